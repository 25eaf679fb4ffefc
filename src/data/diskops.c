/* The /data operations for a data_limit disk (see diskops.h). pack and unpack run in the
 * guest, on a file system that is the guest's own; extract runs on the host, on a tar stream
 * the guest made, and is safetar's all-or-nothing reader into a directory of yours. */
#include "diskops.h"

#include <archive.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "copy.h"
#include "safetar.h"
#include "snapwrite.h"
#include "util/fs.h"
#include "util/xalloc.h"

static int open_dir(const char *path, bb_error **err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    return fd;
}

int op_pack(const data_job *j, data_tally *t, bb_error **err)
{
    snap_compress c;
    if (compress_parse(j->arg[1], &c) < 0)
        return bb_fail(err, EINVAL, "unknown compression %s", j->arg[1]);
    _cleanup_close_ int dir = open_dir(j->arg[0], err);
    if (dir < 0)
        return -1;
    return snapshot_write(dir, STDOUT_FILENO, c, NULL, NULL, t, err);
}

/* What the file system holding dir can still take, less a margin (a tar bomb is refused
 * before it fills the disk). */
static void room_in(int dir, safetar_opts *o)
{
    struct statvfs vfs;
    if (fstatvfs(dir, &vfs) < 0)
        return;
    uint64_t bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    o->max_bytes = bytes ? bytes - bytes / 50 : 1;
    if (vfs.f_files)
        o->max_entries = vfs.f_favail ? vfs.f_favail - vfs.f_favail / 50 : 1;
}

/* The archive at path (- is stdin) for reading; *fd is the caller's to close after the
 * reader (libarchive does not close it). */
static int open_archive(const char *path, int *fd, struct archive **ret, bb_error **err)
{
    *fd = -1;
    if (streq(path, "-"))
        return safetar_open_fd(STDIN_FILENO, ret, err);
    *fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (*fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    return safetar_open_fd(*fd, ret, err);
}

/* Remove every entry of dir but `keep`. */
static int empty_but(int dir, const char *keep, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(dir, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++)
        if (!streq(names.v[i], keep) && rm_rf_at(dir, names.v[i], err) < 0)
            return -1;
    return 0;
}

/* Move every entry of staging up into dir (the same file system: renames). */
static int move_up(int dir, int staging, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(staging, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++)
        if (renameat(staging, names.v[i], dir, names.v[i]) < 0)
            return bb_fail_errno(err, errno, "cannot move %s into place", names.v[i]);
    return 0;
}

int op_unpack(const data_job *j, data_tally *t, bb_error **err)
{
    bool replace = streq(j->arg[2], "replace");
    if (!replace && !streq(j->arg[2], "merge"))
        return bb_fail(err, EINVAL, "unpack takes merge or replace, not %s", j->arg[2]);
    _cleanup_close_ int dir = open_dir(j->arg[0], err);
    if (dir < 0)
        return -1;
    _cleanup_free_ char *name = xasprintf(".bluebox-unpack-%d", (int)getpid());
    (void)rm_rf_at(dir, name, NULL);
    if (mkdirat(dir, name, 0700) < 0)
        return bb_fail_errno(err, errno, "cannot create %s in %s", name, j->arg[0]);
    _cleanup_close_ int staging =
        openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct archive *a = NULL;
    _cleanup_close_ int in = -1;
    safetar_opts o = {0};
    room_in(dir, &o);
    int r = staging < 0 ? bb_fail_errno(err, errno, "cannot open %s", name)
                        : open_archive(j->arg[1], &in, &a, err);
    if (r == 0)
        r = safetar_extract(a, staging, &o, t, err);
    safetar_close(a);
    if (r == 0 && replace)
        r = empty_but(dir, name, err) < 0 || move_up(dir, staging, err) < 0 ? -1 : 0;
    if (r == 0 && !replace) {
        copy_opts c = {.links = false};
        r = tree_copy(staging, dir, &c, t, err);
    }
    (void)rm_rf_at(dir, name, NULL);
    return r;
}

int op_extract(const data_job *j, data_tally *t, bb_error **err)
{
    _cleanup_close_ int dir = open_dir(j->arg[1], err);
    if (dir < 0)
        return -1;
    struct archive *a = NULL;
    _cleanup_close_ int in = -1;
    safetar_opts o = {0};
    room_in(dir, &o);
    if (open_archive(j->arg[0], &in, &a, err) < 0)
        return -1;
    int r = safetar_extract(a, dir, &o, t, err);
    safetar_close(a);
    return r;
}
