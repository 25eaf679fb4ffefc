/* /data as a disk image (Bluefile data_limit), the host's half: see datadisk.h. The size
 * limit itself is enforced on the VMM's side (src/vmm/disklimit.c). */
#include "datadisk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/home.h"
#include "dataown.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

char *datadisk_size_words(unsigned long long bytes)
{
    if (bytes % (1ULL << 40) == 0)
        return xasprintf("%lluT", bytes >> 40);
    if (bytes % (1ULL << 30) == 0)
        return xasprintf("%lluG", bytes >> 30);
    if (bytes % (1ULL << 20) == 0)
        return xasprintf("%lluM", bytes >> 20);
    return xasprintf("%llu bytes", bytes);
}

static const char *mke2fs_path(void)
{
    if (program_on_path("mke2fs"))
        return "mke2fs";
    static const char *const dirs[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs"};
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
        if (access(dirs[i], X_OK) == 0)
            return dirs[i];
    return NULL;
}

/* An empty ext4 of exactly `bytes` at path (which must not exist). Its root is the guest's
 * root's, 0755; no blocks are reserved (the sandbox is the only user). */
static int make_image(const char *path, unsigned long long bytes, bb_error **err)
{
    const char *mke2fs = mke2fs_path();
    if (!mke2fs)
        return bb_fail(err, ENOENT,
                       "data_limit needs mke2fs to make the /data disk image; install it "
                       "(Debian: apt-get install e2fsprogs)");
    {
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return bb_fail_errno(err, errno, "cannot create %s", path);
        if (ftruncate(fd, (off_t)bytes) < 0)
            return bb_fail_errno(err, errno, "cannot size %s", path);
    }
    /* 4 KiB blocks whatever the size (mke2fs picks 1 KiB for small ones), so that what the
     * guest deletes is discarded from the host file (see src/guest/datadisk.c). */
    char *argv[] = {(char *)mke2fs,   "-q",         "-F", "-t", "ext4",         "-b",
                    "4096",           "-m",         "0",  "-L", "bluebox-data", "-E",
                    "root_owner=0:0", (char *)path, NULL};
    _cleanup_free_ char *errout = NULL;
    int r = spawn_capture(argv, NULL, &errout, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EIO, "mke2fs could not make the /data disk image %s: %s", path,
                       errout && *errout ? errout : "no message");
    return 0;
}

static int create(const char *root, const char *name, const char *disk, const bluefile *bf,
                  const char *self, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(root, "disks");
    if (mkdir_p(dir, 0700, err) < 0)
        return -1;
    _cleanup_free_ char *tmp = xasprintf("%s/.%s.img.new-%d", dir, name, (int)getpid());
    (void)unlink(tmp);
    if (make_image(tmp, bf->data_limit, err) < 0 || data_hand_over(tmp, bf, self, err) < 0) {
        (void)unlink(tmp);
        return -1;
    }
    if (rename(tmp, disk) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return bb_fail_errno(err, e, "cannot move %s into place", disk);
    }
    return 0;
}

/* A larger data_limit: the image file grows (sparse; the host only sets its length) and the
 * guest grows its file system into it at boot (src/guest/datadisk.c). The file belongs to
 * the sandbox's root: rootless strict reaches it inside podman's user namespace. */
static int grow(const char *disk, const bluefile *bf, bb_error **err)
{
    if (bf->isolation == ISO_STRICT && getuid() != 0) {
        _cleanup_free_ char *size = xasprintf("%llu", bf->data_limit);
        char *argv[] = {"podman", "unshare", "truncate", "-s", size, (char *)disk, NULL};
        _cleanup_free_ char *errout = NULL;
        int r = spawn_capture(argv, NULL, &errout, err);
        if (r < 0)
            return -1;
        if (r != 0)
            return bb_fail(err, EIO, "cannot grow %s: %s", disk, errout);
        return 0;
    }
    _cleanup_close_ int fd = open(disk, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)bf->data_limit) < 0)
        return bb_fail_errno(err, errno, "cannot grow %s", disk);
    return 0;
}

int datadisk_prepare(const sandbox *sb, const char *self, bb_error **err)
{
    const bluefile *bf = sb->bf;
    const char *disk = sb->disk, *name = sb->name;
    struct stat st;
    bool have = lstat(disk, &st) == 0;
    if (have && !S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s is not a regular file; remove it, or: bluebox reset %s",
                       disk, name);
    if (!bf->data_limit) {
        if (!have)
            return 0;
        _cleanup_free_ char *was = datadisk_size_words((unsigned long long)st.st_size);
        return bb_fail(err, EEXIST,
                       "%s's /data is the disk image %s, but its Bluefile no longer has "
                       "data_limit; put \"data_limit: %s\" back, or start over with an empty "
                       "/data directory: bluebox reset %s (deletes the image)",
                       name, disk, was, name);
    }
    if (have) {
        if ((unsigned long long)st.st_size > bf->data_limit) {
            _cleanup_free_ char *was = datadisk_size_words((unsigned long long)st.st_size);
            _cleanup_free_ char *now = datadisk_size_words(bf->data_limit);
            return bb_fail(err, EEXIST,
                           "%s's /data is a disk image of %s, but data_limit is now %s; an image "
                           "only grows. Put \"data_limit: %s\" back, or take a snapshot "
                           "(bluebox snapshot %s before-shrink), start over (bluebox reset %s) "
                           "and restore it (bluebox restore %s before-shrink)",
                           name, was, now, was, name, name, name);
        }
        if ((unsigned long long)st.st_size < bf->data_limit && grow(disk, bf, err) < 0)
            return -1;
        return data_hand_over(disk, bf, self, err) < 0 ? -1 : 1;
    }
    const char *data = sb->data;
    int empty = dir_is_empty(data, err);
    if (empty < 0)
        return -1;
    if (!empty)
        return bb_fail(err, ENOTEMPTY,
                       "data_limit puts %s's /data in a disk image, but %s has files; move them "
                       "out first (bluebox data export %s DIR, then bluebox reset %s) and copy "
                       "them in after the first run (tar -C DIR -cf - . | bluebox run %s -- "
                       "tar -C /data -xf -), or remove data_limit",
                       name, data, name, name, name);
    return create(sb->root, name, disk, bf, self, err) < 0 ? -1 : 1;
}

bool datadisk_exists(const sandbox *sb)
{
    struct stat st;
    return lstat(sb->disk, &st) == 0;
}

int datadisk_remove(const sandbox *sb, bb_error **err)
{
    if (unlink(sb->disk) < 0 && errno != ENOENT)
        return bb_fail_errno(err, errno, "cannot delete %s", sb->disk);
    return 0;
}

int data_prepare(const sandbox *sb, const char *self, bb_error **err)
{
    int disk = datadisk_prepare(sb, self, err);
    if (disk != 0)
        return disk < 0 ? -1 : 0;
    const bluefile *bf = sb->bf;
    const char *data = sb->data;
    if (mkdir_p(data, HOME_DIR_MODE, err) < 0)
        return -1;
    struct stat st;
    if (lstat(data, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", data);
    if (!S_ISDIR(st.st_mode))
        return bb_fail(err, ENOTDIR, "%s is not a directory", data);
    return data_hand_over(data, bf, self, err);
}
