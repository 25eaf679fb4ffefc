/* The /data operations: reset, snapshot, restore, export, import (ops.h). A sandbox with
 * data_limit keeps /data in a disk image that the host never reads: its guest's bluebox packs
 * /data into a tar stream or unpacks one into it, booting the sandbox once, so it must not be
 * up (its VM holds the disk). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/home.h"
#include "data/crashpoint.h"
#include "data/snapshots.h"
#include "guard.h"
#include "runtime/datadisk.h"
#include "runtime/diskjob.h"
#include "util/fs.h"
#include "util/xalloc.h"

void ops_data_result_clear(ops_data_result *r)
{
    free(r->path);
    r->path = NULL;
}

int ops_data_precheck(sandbox *sb, const char *doing, ops_why *ret_why, bb_error **err)
{
    if (ops_fork_guard(sb, doing, ret_why, err) < 0)
        return -1;
    if (streq(doing, "reset") || streq(doing, "restore"))
        return ops_precheck_busy(sb, ret_why, err);
    return 0;
}

static int refuse_up(sandbox *sb, ops_data_result *ret, bb_error **err)
{
    if (sandbox_refuse_up(sb, err) == 0)
        return 0;
    ret->why = OPS_IS_UP;
    return -1;
}

/* Every operation starts here: a clean result and the fork guard. */
static int begin(sandbox *sb, const char *doing, ops_data_result *ret, bb_error **err)
{
    *ret = (ops_data_result){0};
    if (ops_fork_guard(sb, doing, &ret->why, err) < 0)
        return -1;
    return 0;
}

int ops_reset(sandbox *sb, ops_data_result *ret, bb_error **err)
{
    if (begin(sb, "reset", ret, err) < 0 || sandbox_lock(sb, err) < 0)
        return -1;
    _cleanup_close_ int use = ops_refuse_busy(sb, &ret->why, err);
    if (use < 0)
        return -1;
    /* A disk image (data_limit) is deleted, not emptied: the next boot makes a fresh one. */
    if (datadisk_remove(sb, err) < 0)
        return -1;
    data_job j = {.op = "reset", .arg = {sb->data}};
    return ops_data_job(sb, &j, &ret->tally, err);
}

/* The label's existing archives other than `keep`, removed once the new one is in place. */
static void remove_other_suffixes(const sandbox *sb, const char *label, const char *keep)
{
    _cleanup_snapshots_ snapshot_list l = {0};
    if (snapshots_list(sb, &l, NULL) < 0)
        return;
    for (size_t i = 0; i < l.n; i++)
        if (streq(l.v[i].label, label) && !streq(l.v[i].path, keep))
            (void)unlink(l.v[i].path);
}

static int snapshot_dir(sandbox *sb, const ops_snapshot_opts *o, ops_data_result *ret,
                        bb_error **err)
{
    if (!is_dir(sb->data))
        return bb_fail(err, ENOENT, "%s has no /data at %s", sb->name, sb->data);
    if (mkdir_p(sb->snapshots, HOME_DIR_MODE, err) < 0 || snapshots_cleanup(sb, err) < 0)
        return -1;
    _cleanup_free_ char *file =
        xasprintf("%s/%s%s", sb->snapshots, o->label, compress_suffix(o->compress));
    _cleanup_free_ char *partial = xasprintf("%s.partial", file);
    data_job j = {.op = "snapshot",
                  .arg = {sb->data, partial, compress_name(o->compress)},
                  .progress = o->progress,
                  .ud = o->ud};
    if (ops_data_job(sb, &j, &ret->tally, err) < 0) {
        (void)unlink(partial);
        return -1;
    }
    CRASH_POINT("snapshot-before-rename");
    if (rename(partial, file) < 0) {
        int e = errno;
        (void)unlink(partial);
        return bb_fail_errno(err, e, "cannot move %s into place", file);
    }
    remove_other_suffixes(sb, o->label, file);
    ret->path = steal_pointer(&file);
    return 0;
}

static int snapshot_disk(sandbox *sb, const ops_snapshot_opts *o, ops_data_result *ret,
                         bb_error **err)
{
    if (refuse_up(sb, ret, err) < 0 || mkdir_p(sb->snapshots, 0755, err) < 0)
        return -1;
    _cleanup_free_ char *file =
        xasprintf("%s/%s%s", sb->snapshots, o->label, compress_suffix(o->compress));
    _cleanup_free_ char *partial = xasprintf("%s.partial", file);
    _cleanup_close_ int fd =
        open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", partial);
    char *args[] = {"pack", "/data", (char *)compress_name(o->compress), NULL};
    if (diskjob_run(sb, args, -1, fd, err) < 0 || fsync(fd) < 0 || rename(partial, file) < 0) {
        if (!*err)
            bb_fail_errno(err, errno, "cannot move %s into place", file);
        (void)unlink(partial);
        return -1;
    }
    remove_other_suffixes(sb, o->label, file);
    ret->path = steal_pointer(&file);
    return 0;
}

int ops_snapshot(sandbox *sb, const ops_snapshot_opts *o, ops_data_result *ret, bb_error **err)
{
    if (begin(sb, "snapshot", ret, err) < 0)
        return -1;
    if (datadisk_exists(sb))
        return snapshot_disk(sb, o, ret, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    return snapshot_dir(sb, o, ret, err);
}

/* A temporary archive beside the sandbox's snapshots, removed by the caller. */
static int disk_temp(const sandbox *sb, char **ret_path, bb_error **err)
{
    if (mkdir_p(sb->snapshots, 0700, err) < 0)
        return -1;
    *ret_path = xasprintf("%s/.disk-%d.partial", sb->snapshots, (int)getpid()); /* never listed */
    int fd = open(*ret_path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", *ret_path);
    return fd;
}

static int disk_unpack(sandbox *sb, int in_fd, const char *how, bb_error **err)
{
    _cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    char *args[] = {"unpack", "/data", "-", (char *)how, NULL};
    return diskjob_run(sb, args, in_fd, null, err);
}

static char *absolute(const char *path)
{
    if (path[0] == '/')
        return xstrdup(path);
    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    return cwd ? path_join(cwd, path) : xstrdup(path);
}

int ops_restore(sandbox *sb, const ops_restore_opts *o, ops_data_result *ret, bb_error **err)
{
    if (begin(sb, "restore", ret, err) < 0)
        return -1;
    if (datadisk_exists(sb)) {
        if (ops_precheck_busy(sb, &ret->why, err) < 0)
            return -1;
        _cleanup_close_ int fd = open(o->archive, O_RDONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            return bb_fail_errno(err, errno, "cannot open %s", o->archive);
        return disk_unpack(sb, fd, "replace", err);
    }
    if (sandbox_lock(sb, err) < 0)
        return -1;
    _cleanup_close_ int use = ops_refuse_busy(sb, &ret->why, err);
    if (use < 0)
        return -1;
    /* podman unshare runs from another directory: hand it an absolute path. */
    _cleanup_free_ char *abs = absolute(o->archive);
    data_job j = {.op = "restore", .arg = {sb->data, abs}};
    return ops_data_job(sb, &j, &ret->tally, err);
}

static int disk_export(sandbox *sb, const char *dir, ops_data_result *ret, bb_error **err)
{
    if (refuse_up(sb, ret, err) < 0)
        return -1;
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int fd = disk_temp(sb, &tmp, err);
    char *args[] = {"pack", "/data", "gzip", NULL};
    data_job j = {.op = "extract", .arg = {tmp, dir}};
    int r = fd < 0 ? -1 : diskjob_run(sb, args, -1, fd, err);
    if (r == 0)
        r = data_job_run(&j, false, NULL, &ret->tally, err);
    if (tmp)
        (void)unlink(tmp);
    return r;
}

int ops_export(sandbox *sb, const ops_transfer_opts *o, ops_data_result *ret, bb_error **err)
{
    if (begin(sb, "export", ret, err) < 0)
        return -1;
    _cleanup_free_ char *dir = absolute(o->dir);
    int empty = dir_is_empty(dir, err);
    if (empty < 0)
        return -1;
    if (!empty)
        return bb_fail(err, EEXIST, "%s is not empty; export into a new or empty directory",
                       o->dir);
    if (mkdir_p(dir, 0755, err) < 0)
        return -1;
    if (datadisk_exists(sb))
        return disk_export(sb, dir, ret, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    data_job j = {.op = "export", .arg = {sb->data, dir}};
    return ops_data_job(sb, &j, &ret->tally, err);
}

static int disk_import(sandbox *sb, const char *dir, ops_data_result *ret, bb_error **err)
{
    if (refuse_up(sb, ret, err) < 0)
        return -1;
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int fd = disk_temp(sb, &tmp, err);
    data_job j = {.op = "snapshot", .arg = {dir, tmp, "gzip"}};
    int r = fd < 0 ? -1 : data_job_run(&j, false, NULL, &ret->tally, err);
    if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
        r = bb_fail_errno(err, errno, "cannot read %s", tmp);
    if (r == 0)
        r = disk_unpack(sb, fd, "merge", err);
    if (tmp)
        (void)unlink(tmp);
    return r;
}

int ops_import(sandbox *sb, const ops_transfer_opts *o, ops_data_result *ret, bb_error **err)
{
    if (begin(sb, "import", ret, err) < 0)
        return -1;
    _cleanup_free_ char *dir = absolute(o->dir);
    if (!is_dir(dir))
        return bb_fail(err, ENOTDIR, "%s is not a directory", o->dir);
    if (datadisk_exists(sb))
        return disk_import(sb, dir, ret, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    if (!is_dir(sb->data))
        return bb_fail(err, ENOENT, "%s has no /data at %s", sb->name, sb->data);
    data_job j = {.op = "import", .arg = {dir, sb->data}};
    return ops_data_job(sb, &j, &ret->tally, err);
}
