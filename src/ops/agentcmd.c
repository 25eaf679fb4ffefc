/* A command for an agent that is already running (agentcmd.h). */
#include "agentcmd.h"

#include "core/runlog.h"
#include "launch/launch.h"
#include "runtime/boot.h"
#include "util/time.h"
#include "util/xalloc.h"

int ops_check_cached(sandbox *sb, const ops_command *c, bb_error **err)
{
    isolation_state was;
    isolation_result iso;
    if (boot_check_cached(sb, &was, &iso, err) < 0)
        return -1;
    if (c->ev.checked)
        c->ev.checked(c->ev.opaque, was, &iso);
    return 0;
}

void ops_hello(const bluefile *bf, const ops_command *c, agent_hello *h, agent_io *io)
{
    *h = (agent_hello){.timeout_seconds = bf->timeout_seconds,
                       .tty = c->tty,
                       .rows = c->rows,
                       .cols = c->cols,
                       .dir = c->cwd ? xstrdup(c->cwd) : NULL};
    for (char **a = c->argv; *a; a++)
        strv_add(&h->argv, *a);
    const char *term = launch_term(bf);
    if (term)
        strv_push(&h->env, xasprintf("TERM=%s", term));
    for (char **e = c->env; e && *e; e++)
        strv_add(&h->env, *e);
    *io = (agent_io){
        .forward_stdin = c->forward_stdin, .tty = c->tty, .timeout_seconds = bf->timeout_seconds};
}

int ops_session(sandbox *sb, const ops_command *c, agent_conn *conn, agent_io *io, char **argv,
                ops_run_result *ret, bb_error **err)
{
    io->log = runlog_begin(sb->log, c->log_as, argv, NULL); /* best effort */
    double start = now_mono_s();
    agent_exit x = {0};
    int r = agent_session(conn, io, &x, err);
    runlog_end(io->log, r < 0 ? -1 : x.code, now_mono_s() - start);
    if (r < 0)
        return -1;
    ret->code = x.code;
    ret->timed_out = x.timed_out;
    ret->agent_err = x.err;
    return 0;
}
