/* The archive validator and extractor behind restore (and the fuzz target). Nothing here
 * trusts a name, a type or a link in the archive: names are cleaned and refused when
 * absolute or escaping, every path is resolved beneath the destination without following a
 * symlink, and an entry may neither pass through nor replace what an earlier one planted.
 * The destination itself is the record of earlier entries, so memory does not grow with
 * the archive (only with the number of directories, whose modes are applied last). */
#include "safetar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crashpoint.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "xattrs.h"

#define BLOCK_SIZE (1024 * 1024)
/* The unit of allocation the budget counts and zero runs are dropped in. */
#define PAGE 4096

static int setup_reader(struct archive **ret, bb_error **err)
{
    struct archive *a = archive_read_new();
    if (!a)
        abort();
    archive_read_support_format_tar(a);
    /* Built in (static zlib and libzstd), never an external program. */
    if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
        archive_read_support_filter_zstd(a) != ARCHIVE_OK) {
        archive_read_free(a);
        return bb_fail(err, ENOTSUP, "this bluebox was built without gzip or zstd support");
    }
    archive_read_support_filter_none(a);
    *ret = a;
    return 0;
}

static int opened(struct archive *a, int r, struct archive **ret, bb_error **err)
{
    if (r != ARCHIVE_OK) {
        bb_fail(err, EINVAL, "cannot read it as a .tar, .tar.gz or .tar.zst archive: %s",
                archive_error_string(a) ? archive_error_string(a) : "unknown error");
        archive_read_free(a);
        return -1;
    }
    *ret = a;
    return 0;
}

int safetar_open_fd(int fd, struct archive **ret, bb_error **err)
{
    struct archive *a;
    if (setup_reader(&a, err) < 0)
        return -1;
    return opened(a, archive_read_open_fd(a, fd, BLOCK_SIZE), ret, err);
}

int safetar_open_memory(const void *buf, size_t len, struct archive **ret, bb_error **err)
{
    struct archive *a;
    if (setup_reader(&a, err) < 0)
        return -1;
    return opened(a, archive_read_open_memory(a, buf, len), ret, err);
}

void safetar_close(struct archive *a)
{
    if (a)
        archive_read_free(a);
}

typedef struct {
    char *rel; /* "" for the root */
    mode_t mode;
    struct timespec mtime;
} dir_attr;

typedef struct {
    int root;
    const safetar_opts *o;
    data_tally *t;
    const char *entry; /* the raw name, for messages */
    char *pname;       /* the cached parent directory and its O_PATH fd */
    int pfd;
    dir_attr *dirs;
    size_t ndirs;
    uint64_t bytes_left, entries_left;
    uint64_t bytes_used; /* what the budget gave out: pages and directories written */
    bool no_room;        /* the budget ran out; the rest of the archive is only counted */
    bool capped;         /* the data segment is capped (max_memory); old is the limit before */
    struct rlimit old;
} extractor;

static int refuse(extractor *x, bb_error **err, const char *fmt, ...) _printf_(3, 4);
static int refuse(extractor *x, bb_error **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *why = xvasprintf(fmt, ap);
    va_end(ap);
    return bb_fail(err, EINVAL, "entry \"%s\": %s", x->entry, why);
}

_Static_assert(DATA_PATH_MAX == 4095, "the refusal in clean_name says 4095");

/* Clean an entry name: drop "." components and repeated or trailing slashes. Absolute
 * names and ".." anywhere are refused, raw or cleaned. "" is the archive root. */
static const char *clean_name(const char *raw, char **ret)
{
    if (!raw || !*raw)
        return "has no name";
    if (raw[0] == '/')
        return "is an absolute path";
    _cleanup_sb_ strbuf b = {0};
    sb_puts(&b, "");
    for (const char *p = raw; *p;) {
        const char *end = strchrnul(p, '/');
        size_t n = (size_t)(end - p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return "escapes the archive root";
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (b.len)
                sb_putc(&b, '/');
            sb_putn(&b, p, n);
        }
        p = *end ? end + 1 : end;
    }
    /* Longer could not be opened in one openat2, and makes a walk as deep as it is. */
    if (b.len > DATA_PATH_MAX)
        return "is longer than the 4095 bytes a path in /data can have";
    *ret = sb_steal(&b);
    return NULL;
}

static void split(char *path, const char **ret_parent, const char **ret_base)
{
    char *slash = strrchr(path, '/');
    if (!slash) {
        *ret_parent = "";
        *ret_base = path;
        return;
    }
    *slash = '\0';
    *ret_parent = path;
    *ret_base = slash + 1;
}

static int take_entry(extractor *x, bb_error **err)
{
    if (!x->o->max_entries)
        return 0;
    if (x->entries_left == 0)
        return refuse(x, err,
                      "the archive has more entries than the %llu the disk holding /data "
                      "has room for",
                      (unsigned long long)x->o->max_entries);
    x->entries_left--;
    return 0;
}

/* Bytes of disk the restore is about to allocate. When they are not there, the error is
 * only a placeholder: safetar_extract counts the rest of the archive and says how much it
 * needs (no_room_error). */
static int take_bytes(extractor *x, uint64_t bytes, bb_error **err)
{
    x->bytes_used += bytes;
    if (!x->o->max_bytes)
        return 0;
    if (bytes > x->bytes_left) {
        x->no_room = true;
        return refuse(x, err, "no room");
    }
    x->bytes_left -= bytes;
    return 0;
}

static int take_budget(extractor *x, uint64_t bytes, bb_error **err)
{
    if (take_entry(x, err) < 0)
        return -1;
    return take_bytes(x, bytes, err);
}

static int own_at(extractor *x, int dfd, const char *name, bb_error **err)
{
    if (!x->o->chown)
        return 0;
    if (fchownat(dfd, name, x->o->uid, x->o->gid, AT_SYMLINK_NOFOLLOW) < 0)
        return bb_fail_errno(err, errno, "cannot give %s to the sandbox", x->entry);
    return 0;
}

/* The entry's extended attributes a restore writes: user.bluebox.* within the limits
 * (xattrs.h), and only on files and directories. Everything else in the archive
 * (security.capability, trusted.*, ACLs, other user.* names, or any on a symlink or a hard
 * link) is never written, only counted. */
static void entry_xattrs(extractor *x, struct archive_entry *e, xattr_set *ret)
{
    *ret = (xattr_set){0};
    if (archive_entry_xattr_reset(e) <= 0)
        return;
    const char *name;
    const void *value;
    size_t len;
    while (archive_entry_xattr_next(e, &name, &value, &len) == ARCHIVE_OK) {
        xattr_added r = name ? xattr_set_add(ret, name, value, len) : XATTR_FOREIGN;
        if (r == XATTR_FOREIGN || r == XATTR_OVER)
            x->t->xattrs_ignored++;
    }
}

/* Write the entry's carried attributes to fd, which it just created. */
static int set_xattrs(extractor *x, struct archive_entry *e, int fd, bb_error **err)
{
    _cleanup_xattrs_ xattr_set s = {0};
    entry_xattrs(x, e, &s);
    return xattrs_write(fd, x->entry, &s, x->t, err);
}

/* A directory's attributes, through an fd of it that can take them (not O_PATH). */
static int set_dir_xattrs(extractor *x, struct archive_entry *e, int pfd, const char *base,
                          bb_error **err)
{
    if (archive_entry_xattr_count(e) == 0)
        return 0;
    _cleanup_close_ int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", x->entry);
    return set_xattrs(x, e, fd, err);
}

/* Walk to a directory one component at a time, creating missing ones (0755, as tar does)
 * or refusing them, and naming the first component that is a symlink or not a directory.
 * `how` starts the refusal: "passes through", "is a hard link through". */
static int walk_dirs(extractor *x, const char *parent, bool create, const char *how, bb_error **err)
{
    _cleanup_close_ int cur = fcntl(x->root, F_DUPFD_CLOEXEC, 3);
    if (cur < 0)
        return bb_fail_errno(err, errno, "cannot open the staging directory");
    _cleanup_free_ char *path = xstrdup(parent);
    for (char *p = path; *p;) {
        char *end = strchrnul(p, '/');
        bool last = !*end;
        *end = '\0';
        struct stat st;
        if (fstatat(cur, p, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                return bb_fail_errno(err, errno, "cannot stat %s", path);
            if (!create)
                return refuse(x, err, "%s \"%s\", which is not an earlier entry", how, path);
            if (take_budget(x, PAGE, err) < 0)
                return -1;
            if (mkdirat(cur, p, 0755) < 0)
                return bb_fail_errno(err, errno, "cannot create %s", path);
            if (own_at(x, cur, p, err) < 0)
                return -1;
        } else if (S_ISLNK(st.st_mode)) {
            return refuse(x, err, "%s the symlink \"%s\" an earlier entry planted", how, path);
        } else if (!S_ISDIR(st.st_mode)) {
            return refuse(x, err, "%s \"%s\", which is not a directory", how, path);
        }
        int next = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0)
            return bb_fail_errno(err, errno, "cannot open %s", path);
        close(cur);
        cur = next;
        if (!last)
            *end = '/';
        p = last ? end : end + 1;
    }
    return steal_fd(&cur);
}

/* The O_PATH fd of the parent directory, cached for runs of entries in one directory. */
static int parent_fd(extractor *x, const char *parent, bb_error **err)
{
    if (!*parent)
        return x->root;
    if (x->pname && streq(x->pname, parent))
        return x->pfd;
    int fd = openat_beneath(x->root, parent, O_PATH | O_DIRECTORY, 0, NULL);
    if (fd < 0 && (fd = walk_dirs(x, parent, true, "passes through", err)) < 0)
        return -1;
    if (x->pfd >= 0)
        close(x->pfd);
    free(x->pname);
    x->pname = xstrdup(parent);
    x->pfd = fd;
    return fd;
}

static void remember_dir(extractor *x, const char *rel, struct archive_entry *e)
{
    x->dirs = xreallocarray(x->dirs, x->ndirs + 1, sizeof *x->dirs);
    dir_attr *d = &x->dirs[x->ndirs++];
    d->rel = xstrdup(rel);
    d->mode = archive_entry_perm(e);
    d->mtime.tv_sec = archive_entry_mtime_is_set(e) ? archive_entry_mtime(e) : 0;
    d->mtime.tv_nsec = archive_entry_mtime_is_set(e) ? archive_entry_mtime_nsec(e) : UTIME_OMIT;
}

static struct timespec entry_mtime(struct archive_entry *e)
{
    if (!archive_entry_mtime_is_set(e))
        return (struct timespec){0, UTIME_OMIT};
    return (struct timespec){archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
}

static int pwrite_all(int fd, const char *buf, size_t len, off_t off)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

/* Cap the data segment at what it holds now plus max (not in sanitizer builds, whose
 * allocator dies rather than fail). Returns whether it did, with the limit to put back. */
static bool cap_memory(uint64_t max, struct rlimit *ret_old)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)max, (void)ret_old;
    return false;
#else
    _cleanup_fclose_ FILE *f = max ? fopen("/proc/self/statm", "re") : NULL;
    unsigned long long v[6];
    if (!f ||
        fscanf(f, "%llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6 ||
        getrlimit(RLIMIT_DATA, ret_old) < 0)
        return false;
    struct rlimit cap = *ret_old;
    cap.rlim_cur = (rlim_t)(v[5] * (unsigned long long)sysconf(_SC_PAGESIZE) + max);
    if (ret_old->rlim_cur != RLIM_INFINITY && ret_old->rlim_cur <= cap.rlim_cur)
        return false;
    return setrlimit(RLIMIT_DATA, &cap) == 0;
#endif
}

static void lift_cap(extractor *x)
{
    if (x->capped)
        (void)setrlimit(RLIMIT_DATA, &x->old);
    x->capped = false;
}

/* libarchive failed to read: with the memory cap lifted first, since libarchive may hold
 * all of it (a sparse map too long) and saying so takes memory. */
static int read_failed(extractor *x, struct archive *a, bb_error **err)
{
    bool capped = x->capped;
    lift_cap(x);
    const char *why = archive_error_string(a) ? archive_error_string(a) : "unknown error";
    if (capped &&
        (archive_errno(a) == ENOMEM || strcasestr(why, "memory") || strcasestr(why, "alloc")))
        return bb_fail(err, ENOMEM,
                       "%s%s%sthe archive needs more than the %llu MiB of memory a restore may "
                       "use to read it (%s; a sparse map this long is not one bluebox writes)",
                       x->entry ? "entry \"" : "", x->entry ? x->entry : "", x->entry ? "\": " : "",
                       (unsigned long long)(x->o->max_memory >> 20), why);
    if (x->entry)
        return bb_fail(err, EIO, "cannot read %s from the archive: %s", x->entry, why);
    return bb_fail(err, EIO, "cannot read the archive: %s", why);
}

static bool all_zero(const char *p, size_t n)
{
    static const char zero[PAGE];
    for (size_t k; n > 0; p += k, n -= k) {
        k = n < PAGE ? n : PAGE;
        if (memcmp(p, zero, k) != 0)
            return false;
    }
    return true;
}

/* The length of the run at buf (file offset off) that is all zeros page by page (zero) or
 * has a nonzero byte in every page (!zero); runs break at page boundaries of the file. */
static size_t run_of(const char *buf, size_t len, uint64_t off, bool *ret_zero)
{
    size_t n = PAGE - off % PAGE < len ? PAGE - off % PAGE : len;
    *ret_zero = all_zero(buf, n);
    while (n < len) {
        size_t k = len - n < PAGE ? len - n : PAGE;
        if (all_zero(buf + n, k) != *ret_zero)
            break;
        n += k;
    }
    return n;
}

typedef struct {
    int fd;
    uint64_t next;     /* where the data read so far ends */
    uint64_t paid;     /* the first page the budget has not paid for */
    uint64_t segments; /* runs of data with a gap before them */
} out_file;

/* Write one block of the entry's data, leaving out the pages it would only fill with
 * zeros: the file is new, so they read as zeros already and stay holes. Only the pages
 * written are taken from the budget. */
static int write_block(extractor *x, out_file *f, const char *buf, size_t len, uint64_t off,
                       bb_error **err)
{
    while (len > 0) {
        bool zero;
        size_t n = run_of(buf, len, off, &zero);
        if (!zero) {
            uint64_t first = off / PAGE > f->paid ? off / PAGE : f->paid;
            uint64_t last = (off + n - 1) / PAGE;
            if (last >= first && take_bytes(x, (last - first + 1) * PAGE, err) < 0)
                return -1;
            if (last >= first)
                f->paid = last + 1;
            if (pwrite_all(f->fd, buf, n, (off_t)off) < 0)
                return bb_fail_errno(err, errno, "cannot write %s", x->entry);
        }
        buf += n;
        off += n;
        len -= n;
    }
    return 0;
}

/* A data block as the archive hands it: in order, inside the size, and (for a sparse
 * entry) not one of more segments than a snapshot ever writes. */
static int check_block(extractor *x, out_file *f, la_int64_t off, size_t len, la_int64_t size,
                       bb_error **err)
{
    if (off < 0 || (uint64_t)off + len > (uint64_t)size)
        return refuse(x, err, "has more data than its size");
    if ((uint64_t)off < f->next)
        return refuse(x, err, "has a sparse map with overlapping or unordered segments");
    if ((uint64_t)off > f->next && ++f->segments > DATA_MAX_SEGMENTS)
        return refuse(x, err, "has a sparse map of more than %d segments", DATA_MAX_SEGMENTS);
    f->next = (uint64_t)off + len;
    return 0;
}

static int write_file(extractor *x, struct archive *a, struct archive_entry *e, int pfd,
                      const char *base, bb_error **err)
{
    la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    if (size < 0)
        return refuse(x, err, "has a negative size");
    if (take_entry(x, err) < 0)
        return -1;
    _cleanup_close_ int fd =
        openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    out_file f = {.fd = fd};
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", x->entry);
    /* The full size first, as a hole: an absurd size is refused before any data is read. */
    if (ftruncate(fd, size) < 0) {
        if (errno == EFBIG || errno == EINVAL)
            return refuse(x, err,
                          "its size (%lld bytes) is more than the disk holding /data can "
                          "hold",
                          (long long)size);
        return bb_fail_errno(err, errno, "cannot write %s", x->entry);
    }
    for (;;) {
        const void *buf;
        size_t len;
        la_int64_t off;
        int r = archive_read_data_block(a, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN)
            return read_failed(x, a, err);
        if (check_block(x, &f, off, len, size, err) < 0 ||
            write_block(x, &f, buf, len, (uint64_t)off, err) < 0)
            return -1;
    }
    CRASH_POINT("restore-file-written");
    /* While the file is still 0600: setting a user.* attribute takes write permission. */
    if (set_xattrs(x, e, fd, err) < 0)
        return -1;
    if (x->o->chown && fchown(fd, x->o->uid, x->o->gid) < 0)
        return bb_fail_errno(err, errno, "cannot give %s to the sandbox", x->entry);
    struct timespec ts[2] = {{0, UTIME_OMIT}, entry_mtime(e)};
    if (fchmod(fd, archive_entry_perm(e) & 0777) < 0 || futimens(fd, ts) < 0)
        return bb_fail_errno(err, errno, "cannot set the mode of %s", x->entry);
    x->t->bytes += (uint64_t)size;
    return 0;
}

static int write_symlink(extractor *x, struct archive_entry *e, int pfd, const char *base,
                         bb_error **err)
{
    const char *target = archive_entry_symlink(e);
    if (!target || !*target)
        return refuse(x, err, "is a symlink without a target");
    if (take_budget(x, 0, err) < 0)
        return -1;
    if (symlinkat(target, pfd, base) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", x->entry);
    if (own_at(x, pfd, base, err) < 0)
        return -1;
    struct timespec ts[2] = {{0, UTIME_OMIT}, entry_mtime(e)};
    if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
        return bb_fail_errno(err, errno, "cannot set the time of %s", x->entry);
    return 0;
}

/* A hard link must name an earlier regular file of this archive, reached without a
 * symlink; it can never reach anything outside the destination. */
static int write_hardlink(extractor *x, const char *target_raw, int pfd, const char *base,
                          bb_error **err)
{
    _cleanup_free_ char *target = NULL;
    const char *why = clean_name(target_raw, &target);
    if (why)
        return refuse(x, err, "is a hard link to \"%s\", which %s", target_raw, why);
    if (!*target)
        return refuse(x, err, "is a hard link to the archive root");
    const char *tparent, *tbase;
    split(target, &tparent, &tbase);
    _cleanup_close_ int tfd = walk_dirs(x, tparent, false, "is a hard link through", err);
    if (tfd < 0)
        return -1;
    struct stat st;
    if (fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return refuse(x, err, "is a hard link to \"%s\", which is not an earlier entry",
                      target_raw);
    if (!S_ISREG(st.st_mode))
        return refuse(x, err, "is a hard link to \"%s\", which is not a regular file", target_raw);
    if (take_budget(x, 0, err) < 0)
        return -1;
    if (linkat(tfd, tbase, pfd, base, 0) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", x->entry);
    return 0;
}

static int write_dir(extractor *x, struct archive_entry *e, int pfd, const char *base,
                     const char *rel, bb_error **err)
{
    if (take_budget(x, PAGE, err) < 0)
        return -1;
    if (mkdirat(pfd, base, 0700) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", x->entry);
    if (own_at(x, pfd, base, err) < 0 || set_dir_xattrs(x, e, pfd, base, err) < 0)
        return -1;
    remember_dir(x, rel, e);
    return 0;
}

static const char *refused_type(mode_t type)
{
    switch (type) {
    case AE_IFCHR:
        return "character device";
    case AE_IFBLK:
        return "block device";
    case AE_IFIFO:
        return "fifo";
    case AE_IFSOCK:
        return "socket";
    default:
        return "unknown type";
    }
}

static int extract_entry(extractor *x, struct archive *a, struct archive_entry *e, bb_error **err)
{
    const char *hardlink = archive_entry_hardlink(e);
    mode_t type = archive_entry_filetype(e);
    if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
        return refuse(x, err, "%s entries are not restored", refused_type(type));
    _cleanup_free_ char *name = NULL;
    const char *why = clean_name(x->entry, &name);
    if (why)
        return refuse(x, err, "%s", why);
    if (!*name) {
        if (hardlink || type != AE_IFDIR)
            return refuse(x, err, "the archive root is not a directory");
        if (set_xattrs(x, e, x->root, err) < 0)
            return -1;
        remember_dir(x, "", e);
        return 0;
    }
    _cleanup_free_ char *rel = xstrdup(name);
    const char *parent, *base;
    split(name, &parent, &base);
    int pfd = parent_fd(x, parent, err);
    if (pfd < 0)
        return -1;
    struct stat st;
    if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode))
            return refuse(x, err, "would replace a symlink an earlier entry planted");
        if (S_ISDIR(st.st_mode) && type == AE_IFDIR && !hardlink) {
            if (set_dir_xattrs(x, e, pfd, base, err) < 0)
                return -1;
            remember_dir(x, rel, e);
            return 0;
        }
        if (S_ISDIR(st.st_mode))
            return refuse(x, err, "would replace a directory");
        return refuse(x, err, "appears twice in the archive");
    } else if (errno != ENOENT) {
        return bb_fail_errno(err, errno, "cannot stat %s", x->entry);
    }
    if (hardlink || type == AE_IFLNK)
        x->t->xattrs_ignored += (uint64_t)archive_entry_xattr_count(e);
    int r;
    if (hardlink)
        r = write_hardlink(x, hardlink, pfd, base, err);
    else if (type == AE_IFLNK)
        r = write_symlink(x, e, pfd, base, err);
    else if (type == AE_IFREG)
        r = write_file(x, a, e, pfd, base, err);
    else
        r = write_dir(x, e, pfd, base, rel, err);
    if (r == 0)
        x->t->entries++;
    return r;
}

/* Directory modes (at least 0700 for the owner, so what was extracted stays reachable)
 * and mtimes last: writing into a directory changes its mtime. */
static int apply_dirs(extractor *x, bb_error **err)
{
    for (size_t i = 0; i < x->ndirs; i++) {
        const dir_attr *d = &x->dirs[i];
        _cleanup_close_ int fd =
            openat_beneath(x->root, *d->rel ? d->rel : ".", O_RDONLY | O_DIRECTORY, 0, err);
        if (fd < 0)
            return -1;
        struct timespec ts[2] = {{0, UTIME_OMIT}, d->mtime};
        if (fchmod(fd, (d->mode & 0777) | 0700) < 0 || futimens(fd, ts) < 0)
            return bb_fail_errno(err, errno, "cannot set the mode of %s", *d->rel ? d->rel : ".");
    }
    return 0;
}

static void extractor_done(extractor *x)
{
    if (x->pfd >= 0)
        close(x->pfd);
    free(x->pname);
    for (size_t i = 0; i < x->ndirs; i++)
        free(x->dirs[i].rel);
    free(x->dirs);
}

/* Pages of a data block that a restore would write (see write_block). */
static uint64_t pages_of(const char *buf, size_t len, uint64_t off)
{
    uint64_t n = 0;
    while (len > 0) {
        bool zero;
        size_t k = run_of(buf, len, off, &zero);
        if (!zero)
            n += (off + k - 1) / PAGE - off / PAGE + 1;
        buf += k;
        off += k;
        len -= k;
    }
    return n * PAGE;
}

static uint64_t count_data(struct archive *a)
{
    uint64_t n = 0;
    const void *buf;
    size_t len;
    la_int64_t off;
    while (archive_read_data_block(a, &buf, &len, &off) == ARCHIVE_OK && off >= 0)
        n += pages_of(buf, len, (uint64_t)off);
    return n;
}

/* After the budget ran out: what the rest of the archive takes, counted as the restore
 * counts it, so the refusal can say how much is needed. Stops at anything unreadable. */
static uint64_t count_rest(struct archive *a)
{
    uint64_t n = count_data(a);
    struct archive_entry *e;
    while (archive_read_next_header(a, &e) >= ARCHIVE_WARN) {
        if (archive_entry_filetype(e) == AE_IFDIR)
            n += PAGE;
        else if (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e))
            n += count_data(a);
    }
    return n;
}

static unsigned long long mib_up(uint64_t bytes)
{
    return (unsigned long long)((bytes + (1u << 20) - 1) >> 20);
}

static int no_room_error(extractor *x, struct archive *a, bb_error **err)
{
    uint64_t need = x->bytes_used + count_rest(a);
    bb_error_clear(err);
    const safetar_opts *o = x->o;
    if (!o->free_bytes)
        return bb_fail(err, ENOSPC,
                       "the archive needs %llu MiB of disk, more than the %llu MiB free on the "
                       "disk holding /data",
                       mib_up(need), (unsigned long long)(o->max_bytes >> 20));
    return bb_fail(err, ENOSPC,
                   "the archive needs %llu MiB of disk and the disk holding /data has %llu MiB "
                   "free; a restore always leaves %llu MiB of it free (%s), so it has room for "
                   "%llu MiB. Free up %llu MiB, or restore a smaller snapshot",
                   mib_up(need), (unsigned long long)(o->free_bytes >> 20), mib_up(o->keep_free),
                   o->keep_free_why ? o->keep_free_why : "a margin",
                   (unsigned long long)(o->max_bytes >> 20),
                   mib_up(need - (need < o->max_bytes ? need : o->max_bytes)));
}

int safetar_extract(struct archive *a, int dest_fd, const safetar_opts *o, data_tally *t,
                    bb_error **err)
{
    extractor x = {.root = dest_fd,
                   .o = o,
                   .t = t,
                   .pfd = -1,
                   .bytes_left = o->max_bytes,
                   .entries_left = o->max_entries};
    x.capped = cap_memory(o->max_memory, &x.old);
    int r = 0;
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h < ARCHIVE_WARN) {
            x.entry = NULL;
            r = read_failed(&x, a, err);
            break;
        }
        x.entry = archive_entry_pathname(e);
        if (!x.entry) {
            x.entry = "";
            r = refuse(&x, err, "has a name that cannot be read");
            break;
        }
        if ((r = extract_entry(&x, a, e, err)) < 0)
            break;
        CRASH_POINT("restore-entry");
    }
    lift_cap(&x);
    if (r < 0 && x.no_room)
        r = no_room_error(&x, a, err);
    if (r == 0)
        r = apply_dirs(&x, err);
    extractor_done(&x);
    return r;
}
