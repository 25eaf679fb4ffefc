/* Unit tests for a VM's lifeline (launch/lifeline.h): both ends close-on-exec and above the
 * fds a spawn places (3, 4); the VMM's end reads EOF once the owner's end is closed, and the
 * release byte first when the owner hands the VM to a file (what bluebox-vmm tells apart). */
#include "unit.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "abi/abi.h"
#include "launch/lifeline.h"

static bool cloexec(int fd)
{
    return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

/* What the VMM's end says: the byte read (-1 none) and whether EOF followed at once. */
static int read_end(int fd, bool *ret_eof)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 1); /* something to see without waiting */
    char c;
    ssize_t n = read(fd, &c, 1);
    int got = n == 1 ? c : -1;
    *ret_eof = n == 0 || read(fd, &c, 1) == 0;
    return got;
}

static void open_is_cloexec_and_high(void **s)
{
    (void)s;
    bb_error *err = NULL;
    lifeline l;
    assert_int_equal(lifeline_open(&l, &err), 0);
    assert_true(l.vm >= 10 && l.hold >= 10);
    assert_true(cloexec(l.vm) && cloexec(l.hold));
    lifeline_close(&l);
    assert_int_equal(l.vm, -1);
    assert_int_equal(l.hold, -1);
    lifeline_close(&l); /* twice, and LIFELINE_NONE, are no-ops */
}

static void owner_gone_is_eof(void **s)
{
    (void)s;
    bb_error *err = NULL;
    lifeline l;
    assert_int_equal(lifeline_open(&l, &err), 0);
    int vm = dup(l.vm); /* the VMM's copy (the spawn's) */
    lifeline_passed(&l);
    assert_int_equal(l.vm, -1);
    struct pollfd p = {.fd = vm, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0); /* the owner lives: nothing */
    lifeline_close(&l);
    bool eof = false;
    assert_int_equal(read_end(vm, &eof), -1);
    assert_true(eof);
    close(vm);
}

static void release_says_so_first(void **s)
{
    (void)s;
    bb_error *err = NULL;
    lifeline l;
    assert_int_equal(lifeline_open(&l, &err), 0);
    int vm = dup(l.vm);
    lifeline_release(&l);
    assert_int_equal(l.hold, -1);
    bool eof = false;
    assert_int_equal(read_end(vm, &eof), ABI_LIFELINE_RELEASE);
    assert_true(eof);
    close(vm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_is_cloexec_and_high),
        cmocka_unit_test(owner_gone_is_eof),
        cmocka_unit_test(release_says_so_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
