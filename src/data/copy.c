/* The tree copy behind data export and data import. */
#include "copy.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"

#define CHUNK (256 * 1024)

typedef struct {
    const copy_opts *o;
    data_tally *t;
    char *buf;
    size_t len; /* of the path from the root to the directory being copied */
} copier;

static int copy_dir(copier *c, int src, int dst, bb_error **err);

static mode_t safe_mode(mode_t m)
{
    return m & 0777;
}

static int set_attrs(copier *c, int fd, mode_t mode, const struct stat *st, const char *name,
                     bb_error **err)
{
    struct timespec ts[2] = {{0, UTIME_OMIT}, st->st_mtim};
    if (c->o->chown && fchown(fd, c->o->uid, c->o->gid) < 0)
        return bb_fail_errno(err, errno, "cannot change the owner of %s", name);
    if (fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
        return bb_fail_errno(err, errno, "cannot set the mode of %s", name);
    return 0;
}

/* What is at name in dst: 0 nothing, 1 something of the given type (left for the caller to
 * merge or replace), 2 something else (skipped and counted as a clash); -1 on an error. */
static int dst_slot(copier *c, int dst, const char *name, mode_t type, bb_error **err)
{
    struct stat st;
    if (fstatat(dst, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0;
        return bb_fail_errno(err, errno, "cannot stat %s", name);
    }
    if ((st.st_mode & S_IFMT) == type)
        return 1;
    c->t->skipped[SKIP_CONFLICT]++;
    return 2;
}

static int copy_file(copier *c, int src, int dst, const char *name, const struct stat *listed,
                     bb_error **err)
{
    _cleanup_close_ int in =
        openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != listed->st_ino) {
        c->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    int slot = dst_slot(c, dst, name, S_IFREG, err);
    if (slot < 0 || slot == 2)
        return slot < 0 ? -1 : 0;
    /* Replace by unlinking first: writing into an existing file could reach another name
     * (a hard link) the other side planted. */
    if (slot == 1 && unlinkat(dst, name, 0) < 0)
        return bb_fail_errno(err, errno, "cannot replace %s", name);
    _cleanup_close_ int out =
        openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return bb_fail_errno(err, errno, "cannot create %s", name);
    for (;;) {
        ssize_t n = read(in, c->buf, CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bb_fail_errno(err, errno, "cannot read %s", name);
        if (n == 0)
            break;
        int w = write_full(out, c->buf, (size_t)n);
        if (w < 0)
            return bb_fail_errno(err, -w, "cannot write %s", name);
        c->t->bytes += (uint64_t)n;
    }
    c->t->entries++;
    return set_attrs(c, out, safe_mode(st.st_mode), &st, name, err);
}

static int copy_symlink(copier *c, int src, int dst, const char *name, const struct stat *st,
                        bb_error **err)
{
    _cleanup_free_ char *target = readlink_at(src, name);
    if (!target) {
        c->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    int slot = dst_slot(c, dst, name, S_IFLNK, err);
    if (slot < 0 || slot == 2)
        return slot < 0 ? -1 : 0;
    if (slot == 1 && unlinkat(dst, name, 0) < 0)
        return bb_fail_errno(err, errno, "cannot replace %s", name);
    if (symlinkat(target, dst, name) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", name);
    struct timespec ts[2] = {{0, UTIME_OMIT}, st->st_mtim};
    if (c->o->chown && fchownat(dst, name, c->o->uid, c->o->gid, AT_SYMLINK_NOFOLLOW) < 0)
        return bb_fail_errno(err, errno, "cannot change the owner of %s", name);
    (void)utimensat(dst, name, ts, AT_SYMLINK_NOFOLLOW);
    c->t->entries++;
    return 0;
}

static int copy_subdir(copier *c, int src, int dst, const char *name, bb_error **err)
{
    _cleanup_close_ int in = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0) {
        c->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    int slot = dst_slot(c, dst, name, S_IFDIR, err);
    if (slot < 0 || slot == 2)
        return slot < 0 ? -1 : 0;
    if (slot == 0 && mkdirat(dst, name, 0700) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", name);
    _cleanup_close_ int out = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (out < 0)
        return bb_fail_errno(err, errno, "cannot open %s", name);
    /* Reachable by the owner while filling it, its own mode after. */
    (void)fchmod(out, 0700);
    c->t->entries++;
    size_t len = c->len;
    c->len += (len ? 1 : 0) + strlen(name);
    int r = copy_dir(c, in, out, err);
    c->len = len;
    if (r < 0)
        return bb_prefix(err, "%s", name);
    return set_attrs(c, out, safe_mode(st.st_mode) | 0700, &st, name, err);
}

static int copy_child(copier *c, int src, int dst, const char *name, bb_error **err)
{
    struct stat st;
    if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        c->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    bool deep = c->len + (c->len ? 1 : 0) + strlen(name) > DATA_PATH_MAX;
    skip_kind k = deep ? SKIP_DEEP : skip_kind_of(st.st_mode);
    if (k != SKIP_N) {
        c->t->skipped[k]++;
        return 0;
    }
    if (S_ISREG(st.st_mode))
        return copy_file(c, src, dst, name, &st, err);
    if (S_ISLNK(st.st_mode))
        return copy_symlink(c, src, dst, name, &st, err);
    return copy_subdir(c, src, dst, name, err);
}

static int copy_dir(copier *c, int src, int dst, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(src, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++)
        if (copy_child(c, src, dst, names.v[i], err) < 0)
            return -1;
    return 0;
}

int tree_copy(int src_fd, int dst_fd, const copy_opts *o, data_tally *t, bb_error **err)
{
    copier c = {.o = o, .t = t, .buf = xmalloc(CHUNK)};
    int r = copy_dir(&c, src_fd, dst_fd, err);
    free(c.buf);
    return r;
}
