/* The guards on /data and the /data job runner (guard.h). */
#include "guard.h"

#include <errno.h>

#include "core/forks.h"
#include "core/home.h"
#include "core/inuse.h"
#include "runtime/dataown.h"
#include "launch/image.h"
#include "runtime/pool.h"
#include "runtime/running.h"
#include "util/fs.h"
#include "util/xalloc.h"

static void data_place_donep(data_place *p)
{
    data_place_done(p);
}

int ops_data_job(sandbox *sb, data_job *j, data_tally *t, bb_error **err)
{
    _cleanup_(data_place_donep) data_place p = {0};
    if (data_place_of(sb, &p, err) < 0)
        return -1;
    /* What lands in /data belongs to the sandbox; an export belongs to you. */
    j->chown = p.chown && !streq(j->op, "export");
    j->uid = p.uid;
    j->gid = p.gid;
    return data_job_run(j, p.unshare, p.self, t, err);
}

static int refused(ops_why *ret_why, ops_why why)
{
    if (ret_why)
        *ret_why = why;
    return -1;
}

int ops_refuse_busy(const sandbox *sb, ops_why *ret_why, bb_error **err)
{
    if (sandbox_refuse_up(sb, err) < 0)
        return refused(ret_why, OPS_IS_UP);
    _cleanup_close_ int use = inuse_refuse(sb, err);
    if (use < 0)
        return refused(ret_why, OPS_REFUSED);
    /* The warm pool's VMs hold the old /data: gone before it changes. The tender started
     * here waits for our lock, so its VMs boot with the new /data. */
    int pooled = pool_drain(sb, err);
    if (pooled < 0)
        return -1;
    if (image_refuse_running(sb, err) < 0)
        return refused(ret_why, OPS_REFUSED);
    if (pooled)
        pool_kick(sb);
    return steal_fd(&use);
}

int ops_precheck_busy(sandbox *sb, ops_why *ret_why, bb_error **err)
{
    int took = sandbox_lock(sb, err);
    if (took < 0)
        return -1;
    int r = sandbox_refuse_up(sb, err);
    if (r < 0)
        refused(ret_why, OPS_IS_UP);
    else {
        _cleanup_close_ int use = inuse_refuse(sb, err);
        r = use < 0 ? refused(ret_why, OPS_REFUSED) : 0;
    }
    if (took)
        sandbox_unlock(sb);
    return r;
}

int ops_fork_guard(const sandbox *sb, const char *doing, ops_why *ret_why, bb_error **err)
{
    const char *name = sb->name, *parent = sb->parent;
    if (!parent) {
        if (!streq(doing, "reset") && !streq(doing, "restore"))
            return 0;
        return forks_refuse_parent(sb, doing, err) < 0 ? refused(ret_why, OPS_REFUSED) : 0;
    }
    if (streq(doing, "reset"))
        bb_fail(err, EINVAL, "%s is a fork; drop its changes with: bluebox discard %s", name, name);
    else if (streq(doing, "restore"))
        bb_fail(err, EINVAL, "%s is a fork of %s; apply or discard it, then restore its parent",
                name, parent);
    else if (streq(doing, "snapshot"))
        bb_fail(err, EINVAL,
                "%s is a fork; apply it, then snapshot its parent: bluebox apply %s && "
                "bluebox snapshot %s",
                name, name, parent);
    else
        bb_fail(err, EINVAL,
                "%s is a fork; apply it, then %s its parent's /data: bluebox apply %s && "
                "bluebox data %s %s …",
                name, doing, name, doing, parent);
    return refused(ret_why, OPS_REFUSED);
}
