/* Staging and swap for restore and reset. */
#include "replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <unistd.h>

#include "crashpoint.h"
#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"

static char *staging_prefix(const char *base)
{
    /* A leading dot: never a valid sandbox name, so never anyone's /data. */
    return xasprintf(".%s.restore-", base);
}

/* Exactly the prefix and 8 hex digits: names may contain dots, so ".a.restore-" must not
 * match the staging of a sandbox called "a.restore-x" (its restore may be running). */
static bool is_staging_of(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || strlen(name + n) != 8)
        return false;
    for (const char *c = name + n; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return false;
    return true;
}

/* Remove staging directories an interrupted replace left beside data_path. */
static int data_replace_cleanup(int parent_fd, const char *base, bb_error **err)
{
    _cleanup_free_ char *prefix = staging_prefix(base);
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(parent_fd, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++)
        if (is_staging_of(names.v[i], prefix) && rm_rf_at(parent_fd, names.v[i], err) < 0)
            return bb_prefix(err, "cannot remove an interrupted restore");
    return 0;
}

static int make_staging(int parent_fd, const char *base, char **ret, bb_error **err)
{
    _cleanup_free_ char *prefix = staging_prefix(base);
    for (int tries = 0; tries < 100; tries++) {
        unsigned char rnd[4];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return bb_fail_errno(err, errno, "cannot get random bytes");
        _cleanup_free_ char *name =
            xasprintf("%s%02x%02x%02x%02x", prefix, rnd[0], rnd[1], rnd[2], rnd[3]);
        if (mkdirat(parent_fd, name, 0700) == 0) {
            *ret = steal_pointer(&name);
            return 0;
        }
        if (errno != EEXIST)
            return bb_fail_errno(err, errno, "cannot create %s", name);
    }
    return bb_fail(err, EEXIST, "cannot create a staging directory beside %s", base);
}

/* Put new in place of base: one exchange where the filesystem has it, else two renames
 * with the old one put back if the second fails. */
static int swap_in(int parent_fd, const char *base, int stage_fd, bb_error **err)
{
    struct stat st;
    if (fstatat(parent_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno != ENOENT)
            return bb_fail_errno(err, errno, "cannot stat %s", base);
        if (renameat(stage_fd, "new", parent_fd, base) < 0)
            return bb_fail_errno(err, errno, "cannot move the new /data into place");
        return 0;
    }
    if (renameat2(stage_fd, "new", parent_fd, base, RENAME_EXCHANGE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return bb_fail_errno(err, errno, "cannot swap in the new /data");
    if (renameat(parent_fd, base, stage_fd, "old") < 0)
        return bb_fail_errno(err, errno, "cannot move the old /data aside");
    if (renameat(stage_fd, "new", parent_fd, base) < 0) {
        int e = errno;
        (void)renameat(stage_fd, "old", parent_fd, base);
        return bb_fail_errno(err, e, "cannot move the new /data into place");
    }
    return 0;
}

static int fill_and_swap(int parent_fd, const char *base, int stage_fd, bool chown, uid_t uid,
                         gid_t gid, replace_fill fill, void *ud, bb_error **err)
{
    if (mkdirat(stage_fd, "new", 0700) < 0)
        return bb_fail_errno(err, errno, "cannot create the staging directory");
    _cleanup_close_ int new_fd =
        openat(stage_fd, "new", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (new_fd < 0)
        return bb_fail_errno(err, errno, "cannot open the staging directory");
    if ((chown && fchown(new_fd, uid, gid) < 0) || fchmod(new_fd, 0755) < 0)
        return bb_fail_errno(err, errno, "cannot prepare the staging directory");
    if (fill && fill(new_fd, ud, err) < 0)
        return -1;
    CRASH_POINT("restore-before-swap");
    if (swap_in(parent_fd, base, stage_fd, err) < 0)
        return -1;
    CRASH_POINT("restore-after-swap");
    return 0;
}

int data_replace(const char *data_path, bool chown, uid_t uid, gid_t gid, replace_fill fill,
                 void *ud, bb_error **err)
{
    _cleanup_free_ char *parent = xstrdup(data_path);
    char *slash = strrchr(parent, '/');
    if (!slash || !slash[1])
        return bb_fail(err, EINVAL, "%s is not a sandbox's /data", data_path);
    *slash = '\0';
    const char *base = slash + 1;
    _cleanup_close_ int parent_fd =
        open(*parent ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent_fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", parent);
    if (data_replace_cleanup(parent_fd, base, err) < 0)
        return -1;
    _cleanup_free_ char *stage = NULL;
    if (make_staging(parent_fd, base, &stage, err) < 0)
        return -1;
    _cleanup_close_ int stage_fd =
        openat(parent_fd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int r = stage_fd < 0 ? bb_fail_errno(err, errno, "cannot open %s", stage)
                         : fill_and_swap(parent_fd, base, stage_fd, chown, uid, gid, fill, ud, err);
    /* After a swap the staging holds the old /data; either way it goes. A failure to remove
     * it is left to the next replace. */
    (void)rm_rf_at(parent_fd, stage, NULL);
    return r;
}
