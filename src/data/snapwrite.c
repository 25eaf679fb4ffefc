/* The snapshot writer: a walk over /data by fds, into libarchive's pax writer (holes kept as
 * GNU sparse 1.0 entries). */
#include "snapwrite.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "crashpoint.h"
#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"
#include "xattrs.h"
#include "zpipe.h"

#define CHUNK (256 * 1024)
/* A hole is handed to the writer as zeros it skips without reading them: one untouched
 * calloc'd buffer, so a terabyte-sized hole is a few thousand calls and no page of memory. */
#define HOLE_CHUNK (16 * 1024 * 1024)

static const struct {
    const char *name, *suffix;
} compressors[] = {
    [COMPRESS_GZIP] = {"gzip", ".tar.gz"},
    [COMPRESS_ZSTD] = {"zstd", ".tar.zst"},
    [COMPRESS_NONE] = {"none", ".tar"},
};

const char *compress_suffix(snap_compress c)
{
    return compressors[c].suffix;
}

const char *compress_name(snap_compress c)
{
    return compressors[c].name;
}

int compress_parse(const char *s, snap_compress *ret)
{
    for (size_t i = 0; i < ELEMENTSOF(compressors); i++)
        if (streq(s, compressors[i].name)) {
            *ret = (snap_compress)i;
            return 0;
        }
    return -1;
}

typedef struct {
    struct archive *a;
    struct archive_entry_linkresolver *links;
    data_tally *t;
    snap_progress progress;
    void *ud;
    char *buf;
    char *zeros; /* HOLE_CHUNK, never written */
    zpipe *z;    /* zstd: the compressor thread */
} writer;

static int archive_fail(writer *w, bb_error **err, const char *what)
{
    const char *msg = archive_error_string(w->a);
    int e = archive_errno(w->a);
    return bb_fail(err, e > 0 ? e : EIO, "cannot write the archive (%s): %s", what,
                   msg ? msg : "unknown error");
}

static struct archive_entry *entry_for(const char *path, const struct stat *st)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        abort();
    archive_entry_copy_pathname(e, path);
    archive_entry_copy_stat(e, st);
    /* Owners mean nothing outside the sandbox; setuid/setgid are never carried. */
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_perm(e, st->st_mode & 01777 & ~(mode_t)(S_ISUID | S_ISGID));
    archive_entry_unset_atime(e);
    archive_entry_unset_ctime(e);
    archive_entry_unset_birthtime(e);
    return e;
}

/* The guest's ownership and extended attributes (user.bluebox.*, xattrs.h) of the file or
 * directory open at fd, as SCHILY.xattr records. A name with '=' cannot be one (the record
 * ends its key there): left out and counted. */
static int add_xattrs(writer *w, int fd, struct archive_entry *e, const char *path, bb_error **err)
{
    _cleanup_xattrs_ xattr_set s = {0};
    if (xattrs_read(fd, path, &s, w->t, err) < 0)
        return -1;
    for (size_t i = 0; i < s.n; i++) {
        if (strchr(s.v[i].name, '='))
            w->t->xattrs_ignored++;
        else
            archive_entry_xattr_add_entry(e, s.v[i].name, s.v[i].value, s.v[i].len);
    }
    return 0;
}

static int write_header(writer *w, struct archive_entry *e, bb_error **err)
{
    if (archive_write_header(w->a, e) < ARCHIVE_WARN)
        return archive_fail(w, err, archive_entry_pathname(e));
    w->t->entries++;
    return 0;
}

static int write_zeros(writer *w, int64_t len, bb_error **err, const char *path)
{
    while (len > 0) {
        size_t n = len < HOLE_CHUNK ? (size_t)len : HOLE_CHUNK;
        if (archive_write_data(w->a, w->zeros, n) < 0)
            return archive_fail(w, err, path);
        len -= (int64_t)n;
    }
    return 0;
}

/* Copy [from, to) of the file; *ret_short is set when it ends early (the file shrank). */
static int write_range(writer *w, int fd, int64_t from, int64_t to, bool *ret_short, bb_error **err,
                       const char *path)
{
    while (from < to) {
        size_t want = to - from < CHUNK ? (size_t)(to - from) : CHUNK;
        ssize_t n = pread(fd, w->buf, want, from);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bb_fail_errno(err, errno, "cannot read %s", path);
        if (n == 0) {
            *ret_short = true;
            return 0;
        }
        if (archive_write_data(w->a, w->buf, (size_t)n) < 0)
            return archive_fail(w, err, path);
        from += n;
        w->t->bytes += (uint64_t)n;
        if (w->progress)
            w->progress(w->t->bytes, w->ud);
    }
    return 0;
}

/* Copy exactly the size the header promised, holes as zeros the sparse writer drops: a
 * file that shrank is padded, one that grew is cut, so the archive stays well-formed
 * while the guest writes. */
static int write_data(writer *w, int fd, struct archive_entry *e, bb_error **err, const char *path)
{
    int64_t size = archive_entry_size(e), at = 0, off, len;
    bool shrunk = false;
    if (archive_entry_sparse_reset(e) == 0) {
        if (write_range(w, fd, 0, size, &shrunk, err, path) < 0)
            return -1;
    } else {
        while (!shrunk && archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK) {
            if (write_zeros(w, off - at, err, path) < 0 ||
                write_range(w, fd, off, off + len, &shrunk, err, path) < 0)
                return -1;
            at = off + len;
        }
        if (!shrunk && write_zeros(w, size - at, err, path) < 0)
            return -1;
    }
    CRASH_POINT("snapshot-file-written");
    return 0;
}

/* Record the file's data segments (SEEK_DATA/SEEK_HOLE, as data export reads them) in e
 * when it has a hole, so the archive holds the data and a map, not gigabytes of zeros.
 * Past DATA_MAX_SEGMENTS the rest of the file is one segment, zeros and all (a restore turns
 * zero runs back into holes), which bounds the map and the memory of whoever reads it. */
static void map_holes(int fd, struct archive_entry *e)
{
    int64_t size = archive_entry_size(e);
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    if (size <= 0 || hole < 0 || hole >= size)
        return; /* no hole, or a filesystem that cannot say */
    size_t n = 0;
    for (off_t at = 0; at < size;) {
        off_t data = lseek(fd, at, SEEK_DATA);
        if (data < 0 || data >= size)
            break; /* only a hole is left */
        off_t end = ++n == DATA_MAX_SEGMENTS ? size : lseek(fd, data, SEEK_HOLE);
        if (end < 0 || end > size)
            end = size;
        archive_entry_sparse_add_entry(e, data, end - data);
        at = end;
    }
    if (n == 0) /* all hole: an empty segment at the end still makes it a sparse entry */
        archive_entry_sparse_add_entry(e, size, 0);
}

static int walk(writer *w, int dfd, const char *rel, bb_error **err);

static int add_file(writer *w, int dfd, const char *name, const char *path,
                    const struct stat *listed, bb_error **err)
{
    _cleanup_close_ int fd =
        openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != listed->st_ino) {
        w->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    struct archive_entry *e = entry_for(path, &st), *spare = NULL;
    archive_entry_linkify(w->links, &e, &spare);
    /* A later name of a hard-linked file becomes a link entry without data. */
    bool has_data = !archive_entry_hardlink(e) && archive_entry_size(e) > 0;
    if (has_data)
        map_holes(fd, e);
    /* A link entry names an inode whose first entry carries its attributes. */
    int r = archive_entry_hardlink(e) ? 0 : add_xattrs(w, fd, e, path, err);
    if (r == 0)
        r = write_header(w, e, err);
    if (r == 0 && has_data)
        r = write_data(w, fd, e, err, path);
    archive_entry_free(e);
    archive_entry_free(spare);
    return r;
}

static int add_symlink(writer *w, int dfd, const char *name, const char *path,
                       const struct stat *st, bb_error **err)
{
    _cleanup_free_ char *target = readlink_at(dfd, name, NULL);
    if (!target) {
        w->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    struct archive_entry *e = entry_for(path, st);
    archive_entry_copy_symlink(e, target);
    int r = write_header(w, e, err);
    archive_entry_free(e);
    return r;
}

static int add_dir(writer *w, int dfd, const char *name, const char *path, bb_error **err)
{
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        w->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    _cleanup_free_ char *dirpath = xasprintf("%s/", path);
    struct archive_entry *e = entry_for(dirpath, &st);
    int r = add_xattrs(w, fd, e, path, err);
    if (r == 0)
        r = write_header(w, e, err);
    archive_entry_free(e);
    if (r < 0)
        return -1;
    return walk(w, fd, path, err);
}

static int add_child(writer *w, int dfd, const char *rel, const char *name, bb_error **err)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        w->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    _cleanup_free_ char *path = xasprintf("%s/%s", rel, name);
    skip_kind k = strlen(path) - 2 > DATA_PATH_MAX ? SKIP_DEEP : skip_kind_of(st.st_mode);
    if (k != SKIP_N) {
        w->t->skipped[k]++;
        return 0;
    }
    if (S_ISREG(st.st_mode))
        return add_file(w, dfd, name, path, &st, err);
    if (S_ISLNK(st.st_mode))
        return add_symlink(w, dfd, name, path, &st, err);
    return add_dir(w, dfd, name, path, err);
}

static int walk(writer *w, int dfd, const char *rel, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    /* Sorted: archives of the same tree come out the same. */
    if (list_dir_at(dfd, &names, err) < 0)
        return -1;
    strv_sort(&names);
    for (size_t i = 0; i < names.n; i++)
        if (add_child(w, dfd, rel, names.v[i], err) < 0)
            return -1;
    return 0;
}

static int add_filter(struct archive *a, snap_compress c)
{
    switch (c) {
    case COMPRESS_GZIP:
        return archive_write_add_filter_gzip(a);
    case COMPRESS_ZSTD: /* compressed by zpipe, beside the walk */
    case COMPRESS_NONE:
        return archive_write_add_filter_none(a);
    }
    return ARCHIVE_FATAL;
}

static la_ssize_t zpipe_cb(struct archive *a, void *z, const void *data, size_t len)
{
    if (zpipe_write(z, data, len) < 0) {
        archive_set_error(a, errno, "cannot compress the snapshot: %s", strerror(errno));
        return -1;
    }
    return (la_ssize_t)len;
}

static int open_out(writer *w, int out_fd, snap_compress c)
{
    if (c != COMPRESS_ZSTD)
        return archive_write_open_fd(w->a, out_fd);
    w->z = zpipe_start(out_fd, ZSTD_CLEVEL_DEFAULT);
    return archive_write_open2(w->a, w->z, NULL, zpipe_cb, NULL, NULL);
}

static int write_all(writer *w, int data_fd, int out_fd, snap_compress c, bb_error **err)
{
    /* ARCHIVE_WARN would mean an external compressor program: not in a static bluebox. */
    if (add_filter(w->a, c) != ARCHIVE_OK)
        return bb_fail(err, ENOTSUP, "this bluebox was built without %s support", compress_name(c));
    /* Extended attributes as SCHILY.xattr records only (GNU tar's, raw values), not also as
     * LIBARCHIVE.xattr: a reader would see each twice. */
    if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
        archive_write_set_format_option(w->a, "pax", "xattrheader", "SCHILY") != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(w->a, 65536) != ARCHIVE_OK ||
        open_out(w, out_fd, c) != ARCHIVE_OK)
        return archive_fail(w, err, "setup");
    archive_entry_linkresolver_set_strategy(w->links, archive_format(w->a));
    struct stat st;
    if (fstat(data_fd, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat /data");
    struct archive_entry *e = entry_for("./", &st);
    int r = add_xattrs(w, data_fd, e, "/data", err);
    if (r == 0)
        r = write_header(w, e, err);
    archive_entry_free(e);
    if (r < 0 || walk(w, data_fd, ".", err) < 0)
        return -1;
    if (archive_write_close(w->a) != ARCHIVE_OK)
        return archive_fail(w, err, "closing");
    if (w->z) {
        zpipe *z = steal_pointer(&w->z);
        if (zpipe_finish(z) < 0)
            return bb_fail_errno(err, errno, "cannot write the snapshot");
    }
    return 0;
}

int snapshot_write(int data_fd, int out_fd, snap_compress c, snap_progress progress, void *ud,
                   data_tally *t, bb_error **err)
{
    writer w = {.a = archive_write_new(),
                .links = archive_entry_linkresolver_new(),
                .t = t,
                .progress = progress,
                .ud = ud,
                .buf = xmalloc(CHUNK),
                .zeros = xcalloc(1, HOLE_CHUNK)};
    if (!w.a || !w.links)
        abort();
    int r = write_all(&w, data_fd, out_fd, c, err);
    archive_write_free(w.a);
    if (w.z)
        (void)zpipe_finish(w.z); /* after a failure: the error is already said */
    archive_entry_linkresolver_free(w.links);
    free(w.buf);
    free(w.zeros);
    return r;
}
