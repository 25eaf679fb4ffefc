/* The FUSE side of the /data file server: one request in, one reply out (fsd.h).
 *
 * Every byte of a request is untrusted: arguments are copied out of it with bounds checks
 * (never cast in place: the buffer need not be aligned), names are single path components,
 * nodeids and fhs are looked up in tables (inodes.c), never dereferenced. Host paths are
 * never strings: each inode is an O_PATH fd, names are resolved one component at a time with
 * O_NOFOLLOW, and a file is reopened for I/O through /proc/self/fd only once its type is
 * known. Ownership is mapped (owner.c). */
#include "fsd/fsd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsd/inodes.h"
#include "fsd/owner.h"
#include "util/xalloc.h"

/* The oldest protocol we speak: Linux 4.20 (the guest is 6.1, 7.36). */
#define MINOR_MIN     27
#define TIMEOUT_S     1
#define DIRBUF        32768
#define GUEST_XPREFIX "user.bluebox.x."
#define NAME_MAX_HOST 255

struct fsd {
    fsd_tables t;
    bool read_only;
    bool real_owners; /* fsd_options.real_owners */
    bool no_xattr;    /* the export's filesystem has no user xattrs: today's 0:0 view */
    bool inited;
    uint32_t minor;
    mode_t umask; /* the process's, which mkdirat/openat apply */
};

typedef struct req {
    fsd *fs;
    struct fuse_in_header h;
    const uint8_t *p; /* arguments not yet taken */
    size_t left;
    uint8_t *o; /* reply payload */
    size_t ocap, olen;
    bool overflow;
} req;

#define NO_REPLY 1

/* ---- request and reply bytes ---- */

/* -errno after a failed call (never 0, so a failure is never mistaken for success). */
static int neg_errno(void)
{
    return errno > 0 ? -errno : -EIO;
}

static bool take(req *r, void *dst, size_t n)
{
    if (r->left < n)
        return false;
    memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
    return true;
}

/* A NUL-terminated string inside the request, at most `max` bytes before the NUL. */
static const char *take_str(req *r, size_t max)
{
    const uint8_t *nul = memchr(r->p, 0, r->left);
    if (!nul || (size_t)(nul - r->p) > max)
        return NULL;
    const char *s = (const char *)r->p;
    size_t n = (size_t)(nul - r->p) + 1;
    r->p += n;
    r->left -= n;
    return s;
}

/* One path component: not empty, ".", ".." or with '/', at most NAME_MAX bytes. */
static const char *take_name(req *r)
{
    const char *s = take_str(r, NAME_MAX_HOST);
    if (!s || !*s || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return NULL;
    return s;
}

static void put(req *r, const void *src, size_t n)
{
    if (r->ocap - r->olen < n) {
        r->overflow = true;
        return;
    }
    memcpy(r->o + r->olen, src, n);
    r->olen += n;
}

static void log_no_xattr(fsd *fs)
{
    if (fs->no_xattr)
        return;
    fs->no_xattr = true;
    fprintf(stderr, "bluebox-fsd: the export's filesystem has no user xattrs; guest files show "
                    "as root-owned and guest chown and setuid/setgid chmod fail\n");
}

/* The host mode for a guest mode. Without user xattrs there is no record, so the host file
 * carries the guest's permissions as they are (never setuid, setgid or sticky). */
static mode_t host_mode(const fsd *fs, uint32_t guest_mode)
{
    if (fs->real_owners)
        return (mode_t)(guest_mode & (S_IFMT | 07777));
    if (fs->no_xattr && ((guest_mode & S_IFMT) == S_IFREG || (guest_mode & S_IFMT) == S_IFDIR))
        return (mode_t)(guest_mode & (S_IFMT | 0777));
    return fsd_own_host_mode(guest_mode);
}

/* ---- inodes ---- */

static void load_own(fsd *fs, fsd_inode *i, const struct stat *st)
{
    i->own = fsd_own_default(st->st_mode);
    i->own_stored = false;
    if (fs->real_owners) {
        i->own = (fsd_own){
            .uid = st->st_uid, .gid = st->st_gid, .mode = st->st_mode, .rdev = st->st_rdev};
        return;
    }
    if (fs->no_xattr || (i->host_type != S_IFREG && i->host_type != S_IFDIR))
        return;
    int rc = fsd_own_read(fsd_inode_fd(&fs->t, i), i->host_type, &i->own);
    if (rc == 0)
        i->own_stored = true;
    else if (rc == -ENOTSUP)
        log_no_xattr(fs);
}

static void fill_attr(struct fuse_attr *a, const fsd_inode *i, const struct stat *st)
{
    *a = (struct fuse_attr){
        .ino = st->st_ino,
        .size = (uint64_t)st->st_size,
        .blocks = (uint64_t)st->st_blocks,
        .atime = (uint64_t)st->st_atim.tv_sec,
        .mtime = (uint64_t)st->st_mtim.tv_sec,
        .ctime = (uint64_t)st->st_ctim.tv_sec,
        .atimensec = (uint32_t)st->st_atim.tv_nsec,
        .mtimensec = (uint32_t)st->st_mtim.tv_nsec,
        .ctimensec = (uint32_t)st->st_ctim.tv_nsec,
        .mode = i->own.mode,
        .nlink = (uint32_t)st->st_nlink,
        .uid = i->own.uid,
        .gid = i->own.gid,
        .rdev = (uint32_t)i->own.rdev,
        .blksize = (uint32_t)st->st_blksize,
    };
    /* A host file made as a guest device node, FIFO or socket has no size. */
    if ((i->own.mode & S_IFMT) != (uint32_t)i->host_type)
        a->size = a->blocks = 0;
}

static void put_entry(req *r, fsd_inode *i, const struct stat *st)
{
    struct fuse_entry_out e = {
        .nodeid = fsd_inode_id(&r->fs->t, i),
        .entry_valid = TIMEOUT_S,
        .attr_valid = TIMEOUT_S,
    };
    fill_attr(&e.attr, i, st);
    put(r, &e, sizeof(e));
}

/* The known inode with this st_dev/st_ino. One whose fd was closed is checked by reopening
 * it by its name: an inode number the host freed (the file deleted behind our back, so no
 * fd of ours held it) may now name another file; that old entry is dropped from the hash,
 * as is one of another file type. */
static fsd_inode *find_known(fsd *fs, const struct stat *st)
{
    fsd_inode *i = fsd_inode_find(&fs->t, st->st_dev, st->st_ino);
    if (i &&
        (i->host_type != (st->st_mode & S_IFMT) || (i->fd < 0 && fsd_inode_fd(&fs->t, i) < 0))) {
        fsd_inode_unhash(&fs->t, i);
        return NULL;
    }
    return i;
}

/* The table's inode for `fd` (a fresh O_PATH fd, consumed) with one more lookup. */
static int ref_fd(fsd *fs, int fd, struct stat *st, fsd_inode *dir, const char *name,
                  fsd_inode **ret)
{
    if (fstat(fd, st) < 0) {
        int e = neg_errno();
        close(fd);
        return e;
    }
    fsd_inode *i = find_known(fs, st);
    if (i) {
        close(fd);
        i->nlookup++;
        fsd_inode_name(&fs->t, i, dir, name);
    } else {
        i = fsd_inode_add(&fs->t, fd, st, dir, name);
        if (!i) {
            close(fd);
            return -ENFILE;
        }
        load_own(fs, i, st);
    }
    *ret = i;
    return 0;
}

static int lookup_name(fsd *fs, fsd_inode *dir, const char *name, struct stat *st, fsd_inode **ret)
{
    if (fstatat(dir->fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
        return neg_errno();
    fsd_inode *i = find_known(fs, st);
    if (i) {
        i->nlookup++;
        fsd_inode_name(&fs->t, i, dir, name);
        *ret = i;
        return 0;
    }
    int fd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return neg_errno();
    return ref_fd(fs, fd, st, dir, name, ret);
}

/* After an unlink or a replacing rename: a host inode that is gone must not be found again
 * by st_ino (the number may be reused); the guest's nodeid for it stays valid until FORGET. */
static void unhash_if_gone(fsd *fs, dev_t dev, ino_t ino)
{
    fsd_inode *i = fsd_inode_find(&fs->t, dev, ino);
    struct stat st;
    /* A known inode's fd is open here: it was pinned before its name went. */
    if (i && i->fd >= 0 && fstat(i->fd, &st) == 0 && st.st_nlink == 0)
        fsd_inode_unhash(&fs->t, i);
}

static fsd_inode *dir_inode(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    return i && i->host_type == S_IFDIR ? i : NULL;
}

/* The start of every request about a name in the directory r->h.nodeid: its fixed
 * arguments (`n` bytes into `args`; none when n is 0), then the name. 0, or the error to
 * reply: EINVAL for short arguments or a name that is not one path component, ENOTDIR
 * for a nodeid that is not a directory. */
static int take_dir_name(req *r, void *args, size_t n, fsd_inode **ret_dir, const char **ret_name)
{
    if (n && !take(r, args, n))
        return -EINVAL;
    *ret_dir = dir_inode(r);
    *ret_name = take_name(r);
    if (!*ret_dir)
        return -ENOTDIR;
    return *ret_name ? 0 : -EINVAL;
}

static bool is_file_or_dir(const fsd_inode *i)
{
    return i->host_type == S_IFREG || i->host_type == S_IFDIR;
}

/* A build step's root (fsd_options.real_owners, written): the guest's owner and mode are the
 * host file's own. chown first, since it clears setuid and setgid; a symlink's mode stays. */
static int store_real(fsd *fs, fsd_inode *i, const fsd_own *o)
{
    int ifd = fsd_inode_fd(&fs->t, i);
    struct stat st;
    if (ifd < 0 || fstat(ifd, &st) < 0)
        return neg_errno();
    if ((st.st_uid != o->uid || st.st_gid != o->gid) &&
        fchownat(ifd, "", o->uid, o->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        return neg_errno();
    if (i->host_type != S_IFLNK) {
        char path[32];
        fsd_proc_path(path, sizeof(path), ifd);
        if (fchmodat(AT_FDCWD, path, (mode_t)o->mode & 07777, 0) < 0)
            return neg_errno();
    }
    i->own = (fsd_own){.uid = o->uid,
                       .gid = o->gid,
                       .mode = (uint32_t)(st.st_mode & S_IFMT) |
                               (i->host_type == S_IFLNK ? 0777 : (o->mode & 07777)),
                       .rdev = st.st_rdev};
    return 0;
}

/* Store the guest view `o` of `i` whose host mode is `host_mode`: the xattr is written unless
 * the default view already says the same. */
static int store_own(fsd *fs, fsd_inode *i, const fsd_own *o, mode_t host_mode)
{
    if (fs->real_owners)
        return store_real(fs, i, o);
    if (!i->own_stored && fsd_own_is_default(o, host_mode & ~(mode_t)(S_ISUID | S_ISGID))) {
        i->own = *o;
        return 0;
    }
    if (fs->no_xattr || !is_file_or_dir(i))
        return -EPERM;
    int rc = fsd_own_write(fsd_inode_fd(&fs->t, i), o);
    if (rc == -ENOTSUP) {
        log_no_xattr(fs);
        return -EPERM;
    }
    if (rc < 0)
        return rc;
    i->own = *o;
    i->own_stored = true;
    return 0;
}

/* ---- INIT, DESTROY, FORGET ---- */

static int op_init(req *r)
{
    struct fuse_init_in in = {0};
    if (!take(r, &in, 16))
        return -EINVAL;
    struct fuse_init_out o = {.major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION};
    if (in.major > FUSE_KERNEL_VERSION) {
        /* The kernel answers a newer major with INIT again, at ours. */
        put(r, &o, sizeof(o));
        return 0;
    }
    if (in.major < FUSE_KERNEL_VERSION || in.minor < MINOR_MIN || r->fs->inited)
        return -EPROTO;
    uint32_t want = FUSE_ASYNC_READ | FUSE_ATOMIC_O_TRUNC | FUSE_BIG_WRITES | FUSE_AUTO_INVAL_DATA |
                    FUSE_MAX_PAGES | FUSE_CACHE_SYMLINKS | FUSE_PARALLEL_DIROPS |
                    FUSE_DO_READDIRPLUS;
    r->fs->minor = in.minor < FUSE_KERNEL_MINOR_VERSION ? in.minor : FUSE_KERNEL_MINOR_VERSION;
    o.minor = r->fs->minor;
    o.max_readahead = in.max_readahead;
    o.flags = in.flags & want;
    o.max_background = 16;
    o.congestion_threshold = 12;
    o.max_write = FSD_MAX_IO;
    o.time_gran = 1;
    o.max_pages = (uint16_t)(FSD_MAX_IO / 4096);
    r->fs->inited = true;
    put(r, &o, sizeof(o));
    return 0;
}

static int op_forget(req *r)
{
    struct fuse_forget_in in;
    if (take(r, &in, sizeof(in)))
        fsd_inode_forget(&r->fs->t, r->h.nodeid, in.nlookup);
    return NO_REPLY;
}

static int op_batch_forget(req *r)
{
    struct fuse_batch_forget_in in;
    struct fuse_forget_one one;
    if (!take(r, &in, sizeof(in)))
        return NO_REPLY;
    for (uint32_t k = 0; k < in.count && take(r, &one, sizeof(one)); k++)
        fsd_inode_forget(&r->fs->t, one.nodeid, one.nlookup);
    return NO_REPLY;
}

static int op_destroy(req *r)
{
    return 0;
}

static int op_interrupt(req *r)
{
    return NO_REPLY;
}

/* ---- attributes ---- */

static int op_lookup(req *r)
{
    fsd_inode *dir, *i = NULL;
    const char *name;
    struct stat st;
    int rc = take_dir_name(r, NULL, 0, &dir, &name);
    if (rc == 0)
        rc = lookup_name(r->fs, dir, name, &st, &i);
    if (rc < 0 || !i)
        return rc < 0 ? rc : -EIO;
    put_entry(r, i, &st);
    return 0;
}

static void put_attr(req *r, const fsd_inode *i, const struct stat *st)
{
    struct fuse_attr_out o = {.attr_valid = TIMEOUT_S};
    fill_attr(&o.attr, i, st);
    put(r, &o, sizeof(o));
}

static int op_getattr(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct stat st;
    if (!i)
        return -ESTALE;
    if (fstat(fsd_inode_fd(&r->fs->t, i), &st) < 0)
        return neg_errno();
    put_attr(r, i, &st);
    return 0;
}

/* An fd for I/O on a regular file or directory inode, through /proc/self/fd. */
static int reopen(fsd_tables *t, fsd_inode *i, int flags)
{
    if (i->host_type != S_IFREG && i->host_type != S_IFDIR)
        return -EINVAL;
    int ifd = fsd_inode_fd(t, i);
    if (ifd < 0)
        return neg_errno();
    char path[32];
    fsd_proc_path(path, sizeof(path), ifd);
    int fd = open(path, flags | O_CLOEXEC);
    return fd < 0 ? neg_errno() : fd;
}

static int set_size(req *r, fsd_inode *i, const struct fuse_setattr_in *in)
{
    if (i->host_type != S_IFREG || (i->own.mode & S_IFMT) != S_IFREG)
        return i->host_type == S_IFDIR ? -EISDIR : -EINVAL;
    if (in->size > (uint64_t)INT64_MAX)
        return -EFBIG;
    if (in->valid & FATTR_FH) {
        fsd_fh *h = fsd_handle_get(&r->fs->t, in->fh, false);
        if (h && h->ino == r->h.nodeid && ftruncate(h->fd, (off_t)in->size) == 0)
            return 0;
    }
    int fd = reopen(&r->fs->t, i, O_WRONLY);
    if (fd < 0)
        return fd;
    int rc = ftruncate(fd, (off_t)in->size) < 0 ? neg_errno() : 0;
    close(fd);
    return rc;
}

static int set_times(fsd_tables *t, fsd_inode *i, const struct fuse_setattr_in *in)
{
    struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
    if (in->valid & FATTR_ATIME_NOW)
        ts[0].tv_nsec = UTIME_NOW;
    else if (in->valid & FATTR_ATIME) {
        if (in->atimensec >= 1000000000u)
            return -EINVAL;
        ts[0] = (struct timespec){.tv_sec = (time_t)in->atime, .tv_nsec = in->atimensec};
    }
    if (in->valid & FATTR_MTIME_NOW)
        ts[1].tv_nsec = UTIME_NOW;
    else if (in->valid & FATTR_MTIME) {
        if (in->mtimensec >= 1000000000u)
            return -EINVAL;
        ts[1] = (struct timespec){.tv_sec = (time_t)in->mtime, .tv_nsec = in->mtimensec};
    }
    int ifd = fsd_inode_fd(t, i);
    if (ifd < 0)
        return neg_errno();
    if (utimensat(ifd, "", ts, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != EINVAL || !is_file_or_dir(i))
        return neg_errno();
    /* Kernels before 5.8 have no AT_EMPTY_PATH for utimensat. */
    char path[32];
    fsd_proc_path(path, sizeof(path), ifd);
    return utimensat(AT_FDCWD, path, ts, 0) < 0 ? neg_errno() : 0;
}

/* chmod/chown: the guest kernel has checked the caller's right (default_permissions); only
 * the record changes, and the host mode follows the guest's permissions. */
static int set_owner(req *r, fsd_inode *i, const struct fuse_setattr_in *in, struct stat *st)
{
    if (i->host_type == S_IFLNK && !r->fs->real_owners)
        return 0; /* symlinks show 0:0 0777; lchown is accepted and changes nothing */
    fsd_own o = i->own;
    if (in->valid & FATTR_MODE)
        o.mode = (o.mode & S_IFMT) | (in->mode & 07777);
    if (in->valid & FATTR_UID)
        o.uid = in->uid;
    if (in->valid & FATTR_GID)
        o.gid = in->gid;
    if (o.uid == UINT32_MAX || o.gid == UINT32_MAX)
        return -EINVAL;
    if (r->fs->real_owners)
        return store_real(r->fs, i, &o);
    mode_t host = st->st_mode;
    if (is_file_or_dir(i) && (i->own.mode & S_IFMT) == (uint32_t)i->host_type)
        host = host_mode(r->fs, o.mode);
    else if (is_file_or_dir(i))
        host = S_IFREG | 0600;
    int rc = store_own(r->fs, i, &o, host);
    if (rc < 0)
        return rc;
    if ((host & 07777) != (st->st_mode & 07777)) {
        char path[32];
        fsd_proc_path(path, sizeof(path), fsd_inode_fd(&r->fs->t, i));
        if (fchmodat(AT_FDCWD, path, host & 0777, 0) < 0)
            return neg_errno();
    }
    return 0;
}

static int op_setattr(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct fuse_setattr_in in;
    struct stat st;
    if (!i)
        return -ESTALE;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    int rc = 0;
    if (in.valid & FATTR_SIZE)
        rc = set_size(r, i, &in);
    if (rc == 0 && (in.valid & (FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW)))
        rc = set_times(&r->fs->t, i, &in);
    if (rc == 0 && (in.valid & (FATTR_MODE | FATTR_UID | FATTR_GID))) {
        if (fstat(fsd_inode_fd(&r->fs->t, i), &st) < 0)
            return neg_errno();
        rc = set_owner(r, i, &in, &st);
    }
    if (rc < 0)
        return rc;
    if (fstat(fsd_inode_fd(&r->fs->t, i), &st) < 0)
        return neg_errno();
    put_attr(r, i, &st);
    return 0;
}

/* ---- making and removing names ---- */

/* The guest view of a new object: the caller's uid; the caller's gid, or the directory's
 * when the directory is setgid (and a new directory then is setgid too). */
static fsd_own new_own(req *r, const fsd_inode *dir, uint32_t mode, uint32_t rdev)
{
    fsd_own o = {.uid = r->h.uid, .gid = r->h.gid, .mode = mode, .rdev = rdev};
    if (dir->own.mode & S_ISGID) {
        o.gid = dir->own.gid;
        if ((mode & S_IFMT) == S_IFDIR)
            o.mode |= S_ISGID;
    }
    if (o.uid == UINT32_MAX || o.gid == UINT32_MAX)
        o.uid = o.gid = 0;
    return o;
}

/* Record the new object `name` (just made in `dir`, reached by `fd` when >= 0) and put its
 * entry; on failure the object is removed again. */
static int finish_new(req *r, fsd_inode *dir, const char *name, int fd, const fsd_own *o,
                      bool is_dir)
{
    if (fd < 0)
        fd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int rc = fd < 0 ? neg_errno() : 0;
    struct stat st;
    fsd_inode *i = NULL;
    if (rc == 0)
        rc = ref_fd(r->fs, fd, &st, dir, name, &i);
    if (rc == 0 && !i)
        rc = -EIO;
    if (rc == 0 && (i->host_type != S_IFLNK || r->fs->real_owners))
        rc = store_own(r->fs, i, o, st.st_mode);
    if (rc == 0 && r->fs->real_owners && fstat(fsd_inode_fd(&r->fs->t, i), &st) < 0)
        rc = neg_errno();
    if (rc != 0 || !i) {
        if (i)
            fsd_inode_forget(&r->fs->t, fsd_inode_id(&r->fs->t, i), 1);
        unlinkat(dir->fd, name, is_dir ? AT_REMOVEDIR : 0);
        return rc < 0 ? rc : -EIO;
    }
    put_entry(r, i, &st);
    return 0;
}

static bool needs_record(const fsd *fs, const fsd_own *o)
{
    return !fsd_own_is_default(o, host_mode(fs, o->mode));
}

/* The view to make a new object with when there are no user xattrs: root's, without
 * setuid/setgid (what the host file shows). */
static void no_record_view(const fsd *fs, fsd_own *o)
{
    if (!fs->real_owners && fs->no_xattr && needs_record(fs, o)) {
        o->uid = o->gid = 0;
        o->mode &= ~(uint32_t)(S_ISUID | S_ISGID | S_ISVTX);
    }
}

/* Set a new object's host mode exactly, unless the process umask left it so already. A
 * directory is checked, since one made in a host setgid directory is setgid too (mkdir(2)). */
static int fix_mode(const fsd *fs, int fd, mode_t want)
{
    struct stat st;
    if (!(want & fs->umask) &&
        (!S_ISDIR(want) || (fstat(fd, &st) == 0 && (st.st_mode & 07777) == (want & 0777))))
        return 0;
    char path[32];
    fsd_proc_path(path, sizeof(path), fd);
    return fchmodat(AT_FDCWD, path, want & 0777, 0) < 0 ? neg_errno() : 0;
}

static int op_mknod(req *r)
{
    fsd_inode *dir;
    struct fuse_mknod_in in;
    const char *name;
    int rc = take_dir_name(r, &in, sizeof(in), &dir, &name);
    if (rc < 0)
        return rc;
    if (in.mode & ~(uint32_t)(S_IFMT | 07777))
        return -EINVAL;
    uint32_t type = in.mode & S_IFMT;
    if (type != S_IFREG && type != S_IFCHR && type != S_IFBLK && type != S_IFIFO &&
        type != S_IFSOCK)
        return -EINVAL;
    fsd_own o = new_own(r, dir, in.mode, type == S_IFCHR || type == S_IFBLK ? in.rdev : 0);
    if (type == S_IFREG)
        no_record_view(r->fs, &o);
    else if (r->fs->real_owners) {
        /* A real node (a device needs CAP_MKNOD, which a build's server has not). */
        if (mknodat(dir->fd, name, o.mode & (S_IFMT | 0600), (dev_t)o.rdev) < 0)
            return neg_errno();
        return finish_new(r, dir, name, -1, &o, false);
    } else if (r->fs->no_xattr)
        return -EPERM; /* a device node or FIFO needs the record: nothing real is made */
    mode_t host = host_mode(r->fs, o.mode);
    int fd =
        openat(dir->fd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, host & 0777);
    if (fd < 0)
        return neg_errno();
    rc = fix_mode(r->fs, fd, host);
    close(fd);
    if (rc < 0) {
        unlinkat(dir->fd, name, 0);
        return rc;
    }
    return finish_new(r, dir, name, -1, &o, false);
}

static int op_mkdir(req *r)
{
    fsd_inode *dir;
    struct fuse_mkdir_in in;
    const char *name;
    int rc = take_dir_name(r, &in, sizeof(in), &dir, &name);
    if (rc < 0)
        return rc;
    fsd_own o = new_own(r, dir, S_IFDIR | (in.mode & 07777), 0);
    no_record_view(r->fs, &o);
    mode_t host = host_mode(r->fs, o.mode);
    if (mkdirat(dir->fd, name, host & 0777) < 0)
        return neg_errno();
    int fd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        rc = fix_mode(r->fs, fd, host);
        if (rc < 0) {
            close(fd);
            unlinkat(dir->fd, name, AT_REMOVEDIR);
            return rc;
        }
    }
    return finish_new(r, dir, name, fd, &o, true);
}

static int op_symlink(req *r)
{
    fsd_inode *dir;
    const char *name, *target;
    int rc = take_dir_name(r, NULL, 0, &dir, &name);
    if (rc < 0)
        return rc;
    target = take_str(r, PATH_MAX - 1);
    if (!target || !*target)
        return -EINVAL;
    if (symlinkat(target, dir->fd, name) < 0)
        return neg_errno();
    fsd_own o = {.mode = S_IFLNK | 0777};
    if (r->fs->real_owners)
        o = new_own(r, dir, S_IFLNK | 0777, 0);
    return finish_new(r, dir, name, -1, &o, false);
}

static int open_inode(req *r, fsd_inode *i, uint64_t nodeid, int flags, uint64_t *ret_fh);

/* CREATE without O_EXCL of a name that appeared on the host since the guest looked: open it. */
static int create_existing(req *r, fsd_inode *dir, const char *name, int flags)
{
    struct stat st;
    fsd_inode *i = NULL;
    int rc = lookup_name(r->fs, dir, name, &st, &i);
    if (rc < 0 || !i)
        return rc < 0 ? rc : -EIO;
    uint64_t id = fsd_inode_id(&r->fs->t, i), fh;
    rc = open_inode(r, i, id, flags & ~O_TRUNC, &fh);
    if (rc == 0 && (flags & O_TRUNC)) {
        fsd_fh *h = fsd_handle_get(&r->fs->t, fh, false);
        if (ftruncate(h->fd, 0) < 0) {
            rc = neg_errno();
            fsd_handle_close(&r->fs->t, fh, false);
        } else if (fstat(h->fd, &st) < 0) {
            rc = neg_errno();
            fsd_handle_close(&r->fs->t, fh, false);
        }
    }
    if (rc < 0) {
        fsd_inode_forget(&r->fs->t, id, 1);
        return rc;
    }
    put_entry(r, i, &st);
    struct fuse_open_out oo = {.fh = fh};
    put(r, &oo, sizeof(oo));
    return 0;
}

static int op_create(req *r)
{
    fsd_inode *dir;
    struct fuse_create_in in;
    const char *name;
    int rc = take_dir_name(r, &in, sizeof(in), &dir, &name);
    if (rc < 0)
        return rc;
    fsd_own o = new_own(r, dir, S_IFREG | (in.mode & 07777), 0);
    no_record_view(r->fs, &o);
    int flags = (int)in.flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME);
    if ((flags & O_ACCMODE) == O_ACCMODE)
        return -EINVAL;
    mode_t host = host_mode(r->fs, o.mode);
    int fd = openat(dir->fd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, host & 0777);
    if (fd < 0 && errno == EEXIST && !(in.flags & O_EXCL))
        return create_existing(r, dir, name, flags);
    if (fd < 0)
        return neg_errno();
    rc = fix_mode(r->fs, fd, host);
    uint64_t fh = rc < 0 ? 0 : fsd_handle_add(&r->fs->t, fd, false, 0);
    if (!fh) {
        close(fd);
        unlinkat(dir->fd, name, 0);
        return rc < 0 ? rc : -EMFILE;
    }
    rc = finish_new(r, dir, name, -1, &o, false);
    if (rc < 0) {
        fsd_handle_close(&r->fs->t, fh, false);
        return rc;
    }
    /* The entry was put first: its nodeid names the inode the handle belongs to. */
    struct fuse_entry_out e;
    memcpy(&e, r->o, sizeof(e));
    fsd_handle_get(&r->fs->t, fh, false)->ino = e.nodeid;
    struct fuse_open_out oo = {.fh = fh};
    put(r, &oo, sizeof(oo));
    return 0;
}

static int op_unlink_common(req *r, int flags)
{
    fsd_inode *dir;
    const char *name;
    int rc = take_dir_name(r, NULL, 0, &dir, &name);
    if (rc < 0)
        return rc;
    struct stat st;
    bool known = fstatat(dir->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    /* The guest may still hold the inode (an open file): keep its fd, the name goes. */
    fsd_inode *i = known ? fsd_inode_find(&r->fs->t, st.st_dev, st.st_ino) : NULL;
    if (i)
        fsd_inode_unnamed(&r->fs->t, i, dir, name, st.st_nlink);
    if (unlinkat(dir->fd, name, flags) < 0)
        return neg_errno();
    if (known)
        unhash_if_gone(r->fs, st.st_dev, st.st_ino);
    return 0;
}

static int op_unlink(req *r)
{
    return op_unlink_common(r, 0);
}

static int op_rmdir(req *r)
{
    return op_unlink_common(r, AT_REMOVEDIR);
}

/* RENAME_WHITEOUT (overlayfs needs it of a remote upper layer of a fork): the host
 * has no whiteout of this format, so the whiteout is made first under a temporary name, a
 * plain file whose record says character device 0:0, and put where the source was once the
 * source has moved. The guest kernel holds both directories locked meanwhile. */
static int whiteout_make(req *r, fsd_inode *dir, char *name, size_t size)
{
    static unsigned long seq;
    if (r->fs->no_xattr)
        return -EINVAL; /* no record, no whiteout */
    fsd_own o = new_own(r, dir, S_IFCHR, 0);
    for (int tries = 0; tries < 16; tries++) {
        snprintf(name, size, ".bluebox-whiteout.%d.%lu", (int)getpid(), seq++);
        int fd = openat(dir->fd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return neg_errno();
        int rc = fsd_own_write(fd, &o);
        close(fd);
        if (rc < 0)
            unlinkat(dir->fd, name, 0);
        return rc;
    }
    return -EEXIST;
}

static int do_rename_plain(req *r, uint64_t newdir, uint32_t flags, fsd_inode *od,
                           const char *oname);

static int do_rename(req *r, uint64_t newdir, uint32_t flags)
{
    if (!(flags & RENAME_WHITEOUT))
        return do_rename_plain(r, newdir, flags, NULL, NULL);
    if (flags & RENAME_EXCHANGE)
        return -EINVAL;
    fsd_inode *od;
    const char *oname;
    int rc = take_dir_name(r, NULL, 0, &od, &oname);
    if (rc < 0)
        return rc;
    char wh[64];
    rc = whiteout_make(r, od, wh, sizeof wh);
    if (rc < 0)
        return rc;
    rc = do_rename_plain(r, newdir, flags & ~(uint32_t)RENAME_WHITEOUT, od, oname);
    if (rc == 0 && renameat2(od->fd, wh, od->fd, oname, RENAME_NOREPLACE) < 0)
        rc = neg_errno();
    if (rc < 0)
        unlinkat(od->fd, wh, 0);
    return rc;
}

/* od and oname: taken from the request already (RENAME_WHITEOUT), else NULL. */
static int do_rename_plain(req *r, uint64_t newdir, uint32_t flags, fsd_inode *od,
                           const char *oname)
{
    if (!od) {
        int rc = take_dir_name(r, NULL, 0, &od, &oname);
        if (rc < 0)
            return rc;
    }
    const char *nname = take_name(r);
    fsd_inode *nd = fsd_inode_use(&r->fs->t, newdir);
    if (!nd || nd->host_type != S_IFDIR)
        return -ENOTDIR;
    if (!nname || (flags & ~(uint32_t)(RENAME_NOREPLACE | RENAME_EXCHANGE)))
        return -EINVAL;
    struct stat st, src;
    fsd_tables *t = &r->fs->t;
    bool known = fstatat(nd->fd, nname, &st, AT_SYMLINK_NOFOLLOW) == 0;
    fsd_inode *moved = fstatat(od->fd, oname, &src, AT_SYMLINK_NOFOLLOW) == 0
                           ? fsd_inode_find(t, src.st_dev, src.st_ino)
                           : NULL;
    fsd_inode *target = known ? fsd_inode_find(t, st.st_dev, st.st_ino) : NULL;
    /* A replaced target the guest may still hold keeps its fd; an exchanged one is renamed. */
    if (target && !(flags & RENAME_EXCHANGE))
        fsd_inode_unnamed(t, target, nd, nname, st.st_nlink);
    if (renameat2(od->fd, oname, nd->fd, nname, flags) < 0)
        return neg_errno();
    if (moved)
        fsd_inode_name(t, moved, nd, nname);
    if (target && (flags & RENAME_EXCHANGE))
        fsd_inode_name(t, target, od, oname);
    else if (known)
        unhash_if_gone(r->fs, st.st_dev, st.st_ino);
    return 0;
}

static int op_rename(req *r)
{
    struct fuse_rename_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    return do_rename(r, in.newdir, 0);
}

static int op_rename2(req *r)
{
    struct fuse_rename2_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    return do_rename(r, in.newdir, in.flags);
}

static int op_link(req *r)
{
    fsd_inode *dir;
    struct fuse_link_in in;
    const char *name;
    int rc = take_dir_name(r, &in, sizeof(in), &dir, &name);
    if (rc < 0)
        return rc;
    fsd_inode *i = fsd_inode_use(&r->fs->t, in.oldnodeid);
    if (!i)
        return -ESTALE;
    if (i->host_type == S_IFDIR)
        return -EPERM;
    char path[32];
    fsd_proc_path(path, sizeof(path), fsd_inode_fd(&r->fs->t, i));
    if (linkat(AT_FDCWD, path, dir->fd, name, AT_SYMLINK_FOLLOW) < 0)
        return neg_errno();
    /* The newest name: the one a link-then-unlink (git's objects) keeps. */
    fsd_inode_name(&r->fs->t, i, dir, name);
    struct stat st;
    if (fstat(fsd_inode_fd(&r->fs->t, i), &st) < 0)
        return neg_errno();
    i->nlookup++;
    put_entry(r, i, &st);
    return 0;
}

static int op_readlink(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    if (!i)
        return -ESTALE;
    if (i->host_type != S_IFLNK)
        return -EINVAL;
    /* The kernel's buffer is a page less one byte (for its NUL), smaller than PATH_MAX:
     * read into our own and refuse what does not fit. */
    char target[PATH_MAX];
    ssize_t n = readlinkat(fsd_inode_fd(&r->fs->t, i), "", target, sizeof target);
    if (n < 0)
        return neg_errno();
    if ((size_t)n > r->ocap)
        return -ENAMETOOLONG;
    memcpy(r->o, target, (size_t)n);
    r->olen = (size_t)n;
    return 0;
}

/* ---- open files ---- */

static int open_inode(req *r, fsd_inode *i, uint64_t nodeid, int flags, uint64_t *ret_fh)
{
    if (i->host_type == S_IFDIR)
        return -EISDIR;
    if (i->host_type != S_IFREG || (i->own.mode & S_IFMT) != S_IFREG)
        return -EINVAL;
    if ((flags & O_ACCMODE) == O_ACCMODE)
        return -EINVAL;
    if (r->fs->read_only && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)))
        return -EROFS;
    int fd = reopen(&r->fs->t, i, flags);
    if (fd < 0)
        return fd;
    uint64_t fh = fsd_handle_add(&r->fs->t, fd, false, nodeid);
    if (!fh) {
        close(fd);
        return -EMFILE;
    }
    *ret_fh = fh;
    return 0;
}

static int op_open(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct fuse_open_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    if (!i)
        return -ESTALE;
    int flags = (int)in.flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC | O_NOATIME);
    uint64_t fh;
    int rc = open_inode(r, i, r->h.nodeid, flags, &fh);
    if (rc < 0)
        return rc;
    struct fuse_open_out o = {.fh = fh};
    put(r, &o, sizeof(o));
    return 0;
}

static int op_read(req *r)
{
    struct fuse_read_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    fsd_fh *h = fsd_handle_get(&r->fs->t, in.fh, false);
    if (!h)
        return -EBADF;
    if (in.offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    size_t n = in.size < FSD_MAX_IO ? in.size : FSD_MAX_IO;
    if (n > r->ocap)
        n = r->ocap;
    ssize_t got = pread(h->fd, r->o, n, (off_t)in.offset);
    if (got < 0)
        return neg_errno();
    r->olen = (size_t)got;
    return 0;
}

static int op_write(req *r)
{
    struct fuse_write_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    fsd_fh *h = fsd_handle_get(&r->fs->t, in.fh, false);
    if (!h)
        return -EBADF;
    if (in.size > FSD_MAX_IO || in.size > r->left || in.offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    ssize_t n = pwrite(h->fd, r->p, in.size, (off_t)in.offset);
    if (n < 0)
        return neg_errno();
    struct fuse_write_out o = {.size = (uint32_t)n};
    put(r, &o, sizeof(o));
    return 0;
}

static int op_flush(req *r)
{
    struct fuse_flush_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    return fsd_handle_get(&r->fs->t, in.fh, false) ? 0 : -EBADF;
}

static int release(req *r, bool dir)
{
    struct fuse_release_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    return fsd_handle_close(&r->fs->t, in.fh, dir) ? 0 : -EBADF;
}

static int op_release(req *r)
{
    return release(r, false);
}

static int op_releasedir(req *r)
{
    return release(r, true);
}

static int fsync_common(req *r, bool dir)
{
    struct fuse_fsync_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    fsd_fh *h = fsd_handle_get(&r->fs->t, in.fh, dir);
    if (!h)
        return -EBADF;
    int rc = (in.fsync_flags & 1) ? fdatasync(h->fd) : fsync(h->fd);
    return rc < 0 ? neg_errno() : 0;
}

static int op_fsync(req *r)
{
    return fsync_common(r, false);
}

static int op_fsyncdir(req *r)
{
    return fsync_common(r, true);
}

static int op_fallocate(req *r)
{
    struct fuse_fallocate_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    fsd_fh *h = fsd_handle_get(&r->fs->t, in.fh, false);
    if (!h)
        return -EBADF;
    if (in.mode & ~(uint32_t)(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
        return -EOPNOTSUPP;
    if (in.offset > (uint64_t)INT64_MAX || in.length > (uint64_t)INT64_MAX)
        return -EINVAL;
    if (fallocate(h->fd, (int)in.mode, (off_t)in.offset, (off_t)in.length) < 0)
        return neg_errno();
    return 0;
}

static int op_lseek(req *r)
{
    struct fuse_lseek_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    fsd_fh *h = fsd_handle_get(&r->fs->t, in.fh, false);
    if (!h)
        return -EBADF;
    if ((in.whence != SEEK_DATA && in.whence != SEEK_HOLE) || in.offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    off_t off = lseek(h->fd, (off_t)in.offset, (int)in.whence);
    if (off < 0)
        return neg_errno();
    struct fuse_lseek_out o = {.offset = (uint64_t)off};
    put(r, &o, sizeof(o));
    return 0;
}

/* ---- directories ---- */

static int op_opendir(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    if (!i)
        return -ESTALE;
    if (i->host_type != S_IFDIR)
        return -ENOTDIR;
    int fd = openat(fsd_inode_fd(&r->fs->t, i), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return neg_errno();
    uint64_t fh = fsd_handle_add(&r->fs->t, fd, true, r->h.nodeid);
    if (!fh) {
        close(fd);
        return -EMFILE;
    }
    struct fuse_open_out o = {.fh = fh};
    put(r, &o, sizeof(o));
    return 0;
}

struct dirent64_k {
    uint64_t d_ino;
    int64_t d_off;
    uint16_t d_reclen;
    uint8_t d_type;
    char d_name[];
};

/* One READDIRPLUS entry's lookup: the entry's inode with one more lookup, or nodeid 0 (no
 * attributes: the kernel then asks itself) for "." and "..", which the kernel never counts,
 * and for a name that is gone or cannot be held. */
static void plus_entry(req *r, fsd_inode *dir, const char *name, size_t namelen,
                       struct fuse_entry_out *e)
{
    *e = (struct fuse_entry_out){0};
    if ((namelen == 1 && name[0] == '.') || (namelen == 2 && name[0] == '.' && name[1] == '.'))
        return;
    fsd_inode *i = NULL;
    struct stat st;
    if (!dir || lookup_name(r->fs, dir, name, &st, &i) < 0 || !i)
        return;
    e->nodeid = fsd_inode_id(&r->fs->t, i);
    e->entry_valid = TIMEOUT_S;
    e->attr_valid = TIMEOUT_S;
    fill_attr(&e->attr, i, &st);
}

/* Entries from the handle's getdents64 buffer, from offset `off`, as many as fit in `size`;
 * with `plus` each with its lookup (READDIRPLUS), so `ls -l`, `find` and `rm -r` need no
 * LOOKUP round trip per name. */
static int readdir_common(req *r, bool plus)
{
    struct fuse_read_in in;
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    fsd_fh *h = fsd_handle_get(&r->fs->t, in.fh, true);
    if (!h)
        return -EBADF;
    if (in.offset > (uint64_t)INT64_MAX)
        return -EINVAL;
    fsd_inode *dir = plus ? fsd_inode_use(&r->fs->t, r->h.nodeid) : NULL;
    if (dir && dir->host_type != S_IFDIR)
        dir = NULL;
    size_t room = in.size < r->ocap ? in.size : r->ocap;
    if (!h->buf)
        h->buf = xmalloc(DIRBUF);
    if (in.offset != h->off) {
        if (lseek(h->fd, (off_t)in.offset, SEEK_SET) < 0)
            return neg_errno();
        h->pos = h->end = 0;
        h->off = in.offset;
    }
    for (;;) {
        if (h->pos >= h->end) {
            ssize_t n = getdents64(h->fd, h->buf, DIRBUF);
            if (n < 0)
                return r->olen ? 0 : neg_errno();
            if (n == 0) {
                /* Drained: a guest holding many directories open holds no buffers. */
                free(h->buf);
                h->buf = NULL;
                return 0;
            }
            h->pos = 0;
            h->end = (size_t)n;
        }
        struct dirent64_k d;
        memcpy(&d, h->buf + h->pos, sizeof(d));
        const char *name = (const char *)h->buf + h->pos + offsetof(struct dirent64_k, d_name);
        size_t namelen = strnlen(name, d.d_reclen - offsetof(struct dirent64_k, d_name));
        size_t head = plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET;
        size_t rec = FUSE_DIRENT_ALIGN(head + namelen);
        if (rec > room - r->olen || room < r->olen)
            return 0;
        uint8_t *o = r->o + r->olen;
        struct fuse_dirent fd = {.ino = d.d_ino,
                                 .off = (uint64_t)d.d_off,
                                 .namelen = (uint32_t)namelen,
                                 .type = d.d_type};
        if (plus) {
            /* Counted only once it is sure to be sent: it fits (checked above). */
            struct fuse_entry_out e;
            plus_entry(r, dir, name, namelen, &e);
            if (e.nodeid)
                fd.type = (uint32_t)((e.attr.mode & S_IFMT) >> 12);
            memcpy(o, &e, sizeof(e));
            o += sizeof(e);
        }
        memcpy(o, &fd, FUSE_NAME_OFFSET);
        memcpy(o + FUSE_NAME_OFFSET, name, namelen);
        memset(o + FUSE_NAME_OFFSET + namelen, 0, rec - head - namelen);
        r->olen += rec;
        h->pos += d.d_reclen;
        h->off = (uint64_t)d.d_off;
    }
}

static int op_readdir(req *r)
{
    return readdir_common(r, false);
}

static int op_readdirplus(req *r)
{
    return readdir_common(r, true);
}

static int op_statfs(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct statfs s;
    if (!i)
        return -ESTALE;
    if (fstatfs(fsd_inode_fd(&r->fs->t, i), &s) < 0)
        return neg_errno();
    struct fuse_kstatfs k = {
        .blocks = s.f_blocks,
        .bfree = s.f_bfree,
        .bavail = s.f_bavail,
        .files = s.f_files,
        .ffree = s.f_ffree,
        .bsize = (uint32_t)s.f_bsize,
        .namelen = (uint32_t)s.f_namelen,
        .frsize = (uint32_t)s.f_frsize,
    };
    put(r, &k, sizeof(k));
    return 0;
}

static int op_access(req *r)
{
    /* default_permissions: the guest kernel checks access itself and never asks. */
    return fsd_inode_use(&r->fs->t, r->h.nodeid) ? 0 : -ESTALE;
}

/* ---- extended attributes: guest name N is host user.bluebox.x.N ---- */

/* A build step's root (real owners, written): the image's own names, as they are. File
 * capabilities (security.capability: the server needs CAP_SETFCAP) and user.* names; the
 * host's trusted.*, security.* others and ACLs (whose ids the host would map) never. */
static bool real_xattrs(const fsd *fs)
{
    return fs->real_owners && !fs->read_only;
}

static bool real_xname_ok(const char *n)
{
    return strcmp(n, "security.capability") == 0 ||
           (strncmp(n, "user.", 5) == 0 && strncmp(n, "user.bluebox.", 13) != 0);
}

static int host_xname(req *r, char *buf, size_t size)
{
    const char *n = take_str(r, XATTR_NAME_MAX);
    if (!n || !*n)
        return -EINVAL;
    if (real_xattrs(r->fs)) {
        if (!real_xname_ok(n))
            return -EOPNOTSUPP;
        snprintf(buf, size, "%s", n);
        return 0;
    }
    if (strncmp(n, "system.posix_acl_", 17) == 0)
        return -EOPNOTSUPP;
    if (strlen(GUEST_XPREFIX) + strlen(n) > XATTR_NAME_MAX)
        return -ERANGE;
    snprintf(buf, size, "%s%s", GUEST_XPREFIX, n);
    return 0;
}

static int op_getxattr(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct fuse_getxattr_in in;
    char name[XATTR_NAME_MAX + 1], path[32];
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    int rc = host_xname(r, name, sizeof(name));
    if (rc < 0)
        return rc;
    if (!i)
        return -ESTALE;
    if (!is_file_or_dir(i))
        return -ENODATA;
    fsd_proc_path(path, sizeof(path), fsd_inode_fd(&r->fs->t, i));
    size_t want = in.size < XATTR_SIZE_MAX ? in.size : XATTR_SIZE_MAX;
    if (want > r->ocap)
        want = r->ocap;
    ssize_t n = getxattr(path, name, want ? r->o : NULL, want);
    if (n < 0)
        return errno == ENOTSUP ? -ENODATA : neg_errno();
    if (in.size == 0) {
        struct fuse_getxattr_out o = {.size = (uint32_t)n};
        put(r, &o, sizeof(o));
    } else {
        r->olen = (size_t)n;
    }
    return 0;
}

static int op_listxattr(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct fuse_getxattr_in in;
    char path[32];
    if (!take(r, &in, sizeof(in)))
        return -EINVAL;
    if (!i)
        return -ESTALE;
    size_t total = 0;
    _cleanup_free_ char *list = NULL;
    if (is_file_or_dir(i) && !r->fs->no_xattr) {
        fsd_proc_path(path, sizeof(path), fsd_inode_fd(&r->fs->t, i));
        ssize_t n = listxattr(path, NULL, 0);
        if (n < 0 && errno != ENOTSUP)
            return neg_errno();
        if (n > 0) {
            list = xmalloc((size_t)n + 1);
            n = listxattr(path, list, (size_t)n);
            if (n < 0)
                return errno == ERANGE ? -EAGAIN : neg_errno();
            total = (size_t)n;
        }
    }
    bool real = real_xattrs(r->fs);
    size_t plen = real ? 0 : strlen(GUEST_XPREFIX), outlen = 0;
    /* Pass 1 sizes, pass 2 (when the guest gave room) copies. */
    for (size_t k = 0; k < total;) {
        size_t l = strnlen(list + k, total - k);
        if (real ? l < total - k && real_xname_ok(list + k)
                 : l > plen && strncmp(list + k, GUEST_XPREFIX, plen) == 0) {
            size_t g = l - plen + 1;
            if (in.size) {
                if (outlen + g > in.size || outlen + g > r->ocap)
                    return -ERANGE;
                memcpy(r->o + outlen, list + k + plen, g - 1);
                r->o[outlen + g - 1] = 0;
            }
            outlen += g;
        }
        k += l + 1;
    }
    if (in.size == 0) {
        struct fuse_getxattr_out o = {.size = (uint32_t)outlen};
        put(r, &o, sizeof(o));
    } else {
        r->olen = outlen;
    }
    return 0;
}

static int op_setxattr(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    struct fuse_setxattr_in in = {0};
    char name[XATTR_NAME_MAX + 1], path[32];
    if (!take(r, &in, FUSE_COMPAT_SETXATTR_IN_SIZE))
        return -EINVAL;
    int rc = host_xname(r, name, sizeof(name));
    if (rc < 0)
        return rc;
    if (in.size > XATTR_SIZE_MAX || in.size > r->left)
        return -E2BIG;
    if (in.flags & ~(uint32_t)(XATTR_CREATE | XATTR_REPLACE))
        return -EINVAL;
    if (!i)
        return -ESTALE;
    if (!is_file_or_dir(i))
        return -EPERM;
    fsd_proc_path(path, sizeof(path), fsd_inode_fd(&r->fs->t, i));
    if (setxattr(path, name, r->p, in.size, (int)in.flags) < 0)
        return neg_errno();
    return 0;
}

static int op_removexattr(req *r)
{
    fsd_inode *i = fsd_inode_use(&r->fs->t, r->h.nodeid);
    char name[XATTR_NAME_MAX + 1], path[32];
    int rc = host_xname(r, name, sizeof(name));
    if (rc < 0)
        return rc;
    if (!i)
        return -ESTALE;
    if (!is_file_or_dir(i))
        return -ENODATA;
    fsd_proc_path(path, sizeof(path), fsd_inode_fd(&r->fs->t, i));
    if (removexattr(path, name) < 0)
        return errno == ENOTSUP ? -ENODATA : neg_errno();
    return 0;
}

/* ---- dispatch ---- */

typedef struct op {
    int (*fn)(req *r);
    bool writes; /* refused with EROFS on a read-only export */
    /* The reply's fixed size: a request whose buffer cannot hold it is refused before it
     * acts, so nothing is made, counted or opened that the guest is never told of. */
    size_t out;
} op;

static const op ops[] = {
    [FUSE_LOOKUP] = {op_lookup, false, sizeof(struct fuse_entry_out)},
    [FUSE_FORGET] = {op_forget, false},
    [FUSE_GETATTR] = {op_getattr, false, sizeof(struct fuse_attr_out)},
    [FUSE_SETATTR] = {op_setattr, true, sizeof(struct fuse_attr_out)},
    [FUSE_READLINK] = {op_readlink, false},
    [FUSE_SYMLINK] = {op_symlink, true, sizeof(struct fuse_entry_out)},
    [FUSE_MKNOD] = {op_mknod, true, sizeof(struct fuse_entry_out)},
    [FUSE_MKDIR] = {op_mkdir, true, sizeof(struct fuse_entry_out)},
    [FUSE_UNLINK] = {op_unlink, true},
    [FUSE_RMDIR] = {op_rmdir, true},
    [FUSE_RENAME] = {op_rename, true},
    [FUSE_LINK] = {op_link, true, sizeof(struct fuse_entry_out)},
    [FUSE_OPEN] = {op_open, false, sizeof(struct fuse_open_out)},
    [FUSE_READ] = {op_read, false},
    [FUSE_WRITE] = {op_write, true, sizeof(struct fuse_write_out)},
    [FUSE_STATFS] = {op_statfs, false, sizeof(struct fuse_kstatfs)},
    [FUSE_RELEASE] = {op_release, false},
    [FUSE_FSYNC] = {op_fsync, false},
    [FUSE_SETXATTR] = {op_setxattr, true},
    [FUSE_GETXATTR] = {op_getxattr, false},
    [FUSE_LISTXATTR] = {op_listxattr, false},
    [FUSE_REMOVEXATTR] = {op_removexattr, true},
    [FUSE_FLUSH] = {op_flush, false},
    [FUSE_INIT] = {op_init, false, sizeof(struct fuse_init_out)},
    [FUSE_OPENDIR] = {op_opendir, false, sizeof(struct fuse_open_out)},
    [FUSE_READDIR] = {op_readdir, false},
    [FUSE_READDIRPLUS] = {op_readdirplus, false},
    [FUSE_RELEASEDIR] = {op_releasedir, false},
    [FUSE_FSYNCDIR] = {op_fsyncdir, false},
    [FUSE_ACCESS] = {op_access, false},
    [FUSE_CREATE] = {op_create, true, sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)},
    [FUSE_INTERRUPT] = {op_interrupt, false},
    [FUSE_DESTROY] = {op_destroy, false},
    [FUSE_BATCH_FORGET] = {op_batch_forget, false},
    [FUSE_FALLOCATE] = {op_fallocate, true},
    [FUSE_RENAME2] = {op_rename2, true},
    [FUSE_LSEEK] = {op_lseek, false, sizeof(struct fuse_lseek_out)},
};

static size_t reply(void *out, uint64_t unique, int error, size_t payload)
{
    struct fuse_out_header oh = {
        .len = (uint32_t)(sizeof(oh) + payload), .error = error, .unique = unique};
    memcpy(out, &oh, sizeof(oh));
    return sizeof(oh) + payload;
}

uint64_t fsd_fds_open(const fsd *fs)
{
    return fs->t.live;
}

size_t fsd_handle(fsd *fs, const void *in, size_t len, void *out, size_t cap)
{
    const size_t oh = sizeof(struct fuse_out_header);
    if (cap < oh)
        return 0;
    if (cap > FSD_BUF_MAX)
        cap = FSD_BUF_MAX;
    req r = {.fs = fs, .o = (uint8_t *)out + oh, .ocap = cap - oh};
    fs->t.req++; /* the inodes this request touches keep their fds until it is done */
    if (len < sizeof(r.h))
        return reply(out, 0, -EINVAL, 0);
    memcpy(&r.h, in, sizeof(r.h));
    /* The header's own length bounds the arguments (a transport may hand a larger buffer). */
    if (r.h.len < sizeof(r.h) || r.h.len > len)
        return r.h.opcode == FUSE_FORGET || r.h.opcode == FUSE_BATCH_FORGET ||
                       r.h.opcode == FUSE_INTERRUPT
                   ? 0
                   : reply(out, r.h.unique, -EINVAL, 0);
    r.p = (const uint8_t *)in + sizeof(r.h);
    r.left = r.h.len - sizeof(r.h);
    const op *o = r.h.opcode < ELEMENTSOF(ops) ? &ops[r.h.opcode] : NULL;
    int rc;
    if (!o || !o->fn)
        rc = -ENOSYS;
    else if (!fs->inited && r.h.opcode != FUSE_INIT)
        rc = r.h.opcode == FUSE_FORGET || r.h.opcode == FUSE_BATCH_FORGET ||
                     r.h.opcode == FUSE_INTERRUPT
                 ? NO_REPLY
                 : -EIO;
    else if (o->writes && fs->read_only)
        rc = -EROFS;
    else if (r.ocap < o->out)
        rc = -EIO;
    else
        rc = o->fn(&r);
    if (rc == NO_REPLY)
        return 0;
    if (rc == 0 && r.overflow)
        rc = -EIO;
    return reply(out, r.h.unique, rc < 0 ? rc : 0, rc < 0 ? 0 : r.olen);
}

int fsd_new(fsd **ret, int root_fd, const fsd_options *opt, bb_error **err)
{
    int fd = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open the export directory");
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return bb_fail_errno(err, e, "cannot stat the export directory");
    }
    fsd *fs = xcalloc(1, sizeof(*fs));
    fs->read_only = opt && opt->read_only;
    fs->real_owners = opt && opt->real_owners;
    fs->umask = umask(022);
    umask(fs->umask);
    fsd_tables_init(&fs->t, fd, &st, opt ? opt->max_fds : 0);
    char path[32];
    fsd_proc_path(path, sizeof(path), fd);
    if (getxattr(path, FSD_OWN_XATTR, NULL, 0) < 0 && errno == ENOTSUP)
        log_no_xattr(fs);
    fsd_inode *root = fsd_inode_root(&fs->t);
    load_own(fs, root, &st);
    /* The export's own directory is 0700 on the host (BLUEBOX_HOME's data/<name>): without
     * a record the guest sees it root's and 0755, as a real machine's /data, so every guest
     * user can reach what root hands it there (`install -d -o agent /data/home`). */
    if (!root->own_stored)
        root->own.mode |= 0755;
    *ret = fs;
    return 0;
}

void fsd_free(fsd *fs)
{
    if (!fs)
        return;
    fsd_tables_free(&fs->t);
    free(fs);
}
