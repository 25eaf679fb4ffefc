/* The tree copy behind data export and data import. */
#include "copy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"
#include "xattrs.h"

#define CHUNK (256 * 1024)

/* A file with several names, by its identity in src, and where its first copy went. */
typedef struct {
    dev_t dev;
    ino_t ino;
    char *path; /* relative to the destination root; NULL: free slot */
} link_slot;

typedef struct {
    const copy_opts *o;
    data_tally *t;
    char *buf;
    size_t len;                   /* of the path from the root to the directory being copied */
    char path[DATA_PATH_MAX + 2]; /* that path (links only) */
    int root;                     /* the destination root */
    link_slot *links;             /* open addressing, size n_slots (a power of two) */
    size_t n_links, n_slots;
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

/* Copy the bytes of in to out, holes as holes: a guest's 1 TiB sparse file costs /data
 * nothing and must not cost the destination a terabyte of zeros either. */
/* In the kernel where it can (a reflink on XFS or btrfs, a page-cache copy elsewhere), as
 * cp does; 1 when it cannot here at all (another file system, no such call), 0 when done. */
static int copy_in_kernel(copier *c, int in, int out, off_t *from, off_t to, const char *name,
                          bb_error **err)
{
    while (*from < to) {
        off_t off_out = *from;
        ssize_t n = copy_file_range(in, from, out, &off_out, (size_t)(to - *from), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP ||
                      errno == EBADF))
            return 1;
        if (n < 0)
            return bb_fail_errno(err, errno, "cannot copy %s", name);
        if (n == 0)
            break; /* shrunk while we copy */
        c->t->bytes += (uint64_t)n;
    }
    return 0;
}

static int copy_range(copier *c, int in, int out, off_t from, off_t to, const char *name,
                      bb_error **err)
{
    int k = copy_in_kernel(c, in, out, &from, to, name, err);
    if (k <= 0)
        return k;
    while (from < to) {
        size_t want = to - from < CHUNK ? (size_t)(to - from) : CHUNK;
        ssize_t n = pread(in, c->buf, want, from);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bb_fail_errno(err, errno, "cannot read %s", name);
        if (n == 0)
            break; /* shrunk while we copy */
        for (size_t off = 0; off < (size_t)n;) {
            ssize_t w = pwrite(out, c->buf + off, (size_t)n - off, from + (off_t)off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return bb_fail_errno(err, errno, "cannot write %s", name);
            off += (size_t)w;
        }
        from += n;
        c->t->bytes += (uint64_t)n;
    }
    return 0;
}

static int copy_data(copier *c, int in, int out, off_t size, const char *name, bb_error **err)
{
    for (off_t at = 0; at < size;) {
        off_t data = lseek(in, at, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break;    /* only a hole is left */
        if (data < 0) /* no SEEK_DATA here: all of it */
            return copy_range(c, in, out, at, size, name, err);
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            hole = size;
        if (copy_range(c, in, out, data, hole < size ? hole : size, name, err) < 0)
            return -1;
        at = hole;
    }
    if (ftruncate(out, size) < 0)
        return bb_fail_errno(err, errno, "cannot write %s", name);
    return 0;
}

static size_t link_hash(dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull) ^ (uint64_t)ino;
    h ^= h >> 29;
    return (size_t)(h * 0xbf58476d1ce4e5b9ull);
}

static link_slot *link_find(copier *c, dev_t dev, ino_t ino)
{
    if (c->n_slots == 0)
        return NULL;
    for (size_t i = link_hash(dev, ino) & (c->n_slots - 1);; i = (i + 1) & (c->n_slots - 1))
        if (!c->links[i].path || (c->links[i].dev == dev && c->links[i].ino == ino))
            return &c->links[i];
}

static char *path_of(copier *c, const char *name)
{
    return c->len ? xasprintf("%.*s/%s", (int)c->len, c->path, name) : xstrdup(name);
}

static void link_remember(copier *c, const struct stat *st, const char *name)
{
    if (2 * (c->n_links + 1) > c->n_slots) {
        link_slot *old = c->links;
        size_t n = c->n_slots;
        c->n_slots = n ? 2 * n : 64;
        c->links = xcalloc(c->n_slots, sizeof *c->links);
        for (size_t i = 0; i < n; i++)
            if (old[i].path)
                *link_find(c, old[i].dev, old[i].ino) = old[i];
        free(old);
    }
    link_slot *s = link_find(c, st->st_dev, st->st_ino);
    if (s->path)
        return;
    *s = (link_slot){st->st_dev, st->st_ino, path_of(c, name)};
    c->n_links++;
}

/* A further name of a file already exported: a hard link to that copy, if it still is one. */
static int copy_link(copier *c, int dst, const char *name, const struct stat *st, bb_error **err)
{
    link_slot *s = link_find(c, st->st_dev, st->st_ino);
    if (!s || !s->path)
        return 0;
    int slot = dst_slot(c, dst, name, S_IFREG, err);
    if (slot < 0 || slot == 2)
        return slot < 0 ? -1 : 1;
    if (slot == 1 && unlinkat(dst, name, 0) < 0)
        return bb_fail_errno(err, errno, "cannot replace %s", name);
    if (linkat(c->root, s->path, dst, name, 0) < 0)
        return 0; /* e.g. too many links: fall back to a copy */
    c->t->entries++;
    return 1;
}

static int copy_file(copier *c, int src, int dst, const char *name, const struct stat *listed,
                     bb_error **err)
{
    if (c->o->links && listed->st_nlink > 1) {
        int r = copy_link(c, dst, name, listed, err);
        if (r != 0)
            return r < 0 ? -1 : 0;
    }
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
    /* The attributes while the copy is still 0600: a user.* one takes write permission. */
    if (copy_data(c, in, out, st.st_size, name, err) < 0 ||
        xattrs_copy(in, out, name, c->t, err) < 0)
        return -1;
    if (c->o->links && st.st_nlink > 1)
        link_remember(c, &st, name);
    c->t->entries++;
    return set_attrs(c, out, safe_mode(st.st_mode), &st, name, err);
}

static int copy_symlink(copier *c, int src, int dst, const char *name, const struct stat *st,
                        bb_error **err)
{
    _cleanup_free_ char *target = readlink_at(src, name, NULL);
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
    if (xattrs_copy(in, out, name, c->t, err) < 0)
        return -1;
    c->t->entries++;
    size_t len = c->len;
    c->len += (len ? 1 : 0) + strlen(name);
    if (c->len <= DATA_PATH_MAX) /* deeper ones are skipped (copy_child) */
        snprintf(c->path + len, sizeof c->path - len, "%s%s", len ? "/" : "", name);
    int r = copy_dir(c, in, out, err);
    c->len = len;
    c->path[len] = '\0';
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

int copy_bytes(int in, int out, off_t size, const char *name, data_tally *t, bb_error **err)
{
    copier c = {.t = t, .buf = xmalloc(CHUNK)};
    int r = copy_data(&c, in, out, size, name, err);
    free(c.buf);
    return r;
}

int tree_copy(int src_fd, int dst_fd, const copy_opts *o, data_tally *t, bb_error **err)
{
    copier *c = xmalloc(sizeof *c);
    *c = (copier){.o = o, .t = t, .buf = xmalloc(CHUNK), .root = dst_fd};
    int r = xattrs_copy(src_fd, dst_fd, ".", t, err);
    if (r == 0)
        r = copy_dir(c, src_fd, dst_fd, err);
    for (size_t i = 0; i < c->n_slots; i++)
        free(c->links[i].path);
    free(c->links);
    free(c->buf);
    free(c);
    return r;
}
