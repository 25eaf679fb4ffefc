/* diff, apply and discard of a fork's upper layer (fork.h). */
#include "fork.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "copy.h"
#include "crashpoint.h"
#include "replace.h"
#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"
#include "xattrs.h"

/* The file server's ownership record (src/fsd/owner.h): version 1, 3 zero bytes, then uid,
 * gid, mode and rdev (two words), little-endian. Only the type and rdev matter here. */
#define OWN_XATTR      "user.bluebox.own"
#define OWN_RECORD_LEN 24

/* Directories deep enough to pass this are refused (the parent's) or skipped (the upper
 * layer's): every level holds two fds while it is walked. */
#define FORK_DEPTH_MAX (DATA_PATH_MAX / 2)

typedef enum {
    E_SKIP,     /* counted in the tally, left alone */
    E_WHITEOUT, /* overlayfs's mark of a deleted lower entry */
    E_FILE,     /* any other non-directory the file server keeps as a host file */
    E_LINK,
    E_DIR,
    E_OPAQUE, /* a directory that hides the lower one of its name */
} entry_kind;

typedef struct {
    entry_kind kind;
    struct stat st;
    int fd; /* open (files and directories), or -1 */
} entry;

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool is_whiteout(int fd)
{
    unsigned char rec[OWN_RECORD_LEN + 1];
    ssize_t n = fgetxattr(fd, OWN_XATTR, rec, sizeof rec);
    if (n != OWN_RECORD_LEN || rec[0] != 1 || rec[1] || rec[2] || rec[3])
        return false;
    return (get32(rec + 12) & S_IFMT) == S_IFCHR && get32(rec + 16) == 0 && get32(rec + 20) == 0;
}

static bool is_opaque(int fd)
{
    char v[2];
    return fgetxattr(fd, FORK_OVL_XATTR "opaque", v, sizeof v) == 1 && v[0] == 'y';
}

/* What name in dir is, opened without following anything. */
static int classify(int dir, const char *name, entry *e, data_tally *t)
{
    *e = (entry){.kind = E_SKIP, .fd = -1};
    if (fstatat(dir, name, &e->st, AT_SYMLINK_NOFOLLOW) < 0) {
        t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    if (S_ISLNK(e->st.st_mode)) {
        e->kind = E_LINK;
        return 0;
    }
    skip_kind k = skip_kind_of(e->st.st_mode);
    if (k != SKIP_N) {
        t->skipped[k]++;
        return 0;
    }
    bool d = S_ISDIR(e->st.st_mode);
    int fd = openat(dir, name,
                    d ? O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
                      : O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_ino != e->st.st_ino ||
        (st.st_mode & S_IFMT) != (e->st.st_mode & S_IFMT)) {
        if (fd >= 0)
            close(fd);
        t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    e->st = st;
    if (!d && is_whiteout(fd)) {
        close(fd);
        e->kind = E_WHITEOUT;
        return 0;
    }
    e->fd = fd;
    e->kind = d ? (is_opaque(fd) ? E_OPAQUE : E_DIR) : E_FILE;
    return 0;
}

static void entry_done(entry *e)
{
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
}

/* ---- the path being walked, for diff lines and the depth bound ---- */

typedef struct {
    char buf[DATA_PATH_MAX + 2];
    size_t len;
    unsigned depth;
} walk_path;

/* Push name; false (and nothing pushed) when the path would be too long or too deep. */
static bool path_push(walk_path *p, const char *name, size_t *saved)
{
    size_t n = strlen(name), add = (p->len ? 1 : 0) + n;
    if (p->len + add > DATA_PATH_MAX || p->depth + 1 > FORK_DEPTH_MAX)
        return false;
    *saved = p->len;
    if (p->len)
        p->buf[p->len++] = '/';
    memcpy(p->buf + p->len, name, n + 1);
    p->len += n;
    p->depth++;
    return true;
}

static void path_pop(walk_path *p, size_t saved)
{
    p->len = saved;
    p->buf[saved] = '\0';
    p->depth--;
}

/* ---- diff ---- */

typedef struct {
    walk_path p;
    strv lines;
    data_tally *t;
} differ;

static void add_line(differ *d, char kind, const char *name)
{
    _cleanup_sb_ strbuf b = {0};
    sb_printf(&b, "%c ", kind);
    for (const char *parts[] = {d->p.buf, name}, **q = parts; q < parts + 2; q++) {
        if (!*q)
            continue;
        if (q == parts + 1 && d->p.len)
            sb_puts(&b, "/");
        for (const unsigned char *c = (const unsigned char *)*q; *c; c++)
            if (*c < 0x20 || *c == 0x7f || *c == '\\')
                sb_printf(&b, "\\%03o", *c);
            else
                sb_printf(&b, "%c", *c);
    }
    strv_push(&d->lines, sb_steal(&b));
}

static bool lower_has(int lower, const char *name, struct stat *st)
{
    return lower >= 0 && fstatat(lower, name, st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int diff_dir(differ *d, int upper, int lower, bool opaque, bb_error **err);

/* The lower-only children of an opaque directory: deleted. */
static int diff_hidden(differ *d, int upper, int lower, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(lower, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++) {
        struct stat st;
        if (fstatat(upper, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
            add_line(d, 'D', names.v[i]);
    }
    return 0;
}

static int diff_subdir(differ *d, const entry *e, int lower, const char *name, bool opaque,
                       bb_error **err)
{
    struct stat lst;
    bool was_dir = lower_has(lower, name, &lst) && S_ISDIR(lst.st_mode);
    _cleanup_close_ int sub =
        was_dir ? openat(lower, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (!was_dir || sub < 0) {
        add_line(d, lower_has(lower, name, &lst) ? 'M' : 'A', name);
        if (sub < 0 && was_dir)
            d->t->skipped[SKIP_CHANGED]++;
    }
    size_t saved;
    if (!path_push(&d->p, name, &saved)) {
        d->t->skipped[SKIP_DEEP]++;
        return 0;
    }
    bool hides = opaque || e->kind == E_OPAQUE;
    int r = 0;
    if (sub >= 0 && hides)
        r = diff_hidden(d, e->fd, sub, err);
    if (r == 0)
        r = diff_dir(d, e->fd, sub, hides, err);
    path_pop(&d->p, saved);
    return r;
}

static int diff_dir(differ *d, int upper, int lower, bool opaque, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(upper, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++) {
        const char *name = names.v[i];
        entry e;
        classify(upper, name, &e, d->t);
        struct stat lst;
        int r = 0;
        switch (e.kind) {
        case E_SKIP:
            break;
        case E_WHITEOUT:
            if (lower_has(lower, name, &lst))
                add_line(d, 'D', name);
            break;
        case E_FILE:
        case E_LINK:
            add_line(d, lower_has(lower, name, &lst) ? 'M' : 'A', name);
            break;
        case E_DIR:
        case E_OPAQUE:
            r = diff_subdir(d, &e, lower, name, opaque, err);
            break;
        }
        entry_done(&e);
        if (r < 0)
            return -1;
    }
    return 0;
}

static int line_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a + 2, *(char *const *)b + 2);
}

int fork_diff(int upper_fd, int lower_fd, char **ret_text, uint64_t *ret_n, data_tally *t,
              bb_error **err)
{
    differ *d = xmalloc(sizeof *d);
    *d = (differ){.t = t};
    int r = diff_dir(d, upper_fd, lower_fd, false, err);
    if (r == 0) {
        if (d->lines.n)
            qsort(d->lines.v, d->lines.n, sizeof *d->lines.v, line_cmp);
        _cleanup_sb_ strbuf b = {0};
        sb_puts(&b, "");
        for (size_t i = 0; i < d->lines.n; i++)
            sb_printf(&b, "%s\n", d->lines.v[i]);
        *ret_text = sb_steal(&b);
        *ret_n = d->lines.n;
    }
    strv_clear(&d->lines);
    free(d);
    return r;
}

/* ---- apply ---- */

typedef struct {
    walk_path p;
    data_tally *t;
    bool chown;
    uid_t uid;
    gid_t gid;
    int upper; /* the upper layer's root */
} merger;

/* Replace fd's carried attributes (user.bluebox.*) with src's, less overlayfs's own. */
static int xattrs_take(int src, int dst, const char *name, data_tally *t, bb_error **err)
{
    _cleanup_xattrs_ xattr_set in = {0}, old = {0};
    if (xattrs_read(src, name, &in, t, err) < 0 || xattrs_read(dst, name, &old, t, err) < 0)
        return -1;
    for (size_t i = 0; i < old.n; i++)
        (void)fremovexattr(dst, old.v[i].name);
    _cleanup_xattrs_ xattr_set keep = {0};
    size_t plen = strlen(FORK_OVL_XATTR);
    for (size_t i = 0; i < in.n; i++)
        if (strncmp(in.v[i].name, FORK_OVL_XATTR, plen) != 0)
            (void)xattr_set_add(&keep, in.v[i].name, in.v[i].value, in.v[i].len);
    return xattrs_write(dst, name, &keep, t, err);
}

static int finish(merger *m, int fd, mode_t mode, const struct stat *st, const char *name,
                  bb_error **err)
{
    struct timespec ts[2] = {{0, UTIME_OMIT}, st->st_mtim};
    if (m->chown && fchown(fd, m->uid, m->gid) < 0)
        return bb_fail_errno(err, errno, "cannot change the owner of %s", name);
    if (fchmod(fd, mode) < 0 || futimens(fd, ts) < 0)
        return bb_fail_errno(err, errno, "cannot set the mode of %s", name);
    return 0;
}

/* Make room for name in dst: whatever is there goes (never written through). */
static int clear_slot(int dst, const char *name, bb_error **err)
{
    return rm_rf_at(dst, name, err);
}

/* A file that is the layer's alone (one name, the sandbox's owner) moves into the staging
 * copy as a hard link instead of a copy: the layer is emptied right after the swap, and an
 * apply interrupted in between is finished before the fork boots again (cmd_fork.c), so the
 * parent never shares an inode with a layer a guest can write. 1: not taken, copy it. */
static int link_file(merger *m, const entry *e, int dst, const char *name, bb_error **err)
{
    uid_t owner = m->chown ? m->uid : geteuid();
    if (e->st.st_nlink != 1 || e->st.st_uid != owner)
        return 1;
    _cleanup_xattrs_ xattr_set x = {0};
    if (xattrs_read(e->fd, name, &x, m->t, err) < 0)
        return -1;
    size_t plen = strlen(FORK_OVL_XATTR);
    for (size_t i = 0; i < x.n; i++)
        if (strncmp(x.v[i].name, FORK_OVL_XATTR, plen) == 0 && fremovexattr(e->fd, x.v[i].name) < 0)
            return 1;
    if (fchmod(e->fd, e->st.st_mode & 0777) < 0)
        return 1;
    if (clear_slot(dst, name, err) < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", e->fd);
    if (linkat(AT_FDCWD, path, dst, name, AT_SYMLINK_FOLLOW) < 0)
        return 1;
    m->t->entries++;
    m->t->bytes += (uint64_t)e->st.st_size;
    return 0;
}

static int merge_file(merger *m, const entry *e, int dst, const char *name, bb_error **err)
{
    int linked = link_file(m, e, dst, name, err);
    if (linked <= 0)
        return linked;
    if (clear_slot(dst, name, err) < 0)
        return -1;
    _cleanup_close_ int out =
        openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return bb_fail_errno(err, errno, "cannot create %s", name);
    if (copy_bytes(e->fd, out, e->st.st_size, name, m->t, err) < 0 ||
        xattrs_take(e->fd, out, name, m->t, err) < 0)
        return -1;
    m->t->entries++;
    return finish(m, out, e->st.st_mode & 0777, &e->st, name, err);
}

static int merge_link(merger *m, const entry *e, int up, int dst, const char *name, bb_error **err)
{
    _cleanup_free_ char *target = readlink_at(up, name, NULL);
    if (!target) {
        m->t->skipped[SKIP_CHANGED]++;
        return 0;
    }
    if (clear_slot(dst, name, err) < 0)
        return -1;
    if (symlinkat(target, dst, name) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", name);
    if (m->chown && fchownat(dst, name, m->uid, m->gid, AT_SYMLINK_NOFOLLOW) < 0)
        return bb_fail_errno(err, errno, "cannot change the owner of %s", name);
    struct timespec ts[2] = {{0, UTIME_OMIT}, e->st.st_mtim};
    (void)utimensat(dst, name, ts, AT_SYMLINK_NOFOLLOW);
    m->t->entries++;
    return 0;
}

static int merge_dir(merger *m, int up, int dst, bb_error **err);

static int merge_subdir(merger *m, const entry *e, int dst, const char *name, bb_error **err)
{
    struct stat st;
    bool have = fstatat(dst, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (have && (e->kind == E_OPAQUE || !S_ISDIR(st.st_mode))) {
        if (clear_slot(dst, name, err) < 0)
            return -1;
        have = false;
    }
    if (!have && mkdirat(dst, name, 0700) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", name);
    _cleanup_close_ int out = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (out < 0)
        return bb_fail_errno(err, errno, "cannot open %s", name);
    (void)fchmod(out, 0700);
    if (xattrs_take(e->fd, out, name, m->t, err) < 0)
        return -1;
    m->t->entries++;
    size_t saved;
    if (!path_push(&m->p, name, &saved)) {
        m->t->skipped[SKIP_DEEP]++;
        return finish(m, out, (e->st.st_mode & 0777) | 0700, &e->st, name, err);
    }
    int r = merge_dir(m, e->fd, out, err);
    path_pop(&m->p, saved);
    if (r < 0)
        return bb_prefix(err, "%s", name);
    return finish(m, out, (e->st.st_mode & 0777) | 0700, &e->st, name, err);
}

static int merge_dir(merger *m, int up, int dst, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(up, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++) {
        const char *name = names.v[i];
        entry e;
        classify(up, name, &e, m->t);
        int r = 0;
        switch (e.kind) {
        case E_SKIP:
            break;
        case E_WHITEOUT:
            r = clear_slot(dst, name, err);
            m->t->entries++;
            break;
        case E_FILE:
            r = merge_file(m, &e, dst, name, err);
            break;
        case E_LINK:
            r = merge_link(m, &e, up, dst, name, err);
            break;
        case E_DIR:
        case E_OPAQUE:
            r = merge_subdir(m, &e, dst, name, err);
            break;
        }
        entry_done(&e);
        if (r < 0)
            return -1;
        CRASH_POINT("apply-mid-merge");
    }
    return 0;
}

/* The staging copy of the parent's /data: directories made anew with their attributes and
 * owners, every other entry a hard link (the merge replaces entries, never writes into
 * one, so the parent's files are never changed through these links). */
static int farm_dir(walk_path *p, int src, int dst, data_tally *t, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(src, &names, err) < 0)
        return -1;
    for (size_t i = 0; i < names.n; i++) {
        const char *name = names.v[i];
        struct stat st;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return bb_fail_errno(err, errno, "cannot stat %s", name);
        if (!S_ISDIR(st.st_mode)) {
            if (linkat(src, name, dst, name, 0) < 0)
                return bb_fail_errno(err, errno, "cannot link %s", name);
            continue;
        }
        size_t saved;
        if (!path_push(p, name, &saved))
            return bb_fail(err, ELOOP,
                           "the parent's /data nests deeper than bluebox can copy (%s/%s)", p->buf,
                           name);
        _cleanup_close_ int in = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (in < 0 || mkdirat(dst, name, 0700) < 0)
            return bb_fail_errno(err, errno, "cannot copy the directory %s", p->buf);
        _cleanup_close_ int out =
            openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (out < 0)
            return bb_fail_errno(err, errno, "cannot open %s", p->buf);
        struct timespec ts[2] = {{0, UTIME_OMIT}, st.st_mtim};
        if (xattrs_copy(in, out, name, t, err) < 0 || farm_dir(p, in, out, t, err) < 0)
            return -1;
        if (fchown(out, st.st_uid, st.st_gid) < 0 || fchmod(out, st.st_mode & 07777) < 0 ||
            futimens(out, ts) < 0)
            return bb_fail_errno(err, errno, "cannot set the owner and mode of %s", p->buf);
        path_pop(p, saved);
    }
    return 0;
}

typedef struct {
    const char *lower_path;
    int upper;
    merger *m;
} apply_fill;

static int fill_applied(int new_fd, void *ud, bb_error **err)
{
    apply_fill *f = ud;
    _cleanup_close_ int lower =
        open(f->lower_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (lower < 0 || fstat(lower, &st) < 0)
        return bb_fail_errno(err, errno, "cannot open %s", f->lower_path);
    walk_path p = {0};
    data_tally scratch = {0};
    if (xattrs_copy(lower, new_fd, ".", &scratch, err) < 0 ||
        farm_dir(&p, lower, new_fd, &scratch, err) < 0)
        return bb_prefix(err, "cannot stage the parent's /data");
    if (fchown(new_fd, st.st_uid, st.st_gid) < 0 || fchmod(new_fd, st.st_mode & 07777) < 0)
        return bb_fail_errno(err, errno, "cannot stage the parent's /data");
    /* The root's own attributes: the guest's chmod or chown of /data in the fork. */
    if (xattrs_take(f->upper, new_fd, ".", f->m->t, err) < 0)
        return -1;
    return merge_dir(f->m, f->upper, new_fd, err);
}

int fork_apply(const char *lower_path, const char *upper_path, bool chown, uid_t uid, gid_t gid,
               data_tally *t, bb_error **err)
{
    _cleanup_close_ int upper = open(upper_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (upper < 0)
        return bb_fail_errno(err, errno, "cannot open %s", upper_path);
    merger *m = xmalloc(sizeof *m);
    *m = (merger){.t = t, .chown = chown, .uid = uid, .gid = gid, .upper = upper};
    apply_fill f = {.lower_path = lower_path, .upper = upper, .m = m};
    /* The staging directory takes the parent's owner (fill_applied), not uid:gid. */
    int r = data_replace(lower_path, false, 0, 0, fill_applied, &f, err);
    free(m);
    return r;
}

/* ---- discard ---- */

static int empty_layer(const char *layers, const char *name, bool chown, uid_t uid, gid_t gid,
                       bb_error **err)
{
    _cleanup_free_ char *path = path_join(layers, name);
    return data_replace(path, chown, uid, gid, NULL, NULL, err);
}

int fork_layers_reset(const char *layers_path, const char *lower_path, bool chown, uid_t uid,
                      gid_t gid, bb_error **err)
{
    if (mkdir_p(layers_path, 0755, err) < 0 ||
        empty_layer(layers_path, FORK_WORK, chown, uid, gid, err) < 0 ||
        empty_layer(layers_path, FORK_UPPER, chown, uid, gid, err) < 0)
        return -1;
    /* The overlay's root shows the upper layer's root: the guest's owner and mode of the
     * parent's /data, as the parent's root carries them. */
    _cleanup_free_ char *upper_path = path_join(layers_path, FORK_UPPER);
    _cleanup_close_ int upper = open(upper_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int lower = open(lower_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (upper < 0 || lower < 0 || fstat(lower, &st) < 0)
        return bb_fail_errno(err, errno, "cannot open the layers of %s", layers_path);
    data_tally t = {0};
    if (xattrs_copy(lower, upper, ".", &t, err) < 0)
        return -1;
    if (fchmod(upper, st.st_mode & 0777) < 0)
        return bb_fail_errno(err, errno, "cannot set the mode of %s", upper_path);
    return 0;
}
