/* Unit tests for the uml VMM's lock (src/vmm/jail.c): after jail_lock() a process of the
 * VMM, root or not, cannot make a namespace or a mount by any door: the 64-bit syscalls,
 * clone's flags, clone3, the x32 numbers or the 32-bit int 0x80 entry. Each probe runs in
 * a child of its own (the filter cannot be removed) and the same probes run unlocked as a
 * control, so a filter that lets something through fails here rather than passing. */
#include "unit.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/jail.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#define I386_NR_GETPID  20
#define I386_NR_UNSHARE 310

typedef enum {
    P_UNSHARE_USER,
    P_UNSHARE_NS,
    P_MOUNT,
    P_CLONE_USER,
    P_CLONE3,
    P_X32_UNSHARE,
    P_I386_UNSHARE,
    P_I386_GETPID,
    P_SETNS,
    P_FORK,
    P_COUNT
} probe;

/* 0 when the call succeeded, else its errno. */
static int result(long r)
{
    return r < 0 ? errno : 0;
}

static long i386_syscall(long nr, long arg)
{
    long ret = nr;
    __asm__ volatile("int $0x80" : "+a"(ret) : "b"(arg) : "memory");
    return ret;
}

static int run_probe(probe p)
{
    switch (p) {
    case P_UNSHARE_USER:
        return result(unshare(CLONE_NEWUSER));
    case P_UNSHARE_NS:
        return result(unshare(CLONE_NEWNS));
    case P_MOUNT:
        return result(mount("none", "/", NULL, MS_REMOUNT | MS_BIND, NULL));
    case P_CLONE_USER:
    case P_FORK: {
        unsigned long flags = SIGCHLD | (p == P_CLONE_USER ? CLONE_NEWUSER : 0);
        long pid = syscall(SYS_clone, flags, 0, 0, 0, 0);
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid((pid_t)pid, NULL, 0);
        return result(pid);
    }
    case P_CLONE3: {
        unsigned long long args[11] = {0};
        args[4] = SIGCHLD; /* exit_signal */
        long pid = syscall(SYS_clone3, args, sizeof args);
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid((pid_t)pid, NULL, 0);
        return result(pid);
    }
    case P_X32_UNSHARE:
        return result(syscall(__X32_SYSCALL_BIT | SYS_unshare, CLONE_NEWUSER));
    case P_I386_UNSHARE:
    case P_I386_GETPID: {
        long r = p == P_I386_GETPID ? i386_syscall(I386_NR_GETPID, 0)
                                    : i386_syscall(I386_NR_UNSHARE, CLONE_NEWUSER);
        return r < 0 && r > -4096 ? (int)-r : 0;
    }
    case P_SETNS:
        return result(setns(0, 0));
    default:
        return -1;
    }
}

/* The probe in a fresh child, locked or not: 0 or the errno it got (-1: the child died). */
static int probe_in_child(probe p, bool locked)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const char *what = "";
        if (locked && jail_lock(&what) < 0)
            _exit(255);
        _exit(run_probe(p));
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) == 255)
        return -1;
    return WEXITSTATUS(st);
}

static void unlocked_control(void **s)
{
    (void)s;
    if (geteuid() != 0)
        skip();
    /* Without the lock these succeed here, so the locked results below mean something. */
    assert_int_equal(probe_in_child(P_UNSHARE_USER, false), 0);
    assert_int_equal(probe_in_child(P_UNSHARE_NS, false), 0);
    assert_int_equal(probe_in_child(P_CLONE_USER, false), 0);
    assert_int_equal(probe_in_child(P_FORK, false), 0);
    assert_int_equal(probe_in_child(P_I386_GETPID, false), 0);
    assert_int_equal(probe_in_child(P_I386_UNSHARE, false), 0);
    /* x32 is off in Debian's kernel: ENOSYS, which the filter turns into EPERM. */
    assert_int_not_equal(probe_in_child(P_X32_UNSHARE, false), EPERM);
}

static void locked_refuses(void **s)
{
    (void)s;
    if (geteuid() != 0)
        skip();
    assert_int_equal(probe_in_child(P_UNSHARE_USER, true), EPERM);
    assert_int_equal(probe_in_child(P_UNSHARE_NS, true), EPERM);
    assert_int_equal(probe_in_child(P_MOUNT, true), EPERM);
    assert_int_equal(probe_in_child(P_CLONE_USER, true), EPERM);
    assert_int_equal(probe_in_child(P_CLONE3, true), ENOSYS); /* glibc falls back to clone */
    assert_int_equal(probe_in_child(P_X32_UNSHARE, true), EPERM);
    assert_int_equal(probe_in_child(P_I386_UNSHARE, true), EPERM);
    assert_int_equal(probe_in_child(P_I386_GETPID, true), EPERM); /* any 32-bit call */
    assert_int_equal(probe_in_child(P_SETNS, true), EPERM);
    /* What UML needs still works: plain clone (fork). */
    assert_int_equal(probe_in_child(P_FORK, true), 0);
}

/* Which container mounts the guest gets as hostfs mounts of its own (and UML may write):
 * directories and files other than the root, the kernel's API filesystems, bluebox's own
 * /.bluebox and podman's /etc files. */
static void guest_mounts(void **s)
{
    (void)s;
    assert_false(jail_guest_mount("/"));
    assert_false(jail_guest_mount("/proc"));
    assert_false(jail_guest_mount("/sys/fs/cgroup"));
    assert_false(jail_guest_mount("/dev/shm"));
    assert_false(jail_guest_mount("/.bluebox"));
    assert_false(jail_guest_mount("/etc/hosts"));
    assert_false(jail_guest_mount("/etc/resolv.conf"));
    assert_false(jail_guest_mount("/etc/hostname"));
    assert_false(jail_guest_mount("/no/such/mount/point"));
    assert_true(jail_guest_mount("/usr"));        /* a directory, as /data is */
    assert_true(jail_guest_mount("/etc/passwd")); /* a file, as a single-file mount is */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unlocked_control),
        cmocka_unit_test(locked_refuses),
        cmocka_unit_test(guest_mounts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
