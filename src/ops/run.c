/* run: the warm pool first (a VM booted ahead of time serves the command), then a cold boot.
 * The pool itself is runtime/pool.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/agent_client.h"
#include "agentcmd.h"
#include "core/inuse.h"
#include "core/runlog.h"
#include "ops.h"
#include "runtime/boot.h"
#include "launch/launch.h"
#include "runtime/pool.h"
#include "launch/session.h"
#include "util/fs.h"
#include "util/time.h"
#include "util/xalloc.h"

void ops_run_result_clear(ops_run_result *r)
{
    free(r->agent_err);
    r->agent_err = NULL;
}

/* Claim a waiting VM and mark /data in use by this run, under the sandbox's lock (as a cold
 * run's boot_prepare does), so that reset, restore and destroy refuse meanwhile. */
static int claim(sandbox *sb, const char *fp, pool_claim *c, inuse *use, bb_error **err)
{
    if (sandbox_lock(sb, err) < 0)
        return -1;
    int r = pool_claim_vm(sb, fp, c, err);
    if (r == 1 && inuse_hold(sb, "run", use, err) < 0) {
        pool_release(c);
        r = -1;
    }
    sandbox_unlock(sb);
    return r;
}

/* Run the command in a claimed VM. 1 with the result, 0 when the VM did not answer (nothing
 * ran: try another), -1 on an error. */
static int serve(sandbox *sb, const ops_command *c, pool_claim *pc, ops_run_result *ret,
                 bb_error **err)
{
    _cleanup_(hello_clear) agent_hello h = {0};
    agent_io io;
    ops_hello(sb->bf, c, &h, &io);
    _cleanup_agent_conn_ agent_conn conn = {.fd = -1};
    _cleanup_free_ char *kernel = NULL;
    _cleanup_error_ bb_error *oerr = NULL;
    if (agent_open(pc->vm.addr, pc->vm.token, &h, &conn, &kernel, &oerr) < 0) {
        if (oerr->status != EPERM) /* the kernel gate is an error, never a retry */
            return 0;
        *err = steal_pointer(&oerr);
        return -1;
    }
    if (c->ev.starting)
        c->ev.starting(c->ev.opaque, NULL);
    int r = ops_session(sb, c, &conn, &io, h.argv.v, ret, err);
    if (r < 0)
        return (*err)->status == EINTR ? -1 : bb_prefix(err, "the sandbox was lost mid-run");
    ret->warm = true;
    return 1;
}

/* 1 when a pool VM ran the command, 0 when none was free (boot cold), -1 on an error. */
static int warm_run(sandbox *sb, const ops_command *c, ops_run_result *ret, bb_error **err)
{
    if (sb->bf->warm == 0) {
        int waiting, total;
        pool_count(sb, &waiting, &total);
        if (total) /* warm was lowered to 0: let a tender empty the pool */
            pool_kick(sb);
        return 0;
    }
    _cleanup_error_ bb_error *ferr = NULL;
    _cleanup_free_ char *fp = pool_fingerprint(sb, &ferr);
    if (!fp)
        return 0;                         /* the cold path says what is wrong */
    if (ops_check_cached(sb, c, err) < 0) /* exec's check */
        return -1;
    for (;;) {
        pool_claim pc = {0};
        inuse use = {0};
        int r = claim(sb, fp, &pc, &use, err);
        if (r <= 0) {
            pool_kick(sb); /* no VM free: fill the pool for the next run */
            return r;
        }
        r = serve(sb, c, &pc, ret, err);
        pool_release(&pc);
        inuse_release(&use);
        /* The tender that removes this VM and boots its replacement starts now, not at the
         * claim: booting beside the run would take the host's CPU from it (bench/RESULTS.md:
         * that cost a short run more than half its time). */
        if (r != 0) {
            pool_kick(sb);
            return r;
        }
    }
}

/* A cold VM runs the command as its main process: env and cwd go through the guest's sh. */
static void wrap_command(const ops_command *c, strv *ret)
{
    size_t n_env = 0;
    while (c->env && c->env[n_env])
        n_env++;
    if (!c->cwd && !n_env) {
        for (char **a = c->argv; *a; a++)
            strv_add(ret, *a);
        return;
    }
    strv_add(ret, "/bin/sh");
    strv_add(ret, "-c");
    strv_add(ret, "cd \"$1\" || exit 125; n=$2; shift 2; while [ \"$n\" -gt 0 ]; do export \"$1\"; "
                  "shift; n=$((n-1)); done; exec \"$@\"");
    strv_add(ret, "sh");
    strv_add(ret, c->cwd ? c->cwd : ".");
    strv_push(ret, xasprintf("%zu", n_env));
    for (size_t i = 0; i < n_env; i++)
        strv_add(ret, c->env[i]);
    for (char **a = c->argv; *a; a++)
        strv_add(ret, *a);
}

static int cold_run(sandbox *sb, const ops_command *c, ops_run_result *ret, bb_error **err)
{
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_CACHED, "run", &b, err) < 0) {
        ret->why = path_exists(sb->image_id) ? OPS_FAILED : OPS_NOT_BUILT;
        return -1;
    }
    _cleanup_strv_ strv cmd = {0};
    wrap_command(c, &cmd);
    b.l.cmd = cmd.v;
    b.l.mode = LAUNCH_RUN;
    b.l.interactive = c->forward_stdin;
    b.l.tty = c->tty;
    _cleanup_strv_ strv argv = {0};
    if (launch_argv(b.b, &b.l, &argv, err) < 0)
        return -1;
    if (c->ev.starting)
        c->ev.starting(c->ev.opaque, &b);
    runlog *rl = runlog_begin(sb->log, c->log_as, cmd.v, NULL); /* best effort */
    session s = {.argv = argv.v,
                 .container = b.container,
                 .timeout_seconds = b.bf->timeout_seconds,
                 .log = rl,
                 .fd3 = launch_gets_secrets(&b.l) ? b.eg.secrets_fd : -1};
    session_result res;
    int r = session_run(&s, &res, err);
    runlog_end(rl, r < 0 ? -1 : res.code, res.seconds);
    if (r < 0)
        return -1;
    ret->timed_out = res.timed_out;
    ret->code = boot_exit_code(&b, res.code, err);
    if (ret->code < 0)
        ret->why = OPS_NOT_BUILT; /* podman's 125 for an image gone from podman */
    return ret->code < 0 ? -1 : 0;
}

int ops_run(sandbox *sb, const ops_command *c, ops_run_result *ret, bb_error **err)
{
    *ret = (ops_run_result){0};
    if (sandbox_resolve_backend(sb, err) < 0)
        return -1;
    if (c->timeout_seconds)
        sb->bf->timeout_seconds = c->timeout_seconds;
    ret->timeout_seconds = sb->bf->timeout_seconds;
    int warm = warm_run(sb, c, ret, err);
    if (warm != 0)
        return warm < 0 ? -1 : 0;
    return cold_run(sb, c, ret, err);
}
