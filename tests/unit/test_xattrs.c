/* Unit tests for the user.bluebox.* attributes a copy of /data carries (src/data/xattrs.c)
 * and their way through the snapshot writer, the restore's extractor and the tree copy: the
 * guest's ownership survives, and nothing but user.bluebox.* is ever written. */
#include "unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "data/copy.h"
#include "data/safetar.h"
#include "data/snapwrite.h"
#include "data/tally.h"
#include "data/xattrs.h"
#include "util/fs.h"

static char base[64];

static int setup(void **s)
{
    (void)s;
    strcpy(base, "/var/tmp/bb-xattrs-XXXXXX");
    if (!mkdtemp(base))
        return -1;
    /* A file system without user xattrs here would make every test below vacuous. */
    char probe[128];
    snprintf(probe, sizeof probe, "%s/probe", base);
    close(open(probe, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    int r = setxattr(probe, "user.bluebox.own", "x", 1, 0);
    unlink(probe);
    if (r < 0)
        fprintf(stderr, "%s has no user xattrs: %s\n", base, strerror(errno));
    return r;
}

static int teardown(void **s)
{
    (void)s;
    char d[128];
    snprintf(d, sizeof d, "%s/src/d", base);
    (void)chmod(d, 0755);
    return rm_rf(base, NULL);
}

static char *p(const char *rel)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", base, rel);
    return buf[k];
}

static void put(const char *rel, const char *name, const char *value)
{
    assert_int_equal(lsetxattr(p(rel), name, value, strlen(value), 0), 0);
}

/* The value of name on rel, "" when it has none (ENODATA). */
static const char *get(const char *rel, const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    ssize_t n = lgetxattr(p(rel), name, buf[k], sizeof buf[k] - 1);
    if (n < 0) {
        assert_int_equal(errno, ENODATA);
        n = 0;
    }
    buf[k][n] = '\0';
    return buf[k];
}

static size_t count(const char *rel)
{
    char names[4096];
    ssize_t n = llistxattr(p(rel), names, sizeof names);
    assert_true(n >= 0);
    size_t c = 0;
    for (char *q = names; q < names + n; q += strlen(q) + 1)
        c++;
    return c;
}

static int open_dir(const char *rel)
{
    int fd = open(p(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static void carried_names(void **s)
{
    (void)s;
    assert_true(xattr_carried("user.bluebox.own"));
    assert_true(xattr_carried("user.bluebox.x.user.mime_type"));
    assert_true(xattr_carried("user.bluebox.x.security.selinux")); /* a guest's, as data */
    const char *never[] = {"user.bluebox",
                           "user.bluebox.",
                           "user.blueboxx.own",
                           "USER.bluebox.own",
                           "user.other",
                           "security.capability",
                           "trusted.overlay.opaque",
                           "system.posix_acl_access",
                           "security.bluebox.own",
                           "",
                           "user"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++)
        assert_false(xattr_carried(never[i]));
    char name[300];
    snprintf(name, sizeof name, "user.bluebox.x.%0*d", 255 - 15, 0);
    assert_true(xattr_carried(name)); /* 255 bytes */
    snprintf(name, sizeof name, "user.bluebox.x.%0*d", 256 - 15, 0);
    assert_false(xattr_carried(name));
}

static void set_limits(void **s)
{
    (void)s;
    xattr_set set = {0};
    assert_int_equal(xattr_set_add(&set, "security.capability", "x", 1), XATTR_FOREIGN);
    assert_int_equal(xattr_set_add(&set, "user.bluebox.own", "a\0b", 3), XATTR_ADDED);
    assert_int_equal(xattr_set_add(&set, "user.bluebox.own", "c", 1), XATTR_DUP);
    assert_int_equal(set.n, 1);
    assert_memory_equal(set.v[0].value, "a\0b", 3);
    char *big = calloc(1, XATTR_VALUE_MAX + 1);
    assert_int_equal(xattr_set_add(&set, "user.bluebox.x.big", big, XATTR_VALUE_MAX + 1),
                     XATTR_OVER);
    /* 64 KiB each: the eighth would pass the 512 KiB an entry holds. */
    char name[64];
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof name, "user.bluebox.x.v%d", i);
        assert_int_equal(xattr_set_add(&set, name, big, XATTR_VALUE_MAX), XATTR_ADDED);
    }
    assert_int_equal(xattr_set_add(&set, "user.bluebox.x.v7", big, XATTR_VALUE_MAX), XATTR_OVER);
    free(big);
    xattr_set_free(&set);
    for (int i = 0; i < XATTR_PER_ENTRY_MAX; i++) {
        snprintf(name, sizeof name, "user.bluebox.x.n%d", i);
        assert_int_equal(xattr_set_add(&set, name, "", 0), XATTR_ADDED);
    }
    assert_int_equal(xattr_set_add(&set, "user.bluebox.x.more", "", 0), XATTR_OVER);
    xattr_set_free(&set);
    assert_int_equal(set.n, 0);
}

static void tally_carries_xattr_counts(void **s)
{
    (void)s;
    data_tally t = {.entries = 3, .bytes = 9, .xattrs_ignored = 4, .xattrs_lost = 2};
    t.skipped[SKIP_FIFO] = 1;
    char *line = tally_format(&t);
    data_tally back;
    assert_int_equal(tally_parse(line, &back), 0);
    assert_memory_equal(&back, &t, sizeof t);
    free(line);
    /* A line without them (a bluebox before xattrs) still parses. */
    assert_int_equal(tally_parse("ok 3 9 0 1 0 0 0 0", &back), 0);
    assert_int_equal(back.skipped[SKIP_FIFO], 1);
    assert_int_equal(back.xattrs_ignored + back.xattrs_lost, 0);
}

/* A file system without extended attributes (proc): nothing read, a write counted as lost
 * and not an error. */
static void unsupported_is_lost_not_failed(void **s)
{
    (void)s;
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    data_tally t = {0};
    bb_error *err = NULL;
    xattr_set set = {0};
    assert_int_equal(xattrs_read(fd, "status", &set, &t, &err), 0);
    assert_int_equal(set.n, 0);
    assert_int_equal(xattr_set_add(&set, "user.bluebox.own", "x", 1), XATTR_ADDED);
    assert_int_equal(xattrs_write(fd, "status", &set, &t, &err), 0);
    assert_null(err);
    assert_int_equal(t.xattrs_lost, 1);
    xattr_set_free(&set);
    close(fd);
}

/* src: a /data as the file server leaves it. */
static void make_src(void)
{
    assert_int_equal(mkdir(p("src"), 0755), 0);
    assert_int_equal(mkdir(p("src/d"), 0755), 0);
    close(open(p("src/f"), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    close(open(p("src/d/g"), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    assert_int_equal(link(p("src/f"), p("src/hard")), 0);
    assert_int_equal(symlink("f", p("src/sym")), 0);
    put("src", "user.bluebox.own", "root-of-data");
    put("src/f", "user.bluebox.own", "f-own");
    put("src/f", "user.bluebox.x.user.mime", "text/plain");
    put("src/f", "user.bluebox.x.a=b", "a name SCHILY cannot hold");
    put("src/f", "user.other", "not carried");
    put("src/d", "user.bluebox.own", "d-own");
    assert_int_equal(chmod(p("src/d"), 0555), 0); /* not writable: the copy still sets them */
}

static void check_dest(const char *d, bool with_eq)
{
    char rel[64];
    snprintf(rel, sizeof rel, "%s/f", d);
    assert_string_equal(get(rel, "user.bluebox.own"), "f-own");
    assert_string_equal(get(rel, "user.bluebox.x.user.mime"), "text/plain");
    assert_string_equal(get(rel, "user.other"), "");
    assert_int_equal(count(rel), with_eq ? 3 : 2);
    snprintf(rel, sizeof rel, "%s/hard", d);
    assert_string_equal(get(rel, "user.bluebox.own"), "f-own");
    snprintf(rel, sizeof rel, "%s/d", d);
    assert_string_equal(get(rel, "user.bluebox.own"), "d-own");
    snprintf(rel, sizeof rel, "%s/d/g", d);
    assert_int_equal(count(rel), 0);
    snprintf(rel, sizeof rel, "%s/sym", d);
    assert_int_equal(count(rel), 0);
    assert_string_equal(get(d, "user.bluebox.own"), "root-of-data");
}

static void snapshot_and_restore_keep_them(void **s)
{
    (void)s;
    make_src();
    int src = open_dir("src");
    int out = open(p("snap.tar"), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(out >= 0);
    data_tally t = {0};
    bb_error *err = NULL;
    assert_int_equal(snapshot_write(src, out, COMPRESS_NONE, NULL, NULL, &t, &err), 0);
    assert_int_equal(t.xattrs_ignored, 1); /* the name with '=' */
    assert_int_equal(lseek(out, 0, SEEK_SET), 0);
    struct archive *a = NULL;
    assert_int_equal(safetar_open_fd(out, &a, &err), 0);
    assert_int_equal(mkdir(p("dest"), 0755), 0);
    int dest = open_dir("dest");
    data_tally r = {0};
    safetar_opts o = {0};
    assert_int_equal(safetar_extract(a, dest, &o, &r, &err), 0);
    assert_null(err);
    assert_int_equal(r.xattrs_ignored + r.xattrs_lost, 0);
    safetar_close(a);
    check_dest("dest", false);
    close(dest);
    close(out);
    close(src);
}

static void tree_copy_keeps_them(void **s)
{
    (void)s;
    make_src();
    assert_int_equal(mkdir(p("copy"), 0755), 0);
    int src = open_dir("src"), dst = open_dir("copy");
    copy_opts o = {.links = true};
    data_tally t = {0};
    bb_error *err = NULL;
    assert_int_equal(tree_copy(src, dst, &o, &t, &err), 0);
    assert_int_equal(t.xattrs_ignored + t.xattrs_lost, 0);
    check_dest("copy", true);
    close(src);
    close(dst);
}

/* An archive as a hostile guest or a stranger would make it, written with libarchive. */
static void add(struct archive *a, const char *name, mode_t type, const char *const *xattrs)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, 0755);
    archive_entry_set_size(e, 0);
    if (type == AE_IFLNK)
        archive_entry_set_symlink(e, "f");
    for (; *xattrs; xattrs += 2)
        archive_entry_xattr_add_entry(e, xattrs[0], xattrs[1], strlen(xattrs[1]));
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    archive_entry_free(e);
}

static void hostile_names_never_written(void **s)
{
    (void)s;
    static char buf[1 << 16];
    size_t used = 0;
    struct archive *w = archive_write_new();
    assert_int_equal(archive_write_set_format_pax_restricted(w), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(w, buf, sizeof buf, &used), ARCHIVE_OK);
    const char *const bad[] = {"security.capability",
                               "\x01\x00\x00\x02",
                               "trusted.overlay.opaque",
                               "y",
                               "system.posix_acl_access",
                               "\x02",
                               "user.other",
                               "x",
                               "user.bluebox.own",
                               "kept",
                               NULL};
    const char *const on_link[] = {"user.bluebox.own", "never on a symlink", NULL};
    add(w, "./", AE_IFDIR, bad);
    add(w, "./f", AE_IFREG, bad);
    add(w, "./sym", AE_IFLNK, on_link);
    assert_int_equal(archive_write_close(w), ARCHIVE_OK);
    archive_write_free(w);

    struct archive *a = NULL;
    bb_error *err = NULL;
    assert_int_equal(safetar_open_memory(buf, used, &a, &err), 0);
    assert_int_equal(mkdir(p("h"), 0755), 0);
    int dest = open_dir("h");
    data_tally t = {0};
    safetar_opts o = {0};
    assert_int_equal(safetar_extract(a, dest, &o, &t, &err), 0);
    safetar_close(a);
    close(dest);
    /* libarchive writes each as SCHILY and LIBARCHIVE records: read twice, ignored twice. */
    assert_int_equal(t.xattrs_ignored, 2 * (4 + 4 + 1));
    assert_int_equal(count("h/f"), 1);
    assert_string_equal(get("h/f", "user.bluebox.own"), "kept");
    assert_int_equal(count("h"), 1);
    assert_string_equal(get("h", "user.bluebox.own"), "kept");
    assert_int_equal(count("h/sym"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(carried_names),
        cmocka_unit_test(set_limits),
        cmocka_unit_test(tally_carries_xattr_counts),
        cmocka_unit_test(unsupported_is_lost_not_failed),
        cmocka_unit_test_setup_teardown(snapshot_and_restore_keep_them, setup, teardown),
        cmocka_unit_test_setup_teardown(tree_copy_keeps_them, setup, teardown),
        cmocka_unit_test_setup_teardown(hostile_names_never_written, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
