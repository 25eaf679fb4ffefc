/* Unit tests for bluebox-vmm's fopen (src/vmm/fopen.c), which libslirp's lazy read of
 * /etc/resolv.conf goes through: a guest that swaps the file for a symlink to /dev/zero or
 * a FIFO, or makes it huge, gets an error back at once, never a stream that does not end
 * or an open that does not return. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/bluebox-fopen-XXXXXX";

static char *in_dir(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static int setup(void **s)
{
    (void)s;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void regular_file_reads(void **s)
{
    (void)s;
    FILE *w = fopen(in_dir("resolv.conf"), "we");
    assert_non_null(w);
    fputs("nameserver 10.0.2.3\n", w);
    fclose(w);
    FILE *f = fopen(in_dir("resolv.conf"), "r");
    assert_non_null(f);
    char line[64];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "nameserver 10.0.2.3\n");
    assert_true(fcntl(fileno(f), F_GETFD) & FD_CLOEXEC);
    assert_false(fcntl(fileno(f), F_GETFL) & O_NONBLOCK);
    fclose(f);
    f = fopen("/proc/self/mountinfo", "re"); /* procfs files have size 0: still fine */
    assert_non_null(f);
    fclose(f);
}

static void symlink_to_dev_zero_refused(void **s)
{
    (void)s;
    assert_int_equal(symlink("/dev/zero", in_dir("zero")), 0);
    errno = 0;
    assert_null(fopen(in_dir("zero"), "r"));
    assert_int_equal(errno, ELOOP);
    assert_null(fopen("/dev/zero", "r")); /* and the device itself: not a regular file */
    assert_int_equal(errno, EINVAL);
}

static void fifo_refused_without_blocking(void **s)
{
    (void)s;
    assert_int_equal(mkfifo(in_dir("fifo"), 0600), 0);
    alarm(10); /* a blocking open would hang the test: fail it instead */
    assert_null(fopen(in_dir("fifo"), "r"));
    assert_int_equal(errno, EINVAL);
    assert_null(fopen(in_dir("fifo"), "w"));
    alarm(0);
}

static void huge_file_refused(void **s)
{
    (void)s;
    int fd = open(in_dir("big"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)2 << 20), 0);
    close(fd);
    assert_null(fopen(in_dir("big"), "r"));
    assert_int_equal(errno, EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(regular_file_reads),
        cmocka_unit_test(symlink_to_dev_zero_refused),
        cmocka_unit_test(fifo_refused_without_blocking),
        cmocka_unit_test(huge_file_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
