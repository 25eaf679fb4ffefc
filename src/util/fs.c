/* Filesystem helpers. */
#include "fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xalloc.h"

int read_file(const char *path, size_t max, char **ret, size_t *ret_len, bb_error **err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", path);
    if (!S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s is not a regular file", path);
    _cleanup_sb_ strbuf b = {0};
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "cannot read %s", path);
        }
        if (n == 0)
            break;
        if (b.len + (size_t)n > max)
            return bb_fail(err, EFBIG, "%s is larger than %zu bytes", path, max);
        sb_putn(&b, chunk, (size_t)n);
    }
    if (ret_len)
        *ret_len = b.len;
    *ret = sb_steal(&b);
    return 0;
}

int write_full(int fd, const char *data, size_t len, const char *what, bb_error **err)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "cannot write %s", what);
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

int write_file_atomic(const char *path, const char *data, size_t len, mode_t mode, bb_error **err)
{
    _cleanup_free_ char *tmp = xasprintf("%s.tmp-XXXXXX", path);
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", tmp);
    if (write_full(fd, data, len, path, err) < 0) {
        unlink(tmp);
        return -1;
    }
    int r = 0;
    if (fchmod(fd, mode) < 0)
        r = -errno;
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return bb_fail_errno(err, -r, "cannot write %s", path);
    }
    return 0;
}

int mkdir_p(const char *path, mode_t mode, bb_error **err)
{
    _cleanup_free_ char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return bb_fail_errno(err, errno, "cannot create %s", p);
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return bb_fail_errno(err, errno, "cannot create %s", p);
    if (!is_dir(p))
        return bb_fail(err, ENOTDIR, "%s exists and is not a directory", p);
    return 0;
}

int openat_beneath(int dirfd, const char *path, int flags, mode_t mode, bb_error **err)
{
    struct open_how how = {
        .flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW),
        .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    return (int)fd;
}

/* Call fn for every entry of the directory dfd except . and .., stopping at the first
 * failure. */
static int for_each_child(int dfd, int (*fn)(int dfd, const char *name, void *ud, bb_error **err),
                          void *ud, bb_error **err)
{
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0)
        return bb_fail_errno(err, errno, "cannot read directory");
    _cleanup_closedir_ DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return bb_fail_errno(err, errno, "cannot read directory");
    }
    /* The dup shares dfd's offset, which an earlier pass over dfd left at the end. */
    rewinddir(d);
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (streq(de->d_name, ".") || streq(de->d_name, ".."))
            continue;
        r = fn(dfd, de->d_name, ud, err);
        if (r < 0)
            break;
    }
    return r;
}

/* Deeper than this below the directory being removed, a directory is first moved up into
 * it: a chain of any depth (a guest can nest 100000 levels in /data) goes with a bounded
 * stack and a bounded number of fds, never through "..". */
#define RM_MAX_DEPTH 64

typedef struct {
    int top;             /* the directory being removed, where deep ones are moved; -1 above it */
    unsigned depth;      /* levels below top */
    unsigned long moved; /* directories moved up so far */
} rm_walk;

static int rm_entry(rm_walk *w, int dirfd, const char *name, bb_error **err);

static int rm_child(int dfd, const char *name, void *ud, bb_error **err)
{
    return rm_entry(ud, dfd, name, err);
}

static int move_up(rm_walk *w, int dirfd, const char *name, bb_error **err)
{
    for (;;) {
        char up[32];
        snprintf(up, sizeof up, ".rm-deep-%lu", w->moved++);
        if (renameat2(dirfd, name, w->top, up, RENAME_NOREPLACE) == 0)
            return 0;
        if (errno != EEXIST)
            return bb_fail_errno(err, errno, "cannot remove %s", name);
    }
}

/* Empty the directory fd: once below top; for top itself until a pass moves nothing up, as
 * one moved up during a pass may not be listed by it. */
static int rm_children(rm_walk *w, int fd, bb_error **err)
{
    if (w->top >= 0) {
        w->depth++;
        int r = for_each_child(fd, rm_child, w, err);
        w->depth--;
        return r;
    }
    w->top = fd;
    unsigned long before;
    do {
        before = w->moved;
        if (for_each_child(fd, rm_child, w, err) < 0)
            return -1;
    } while (w->moved != before);
    return 0;
}

static int rm_entry(rm_walk *w, int dirfd, const char *name, bb_error **err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "cannot stat %s", name);
    if (!S_ISDIR(st.st_mode)) {
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
            return bb_fail_errno(err, errno, "cannot remove %s", name);
        return 0;
    }
    if (w->top >= 0 && w->depth >= RM_MAX_DEPTH)
        return move_up(w, dirfd, name, err);
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", name);
    /* A directory the guest made unreadable is still ours to remove. */
    if ((st.st_mode & 0700) != 0700)
        (void)fchmod(fd, st.st_mode | 0700);
    if (rm_children(w, fd, err) < 0)
        return bb_prefix(err, "%s", name);
    if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return bb_fail_errno(err, errno, "cannot remove %s", name);
    return 0;
}

int rm_rf_at(int dirfd, const char *name, bb_error **err)
{
    rm_walk w = {.top = -1};
    return rm_entry(&w, dirfd, name, err);
}

typedef struct {
    uid_t uid;
    gid_t gid;
} owner;

static int chown_at(int dirfd, const char *name, void *ud, bb_error **err)
{
    const owner *o = ud;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "cannot stat %s", name);
    if ((st.st_uid != o->uid || st.st_gid != o->gid) &&
        fchownat(dirfd, name, o->uid, o->gid, AT_SYMLINK_NOFOLLOW) < 0)
        return bb_fail_errno(err, errno, "cannot change the owner of %s", name);
    /* chown clears setuid/setgid on files; directories keep their modes. */
    if (!S_ISDIR(st.st_mode))
        return 0;
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", name);
    if (for_each_child(fd, chown_at, ud, err) < 0)
        return bb_prefix(err, "%s", name);
    return 0;
}

int chown_tree(const char *path, uid_t uid, gid_t gid, bb_error **err)
{
    owner o = {uid, gid};
    return chown_at(AT_FDCWD, path, &o, err);
}

int rm_rf(const char *path, bb_error **err)
{
    return rm_rf_at(AT_FDCWD, path, err);
}

int dir_is_empty(const char *path, bb_error **err)
{
    _cleanup_closedir_ DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? 1 : bb_fail_errno(err, errno, "cannot read %s", path);
    struct dirent *de;
    while ((de = readdir(d)))
        if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
            return 0;
    return 1;
}

bool path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

bool tmpfs_has_huge_pages(void)
{
    return access("/sys/kernel/mm/transparent_hugepage/shmem_enabled", F_OK) == 0;
}

bool is_dir(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *path_join(const char *a, const char *b)
{
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (*b == '/')
        b++;
    return xasprintf("%.*s/%s", (int)la, a, b);
}

int list_dir_at(int dfd, strv *ret, bb_error **err)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_closedir_ DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return bb_fail_errno(err, errno, "cannot read a directory");
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
            strv_add(ret, de->d_name);
    return 0;
}

char *readlink_at(int dfd, const char *name, bb_error **err)
{
    for (size_t cap = 256;; cap *= 2) {
        _cleanup_free_ char *target = xmalloc(cap);
        ssize_t n = readlinkat(dfd, name, target, cap);
        if (n < 0) {
            bb_fail_errno(err, errno, "cannot read the link %s", name);
            return NULL;
        }
        if ((size_t)n < cap) {
            target[n] = '\0';
            return steal_pointer(&target);
        }
    }
}
