/* Preparing a boot. The order matters: cheap refusals first, the isolation check (which may
 * boot twice) last. */
#include "boot.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/home.h"
#include "core/inuse.h"
#include "core/mounts.h"
#include "dataown.h"
#include "image.h"
#include "isolation.h"
#include "posture.h"
#include "util/fs.h"
#include "util/xalloc.h"

int boot_require_image(const char *root, const char *name, bb_error **err)
{
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    _cleanup_free_ char *iid = path_join(dir, "image-id");
    if (!path_exists(iid))
        return bb_fail(err, ENOENT, "%s is not built yet: bluebox build %s", name, name);
    return 0;
}

int boot_prepare(const char *root, const char *name, boot_check check, const char *use, boot *ret,
                 bb_error **err)
{
    *ret = (boot){0};
    if (home_require(root, name, err) < 0)
        return -1;
    _cleanup_free_ char *path = home_path_of(root, HP_BLUEFILE, name);
    if (bluefile_load(path, &ret->bf, err) < 0 || backend_for(ret->bf, &ret->b, err) < 0 ||
        boot_require_image(root, name, err) < 0 || mounts_check(root, name, ret->bf, err) < 0)
        return -1;
    ret->self = guest_binary(err);
    if (!ret->self)
        return -1;
    ret->container = container_name(NULL, name);
    ret->l = (launch){.root = root,
                      .name = name,
                      .bf = ret->bf,
                      .container = ret->container,
                      .mode = LAUNCH_RUN,
                      .self = ret->self};
    if (ret->b->preflight(&ret->l, err) < 0)
        return -1;
    _cleanup_close_ int lock = home_lock(root, name, err);
    if (lock < 0 || image_adopt(root, name, err) < 0)
        return -1;
    if (use && inuse_hold(root, name, use, &ret->use, err) < 0)
        return -1;
    if (data_prepare(root, name, ret->bf, ret->self, err) < 0)
        return -1;
    if (check == BOOT_CACHED)
        return isolation_ensure(ret->b, &ret->l, &ret->was, &ret->iso, err);
    if (isolation_check(ret->b, &ret->l, &ret->iso, err) < 0)
        return -1;
    return isolation_remember(ret->b, &ret->l, &ret->iso, err);
}

char *boot_posture(const boot *b)
{
    return posture_line(b->b, b->bf, b->iso.guest.release[0] ? b->iso.guest.release : NULL);
}

void boot_done(boot *b)
{
    inuse_release(&b->use);
    bluefile_free(b->bf);
    free(b->self);
    free(b->container);
    *b = (boot){0};
}
