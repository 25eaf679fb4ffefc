/* Commands of long-lived sandboxes: up, exec, down. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "agent/client.h"
#include "cli.h"
#include "core/home.h"
#include "core/sandbox.h"
#include "core/runlog.h"
#include "runtime/boot.h"
#include "runtime/launch.h"
#include "runtime/up.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Is the state's agent answering? A state whose agent does not is stale. */
static bool answering(const up_state *s)
{
    _cleanup_free_ char *kernel = NULL;
    return agent_ping(s->addr, s->token, 5000, &kernel, NULL) == 0;
}

static void print_vm_log(char *log)
{
    if (!log || !*log)
        return;
    fprintf(stderr, "bluebox: the VM's last messages:\n");
    char *save = NULL;
    for (char *line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        cli_print_error("vm: ", line);
}

/* Before anything boots: network: none on a backend that cannot keep it offline while the
 * agent's port is published. */
static int refuse_offline(sandbox *sb, bb_error **err)
{
    if (sandbox_resolve_backend(sb, err) < 0)
        return -1;
    const backend *be = sb->backend;
    const char *name = sb->name;
    if (sb->bf->network == NET_NONE && !be->agent_offline)
        return bb_fail(err, EINVAL,
                       "bluebox up needs a network to reach its agent, and %s has network: none, "
                       "which the %s backend cannot keep offline with a published port. Use "
                       "bluebox run for offline sandboxes (or backend: uml, which can)",
                       name, be->name);
    return 0;
}

int cmd_up(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    _cleanup_upstate_ up_state s = {0};
    int up = upstate_load(a->root, name, &s, NULL);
    if (up > 0 && answering(&s)) {
        printf("%s is already up\n", name);
        return 0;
    }
    if (up != 0 && up_down(a->root, name, true, NULL, err) < 0) /* stale: clean it */
        return -1;
    if (refuse_offline(sb, err) < 0)
        return -1;
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_CACHED, "up", &b, err) < 0)
        return -1;
    cli_say_rechecked(&b);
    _cleanup_upstate_ up_state st = {0};
    _cleanup_free_ char *log = NULL;
    double secs = 0;
    if (up_start(&b, &st, &secs, &log, err) < 0) {
        print_vm_log(log);
        (void)boot_exit_code(&b, ABI_EXIT_SETUP, err); /* an image gone from podman says so */
        return -1;
    }
    _cleanup_free_ char *posture = boot_posture(&b);
    cli_showf(stdout, "up %s (ready in %.2fs)\n%s\n", name, secs, posture);
    return 0;
}

int cmd_down(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    if (name_check(name, "sandbox name", err) < 0)
        return -1;
    bool was = false;
    if (up_down(a->root, name, true, &was, err) < 0)
        return -1;
    printf(was ? "down %s\n" : "%s is not up\n", name);
    return 0;
}

static int lost(const char *name, bb_error **err)
{
    _cleanup_free_ char *cause = xstrdup((*err)->msg);
    bb_error_clear(err);
    return bb_fail(err, ECONNRESET,
                   "%s is not responding (%s); restart it: bluebox down %s && bluebox up %s", name,
                   cause, name, name);
}

int cmd_exec(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    if (a->argc < 2)
        return bb_fail_usage(err, "exec needs a command: bluebox exec %s -- <cmd…>", name);
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    _cleanup_upstate_ up_state s = {0};
    int up = upstate_load(a->root, name, &s, err);
    if (up < 0)
        return -1;
    if (up == 0)
        return bb_fail(err, ENOENT, "%s is not up; start it: bluebox up %s", name, name);
    /* Cheap on purpose: the Bluefile (for its timeout) and the cached isolation check; no
     * image, /data or lock, which the VM that is up already has. */
    isolation_state was;
    isolation_result iso;
    if (boot_check_cached(sb, &was, &iso, err) < 0)
        return -1;
    cli_say_reverified(was, &iso);
    const bluefile *bf = sb->bf;

    bool in_tty = isatty(STDIN_FILENO), interactive = cli_flag(a, "interactive");
    agent_hello h = {.timeout_seconds = bf->timeout_seconds};
    for (int i = 1; i < a->argc; i++)
        strv_add(&h.argv, a->argv[i]);
    const char *term = launch_term(bf);
    if (term)
        strv_push(&h.env, xasprintf("TERM=%s", term));
    h.tty = cli_flag(a, "tty") || (interactive && in_tty && isatty(STDOUT_FILENO));
    struct winsize ws;
    if (h.tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
        h.rows = ws.ws_row, h.cols = ws.ws_col;
    agent_io io = {.forward_stdin = !in_tty || interactive,
                   .tty = h.tty,
                   .timeout_seconds = bf->timeout_seconds};

    _cleanup_agent_conn_ agent_conn c = {.fd = -1};
    _cleanup_free_ char *kernel = NULL;
    int r = agent_open(s.addr, s.token, &h, &c, &kernel, err);
    explicit_bzero(s.token, strlen(s.token)); /* needed for the handshake only */
    if (r < 0) {
        strv_clear(&h.argv);
        strv_clear(&h.env);
        return (*err)->status == EPERM ? -1 : lost(name, err);
    }
    io.log = runlog_begin(sb->log, "exec", h.argv.v, NULL); /* best effort */
    double start = now_mono_s();
    agent_exit x = {0};
    r = agent_session(&c, &io, &x, err);
    runlog_end(io.log, r < 0 ? -1 : x.code, now_mono_s() - start);
    strv_clear(&h.argv);
    strv_clear(&h.env);
    if (r < 0)
        return (*err)->status == EINTR ? -1 : lost(name, err);
    if (x.err)
        cli_print_error(NULL, x.err);
    free(x.err);
    if (x.timed_out)
        fprintf(stderr, "bluebox: killed after %ds (timeout_seconds)\n", bf->timeout_seconds);
    return x.code;
}
