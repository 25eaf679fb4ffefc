/* exec: a command in the sandbox's up VM (runtime/up.h), through its agent. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "agentcmd.h"
#include "runtime/boot.h"
#include "runtime/up.h"
#include "util/fs.h"
#include "util/xalloc.h"

static int lost(sandbox *sb, ops_run_result *ret, bb_error **err)
{
    _cleanup_free_ char *cause = xstrdup(bb_error_message(*err));
    bb_error_clear(err);
    ret->why = OPS_LOST;
    return bb_fail(err, ECONNRESET,
                   "%s is not responding (%s); restart it: bluebox down %s && bluebox up %s",
                   sb->name, cause, sb->name, sb->name);
}

/* agent_open, one hello at a time: the agent keeps few unauthenticated connections and drops
 * the oldest, so fifty execs at once would lose some of their hellos. A lock on the state
 * file, held for the handshake only; the commands then run side by side. */
static int open_one_at_a_time(sandbox *sb, up_state *s, const agent_hello *h, agent_conn *conn,
                              bb_error **err)
{
    _cleanup_free_ char *kernel = NULL;
    _cleanup_close_ int hello = open(sb->run, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (hello >= 0)
        (void)flock(hello, LOCK_EX);
    int r = agent_open(s->addr, s->token, h, conn, &kernel, err);
    if (hello >= 0)
        (void)flock(hello, LOCK_UN);
    explicit_bzero(s->token, strlen(s->token)); /* needed for the handshake only */
    return r;
}

int ops_exec(sandbox *sb, const ops_command *c, ops_run_result *ret, bb_error **err)
{
    *ret = (ops_run_result){0};
    _cleanup_upstate_ up_state s = {0};
    int up = upstate_load(sb, &s, err);
    if (up < 0)
        return -1;
    if (up == 0) {
        ret->why = OPS_NOT_UP;
        return bb_fail(err, ENOENT, "%s is not up; start it: bluebox up %s", sb->name, sb->name);
    }
    /* Cheap on purpose: the Bluefile (for its timeout) and the cached isolation check; no
     * image, /data or lock, which the VM that is up already has. */
    if (ops_check_cached(sb, c, err) < 0)
        return -1;
    if (c->timeout_seconds)
        sb->bf->timeout_seconds = c->timeout_seconds;
    ret->timeout_seconds = sb->bf->timeout_seconds;
    _cleanup_(hello_clear) agent_hello h = {0};
    agent_io io;
    ops_hello(sb->bf, c, &h, &io);
    _cleanup_agent_conn_ agent_conn conn = {.fd = -1};
    if (open_one_at_a_time(sb, &s, &h, &conn, err) < 0)
        return (*err)->status == EPERM ? -1 : lost(sb, ret, err);
    if (c->ev.starting)
        c->ev.starting(c->ev.opaque, NULL);
    if (ops_session(sb, c, &conn, &io, h.argv.v, ret, err) < 0)
        return (*err)->status == EINTR ? -1 : lost(sb, ret, err);
    return 0;
}
