/* Commands that boot a sandbox: run, shell, verify. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "core/sandbox.h"
#include "core/runlog.h"
#include "runtime/boot.h"
#include "ops/ops.h"
#include "launch/session.h"
#include "util/tty.h"
#include "util/xalloc.h"

void print_isolated(const boot *b)
{
    _cleanup_free_ char *posture = boot_posture(b);
    /* The guest's kernel release is what the guest reported. */
    cli_showf(stdout, "isolated: host %s, guest %s (%s)\n%s\n", b->iso.baseline.release,
              b->iso.guest.release, b->b->name, posture);
}

void cli_say_reverified(isolation_state was, const isolation_result *iso)
{
    if (was != ISOCHECK_CHANGED)
        return;
    if (iso->changed[0])
        cli_showf(stderr, "bluebox: re-verified isolation (%s changed since the last check)\n",
                  iso->changed);
    else
        fprintf(stderr, "bluebox: re-verified isolation (runtime changed since last check)\n");
}

void cli_say_rechecked(const boot *b)
{
    if (b->stale)
        fprintf(stderr,
                "bluebox: warning: %s's Bluefile changed since it was built; run: bluebox build "
                "%s\n",
                b->sb->name, b->sb->name);
    if (b->was == ISOCHECK_CHANGED)
        cli_say_reverified(b->was, &b->iso);
    else if (b->was == ISOCHECK_NONE)
        cli_showf(stderr, "bluebox: verified isolation: host %s, guest %s (%s)\n",
                  b->iso.baseline.release, b->iso.guest.release, b->b->name);
}

/* Boot b->l.cmd, wait, log. A run is timed and its output tee'd into the log; a shell's
 * terminal session is neither. Returns the exit code to pass on. */
static int boot_and_wait(boot *b, bb_error **err)
{
    bool run = b->l.mode == LAUNCH_RUN;
    _cleanup_strv_ strv argv = {0};
    if (launch_argv(b->b, &b->l, &argv, err) < 0)
        return -1;
    runlog *rl = runlog_begin(b->sb->log, run ? "run" : "shell", b->l.cmd, NULL); /* best effort */
    session s = {.argv = argv.v,
                 .container = b->container,
                 .timeout_seconds = run ? b->bf->timeout_seconds : 0,
                 .log = run ? rl : NULL,
                 .fd3 = launch_gets_secrets(&b->l) ? b->eg.secrets_fd : -1};
    session_result res;
    int r = session_run(&s, &res, err);
    runlog_end(rl, r < 0 ? -1 : res.code, res.seconds);
    if (r < 0)
        return -1;
    if (res.timed_out)
        fprintf(stderr, "bluebox: killed after %ds (timeout_seconds)\n", s.timeout_seconds);
    return boot_exit_code(b, res.code, err);
}

/* exec's rules, run's too: piped stdin goes to the command, a terminal's only with -i; -t,
 * or -i with a terminal on both ends, gives it a pty. */
static void command_stdio(const cli_args *a, ops_command *c)
{
    bool in_tty = isatty(STDIN_FILENO), interactive = cli_flag(a, "interactive");
    c->forward_stdin = !in_tty || interactive;
    c->tty = cli_flag(a, "tty") || (interactive && in_tty && isatty(STDOUT_FILENO));
    struct winsize ws;
    if (c->tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
        c->rows = ws.ws_row, c->cols = ws.ws_col;
}

static void on_checked(void *opaque, isolation_state was, const isolation_result *iso)
{
    (void)opaque;
    cli_say_reverified(was, iso);
}

static void on_starting(void *opaque, const boot *b)
{
    (void)opaque;
    if (b)
        cli_say_rechecked(b);
}

void cli_ops_command(cli_args *a, const char *log_as, ops_command *ret)
{
    *ret = (ops_command){.argv = a->argv + 1,
                         .log_as = log_as,
                         .ev = {.checked = on_checked, .starting = on_starting}};
    command_stdio(a, ret);
}

int cli_command_done(ops_run_result *r)
{
    if (r->agent_err)
        cli_print_error(NULL, r->agent_err);
    if (r->timed_out)
        fprintf(stderr, "bluebox: killed after %ds (timeout_seconds)\n", r->timeout_seconds);
    ops_run_result_clear(r);
    return r->code;
}

int cmd_run(cli_args *a, bb_error **err)
{
    if (a->argc < 2)
        return bb_fail_usage(err, "run needs a command: bluebox run %s -- <cmd…>", a->argv[0]);
    /* podman cannot give a pty to piped input (it would read the pipe as keystrokes). */
    if (cli_flag(a, "tty") && !isatty(STDIN_FILENO))
        return bb_fail_usage(err, "run -t needs a terminal on stdin; drop -t to pipe input to the "
                                  "command (piped stdin is forwarded without it)");
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, a->argv[0], &sb, err) < 0)
        return -1;
    ops_command c;
    cli_ops_command(a, "run", &c);
    ops_run_result r;
    if (ops_run(sb, &c, &r, err) < 0) {
        ops_run_result_clear(&r);
        return -1;
    }
    return cli_command_done(&r);
}

int cmd_shell(cli_args *a, bb_error **err)
{
    static char *cmd[] = {"/bin/sh", "-l", NULL};
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, a->argv[0], &sb, err) < 0)
        return -1;
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_CACHED, "shell", &b, err) < 0)
        return -1;
    cli_say_rechecked(&b);
    b.l.cmd = cmd;
    b.l.mode = LAUNCH_SHELL;
    b.l.interactive = true;
    b.l.tty = isatty(STDIN_FILENO); /* -t with piped stdin hangs */
    _cleanup_free_ char *posture = boot_posture(&b);
    cli_showf(stderr, "%s\n", posture); /* it quotes the guest's kernel release */
    return boot_and_wait(&b, err);
}

int cmd_verify(cli_args *a, bb_error **err)
{
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, a->argv[0], &sb, err) < 0)
        return -1;
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_VERIFY, NULL, &b, err) < 0)
        return -1;
    print_isolated(&b);
    return 0;
}
