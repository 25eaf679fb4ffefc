/* Unit tests for the /data file server's FUSE side (src/fsd): crafted requests straight to
 * fsd_handle() over a scratch export. Hostile input (truncated headers, lengths past the end,
 * invented nodeids and fhs, bad names, unknown opcodes, huge sizes) gets an error reply that
 * fits the caller's buffer; names never leave the export; the ownership record is checked. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fsd/fsd.h"
#include "fsd/owner.h"

typedef struct env {
    char dir[64];
    fsd *fs;
    uint8_t *out;
    uint64_t unique;
} env;

static env E;

static void rmtree(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A request: header + `a` (na bytes) + `b` (nb bytes). Returns the reply's error (0 or
 * negative errno), or 1 for no reply; *plen gets the payload length. */
static int call(uint32_t op, uint64_t node, const void *a, size_t na, const void *b, size_t nb,
                size_t *plen)
{
    size_t len = sizeof(struct fuse_in_header) + na + nb;
    uint8_t *in = malloc(len);
    struct fuse_in_header h = {.len = (uint32_t)len,
                               .opcode = op,
                               .unique = ++E.unique,
                               .nodeid = node,
                               .uid = 1000,
                               .gid = 1000};
    memcpy(in, &h, sizeof(h));
    if (na)
        memcpy(in + sizeof(h), a, na);
    if (nb)
        memcpy(in + sizeof(h) + na, b, nb);
    size_t r = fsd_handle(E.fs, in, len, E.out, FSD_BUF_MAX);
    free(in);
    if (r == 0)
        return 1;
    struct fuse_out_header oh;
    assert_true(r >= sizeof(oh) && r <= FSD_BUF_MAX);
    memcpy(&oh, E.out, sizeof(oh));
    assert_int_equal(oh.len, r);
    assert_int_equal(oh.unique, E.unique);
    if (plen)
        *plen = r - sizeof(oh);
    return oh.error;
}

static int call_name(uint32_t op, uint64_t node, const void *a, size_t na, const char *name,
                     size_t *plen)
{
    return call(op, node, a, na, name, strlen(name) + 1, plen);
}

static uint64_t lookup(uint64_t dir, const char *name, struct fuse_entry_out *e)
{
    struct fuse_entry_out tmp;
    assert_int_equal(call_name(FUSE_LOOKUP, dir, NULL, 0, name, NULL), 0);
    memcpy(e ? e : &tmp, E.out + sizeof(struct fuse_out_header), sizeof(tmp));
    return (e ? e : &tmp)->nodeid;
}

static int setup(void **s)
{
    (void)s;
    strcpy(E.dir, "/tmp/bluebox-fsd-XXXXXX");
    assert_non_null(mkdtemp(E.dir));
    int fd = open(E.dir, O_RDONLY | O_DIRECTORY);
    fsd_options opt = {.max_fds = 64};
    assert_int_equal(fsd_new(&E.fs, fd, &opt, NULL), 0);
    close(fd);
    E.out = malloc(FSD_BUF_MAX);
    struct fuse_init_in in = {.major = 7, .minor = 36, .max_readahead = 65536, .flags = ~0u};
    assert_int_equal(call(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, NULL), 0);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    fsd_free(E.fs);
    free(E.out);
    rmtree(E.dir);
    return 0;
}

static void init_negotiates(void **s)
{
    (void)s;
    fsd *fs = NULL;
    int fd = open("/tmp", O_RDONLY | O_DIRECTORY);
    assert_int_equal(fsd_new(&fs, fd, NULL, NULL), 0);
    close(fd);
    fsd *keep = E.fs;
    E.fs = fs;
    /* Before INIT: EIO; an old minor: EPROTO; a newer major: our version, no flags. */
    assert_int_equal(call(FUSE_GETATTR, 1, NULL, 0, NULL, 0, NULL), -EIO);
    struct fuse_init_in old = {.major = 7, .minor = 12};
    assert_int_equal(call(FUSE_INIT, 0, &old, sizeof(old), NULL, 0, NULL), -EPROTO);
    struct fuse_init_in newer = {.major = 8, .minor = 1};
    struct fuse_init_out o;
    assert_int_equal(call(FUSE_INIT, 0, &newer, sizeof(newer), NULL, 0, NULL), 0);
    memcpy(&o, E.out + sizeof(struct fuse_out_header), sizeof(o));
    assert_int_equal(o.major, 7);
    /* The 6.1 guest: 7.36, every flag offered; only ours come back. */
    struct fuse_init_in in = {.major = 7, .minor = 36, .max_readahead = 4096, .flags = ~0u};
    size_t n;
    assert_int_equal(call(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, &n), 0);
    assert_int_equal(n, sizeof(o));
    memcpy(&o, E.out + sizeof(struct fuse_out_header), sizeof(o));
    assert_int_equal(o.minor, 36);
    assert_int_equal(o.max_write, FSD_MAX_IO);
    assert_int_equal(o.max_pages, FSD_MAX_IO / 4096);
    assert_true(o.flags & FUSE_MAX_PAGES);
    assert_true(o.flags & FUSE_DO_READDIRPLUS);
    assert_false(o.flags &
                 (FUSE_DONT_MASK | FUSE_WRITEBACK_CACHE | FUSE_HANDLE_KILLPRIV | FUSE_POSIX_ACL));
    /* A second INIT is refused. */
    assert_int_equal(call(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, NULL), -EPROTO);
    /* The kernel's minor above ours: ours. */
    fsd_free(fs);
    fd = open("/tmp", O_RDONLY | O_DIRECTORY);
    assert_int_equal(fsd_new(&fs, fd, NULL, NULL), 0);
    close(fd);
    E.fs = fs;
    in.minor = 99;
    assert_int_equal(call(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, NULL), 0);
    memcpy(&o, E.out + sizeof(struct fuse_out_header), sizeof(o));
    assert_int_equal(o.minor, FUSE_KERNEL_MINOR_VERSION);
    fsd_free(fs);
    E.fs = keep;
}

static void malformed_headers(void **s)
{
    (void)s;
    uint8_t in[64] = {0}, out[64];
    struct fuse_out_header oh;
    /* Shorter than a header: an EINVAL reply, unique 0. */
    for (size_t len = 0; len < sizeof(struct fuse_in_header); len++) {
        assert_int_equal(fsd_handle(E.fs, in, len, out, sizeof(out)), sizeof(oh));
        memcpy(&oh, out, sizeof(oh));
        assert_int_equal(oh.error, -EINVAL);
    }
    /* The header's len beyond the buffer, or shorter than itself. */
    struct fuse_in_header h = {.len = 4096, .opcode = FUSE_GETATTR, .unique = 7, .nodeid = 1};
    memcpy(in, &h, sizeof(h));
    assert_int_equal(fsd_handle(E.fs, in, sizeof(h), out, sizeof(out)), sizeof(oh));
    memcpy(&oh, out, sizeof(oh));
    assert_int_equal(oh.error, -EINVAL);
    assert_int_equal(oh.unique, 7);
    h.len = 3;
    memcpy(in, &h, sizeof(h));
    assert_int_equal(fsd_handle(E.fs, in, sizeof(h), out, sizeof(out)), sizeof(oh));
    /* No room for even a reply header: nothing is written. */
    h.len = sizeof(h);
    memcpy(in, &h, sizeof(h));
    assert_int_equal(fsd_handle(E.fs, in, sizeof(h), out, sizeof(oh) - 1), 0);
    /* A reply that does not fit the caller's buffer is an error, never an overrun. */
    assert_int_equal(fsd_handle(E.fs, in, sizeof(h), out, sizeof(out)), sizeof(oh));
    memcpy(&oh, out, sizeof(oh));
    assert_int_equal(oh.error, -EIO);
    /* The buffer may be unaligned. */
    uint8_t big[256];
    memcpy(big + 1, &h, sizeof(h));
    assert_int_equal(fsd_handle(E.fs, big + 1, sizeof(h), E.out, FSD_BUF_MAX),
                     sizeof(oh) + sizeof(struct fuse_attr_out));
}

static void unknown_opcodes(void **s)
{
    (void)s;
    uint32_t ops[] = {0,
                      7,
                      19,
                      FUSE_GETLK,
                      FUSE_SETLK,
                      FUSE_IOCTL,
                      FUSE_COPY_FILE_RANGE,
                      FUSE_SETUPMAPPING,
                      FUSE_TMPFILE,
                      52,
                      4096,
                      0xffffffffu};
    for (size_t k = 0; k < ELEMENTSOF(ops); k++)
        assert_int_equal(call(ops[k], 1, NULL, 0, NULL, 0, NULL), -ENOSYS);
    /* INTERRUPT, FORGET and BATCH_FORGET take no reply, even malformed. */
    assert_int_equal(call(FUSE_INTERRUPT, 1, NULL, 0, NULL, 0, NULL), 1);
    assert_int_equal(call(FUSE_FORGET, 12345, NULL, 0, NULL, 0, NULL), 1);
    struct fuse_batch_forget_in bf = {.count = 1000000};
    assert_int_equal(call(FUSE_BATCH_FORGET, 0, &bf, sizeof(bf), NULL, 0, NULL), 1);
}

static void invented_nodeids(void **s)
{
    (void)s;
    uint64_t ids[] = {0, 2, 3, 0xffffffffu, 1ull << 32 | 1, (1ull << 32) + 2, ~0ull};
    for (size_t k = 0; k < ELEMENTSOF(ids); k++) {
        assert_int_equal(call(FUSE_GETATTR, ids[k], NULL, 0, NULL, 0, NULL), -ESTALE);
        assert_int_equal(call_name(FUSE_LOOKUP, ids[k], NULL, 0, "x", NULL), -ENOTDIR);
    }
    /* A forgotten nodeid is stale, and so is its slot's next tenant's old number. */
    char path[128];
    snprintf(path, sizeof(path), "%s/f", E.dir);
    close(open(path, O_CREAT | O_WRONLY, 0644));
    uint64_t id = lookup(1, "f", NULL);
    assert_int_equal(call(FUSE_GETATTR, id, NULL, 0, NULL, 0, NULL), 0);
    struct fuse_forget_in fi = {.nlookup = 1};
    assert_int_equal(call(FUSE_FORGET, id, &fi, sizeof(fi), NULL, 0, NULL), 1);
    assert_int_equal(call(FUSE_GETATTR, id, NULL, 0, NULL, 0, NULL), -ESTALE);
    uint64_t again = lookup(1, "f", NULL);
    assert_int_not_equal(again, id);
    assert_int_equal(call(FUSE_GETATTR, id, NULL, 0, NULL, 0, NULL), -ESTALE);
    /* Forgetting the root does nothing. */
    fi.nlookup = 1000;
    call(FUSE_FORGET, 1, &fi, sizeof(fi), NULL, 0, NULL);
    assert_int_equal(call(FUSE_GETATTR, 1, NULL, 0, NULL, 0, NULL), 0);
    /* Invented fhs. */
    struct fuse_read_in rd = {.fh = 1, .size = 10};
    assert_int_equal(call(FUSE_READ, again, &rd, sizeof(rd), NULL, 0, NULL), -EBADF);
    rd.fh = ~0ull;
    assert_int_equal(call(FUSE_READDIR, 1, &rd, sizeof(rd), NULL, 0, NULL), -EBADF);
    struct fuse_release_in rl = {.fh = 77};
    assert_int_equal(call(FUSE_RELEASE, again, &rl, sizeof(rl), NULL, 0, NULL), -EBADF);
}

static void bad_names(void **s)
{
    (void)s;
    const char *bad[] = {"", ".", "..", "a/b", "/", "../x", "x/"};
    for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
        assert_int_equal(call_name(FUSE_LOOKUP, 1, NULL, 0, bad[k], NULL), -EINVAL);
        struct fuse_mkdir_in md = {.mode = 0755};
        assert_int_equal(call_name(FUSE_MKDIR, 1, &md, sizeof(md), bad[k], NULL), -EINVAL);
        assert_int_equal(call_name(FUSE_UNLINK, 1, NULL, 0, bad[k], NULL), -EINVAL);
    }
    /* Not NUL-terminated inside the request. */
    assert_int_equal(call(FUSE_LOOKUP, 1, "abc", 3, NULL, 0, NULL), -EINVAL);
    /* 255 bytes is a name; 256 is not. */
    char name[258];
    memset(name, 'n', 256);
    name[256] = 0;
    assert_int_equal(call_name(FUSE_LOOKUP, 1, NULL, 0, name, NULL), -EINVAL);
    name[255] = 0;
    assert_int_equal(call_name(FUSE_LOOKUP, 1, NULL, 0, name, NULL), -ENOENT);
    /* RENAME with one good name and one bad. */
    struct fuse_rename_in rn = {.newdir = 1};
    assert_int_equal(call(FUSE_RENAME, 1, &rn, sizeof(rn), "a\0..", 5, NULL), -EINVAL);
    struct fuse_rename2_in r2 = {.newdir = 1, .flags = RENAME_WHITEOUT | RENAME_EXCHANGE};
    assert_int_equal(call(FUSE_RENAME2, 1, &r2, sizeof(r2), "a\0b", 4, NULL), -EINVAL);
    r2.flags = 0x80; /* no such flag */
    assert_int_equal(call(FUSE_RENAME2, 1, &r2, sizeof(r2), "a\0b", 4, NULL), -EINVAL);
}

/* RENAME_WHITEOUT (overlayfs over the server): the source becomes a whiteout, a
 * plain host file whose record says character device 0:0; a failed rename leaves nothing. */
static void rename_whiteout(void **s)
{
    (void)s;
    struct fuse_mknod_in mk = {.mode = S_IFREG | 0644};
    assert_int_equal(call_name(FUSE_MKNOD, 1, &mk, sizeof(mk), "wsrc", NULL), 0);
    struct fuse_entry_out e;
    uint64_t ino = (lookup(1, "wsrc", &e), e.attr.ino);
    struct fuse_rename2_in r2 = {.newdir = 1, .flags = RENAME_WHITEOUT};
    assert_int_equal(call(FUSE_RENAME2, 1, &r2, sizeof(r2), "wsrc\0wdst", 10, NULL), 0);
    lookup(1, "wdst", &e);
    assert_int_equal(e.attr.ino, ino);
    lookup(1, "wsrc", &e);
    assert_int_equal(e.attr.mode & S_IFMT, S_IFCHR);
    assert_int_equal(e.attr.rdev, 0);
    char path[160];
    snprintf(path, sizeof(path), "%s/wsrc", E.dir);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode) && st.st_size == 0);
    /* A source that is not there: ENOENT, and no whiteout left behind. */
    assert_int_equal(call(FUSE_RENAME2, 1, &r2, sizeof(r2), "nope\0x", 7, NULL), -ENOENT);
    DIR *d = opendir(E.dir);
    for (struct dirent *de; (de = readdir(d));)
        assert_null(strstr(de->d_name, "whiteout"));
    closedir(d);
}

/* A host symlink in the export pointing outside: the server never walks through it. */
static void symlinks_are_not_followed(void **s)
{
    (void)s;
    char outside[128], link[128];
    snprintf(outside, sizeof(outside), "%s-outside", E.dir);
    assert_int_equal(mkdir(outside, 0755), 0);
    char secret[160];
    snprintf(secret, sizeof(secret), "%s/secret", outside);
    close(open(secret, O_CREAT | O_WRONLY, 0644));
    snprintf(link, sizeof(link), "%s/out", E.dir);
    assert_int_equal(symlink(outside, link), 0);
    struct fuse_entry_out e;
    uint64_t id = lookup(1, "out", &e);
    assert_true(S_ISLNK(e.attr.mode));
    assert_int_equal(call_name(FUSE_LOOKUP, id, NULL, 0, "secret", NULL), -ENOTDIR);
    struct fuse_open_in oi = {.flags = O_RDONLY};
    assert_int_equal(call(FUSE_OPEN, id, &oi, sizeof(oi), NULL, 0, NULL), -EINVAL);
    assert_int_equal(call(FUSE_OPENDIR, id, &oi, sizeof(oi), NULL, 0, NULL), -ENOTDIR);
    struct fuse_mkdir_in md = {.mode = 0755};
    assert_int_equal(call_name(FUSE_MKDIR, id, &md, sizeof(md), "x", NULL), -ENOTDIR);
    struct fuse_create_in ci = {.flags = O_WRONLY, .mode = 0644};
    assert_int_equal(call_name(FUSE_CREATE, 1, &ci, sizeof(ci), "out", NULL), -EINVAL);
    ci.flags = O_WRONLY | O_EXCL;
    assert_int_equal(call_name(FUSE_CREATE, 1, &ci, sizeof(ci), "out", NULL), -EEXIST);
    size_t n;
    assert_int_equal(call(FUSE_READLINK, id, NULL, 0, NULL, 0, &n), 0);
    assert_int_equal(n, strlen(outside));
    /* A hard link of a symlink to a file outside (LINK goes through /proc/self/fd with
     * AT_SYMLINK_FOLLOW) links the symlink itself, never the file it names; SETATTR and
     * xattrs on it reach nothing either. */
    snprintf(link, sizeof(link), "%s/to-secret", E.dir);
    assert_int_equal(symlink(secret, link), 0);
    uint64_t ts = lookup(1, "to-secret", NULL);
    struct fuse_link_in li = {.oldnodeid = ts};
    assert_int_equal(call_name(FUSE_LINK, 1, &li, sizeof(li), "hard", NULL), 0);
    struct stat st, sst;
    snprintf(link, sizeof(link), "%s/hard", E.dir);
    assert_int_equal(lstat(link, &st), 0);
    assert_int_equal(stat(secret, &sst), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_true(st.st_ino != sst.st_ino);
    assert_int_equal(sst.st_nlink, 1);
    struct fuse_setattr_in sa = {.valid = FATTR_MODE | FATTR_SIZE, .mode = 04777, .size = 0};
    assert_true(call(FUSE_SETATTR, ts, &sa, sizeof(sa), NULL, 0, NULL) < 0);
    sa = (struct fuse_setattr_in){.valid = FATTR_MODE | FATTR_UID, .mode = 04777, .uid = 0};
    assert_int_equal(call(FUSE_SETATTR, ts, &sa, sizeof(sa), NULL, 0, NULL), 0);
    struct fuse_setxattr_in sx = {.size = 1};
    char xa[16] = "user.a\0v";
    assert_int_equal(call(FUSE_SETXATTR, ts, &sx, FUSE_COMPAT_SETXATTR_IN_SIZE, xa, 9, NULL),
                     -EPERM);
    assert_int_equal(stat(secret, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(listxattr(secret, NULL, 0), 0);
    rmtree(outside);
}

static uint64_t create(const char *name, uint32_t mode, uint64_t *fh)
{
    struct fuse_create_in ci = {.flags = O_RDWR, .mode = mode};
    size_t n;
    assert_int_equal(call_name(FUSE_CREATE, 1, &ci, sizeof(ci), name, &n), 0);
    assert_int_equal(n, sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out));
    struct fuse_entry_out e;
    struct fuse_open_out o;
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    memcpy(&o, E.out + sizeof(struct fuse_out_header) + sizeof(e), sizeof(o));
    *fh = o.fh;
    return e.nodeid;
}

static void io_bounds(void **s)
{
    (void)s;
    uint64_t fh, id = create("io", 0644, &fh);
    struct fuse_write_in w = {.fh = fh, .size = 5};
    size_t n;
    assert_int_equal(call(FUSE_WRITE, id, &w, sizeof(w), "hello", 5, &n), 0);
    /* Data shorter than the size claimed; a size past the limit. */
    w.size = 6;
    assert_int_equal(call(FUSE_WRITE, id, &w, sizeof(w), "hello", 5, NULL), -EINVAL);
    w.size = 0xffffffffu;
    assert_int_equal(call(FUSE_WRITE, id, &w, sizeof(w), "hello", 5, NULL), -EINVAL);
    w.size = 1;
    w.offset = ~0ull;
    assert_int_equal(call(FUSE_WRITE, id, &w, sizeof(w), "h", 1, NULL), -EINVAL);
    /* A truncated argument struct. */
    assert_int_equal(call(FUSE_WRITE, id, &w, 10, NULL, 0, NULL), -EINVAL);
    /* A huge read is capped at what exists (and at FSD_MAX_IO). */
    struct fuse_read_in rd = {.fh = fh, .size = 0xffffffffu};
    assert_int_equal(call(FUSE_READ, id, &rd, sizeof(rd), NULL, 0, &n), 0);
    assert_int_equal(n, 5);
    assert_memory_equal(E.out + sizeof(struct fuse_out_header), "hello", 5);
    /* The read fills only the caller's buffer. */
    uint8_t in[sizeof(struct fuse_in_header) + sizeof(rd)], out[20];
    struct fuse_in_header h = {.len = sizeof(in), .opcode = FUSE_READ, .unique = 1, .nodeid = id};
    memcpy(in, &h, sizeof(h));
    memcpy(in + sizeof(h), &rd, sizeof(rd));
    assert_int_equal(fsd_handle(E.fs, in, sizeof(in), out, sizeof(out)), sizeof(out));
    struct fuse_fallocate_in fa = {.fh = fh, .length = 100, .mode = 0x80};
    assert_int_equal(call(FUSE_FALLOCATE, id, &fa, sizeof(fa), NULL, 0, NULL), -EOPNOTSUPP);
    struct fuse_lseek_in ls = {.fh = fh, .whence = SEEK_END};
    assert_int_equal(call(FUSE_LSEEK, id, &ls, sizeof(ls), NULL, 0, NULL), -EINVAL);
    /* SETATTR size through the fh, then without. */
    struct fuse_setattr_in sa = {.valid = FATTR_SIZE | FATTR_FH, .fh = fh, .size = 2};
    assert_int_equal(call(FUSE_SETATTR, id, &sa, sizeof(sa), NULL, 0, NULL), 0);
    sa = (struct fuse_setattr_in){.valid = FATTR_SIZE, .size = 1};
    assert_int_equal(call(FUSE_SETATTR, id, &sa, sizeof(sa), NULL, 0, NULL), 0);
    struct fuse_attr_out ao;
    memcpy(&ao, E.out + sizeof(struct fuse_out_header), sizeof(ao));
    assert_int_equal(ao.attr.size, 1);
    sa = (struct fuse_setattr_in){.valid = FATTR_SIZE, .size = ~0ull};
    assert_int_equal(call(FUSE_SETATTR, id, &sa, sizeof(sa), NULL, 0, NULL), -EFBIG);
    sa = (struct fuse_setattr_in){.valid = FATTR_MTIME, .mtimensec = 2000000000u};
    assert_int_equal(call(FUSE_SETATTR, id, &sa, sizeof(sa), NULL, 0, NULL), -EINVAL);
    struct fuse_release_in rl = {.fh = fh};
    assert_int_equal(call(FUSE_RELEASE, id, &rl, sizeof(rl), NULL, 0, NULL), 0);
    assert_int_equal(call(FUSE_RELEASE, id, &rl, sizeof(rl), NULL, 0, NULL), -EBADF);
}

static void mapped_ownership(void **s)
{
    (void)s;
    uint64_t fh, id = create("own", 04755, &fh);
    struct fuse_release_in rl = {.fh = fh};
    call(FUSE_RELEASE, id, &rl, sizeof(rl), NULL, 0, NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/own", E.dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_int_equal(st.st_uid, geteuid());
    struct fuse_attr_out ao;
    assert_int_equal(call(FUSE_GETATTR, id, NULL, 0, NULL, 0, NULL), 0);
    memcpy(&ao, E.out + sizeof(struct fuse_out_header), sizeof(ao));
    assert_int_equal(ao.attr.mode, S_IFREG | 04755);
    assert_int_equal(ao.attr.uid, 1000);
    /* chmod 0400: the host keeps owner rw. */
    struct fuse_setattr_in sa = {.valid = FATTR_MODE, .mode = 0400};
    assert_int_equal(call(FUSE_SETATTR, id, &sa, sizeof(sa), NULL, 0, NULL), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* A device node: a plain 0600 host file. */
    struct fuse_mknod_in mk = {.mode = S_IFBLK | 0660, .rdev = 0x0801};
    assert_int_equal(call_name(FUSE_MKNOD, 1, &mk, sizeof(mk), "sda1", NULL), 0);
    struct fuse_entry_out e;
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    assert_int_equal(e.attr.mode, S_IFBLK | 0660);
    assert_int_equal(e.attr.rdev, 0x0801);
    snprintf(path, sizeof(path), "%s/sda1", E.dir);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    /* Garbage in the record: the default view. */
    assert_int_equal(setxattr(path, FSD_OWN_XATTR, "garbage", 7, 0), 0);
    struct fuse_forget_in fi = {.nlookup = 1};
    call(FUSE_FORGET, e.nodeid, &fi, sizeof(fi), NULL, 0, NULL);
    lookup(1, "sda1", &e);
    assert_int_equal(e.attr.mode, S_IFREG | 0600);
    assert_int_equal(e.attr.uid, 0);
    /* MKNOD of a directory type or junk bits: EINVAL. */
    mk.mode = S_IFDIR | 0755;
    assert_int_equal(call_name(FUSE_MKNOD, 1, &mk, sizeof(mk), "d", NULL), -EINVAL);
    mk.mode = 0xffffffffu;
    assert_int_equal(call_name(FUSE_MKNOD, 1, &mk, sizeof(mk), "d", NULL), -EINVAL);
}

static void guest_xattrs(void **s)
{
    (void)s;
    uint64_t fh, id = create("x", 0644, &fh);
    struct fuse_setxattr_in si = {.size = 3};
    uint8_t arg[64];
    memcpy(arg, "user.bluebox.own\0abc", 20);
    assert_int_equal(call(FUSE_SETXATTR, id, &si, 8, arg, 20, NULL), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/x", E.dir);
    char val[64];
    assert_int_equal(getxattr(path, "user.bluebox.x.user.bluebox.own", val, sizeof(val)), 3);
    assert_int_equal(getxattr(path, FSD_OWN_XATTR, val, sizeof(val)), FSD_OWN_RECORD_LEN);
    /* The real record is out of reach, and LISTXATTR shows only the guest's names. */
    struct fuse_getxattr_in gi = {.size = 0};
    size_t len;
    assert_int_equal(call(FUSE_LISTXATTR, id, &gi, sizeof(gi), NULL, 0, &len), 0);
    struct fuse_getxattr_out go;
    memcpy(&go, E.out + sizeof(struct fuse_out_header), sizeof(go));
    assert_int_equal(go.size, strlen("user.bluebox.own") + 1);
    gi.size = 256;
    assert_int_equal(call(FUSE_LISTXATTR, id, &gi, sizeof(gi), NULL, 0, &len), 0);
    assert_int_equal(len, go.size);
    assert_string_equal((char *)E.out + sizeof(struct fuse_out_header), "user.bluebox.own");
    gi.size = 3;
    assert_int_equal(call(FUSE_LISTXATTR, id, &gi, sizeof(gi), NULL, 0, NULL), -ERANGE);
    /* ACLs: not supported. Oversized names and values. */
    memcpy(arg, "system.posix_acl_access\0abc", 27);
    assert_int_equal(call(FUSE_SETXATTR, id, &si, 8, arg, 27, NULL), -EOPNOTSUPP);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = 0;
    assert_int_equal(call(FUSE_GETXATTR, id, &gi, sizeof(gi), longname, sizeof(longname), NULL),
                     -EINVAL);
    longname[250] = 0;
    assert_int_equal(call(FUSE_GETXATTR, id, &gi, sizeof(gi), longname, 251, NULL), -ERANGE);
    si.size = 1u << 30;
    memcpy(arg, "user.a\0abc", 10);
    assert_int_equal(call(FUSE_SETXATTR, id, &si, 8, arg, 10, NULL), -E2BIG);
    si.size = 3;
    si.flags = 0x100;
    assert_int_equal(call(FUSE_SETXATTR, id, &si, 8, arg, 10, NULL), -EINVAL);
    struct fuse_release_in rl = {.fh = fh};
    call(FUSE_RELEASE, id, &rl, sizeof(rl), NULL, 0, NULL);
}

/* READDIRPLUS: each name with its entry (the same nodeid a LOOKUP gives, counted once per
 * entry sent), "." and ".." without one; an entry that does not fit is neither sent nor
 * counted. */
static void readdirplus_entries(void **s)
{
    (void)s;
    struct fuse_mkdir_in md = {.mode = 0755};
    assert_int_equal(call_name(FUSE_MKDIR, 1, &md, sizeof(md), "plus", NULL), 0);
    struct fuse_entry_out e;
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    char path[160];
    snprintf(path, sizeof(path), "%s/plus/one", E.dir);
    close(open(path, O_CREAT | O_WRONLY, 0644));
    struct fuse_open_in oi = {0};
    assert_int_equal(call(FUSE_OPENDIR, e.nodeid, &oi, sizeof(oi), NULL, 0, NULL), 0);
    struct fuse_open_out oo;
    memcpy(&oo, E.out + sizeof(struct fuse_out_header), sizeof(oo));
    /* Too small for any entry: nothing sent. */
    struct fuse_read_in rd = {.fh = oo.fh, .size = 64};
    size_t n;
    assert_int_equal(call(FUSE_READDIRPLUS, e.nodeid, &rd, sizeof(rd), NULL, 0, &n), 0);
    assert_int_equal(n, 0);
    rd.size = 4096;
    assert_int_equal(call(FUSE_READDIRPLUS, e.nodeid, &rd, sizeof(rd), NULL, 0, &n), 0);
    uint64_t one = 0;
    int names = 0;
    for (size_t p = 0; p < n;) {
        struct fuse_direntplus d;
        memcpy(&d, E.out + sizeof(struct fuse_out_header) + p, sizeof(d));
        const char *name =
            (const char *)E.out + sizeof(struct fuse_out_header) + p + FUSE_NAME_OFFSET_DIRENTPLUS;
        names++;
        if (d.dirent.namelen == 3 && memcmp(name, "one", 3) == 0) {
            one = d.entry_out.nodeid;
            assert_true(S_ISREG(d.entry_out.attr.mode));
        } else {
            assert_int_equal(d.entry_out.nodeid, 0); /* "." and ".." */
        }
        p += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + d.dirent.namelen);
    }
    assert_int_equal(names, 3);
    assert_true(one != 0);
    /* The same inode as a LOOKUP; after forgetting both lookups the nodeid is gone. */
    assert_int_equal(lookup(e.nodeid, "one", NULL), one);
    struct fuse_forget_in fg = {.nlookup = 2};
    assert_int_equal(call(FUSE_FORGET, one, &fg, sizeof(fg), NULL, 0, NULL), 1);
    assert_int_equal(call(FUSE_GETATTR, one, &(struct fuse_getattr_in){0},
                          sizeof(struct fuse_getattr_in), NULL, 0, NULL),
                     -ESTALE);
}

static void readdir_offsets(void **s)
{
    (void)s;
    struct fuse_mkdir_in md = {.mode = 0755};
    assert_int_equal(call_name(FUSE_MKDIR, 1, &md, sizeof(md), "many", NULL), 0);
    struct fuse_entry_out e;
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    char path[160];
    for (int k = 0; k < 200; k++) {
        snprintf(path, sizeof(path), "%s/many/entry-with-a-long-name-%03d", E.dir, k);
        close(open(path, O_CREAT | O_WRONLY, 0644));
    }
    struct fuse_open_in oi = {0};
    assert_int_equal(call(FUSE_OPENDIR, e.nodeid, &oi, sizeof(oi), NULL, 0, NULL), 0);
    struct fuse_open_out oo;
    memcpy(&oo, E.out + sizeof(struct fuse_out_header), sizeof(oo));
    /* Read in small pieces, continuing from each last offset; count the names. */
    uint64_t off = 0, third = 0;
    int names = 0, pieces = 0;
    for (;;) {
        struct fuse_read_in rd = {.fh = oo.fh, .offset = off, .size = 300};
        size_t n;
        assert_int_equal(call(FUSE_READDIR, e.nodeid, &rd, sizeof(rd), NULL, 0, &n), 0);
        if (n == 0)
            break;
        assert_true(n <= 300);
        pieces++;
        for (size_t p = 0; p < n;) {
            struct fuse_dirent d;
            memcpy(&d, E.out + sizeof(struct fuse_out_header) + p, sizeof(d));
            names++;
            off = d.off;
            if (names == 100)
                third = d.off;
            p += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + d.namelen);
        }
    }
    assert_int_equal(names, 202);
    assert_true(pieces > 20);
    /* Seek back: from the 100th entry's offset, 102 remain. */
    int rest = 0;
    off = third;
    for (;;) {
        struct fuse_read_in rd = {.fh = oo.fh, .offset = off, .size = 4096};
        size_t n;
        assert_int_equal(call(FUSE_READDIR, e.nodeid, &rd, sizeof(rd), NULL, 0, &n), 0);
        if (n == 0)
            break;
        for (size_t p = 0; p < n;) {
            struct fuse_dirent d;
            memcpy(&d, E.out + sizeof(struct fuse_out_header) + p, sizeof(d));
            rest++;
            off = d.off;
            p += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + d.namelen);
        }
    }
    assert_int_equal(rest, 102);
    struct fuse_release_in rl = {.fh = oo.fh};
    assert_int_equal(call(FUSE_RELEASEDIR, e.nodeid, &rl, sizeof(rl), NULL, 0, NULL), 0);
}

static void fd_cap(void **s)
{
    (void)s;
    /* max_fds is 64: 80 files looked up all work, the least recently used files' fds closed
     * and reopened by name on use; a name that now leads elsewhere is ESTALE; an unlinked
     * file the guest still holds keeps working. */
    char path[160];
    uint64_t ids[80];
    for (int k = 0; k < 80; k++) {
        snprintf(path, sizeof(path), "%s/cap%02d", E.dir, k);
        int fd = open(path, O_CREAT | O_WRONLY, 0644);
        assert_true(write(fd, path, (size_t)k) == k);
        close(fd);
        snprintf(path, sizeof(path), "cap%02d", k);
        struct fuse_entry_out e;
        ids[k] = lookup(1, path, &e);
        assert_int_equal(e.attr.size, k);
    }
    assert_true(fsd_fds_open(E.fs) <= 64);
    struct fuse_getattr_in gi = {0};
    for (int k = 0; k < 80; k++) {
        size_t n;
        assert_int_equal(call(FUSE_GETATTR, ids[k], &gi, sizeof(gi), NULL, 0, &n), 0);
        struct fuse_attr_out ao;
        memcpy(&ao, E.out + sizeof(struct fuse_out_header), sizeof(ao));
        assert_int_equal(ao.attr.size, k);
    }
    assert_true(fsd_fds_open(E.fs) <= 64);
    /* The host swaps cap00 for another file behind the server's back: stale, not the new
     * file's attributes under the old nodeid. */
    for (int k = 1; k < 70; k++) /* push cap00's fd out again */
        assert_int_equal(call(FUSE_GETATTR, ids[k], &gi, sizeof(gi), NULL, 0, NULL), 0);
    snprintf(path, sizeof(path), "%s/cap00", E.dir);
    char other[176];
    snprintf(other, sizeof(other), "%s/other", E.dir);
    close(open(other, O_CREAT | O_WRONLY, 0644));
    assert_int_equal(rename(other, path), 0);
    assert_int_equal(call(FUSE_GETATTR, ids[0], &gi, sizeof(gi), NULL, 0, NULL), -ESTALE);
    /* Unlinked through the server while open: still there by its nodeid. Unlinked while
     * held by nodeid alone: its fd may go like any other's, then ESTALE. */
    struct fuse_open_in oi = {.flags = O_RDONLY};
    assert_int_equal(call(FUSE_OPEN, ids[5], &oi, sizeof(oi), NULL, 0, NULL), 0);
    for (int k = 0; k < 70; k++)
        (void)call(FUSE_GETATTR, ids[79 - k], &gi, sizeof(gi), NULL, 0, NULL);
    assert_int_equal(call_name(FUSE_UNLINK, 1, NULL, 0, "cap05", NULL), 0);
    assert_int_equal(call_name(FUSE_UNLINK, 1, NULL, 0, "cap06", NULL), 0);
    for (int k = 10; k < 80; k++)
        (void)call(FUSE_GETATTR, ids[k], &gi, sizeof(gi), NULL, 0, NULL);
    size_t n;
    assert_int_equal(call(FUSE_GETATTR, ids[5], &gi, sizeof(gi), NULL, 0, &n), 0);
    struct fuse_attr_out ao;
    memcpy(&ao, E.out + sizeof(struct fuse_out_header), sizeof(ao));
    assert_int_equal(ao.attr.size, 5);
    assert_int_equal(ao.attr.nlink, 0);
    assert_int_equal(call(FUSE_GETATTR, ids[6], &gi, sizeof(gi), NULL, 0, NULL), -ESTALE);
    /* git's way: link into place, unlink the temporary name. The file is reopened by the
     * name it kept once its fd was closed again. */
    struct fuse_link_in li = {.oldnodeid = ids[10]};
    assert_int_equal(call_name(FUSE_LINK, 1, &li, sizeof(li), "kept", NULL), 0);
    assert_int_equal(call_name(FUSE_UNLINK, 1, NULL, 0, "cap10", NULL), 0);
    for (int k = 11; k < 80; k++)
        (void)call(FUSE_GETATTR, ids[k], &gi, sizeof(gi), NULL, 0, NULL);
    assert_int_equal(call(FUSE_GETATTR, ids[10], &gi, sizeof(gi), NULL, 0, &n), 0);
    memcpy(&ao, E.out + sizeof(struct fuse_out_header), sizeof(ao));
    assert_int_equal(ao.attr.size, 10);
    assert_int_equal(ao.attr.nlink, 1);
    assert_true(fsd_fds_open(E.fs) <= 64);
}

/* A request whose reply buffer cannot hold its answer (a hostile guest kernel's choice)
 * changes nothing and holds nothing: no file made, no lookup counted, no handle kept that
 * the guest was never told of; and nothing is read back from past the buffer. */
static void small_reply_buffers_take_nothing(void **s)
{
    teardown(s); /* a fresh export and server: the cap below counts every fd */
    setup(s);
    const size_t cap = sizeof(struct fuse_out_header) + 8;
    uint8_t *out = malloc(cap);
    char path[160];
    snprintf(path, sizeof(path), "%s/there", E.dir);
    close(open(path, O_CREAT | O_WRONLY, 0644));
    uint64_t there = lookup(1, "there", NULL);
    for (int k = 0; k < 100; k++) {
        struct {
            struct fuse_in_header h;
            union {
                struct fuse_create_in c;
                struct fuse_open_in o;
                struct fuse_mkdir_in m;
            } a;
            char name[8];
        } req = {.h = {.unique = 7, .uid = 1000, .gid = 1000}};
        size_t arg = 0;
        switch (k % 4) {
        case 0:
            req.h.opcode = FUSE_CREATE, req.h.nodeid = 1, arg = sizeof(req.a.c);
            req.a.c = (struct fuse_create_in){.flags = O_RDWR, .mode = 0644};
            break;
        case 1:
            req.h.opcode = FUSE_LOOKUP, req.h.nodeid = 1;
            break;
        case 2:
            req.h.opcode = FUSE_OPEN, req.h.nodeid = there, arg = sizeof(req.a.o);
            break;
        case 3:
            req.h.opcode = FUSE_MKDIR, req.h.nodeid = 1, arg = sizeof(req.a.m);
            req.a.m = (struct fuse_mkdir_in){.mode = 0755};
            break;
        }
        uint8_t in[sizeof(req)];
        memcpy(in, &req.h, sizeof(req.h));
        memcpy(in + sizeof(req.h), &req.a, arg);
        size_t nl = (size_t)snprintf((char *)in + sizeof(req.h) + arg, 8, "%s",
                                     k % 4 == 1   ? "there"
                                     : k % 4 == 0 ? "new"
                                                  : "dir") +
                    1;
        uint32_t len = (uint32_t)(sizeof(req.h) + arg + (k % 4 == 2 ? 0 : nl));
        memcpy(in, &len, sizeof(len));
        size_t r = fsd_handle(E.fs, in, len, out, cap);
        struct fuse_out_header oh;
        assert_int_equal(r, sizeof(oh));
        memcpy(&oh, out, sizeof(oh));
        assert_true(oh.error < 0);
    }
    free(out);
    snprintf(path, sizeof(path), "%s/new", E.dir);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof(path), "%s/dir", E.dir);
    assert_int_equal(access(path, F_OK), -1);
    /* Still room for the cap's worth of lookups (max_fds 64: the root, "there", 60 more). */
    for (int k = 0; k < 60; k++) {
        snprintf(path, sizeof(path), "%s/f%02d", E.dir, k);
        close(open(path, O_CREAT | O_WRONLY, 0644));
        snprintf(path, sizeof(path), "f%02d", k);
        assert_int_equal(call_name(FUSE_LOOKUP, 1, NULL, 0, path, NULL), 0);
    }
}

/* A host directory made setgid by its owner passes the bit to every directory made in it
 * (mkdir(2)); the server's never keep it: no host file it makes carries setgid. */
static void host_setgid_is_not_inherited(void **s)
{
    (void)s;
    char path[160];
    struct stat st;
    snprintf(path, sizeof(path), "%s/sgid", E.dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(chmod(path, 02775), 0);
    assert_int_equal(stat(path, &st), 0);
    if (!(st.st_mode & S_ISGID))
        skip(); /* this filesystem or group does not let us set it */
    uint64_t sg = lookup(1, "sgid", NULL);
    struct fuse_mkdir_in mi = {.mode = 0755};
    assert_int_equal(call_name(FUSE_MKDIR, sg, &mi, sizeof(mi), "d", NULL), 0);
    snprintf(path, sizeof(path), "%s/sgid/d", E.dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    /* The guest still sees its own view: a plain 0755 directory (the record holds no bit). */
    struct fuse_entry_out e;
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    assert_int_equal(e.attr.mode, S_IFDIR | 0755);
}

static void record_codec(void **s)
{
    (void)s;
    fsd_own o = {.uid = 1000, .gid = 100, .mode = S_IFCHR | 0620, .rdev = 0x0400}, back;
    uint8_t rec[FSD_OWN_RECORD_LEN];
    fsd_own_encode(&o, rec);
    assert_int_equal(fsd_own_decode(rec, sizeof(rec), S_IFREG, &back), 0);
    /* Field by field: the struct's padding is not part of the record. */
    assert_int_equal(back.uid, o.uid);
    assert_int_equal(back.gid, o.gid);
    assert_int_equal(back.mode, o.mode);
    assert_int_equal(back.rdev, o.rdev);
    /* A character device cannot be a host directory; bad lengths, versions and bits fail. */
    assert_int_equal(fsd_own_decode(rec, sizeof(rec), S_IFDIR, &back), -EINVAL);
    assert_int_equal(fsd_own_decode(rec, sizeof(rec) - 1, S_IFREG, &back), -EINVAL);
    rec[0] = 2;
    assert_int_equal(fsd_own_decode(rec, sizeof(rec), S_IFREG, &back), -EINVAL);
    o.mode = S_IFREG | 0644;
    fsd_own_encode(&o, rec);
    assert_int_equal(fsd_own_decode(rec, sizeof(rec), S_IFREG, &back), -EINVAL); /* rdev */
    o.rdev = 0;
    o.mode = 0170000 | 0777;
    fsd_own_encode(&o, rec);
    assert_int_equal(fsd_own_decode(rec, sizeof(rec), S_IFREG, &back), -EINVAL);
    o.mode = S_IFREG | 0644;
    o.uid = UINT32_MAX;
    fsd_own_encode(&o, rec);
    assert_int_equal(fsd_own_decode(rec, sizeof(rec), S_IFREG, &back), -EINVAL);
    /* The host mode never carries setuid/setgid/sticky and is always owner-usable. */
    assert_int_equal(fsd_own_host_mode(S_IFREG | 07000), S_IFREG | 0600);
    assert_int_equal(fsd_own_host_mode(S_IFDIR | 01777),
                     S_IFDIR | 0755); /* never g+w, o+w on the host */
    assert_int_equal(fsd_own_host_mode(S_IFREG | 0666), S_IFREG | 0644);
    assert_int_equal(fsd_own_host_mode(S_IFDIR | 0), S_IFDIR | 0700);
    assert_int_equal(fsd_own_host_mode(S_IFCHR | 0666), S_IFREG | 0600);
    fsd_own d = fsd_own_default(S_IFREG | 06755);
    assert_int_equal(d.mode, S_IFREG | 0755);
    assert_int_equal(d.uid, 0);
}

static void read_only_export(void **s)
{
    (void)s;
    fsd *keep = E.fs, *fs = NULL;
    int fd = open(E.dir, O_RDONLY | O_DIRECTORY);
    fsd_options opt = {.read_only = true};
    assert_int_equal(fsd_new(&fs, fd, &opt, NULL), 0);
    close(fd);
    E.fs = fs;
    struct fuse_init_in in = {.major = 7, .minor = 36};
    assert_int_equal(call(FUSE_INIT, 0, &in, sizeof(in), NULL, 0, NULL), 0);
    struct fuse_mkdir_in md = {.mode = 0755};
    assert_int_equal(call_name(FUSE_MKDIR, 1, &md, sizeof(md), "ro", NULL), -EROFS);
    assert_int_equal(call_name(FUSE_UNLINK, 1, NULL, 0, "x", NULL), -EROFS);
    uint64_t id = lookup(1, "x", NULL);
    struct fuse_open_in oi = {.flags = O_WRONLY};
    assert_int_equal(call(FUSE_OPEN, id, &oi, sizeof(oi), NULL, 0, NULL), -EROFS);
    oi.flags = O_RDONLY | O_TRUNC;
    assert_int_equal(call(FUSE_OPEN, id, &oi, sizeof(oi), NULL, 0, NULL), -EROFS);
    oi.flags = O_RDONLY;
    assert_int_equal(call(FUSE_OPEN, id, &oi, sizeof(oi), NULL, 0, NULL), 0);
    fsd_free(fs);
    E.fs = keep;
}

static void namespace_ops(void **s);

/* A second group (its own scratch export). */
static int more_tests(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(namespace_ops)};
    return cmocka_run_group_tests(tests, setup, teardown);
}

static void namespace_ops(void **s)
{
    (void)s;
    struct fuse_mkdir_in md = {.mode = 0755};
    assert_int_equal(call_name(FUSE_MKDIR, 1, &md, sizeof(md), "ns", NULL), 0);
    struct fuse_entry_out e;
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    uint64_t dir = e.nodeid;
    struct fuse_mknod_in mk = {.mode = S_IFREG | 0644};
    assert_int_equal(call_name(FUSE_MKNOD, dir, &mk, sizeof(mk), "a", NULL), 0);
    assert_int_equal(call_name(FUSE_MKNOD, dir, &mk, sizeof(mk), "b", NULL), 0);
    assert_int_equal(call_name(FUSE_MKNOD, dir, &mk, sizeof(mk), "a", NULL), -EEXIST);
    uint64_t a = lookup(dir, "a", &e), ino_a = e.attr.ino;
    /* NOREPLACE refuses, EXCHANGE swaps, plain RENAME replaces. */
    struct fuse_rename2_in r2 = {.newdir = dir, .flags = RENAME_NOREPLACE};
    assert_int_equal(call(FUSE_RENAME2, dir, &r2, sizeof(r2), "a\0b", 4, NULL), -EEXIST);
    r2.flags = RENAME_EXCHANGE;
    assert_int_equal(call(FUSE_RENAME2, dir, &r2, sizeof(r2), "a\0b", 4, NULL), 0);
    lookup(dir, "b", &e);
    assert_int_equal(e.attr.ino, ino_a);
    struct fuse_rename_in rn = {.newdir = 1};
    assert_int_equal(call(FUSE_RENAME, dir, &rn, sizeof(rn), "b\0moved", 8, NULL), 0);
    rn.newdir = a; /* not a directory */
    assert_int_equal(call(FUSE_RENAME, 1, &rn, sizeof(rn), "moved\0x", 8, NULL), -ENOTDIR);
    /* LINK, SYMLINK, READLINK. */
    struct fuse_link_in li = {.oldnodeid = a};
    assert_int_equal(call_name(FUSE_LINK, 1, &li, sizeof(li), "alink", NULL), 0);
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    assert_int_equal(e.nodeid, a);
    assert_int_equal(e.attr.nlink, 2);
    li.oldnodeid = dir;
    assert_int_equal(call_name(FUSE_LINK, 1, &li, sizeof(li), "dlink", NULL), -EPERM);
    assert_int_equal(call(FUSE_SYMLINK, dir, "s\0../../etc/passwd", 19, NULL, 0, NULL), 0);
    memcpy(&e, E.out + sizeof(struct fuse_out_header), sizeof(e));
    assert_int_equal(e.attr.mode, S_IFLNK | 0777);
    assert_int_equal(e.attr.uid, 0);
    size_t n;
    assert_int_equal(call(FUSE_READLINK, e.nodeid, NULL, 0, NULL, 0, &n), 0);
    assert_int_equal(n, 16);
    assert_memory_equal(E.out + sizeof(struct fuse_out_header), "../../etc/passwd", 16);
    /* A symlink's lchown is accepted and changes nothing; its xattrs are refused. */
    struct fuse_setattr_in sa = {.valid = FATTR_UID | FATTR_GID, .uid = 5, .gid = 5};
    assert_int_equal(call(FUSE_SETATTR, e.nodeid, &sa, sizeof(sa), NULL, 0, NULL), 0);
    struct fuse_attr_out ao;
    memcpy(&ao, E.out + sizeof(struct fuse_out_header), sizeof(ao));
    assert_int_equal(ao.attr.uid, 0);
    struct fuse_setxattr_in si = {.size = 1};
    assert_int_equal(call(FUSE_SETXATTR, e.nodeid, &si, 8, "user.a\0x", 9, NULL), -EPERM);
    /* A symlink as target of a missing target name, empty targets. */
    assert_int_equal(call(FUSE_SYMLINK, dir, "t\0", 3, NULL, 0, NULL), -EINVAL);
    assert_int_equal(call(FUSE_SYMLINK, dir, "t", 1, NULL, 0, NULL), -EINVAL);
    /* UNLINK / RMDIR. */
    assert_int_equal(call_name(FUSE_RMDIR, 1, NULL, 0, "ns", NULL), -ENOTEMPTY);
    assert_int_equal(call_name(FUSE_UNLINK, dir, NULL, 0, "a", NULL), 0);
    assert_int_equal(call_name(FUSE_UNLINK, dir, NULL, 0, "s", NULL), 0);
    assert_int_equal(call_name(FUSE_RMDIR, 1, NULL, 0, "ns", NULL), 0);
    /* The removed directory's nodeid stays valid (the guest still holds it) but is empty. */
    assert_int_equal(call(FUSE_GETATTR, dir, NULL, 0, NULL, 0, NULL), 0);
    assert_int_equal(call_name(FUSE_LOOKUP, dir, NULL, 0, "a", NULL), -ENOENT);
    struct fuse_kstatfs k;
    assert_int_equal(call(FUSE_STATFS, 1, NULL, 0, NULL, 0, &n), 0);
    assert_int_equal(n, sizeof(k));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_negotiates),
        cmocka_unit_test(malformed_headers),
        cmocka_unit_test(unknown_opcodes),
        cmocka_unit_test(invented_nodeids),
        cmocka_unit_test(bad_names),
        cmocka_unit_test(rename_whiteout),
        cmocka_unit_test(symlinks_are_not_followed),
        cmocka_unit_test(io_bounds),
        cmocka_unit_test(mapped_ownership),
        cmocka_unit_test(guest_xattrs),
        cmocka_unit_test(readdirplus_entries),
        cmocka_unit_test(readdir_offsets),
        cmocka_unit_test(record_codec),
        cmocka_unit_test(read_only_export),
        cmocka_unit_test(fd_cap),
        cmocka_unit_test(host_setgid_is_not_inherited),
        cmocka_unit_test(small_reply_buffers_take_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown) | more_tests();
}
