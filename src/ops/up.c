/* up and down: the sandbox's long-lived VM (runtime/up.h). */
#include <errno.h>
#include <stdlib.h>

#include "runtime/agent_client.h"
#include "core/home.h"
#include "ops.h"
#include "runtime/boot.h"
#include "runtime/up.h"
#include "util/fs.h"
#include "util/xalloc.h"

void ops_up_result_clear(ops_up_result *r)
{
    free(r->posture);
    free(r->vm_log);
    r->posture = r->vm_log = NULL;
}

/* Is the state's agent answering? A state whose agent does not is stale. */
static bool answering(const up_state *s)
{
    _cleanup_free_ char *kernel = NULL;
    return agent_ping(s->addr, s->token, 5000, &kernel, NULL) == 0;
}

/* Before anything boots: network: none on a backend that cannot keep it offline while the
 * agent's port is published. */
static int refuse_offline(sandbox *sb, ops_up_result *ret, bb_error **err)
{
    if (sandbox_resolve_backend(sb, err) < 0)
        return -1;
    const backend *be = sb->backend;
    if (sb->bf->network != NET_NONE || be->agent_offline)
        return 0;
    ret->why = OPS_BAD;
    return bb_fail(err, EINVAL,
                   "bluebox up needs a network to reach its agent, and %s has network: none, "
                   "which the %s backend cannot keep offline with a published port. Use "
                   "bluebox run for offline sandboxes (or backend: uml, which can)",
                   sb->name, be->name);
}

int ops_up(sandbox *sb, const ops_events *ev, ops_up_result *ret, bb_error **err)
{
    *ret = (ops_up_result){0};
    _cleanup_upstate_ up_state s = {0};
    int up = upstate_load(sb, &s, NULL);
    if (up > 0 && answering(&s)) {
        ret->already = true;
        return 0;
    }
    if (up != 0 && up_down(sb, true, NULL, err) < 0) /* stale: clean it */
        return -1;
    if (refuse_offline(sb, ret, err) < 0)
        return -1;
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_CACHED, "up", &b, err) < 0) {
        ret->why = path_exists(sb->image_id) ? OPS_FAILED : OPS_NOT_BUILT;
        return -1;
    }
    if (ev && ev->starting)
        ev->starting(ev->opaque, &b);
    _cleanup_upstate_ up_state st = {0};
    if (up_start(&b, &st, &ret->seconds, &ret->vm_log, err) < 0) {
        /* an image gone from podman says so */
        bb_error *gone = NULL;
        if (boot_exit_code(&b, ABI_EXIT_SETUP, &gone) < 0) {
            bb_error_clear(err);
            *err = gone;
            ret->why = OPS_NOT_BUILT;
        }
        return -1;
    }
    ret->posture = boot_posture(&b);
    return 0;
}

int ops_down(const sandbox *sb, bool *ret_was_up, bb_error **err)
{
    return up_down(sb, true, ret_was_up, err);
}
