/* Preparing a boot. The order matters: cheap refusals first, the isolation check (which may
 * boot twice) last. */
#include "boot.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/forks.h"
#include "core/home.h"
#include "core/inuse.h"
#include "core/mounts.h"
#include "datadisk.h"
#include "dataown.h"
#include "launch/image.h"
#include "isolation.h"
#include "posture.h"
#include "util/fs.h"
#include "util/selfpath.h"
#include "util/xalloc.h"

int sandbox_resolve_backend(sandbox *sb, bb_error **err)
{
    if (sb->backend)
        return 0;
    const backend *b;
    if (sandbox_bluefile(sb, err) < 0 || backend_for(sb->bf, &b, err) < 0)
        return -1;
    sb->backend = b;
    return 0;
}

/* Fail unless the sandbox has a built image, with a hint to build it. */
static int boot_require_image(const sandbox *sb, bb_error **err)
{
    if (!path_exists(sb->image_id))
        return bb_fail(err, ENOENT, "%s is not built yet: bluebox build %s", sb->name, sb->name);
    return 0;
}

/* After podman failed: when the image this home built is gone (podman rmi, a reset store),
 * say that instead of podman's "image not known". Asked only on a failure, so a boot whose
 * image is there pays nothing for it. */
static int explain_gone_image(const sandbox *sb, bb_error **err)
{
    if (image_present(sb->home_id, sb->name))
        return -1;
    bb_error_clear(err);
    return bb_fail(err, ENOENT, "%s is not built: bluebox build %s (its image is gone from podman)",
                   sb->name, sb->name);
}

int boot_exit_code(const boot *b, int code, bb_error **err)
{
    if (code != ABI_EXIT_SETUP || image_present(b->sb->home_id, b->sb->name))
        return code;
    return explain_gone_image(b->sb, err);
}

bool boot_stale(const sandbox *sb)
{
    struct stat bf, img;
    if (stat(sb->bluefile_path, &bf) < 0 || stat(sb->image_id, &img) < 0)
        return false;
    return bf.st_mtim.tv_sec > img.st_mtim.tv_sec ||
           (bf.st_mtim.tv_sec == img.st_mtim.tv_sec && bf.st_mtim.tv_nsec > img.st_mtim.tv_nsec);
}

static launch launch_of(const sandbox *sb, const char *self, const char *container,
                        launch_mode mode)
{
    return (launch){.root = sb->root,
                    .sb = sb,
                    .bf = sb->bf,
                    .container = container,
                    .mode = mode,
                    .self = self,
                    .fork_lower = sb->parent_data};
}

/* The isolation step of every boot: the cached check (a hit costs nothing) or the full one,
 * remembered. */
static int isolation_step(const sandbox *sb, const launch *l, boot_check check,
                          isolation_state *ret_was, isolation_result *ret, bb_error **err)
{
    if (check == BOOT_CACHED)
        return isolation_ensure(sb->backend, l, ret_was, ret, err);
    if (isolation_check(sb->backend, l, ret, err) < 0)
        return -1;
    return isolation_remember(sb->backend, l, ret, err);
}

int boot_check_cached(sandbox *sb, isolation_state *ret_was, isolation_result *ret, bb_error **err)
{
    if (sandbox_resolve_backend(sb, err) < 0)
        return -1;
    _cleanup_free_ char *self = guest_binary(err);
    if (!self)
        return -1;
    launch l = launch_of(sb, self, NULL, LAUNCH_PROBE);
    *ret = (isolation_result){0};
    return isolation_step(sb, &l, BOOT_CACHED, ret_was, ret, err);
}

/* A fork boots over its parent's /data: the parent must still be there, with the same
 * isolation (its /data belongs to the same guest root), and its /data handed over too. */
static int fork_prepare(const sandbox *sb, const char *self, bb_error **err)
{
    if (!sb->parent)
        return 0;
    if (forks_refuse_interrupted(sb, err) < 0)
        return -1;
    _cleanup_sandbox_ sandbox *p = NULL;
    if (sandbox_open(sb->root, sb->parent, &p, err) < 0)
        return bb_prefix(err, "%s is a fork of %s", sb->name, sb->parent);
    if (sandbox_bluefile(p, err) < 0)
        return -1;
    if (p->bf->isolation != sb->bf->isolation)
        return bb_fail(err, EINVAL,
                       "%s is a fork of %s, whose isolation is %s; set the same in the fork's "
                       "Bluefile: bluebox edit %s",
                       sb->name, sb->parent, bf_isolation_name(p->bf->isolation), sb->name);
    if (mkdir_p(sb->parent_data, HOME_DIR_MODE, err) < 0)
        return -1;
    return data_hand_over(sb->parent_data, p->bf, self, err);
}

/* The steps of a boot that need the sandbox's lock. */
static int prepare_locked(sandbox *sb, boot_check check, const char *use, boot *b, bb_error **err)
{
    if (image_adopt(sb, err) < 0)
        return -1;
    if (use && inuse_hold(sb, use, &b->use, err) < 0)
        return -1;
    if (fork_prepare(sb, b->self, err) < 0 || data_prepare(sb, b->self, err) < 0)
        return -1;
    if (use) {
        if (egress_prepare(sb, &b->eg, err) < 0 ||
            (b->eg.log && data_hand_over(b->eg.log, sb->bf, b->self, err) < 0))
            return -1;
        b->l.egress = &b->eg;
    }
    return isolation_step(sb, &b->l, check, &b->was, &b->iso, err);
}

int boot_prepare(sandbox *sb, boot_check check, const char *use, boot *ret, bb_error **err)
{
    *ret = (boot){.sb = sb, .eg = EGRESS_NONE};
    if (sandbox_resolve_backend(sb, err) < 0 || boot_require_image(sb, err) < 0 ||
        mounts_check(sb, err) < 0)
        return -1;
    ret->bf = sb->bf;
    ret->b = sb->backend;
    ret->self = guest_binary(err);
    if (!ret->self)
        return -1;
    ret->container = container_name(NULL, sb->name);
    ret->l = launch_of(sb, ret->self, ret->container, LAUNCH_RUN);
    if (ret->b->preflight(&ret->l, err) < 0)
        return -1;
    int took = sandbox_lock(sb, err);
    if (took < 0)
        return -1;
    int r = prepare_locked(sb, check, use, ret, err);
    if (took)
        sandbox_unlock(sb);
    /* only a podman failure (a probe's exit code); never a refusal such as "not isolated" */
    if (r < 0 && err && *err && (*err)->status == EIO)
        (void)explain_gone_image(sb, err);
    ret->stale = r == 0 && boot_stale(sb);
    return r;
}

char *boot_posture(const boot *b)
{
    return posture_line(b->b, b->bf, b->iso.guest.release[0] ? b->iso.guest.release : NULL);
}

void boot_done(boot *b)
{
    inuse_release(&b->use);
    egress_done(&b->eg);
    free(b->self);
    free(b->container);
    *b = (boot){.eg = EGRESS_NONE};
}
