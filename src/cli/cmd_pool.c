/* The warm pool from the command line: the warm path of `run`, `bluebox pool <name>`, and
 * the tender's role (`bluebox __tend <name>`). The pool itself is runtime/pool.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "agent/client.h"
#include "cli.h"
#include "core/home.h"
#include "core/inuse.h"
#include "core/runlog.h"
#include "core/sandbox.h"
#include "hidden.h"
#include "runtime/boot.h"
#include "runtime/launch.h"
#include "runtime/pool.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Claim a waiting VM and mark /data in use by this run, under the sandbox's lock (as a cold
 * run's boot_prepare does), so that reset, restore and destroy refuse meanwhile. */
static int claim(sandbox *sb, const char *fp, pool_claim *c, inuse *use, bb_error **err)
{
    if (sandbox_lock(sb, err) < 0)
        return -1;
    int r = pool_claim_vm(sb->root, sb->name, fp, c, err);
    if (r == 1 && inuse_hold(sb->root, sb->name, "run", use, err) < 0) {
        pool_release(c);
        r = -1;
    }
    sandbox_unlock(sb);
    return r;
}

/* The hello and the stdio rules of exec (cmd_up.c), for the run's command. */
static void warm_hello(const cli_args *a, const bluefile *bf, agent_hello *h, agent_io *io)
{
    bool in_tty = isatty(STDIN_FILENO), interactive = cli_flag(a, "interactive");
    *h = (agent_hello){.timeout_seconds = bf->timeout_seconds};
    for (int i = 1; i < a->argc; i++)
        strv_add(&h->argv, a->argv[i]);
    const char *term = launch_term(bf);
    if (term)
        strv_push(&h->env, xasprintf("TERM=%s", term));
    h->tty = cli_flag(a, "tty") || (interactive && in_tty && isatty(STDOUT_FILENO));
    struct winsize ws;
    if (h->tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
        h->rows = ws.ws_row, h->cols = ws.ws_col;
    *io = (agent_io){.forward_stdin = !in_tty || interactive,
                     .tty = h->tty,
                     .timeout_seconds = bf->timeout_seconds};
}

/* Run the command in a claimed VM. 1 with the exit code, 0 when the VM did not answer
 * (nothing ran: try another), -1 on an error. */
static int serve(const cli_args *a, sandbox *sb, pool_claim *c, int *ret_code, bb_error **err)
{
    agent_hello h;
    agent_io io;
    warm_hello(a, sb->bf, &h, &io);
    _cleanup_agent_conn_ agent_conn conn = {.fd = -1};
    _cleanup_free_ char *kernel = NULL;
    _cleanup_error_ bb_error *oerr = NULL;
    int r = agent_open(c->vm.addr, c->vm.token, &h, &conn, &kernel, &oerr);
    if (r < 0) {
        strv_clear(&h.argv);
        strv_clear(&h.env);
        if (oerr->status != EPERM) /* the kernel gate is an error, never a retry */
            return 0;
        *err = steal_pointer(&oerr);
        return -1;
    }
    io.log = runlog_begin(sb->log, "run", h.argv.v, NULL); /* best effort */
    double start = now_mono_s();
    agent_exit x = {0};
    r = agent_session(&conn, &io, &x, err);
    runlog_end(io.log, r < 0 ? -1 : x.code, now_mono_s() - start);
    strv_clear(&h.argv);
    strv_clear(&h.env);
    if (r < 0)
        return (*err)->status == EINTR ? -1 : bb_prefix(err, "the sandbox was lost mid-run");
    if (x.err)
        cli_print_error(NULL, x.err);
    free(x.err);
    if (x.timed_out)
        fprintf(stderr, "bluebox: killed after %ds (timeout_seconds)\n", sb->bf->timeout_seconds);
    *ret_code = x.code;
    return 1;
}

int cli_warm_run(cli_args *a, sandbox *sb, int *ret_code, bb_error **err)
{
    if (sandbox_resolve_backend(sb, err) < 0)
        return -1;
    if (sb->bf->warm == 0) {
        int waiting, total;
        pool_count(sb->root, sb->name, &waiting, &total);
        if (total) /* warm was lowered to 0: let a tender empty the pool */
            pool_kick(sb->root, sb->name);
        return 0;
    }
    _cleanup_error_ bb_error *ferr = NULL;
    _cleanup_free_ char *fp = pool_fingerprint(sb, &ferr);
    if (!fp)
        return 0; /* the cold path says what is wrong */
    /* exec's check: the cached isolation check, re-run when the runtime changed. */
    isolation_state was;
    isolation_result iso;
    if (boot_check_cached(sb, &was, &iso, err) < 0)
        return -1;
    cli_say_reverified(was, &iso);
    for (;;) {
        pool_claim c = {0};
        inuse use = {0};
        int r = claim(sb, fp, &c, &use, err);
        if (r <= 0) {
            pool_kick(sb->root, sb->name); /* no VM free: fill the pool for the next run */
            return r;
        }
        r = serve(a, sb, &c, ret_code, err);
        pool_release(&c);
        inuse_release(&use);
        /* The tender that removes this VM and boots its replacement starts now, not at the
         * claim: booting beside the run would take the host's CPU from it (bench/RESULTS.md:
         * that cost a short run more than half its time). */
        if (r != 0) {
            pool_kick(sb->root, sb->name);
            return r;
        }
    }
}

static const char *state_word(const pool_entry *e)
{
    return streq(e->state, "claimed") ? "running" : e->state;
}

int cmd_pool(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || sandbox_bluefile(sb, err) < 0)
        return -1;
    pool_list_result l;
    if (pool_list(a->root, name, &l, err) < 0)
        return -1;
    int waiting = 0;
    for (size_t i = 0; i < l.n; i++)
        waiting += streq(l.v[i].state, "waiting");
    printf("%s: warm %d/%d", name, waiting, sb->bf->warm);
    if (l.n)
        printf(", %zu VM%s holding up to %d MiB of RAM each", l.n, l.n == 1 ? "" : "s",
               sb->bf->ram_mib);
    printf("\n");
    if (l.n)
        printf("%-14s %-9s %8s %s\n", "ID", "STATE", "AGE", "PID");
    for (size_t i = 0; i < l.n; i++) {
        const pool_entry *e = &l.v[i];
        printf("%-14s %-9s %7llds", e->id, state_word(e), e->age_seconds);
        if (e->pid)
            printf(" %d", (int)e->pid);
        printf("\n");
    }
    /* Not what warm asks (or a stale VM left): a tender puts it right. */
    if (waiting != sb->bf->warm || l.n != (size_t)waiting)
        pool_kick(a->root, name);
    pool_list_free(&l);
    return 0;
}

int tend_main(int argc, char **argv)
{
    if (argc != 2 || !name_valid(argv[1])) {
        fprintf(stderr, "usage: bluebox __tend <name>\n");
        return 2;
    }
    _cleanup_error_ bb_error *err = NULL;
    _cleanup_free_ char *root = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (home_root(&root, &err) < 0 || sandbox_open(root, argv[1], &sb, &err) < 0 ||
        pool_tend(sb, &err) < 0) {
        fprintf(stderr, "bluebox __tend: %s\n", err->msg);
        return 1;
    }
    return 0;
}
