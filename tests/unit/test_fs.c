/* Unit tests for the filesystem helpers: nothing follows a symlink a guest could plant. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"

static char base[64];

static int setup(void **s)
{
    (void)s;
    strcpy(base, "/tmp/bb-fs-XXXXXX");
    return mkdtemp(base) ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(base, NULL);
}

static char *p(const char *rel)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", base, rel);
    return buf[k];
}

static void rm_rf_keeps_symlink_targets(void **s)
{
    (void)s;
    mkdir(p("outside"), 0755);
    close(open(p("outside/precious"), O_CREAT | O_WRONLY, 0644));
    mkdir(p("data"), 0755);
    mkdir(p("data/sub"), 0);
    assert_int_equal(symlink(p("outside"), p("data/link")), 0);
    assert_int_equal(symlink(p("outside"), p("data/sub/link2")), 0);
    bb_error *err = NULL;
    assert_int_equal(rm_rf(p("data"), &err), 0);
    assert_false(path_exists(p("data")));
    assert_true(path_exists(p("outside/precious")));
    assert_int_equal(rm_rf(p("missing"), &err), 0);
}

/* Refused with -1 and the errno in the error, never a bare errno. */
static void expect_refused(int dfd, const char *path, int status)
{
    bb_error *err = NULL;
    assert_int_equal(openat_beneath(dfd, path, O_RDONLY, 0, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->status, status);
    assert_contains(err->msg, "cannot open ");
    bb_error_free(err);
    /* no error wanted: still -1 */
    assert_int_equal(openat_beneath(dfd, path, O_RDONLY, 0, NULL), -1);
}

static void openat_beneath_refuses_escapes(void **s)
{
    (void)s;
    mkdir(p("root"), 0755);
    close(open(p("secret"), O_CREAT | O_WRONLY, 0644));
    assert_int_equal(symlink(p("secret"), p("root/abs")), 0);
    assert_int_equal(symlink("../secret", p("root/rel")), 0);
    int dfd = open(p("root"), O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    expect_refused(dfd, "abs", ELOOP);
    expect_refused(dfd, "rel", ELOOP);
    expect_refused(dfd, "../secret", EXDEV);
    expect_refused(dfd, p("secret"), EXDEV);
    expect_refused(dfd, "missing", ENOENT);
    bb_error *err = NULL;
    int fd = openat_beneath(dfd, "new", O_WRONLY | O_CREAT | O_EXCL, 0600, &err);
    assert_true(fd >= 0);
    assert_null(err);
    assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    close(fd);
    assert_int_equal(openat_beneath(dfd, "new", O_WRONLY | O_CREAT | O_EXCL, 0600, &err), -1);
    assert_int_equal(err->status, EEXIST);
    assert_string_equal(err->msg, "cannot open new: File exists");
    bb_error_free(err);
    close(dfd);
}

static void write_full_fails_with_an_error(void **s)
{
    (void)s;
    bb_error *err = NULL;
    int fd = open(p("w"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write_full(fd, "abc", 3, "w", &err), 0);
    assert_null(err);
    close(fd);
    fd = open(p("w"), O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    /* -1 (not -errno) and the errno in the error */
    assert_int_equal(write_full(fd, "abc", 3, "the file", &err), -1);
    assert_int_equal(err->status, EBADF);
    assert_string_equal(err->msg, "cannot write the file: Bad file descriptor");
    bb_error_free(err);
    assert_int_equal(write_full(fd, "abc", 3, "the file", NULL), -1);
    close(fd);
}

static void readlink_at_reads_or_fails_with_an_error(void **s)
{
    (void)s;
    mkdir(p("l"), 0755);
    char target[400];
    memset(target, 'x', sizeof target - 1); /* longer than the first buffer */
    target[sizeof target - 1] = '\0';
    assert_int_equal(symlink(target, p("l/long")), 0);
    close(open(p("l/plain"), O_CREAT | O_WRONLY, 0644));
    int dfd = open(p("l"), O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    bb_error *err = NULL;
    char *t = readlink_at(dfd, "long", &err);
    assert_non_null(t);
    assert_null(err);
    assert_string_equal(t, target);
    free(t);
    assert_null(readlink_at(dfd, "plain", &err));
    assert_int_equal(err->status, EINVAL);
    assert_contains(err->msg, "cannot read the link plain: ");
    bb_error_free(err);
    err = NULL;
    assert_null(readlink_at(dfd, "missing", &err));
    assert_int_equal(err->status, ENOENT);
    bb_error_free(err);
    assert_null(readlink_at(dfd, "missing", NULL));
    close(dfd);
}

static void atomic_write_and_read(void **s)
{
    (void)s;
    bb_error *err = NULL;
    assert_int_equal(write_file_atomic(p("f"), "hello", 5, 0640, &err), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(read_file(p("f"), 100, &text, &len, &err), 0);
    assert_int_equal(len, 5);
    assert_string_equal(text, "hello");
    free(text);
    struct stat st;
    assert_int_equal(stat(p("f"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(read_file(p("f"), 4, &text, &len, &err), -1);
    assert_int_equal(err->status, EFBIG);
    bb_error_free(err);
    err = NULL;
    assert_int_equal(read_file(base, 4, &text, &len, &err), -1);
    bb_error_free(err);
}

/* A FIFO where a file was expected is refused at once: opening it must not wait for a
 * writer. */
static void read_file_refuses_a_fifo_without_blocking(void **s)
{
    (void)s;
    assert_int_equal(mkfifo(p("fifo"), 0600), 0);
    alarm(10);
    char *text = NULL;
    size_t len = 0;
    bb_error *err = NULL;
    assert_int_equal(read_file(p("fifo"), 100, &text, &len, &err), -1);
    alarm(0);
    assert_int_equal(err->status, EINVAL);
    bb_error_free(err);
}

static void mkdir_p_and_empty(void **s)
{
    (void)s;
    bb_error *err = NULL;
    assert_int_equal(mkdir_p(p("a/b/c"), 0755, &err), 0);
    assert_true(is_dir(p("a/b/c")));
    assert_int_equal(dir_is_empty(p("a/b/c"), &err), 1);
    assert_int_equal(dir_is_empty(p("a/b"), &err), 0);
    assert_int_equal(dir_is_empty(p("nope"), &err), 1);
    close(open(p("file"), O_CREAT | O_WRONLY, 0644));
    assert_int_equal(mkdir_p(p("file"), 0755, &err), -1);
    bb_error_free(err);
    char *j = path_join("/a/", "/b");
    assert_string_equal(j, "/a/b");
    free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(rm_rf_keeps_symlink_targets, setup, teardown),
        cmocka_unit_test_setup_teardown(openat_beneath_refuses_escapes, setup, teardown),
        cmocka_unit_test_setup_teardown(write_full_fails_with_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(readlink_at_reads_or_fails_with_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(atomic_write_and_read, setup, teardown),
        cmocka_unit_test_setup_teardown(read_file_refuses_a_fifo_without_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(mkdir_p_and_empty, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
