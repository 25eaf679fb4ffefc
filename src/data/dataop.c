/* The /data operations behind reset, snapshot, restore and data export|import. */
#include "dataop.h"

#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "copy.h"
#include "diskops.h"
#include "fork.h"
#include "replace.h"
#include "safetar.h"
#include "util/spawn.h"
#include "util/xalloc.h"

static int open_dir(const char *path, bb_error **err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    return fd;
}

/* snapshot <data> <out> <gzip|zstd|none> */
static int op_snapshot(const data_job *j, data_tally *t, bb_error **err)
{
    snap_compress c;
    if (compress_parse(j->arg[2], &c) < 0)
        return bb_fail(err, EINVAL, "unknown compression %s", j->arg[2]);
    _cleanup_close_ int data = open_dir(j->arg[0], err);
    if (data < 0)
        return -1;
    _cleanup_close_ int out =
        open(j->arg[1], O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0)
        return bb_fail_errno(err, errno, "cannot create %s", j->arg[1]);
    if (snapshot_write(data, out, c, j->progress, j->ud, t, err) < 0)
        return -1;
    if (fsync(out) < 0)
        return bb_fail_errno(err, errno, "cannot write %s", j->arg[1]);
    return 0;
}

typedef struct {
    struct archive *a;
    safetar_opts o;
    data_tally *t;
} restore_fill;

static int fill_from_archive(int new_fd, void *ud, bb_error **err)
{
    restore_fill *f = ud;
    return safetar_extract(f->a, new_fd, &f->o, f->t, err);
}

/* What a restore leaves free on the disk holding /data: the larger of 5 % of the disk and
 * 1 GiB. 5 % is where ext4 stops ordinary users and where disk monitors start to warn, so
 * a restore never takes the host to the edge it would itself call full; 1 GiB keeps a small
 * disk usable (logs, package managers, podman's own writes). */
#define KEEP_FREE_MIN (1ull << 30)
#define KEEP_FREE_WHY "the larger of 5 % of the disk and 1 GiB"

static uint64_t keep_free(uint64_t disk_bytes)
{
    return disk_bytes / 20 > KEEP_FREE_MIN ? disk_bytes / 20 : KEEP_FREE_MIN;
}

/* Room for the restore on the disk holding /data, less that margin, so a tar bomb is
 * refused before it fills the disk. Nothing set when the filesystem does not say. */
static void room_beside(const char *data, safetar_opts *o)
{
    _cleanup_free_ char *parent = xstrdup(data);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = '\0';
    struct statvfs vfs;
    if (statvfs(*parent ? parent : "/", &vfs) < 0 || vfs.f_blocks == 0)
        return;
    uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    o->free_bytes = avail ? avail : 1;
    o->keep_free = keep_free((uint64_t)vfs.f_blocks * vfs.f_frsize);
    o->keep_free_why = KEEP_FREE_WHY;
    o->max_bytes = avail > o->keep_free ? avail - o->keep_free : 1; /* 0 would be no limit */
    if (vfs.f_files)
        o->max_entries = vfs.f_favail ? vfs.f_favail - vfs.f_favail / 50 : 1;
}

/* What a restore may allocate while it reads: libarchive's buffers, a zstd window (128 MiB
 * at most), one record per directory, with room to spare. */
#define RESTORE_MEMORY (512ull << 20)

/* restore <data> <archive> */
static int op_restore(const data_job *j, data_tally *t, bb_error **err)
{
    _cleanup_close_ int fd = open(j->arg[1], O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", j->arg[1]);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s is not a regular file", j->arg[1]);
    if (fcntl(fd, F_SETFL, 0) < 0)
        return bb_fail_errno(err, errno, "cannot read %s", j->arg[1]);
    restore_fill f = {.o = {.chown = j->chown, .uid = j->uid, .gid = j->gid}, .t = t};
    room_beside(j->arg[0], &f.o);
    f.o.max_memory = RESTORE_MEMORY;
    if (safetar_open_fd(fd, &f.a, err) < 0)
        return bb_prefix(err, "refusing %s", j->arg[1]);
    int r = data_replace(j->arg[0], j->chown, j->uid, j->gid, fill_from_archive, &f, err);
    safetar_close(f.a);
    if (r < 0)
        return bb_prefix(err, "refusing %s", j->arg[1]);
    return 0;
}

/* reset <data> */
static int op_reset(const data_job *j, data_tally *t, bb_error **err)
{
    return data_replace(j->arg[0], j->chown, j->uid, j->gid, NULL, NULL, err);
}

/* export <data> <dir>, import <dir> <data>: copy the first into the second. */
static int op_copy(const data_job *j, data_tally *t, bb_error **err)
{
    _cleanup_close_ int src = open_dir(j->arg[0], err);
    if (src < 0)
        return -1;
    _cleanup_close_ int dst = open_dir(j->arg[1], err);
    if (dst < 0)
        return -1;
    copy_opts o = {
        .chown = j->chown, .uid = j->uid, .gid = j->gid, .links = streq(j->op, "export")};
    return tree_copy(src, dst, &o, t, err);
}

/* fork-diff <upper> <lower>: the changes, as text (fork.h) */
static int op_fork_diff(const data_job *j, data_tally *t, bb_error **err)
{
    _cleanup_close_ int upper = open_dir(j->arg[0], err);
    if (upper < 0)
        return -1;
    _cleanup_close_ int lower = open_dir(j->arg[1], err);
    if (lower < 0)
        return -1;
    char *text = NULL;
    uint64_t n = 0;
    if (fork_diff(upper, lower, &text, &n, t, err) < 0)
        return -1;
    t->entries = n;
    if (j->text)
        *j->text = text;
    else
        free(text);
    return 0;
}

/* fork-apply <parent data> <upper> */
static int op_fork_apply(const data_job *j, data_tally *t, bb_error **err)
{
    return fork_apply(j->arg[0], j->arg[1], j->chown, j->uid, j->gid, t, err);
}

/* fork-reset <layers> <parent data> */
static int op_fork_reset(const data_job *j, data_tally *t, bb_error **err)
{
    (void)t;
    return fork_layers_reset(j->arg[0], j->arg[1], j->chown, j->uid, j->gid, err);
}

static const struct {
    const char *name;
    int nargs;
    int (*run)(const data_job *j, data_tally *t, bb_error **err);
} ops[] = {
    {"snapshot", 3, op_snapshot},     {"restore", 2, op_restore},
    {"reset", 1, op_reset},           {"export", 2, op_copy},
    {"import", 2, op_copy},           {"pack", 2, op_pack},
    {"unpack", 3, op_unpack},         {"extract", 2, op_extract},
    {"fork-diff", 2, op_fork_diff},   {"fork-apply", 2, op_fork_apply},
    {"fork-reset", 2, op_fork_reset},
};

static int run_here(const data_job *j, data_tally *t, bb_error **err)
{
    /* A deep tree holds one fd per level while it is walked. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    for (size_t i = 0; i < ELEMENTSOF(ops); i++)
        if (streq(j->op, ops[i].name)) {
            for (int k = 0; k < ops[i].nargs; k++)
                if (!j->arg[k])
                    return bb_fail(err, EINVAL, "%s needs %d arguments", j->op, ops[i].nargs);
            return ops[i].run(j, t, err);
        }
    return bb_fail(err, EINVAL, "unknown /data operation %s", j->op);
}

static int run_unshared(const data_job *j, const char *self, data_tally *t, bb_error **err)
{
    _cleanup_free_ char *owner =
        j->chown ? xasprintf("--owner=%u:%u", (unsigned)j->uid, (unsigned)j->gid) : NULL;
    char *argv[10] = {"podman", "unshare", (char *)self, "__data", (char *)j->op};
    size_t n = 5;
    if (owner)
        argv[n++] = owner;
    for (int k = 0; k < 3 && j->arg[k]; k++)
        argv[n++] = (char *)j->arg[k];
    _cleanup_free_ char *out = NULL, *errout = NULL;
    int r = spawn_capture(argv, &out, &errout, err);
    if (r < 0)
        return -1;
    if (r != 0) {
        size_t len = strlen(errout);
        while (len && errout[len - 1] == '\n')
            errout[--len] = '\0';
        return bb_fail(err, EIO, "%s", len ? errout : "podman unshare failed");
    }
    /* The tally is the last line; what an op prints as text (fork-diff) comes before it. */
    size_t len = strlen(out);
    while (len && out[len - 1] == '\n')
        out[--len] = '\0';
    char *last = strrchr(out, '\n');
    const char *tally = last ? last + 1 : out;
    if (tally_parse(tally, t) < 0)
        return bb_fail(err, EIO, "unexpected output from bluebox __data: %s", tally);
    if (j->text)
        *j->text = last ? xstrndup(out, (size_t)(last - out) + 1) : xstrdup("");
    return 0;
}

int data_job_run(const data_job *j, bool unshare, const char *self, data_tally *t, bb_error **err)
{
    *t = (data_tally){0};
    return unshare ? run_unshared(j, self, t, err) : run_here(j, t, err);
}
