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
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/fs.h"
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

/* A fresh child, under the lock or not; one that cannot take the lock exits 255. */
static pid_t fork_child(bool locked)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    const char *what = "";
    if (pid == 0 && locked && jail_lock(&what) < 0)
        _exit(255);
    return pid;
}

/* The probe in a fresh child, locked or not: 0 or the errno it got; -SIGNUM when a signal
 * killed the child, -1 when it could not take the lock. The child dies of its signals as any
 * process does (not in cmocka's handler, which would carry on with the tests in the child). */
static int probe_in_child(probe p, bool locked)
{
    pid_t pid = fork_child(locked);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        signal(SIGSYS, SIG_DFL);
        _exit(run_probe(p));
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st))
        return -WTERMSIG(st);
    if (!WIFEXITED(st) || WEXITSTATUS(st) == 255)
        return -1;
    return WEXITSTATUS(st);
}

/* Whether this host's kernel takes 32-bit system calls through int 0x80. A kernel without
 * ia32 emulation, or a guest that cannot run compat mode (a PVM guest, say), kills the caller
 * with SIGSEGV instead; no 32-bit call reaches the kernel then, locked or not. */
static bool int80_works(void)
{
    int r = probe_in_child(P_I386_GETPID, false);
    if (r != 0 && r != -SIGSEGV)
        fail_msg("int 0x80 getpid unlocked: %d", r);
    return r == 0;
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
    if (int80_works())
        assert_int_equal(probe_in_child(P_I386_UNSHARE, false), 0);
    else
        assert_int_equal(probe_in_child(P_I386_UNSHARE, false), -SIGSEGV);
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
    /* any 32-bit call is refused; where the host has no int 0x80 entry it kills the caller */
    int no32 = int80_works() ? EPERM : -SIGSEGV;
    assert_int_equal(probe_in_child(P_I386_UNSHARE, true), no32);
    assert_int_equal(probe_in_child(P_I386_GETPID, true), no32);
    assert_int_equal(probe_in_child(P_SETNS, true), EPERM);
    /* What UML needs still works: plain clone (fork). */
    assert_int_equal(probe_in_child(P_FORK, true), 0);
}

/* ---- host files carry no privilege: what hostfs would do for a hostile guest ---------- */

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

typedef enum {
    F_CHMOD_SUID,
    F_CHMOD_SGID,
    F_FCHMOD_SUID,
    F_FCHMODAT_SUID,
    F_FCHMODAT2_SUID,
    F_CHMOD_PLAIN,
    F_CHMOD_STICKY,
    F_CHMOD_HIGH_BITS, /* 0x10000|04755: the kernel reads the low 16 bits */
    F_OPEN_CREAT_SUID,
    F_OPENAT_CREAT_SGID,
    F_CREAT_SUID,
    F_TMPFILE_SUID,
    F_OPEN_CREAT_PLAIN,
    F_OPEN_NOCREAT_SUID, /* the mode is ignored without O_CREAT */
    F_MKNOD_SUID,
    F_MKNODAT_FIFO,
    F_CHOWN_OTHER,
    F_CHOWN_OTHER_GID,
    F_LCHOWN_OTHER,
    F_FCHOWN_OTHER,
    F_FCHOWNAT_OTHER,
    F_CHOWN_HIGH_WORD, /* uid 1234 with bit 32 set: the kernel reads the low 32 bits */
    F_CHOWN_SELF,
    F_CHOWN_UNCHANGED,
    F_OPENAT2,
    F_SETXATTR_CAP,
    F_SETUID,
    F_SETRESUID,
    F_SETFSUID,
    F_IO_URING,
    F_COUNT
} fprobe;

static char fsdir[64];

static int fs_setup(void **s)
{
    (void)s;
    strcpy(fsdir, "/tmp/bb-jail-XXXXXX");
    return mkdtemp(fsdir) ? 0 : -1;
}

static int fs_teardown(void **s)
{
    (void)s;
    return rm_rf(fsdir, NULL);
}

static int fs_probe(fprobe p, const char *f)
{
    switch (p) {
    case F_CHMOD_SUID:
        return result(chmod(f, 04755));
    case F_CHMOD_SGID:
        return result(chmod(f, 02755));
    case F_FCHMOD_SUID:
    case F_FCHOWN_OTHER: {
        int fd = open(f, O_RDONLY | O_CLOEXEC);
        int r = result(p == F_FCHMOD_SUID ? fchmod(fd, 04755) : fchown(fd, 1234, 1234));
        close(fd);
        return r;
    }
    case F_FCHMODAT_SUID:
        return result(fchmodat(AT_FDCWD, f, 06755, 0));
    case F_FCHMODAT2_SUID:
        return result(syscall(SYS_fchmodat2, AT_FDCWD, f, 04755, 0));
    case F_CHMOD_PLAIN:
        return result(chmod(f, 0700));
    case F_CHMOD_STICKY:
        return result(chmod(f, 01777));
    case F_CHMOD_HIGH_BITS:
        return result(syscall(SYS_chmod, f, 0x10000UL | 04755));
    case F_OPEN_CREAT_SUID:
    case F_OPENAT_CREAT_SGID:
    case F_CREAT_SUID:
    case F_OPEN_CREAT_PLAIN: {
        char path[256];
        snprintf(path, sizeof path, "%s.new%d", f, p);
        long fd = p == F_OPEN_CREAT_SUID     ? syscall(SYS_open, path, O_WRONLY | O_CREAT, 04755)
                  : p == F_OPENAT_CREAT_SGID ? openat(AT_FDCWD, path, O_WRONLY | O_CREAT, 02755)
                  : p == F_CREAT_SUID        ? syscall(SYS_creat, path, 04755)
                                             : open(path, O_WRONLY | O_CREAT, 0644);
        int r = result(fd);
        if (fd >= 0)
            close((int)fd);
        return r;
    }
    case F_TMPFILE_SUID: {
        int fd = open(fsdir, O_TMPFILE | O_WRONLY, 04755);
        int r = result(fd);
        if (fd >= 0)
            close(fd);
        return r == EOPNOTSUPP ? -2 : r;
    }
    case F_OPEN_NOCREAT_SUID: {
        long fd = syscall(SYS_open, f, O_RDONLY, 04755);
        int r = result(fd);
        if (fd >= 0)
            close((int)fd);
        return r;
    }
    case F_MKNOD_SUID: {
        char path[256];
        snprintf(path, sizeof path, "%s.node", f);
        return result(mknod(path, S_IFREG | 04755, 0));
    }
    case F_MKNODAT_FIFO: {
        char path[256];
        snprintf(path, sizeof path, "%s.fifo", f);
        return result(mknodat(AT_FDCWD, path, S_IFIFO | 0600, 0));
    }
    case F_CHOWN_OTHER:
        return result(chown(f, 1234, (gid_t)-1));
    case F_CHOWN_OTHER_GID:
        return result(chown(f, (uid_t)-1, 1234));
    case F_LCHOWN_OTHER:
        return result(lchown(f, 1234, 1234));
    case F_FCHOWNAT_OTHER:
        return result(fchownat(AT_FDCWD, f, 1234, 1234, 0));
    case F_CHOWN_HIGH_WORD:
        return result(syscall(SYS_chown, f, (1UL << 32) | 1234, -1L));
    case F_CHOWN_SELF:
        return result(chown(f, getuid(), getgid()));
    case F_CHOWN_UNCHANGED:
        return result(chown(f, (uid_t)-1, (gid_t)-1));
    case F_OPENAT2: {
        struct open_how how = {.flags = O_RDONLY};
        long fd = syscall(SYS_openat2, AT_FDCWD, f, &how, sizeof how);
        if (fd >= 0)
            close((int)fd);
        return result(fd);
    }
    case F_SETXATTR_CAP: {
        static const char cap[20] = {0x01, 0x00, 0x00, 0x02}; /* VFS_CAP_REVISION_2, empty */
        return result(setxattr(f, "security.capability", cap, sizeof cap, 0));
    }
    case F_SETUID:
        return result(syscall(SYS_setuid, 1234));
    case F_SETRESUID:
        return result(syscall(SYS_setresuid, 1234, 1234, 1234));
    case F_SETFSUID:
        /* setfsuid reports failure only by keeping the old fsuid */
        syscall(SYS_setfsuid, 1234);
        return syscall(SYS_setfsuid, -1) == 1234 ? 0 : EPERM;
    case F_IO_URING: {
        char params[120] = {0};
        long fd = syscall(__NR_io_uring_setup, 1, params);
        if (fd >= 0)
            close((int)fd);
        return result(fd);
    }
    default:
        return -1;
    }
}

/* The probe on a fresh file of its own (mode 0644, ours), in a child, locked or not. Also
 * reports whether the file ended up with S_ISUID/S_ISGID or another owner. */
static int fs_probe_in_child(fprobe p, bool locked, bool *ret_tainted)
{
    char f[128];
    snprintf(f, sizeof f, "%s/f%d-%d", fsdir, p, locked);
    int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
    pid_t pid = fork_child(locked);
    if (pid == 0) {
        int r = fs_probe(p, f);
        _exit(r == -2 ? 254 : r);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 255);
    *ret_tainted = false;
    struct stat sb;
    const char *suffix[] = {"", ".new", ".node"};
    for (size_t i = 0; i < 3; i++) {
        char path[256];
        if (i == 1)
            snprintf(path, sizeof path, "%s.new%d", f, p);
        else
            snprintf(path, sizeof path, "%s%s", f, suffix[i]);
        if (lstat(path, &sb) == 0 &&
            ((sb.st_mode & (S_ISUID | S_ISGID)) || sb.st_uid != getuid() || sb.st_gid != getgid()))
            *ret_tainted = true;
    }
    return WEXITSTATUS(st) == 254 ? -2 : WEXITSTATUS(st);
}

static const struct {
    fprobe p;
    int locked;  /* the errno under the lock (0: allowed) */
    bool taints; /* unlocked, the probe leaves a file with privilege */
} fs_cases[] = {
    {F_CHMOD_SUID, EPERM, true},      {F_CHMOD_SGID, EPERM, true},
    {F_FCHMOD_SUID, EPERM, true},     {F_FCHMODAT_SUID, EPERM, true},
    {F_FCHMODAT2_SUID, EPERM, true},  {F_CHMOD_PLAIN, 0, false},
    {F_CHMOD_STICKY, 0, false},       {F_CHMOD_HIGH_BITS, EPERM, true},
    {F_OPEN_CREAT_SUID, EPERM, true}, {F_OPENAT_CREAT_SGID, EPERM, true},
    {F_CREAT_SUID, EPERM, true},      {F_TMPFILE_SUID, EPERM, false},
    {F_OPEN_CREAT_PLAIN, 0, false},   {F_OPEN_NOCREAT_SUID, 0, false},
    {F_MKNOD_SUID, EPERM, true},      {F_MKNODAT_FIFO, 0, false},
    {F_CHOWN_OTHER, EPERM, true},     {F_CHOWN_OTHER_GID, EPERM, true},
    {F_LCHOWN_OTHER, EPERM, true},    {F_FCHOWN_OTHER, EPERM, true},
    {F_FCHOWNAT_OTHER, EPERM, true},  {F_CHOWN_HIGH_WORD, EPERM, true},
    {F_CHOWN_SELF, 0, false},         {F_CHOWN_UNCHANGED, 0, false},
    {F_OPENAT2, ENOSYS, false},       {F_SETXATTR_CAP, EPERM, false},
    {F_SETUID, EPERM, false},         {F_SETRESUID, EPERM, false},
    {F_SETFSUID, EPERM, false},       {F_IO_URING, ENOSYS, false},
};

/* Every case in a child, locked or not, against what fs_cases expects of that mode. */
static void fs_run_cases(bool locked)
{
    if (geteuid() != 0)
        skip();
    for (size_t i = 0; i < ELEMENTSOF(fs_cases); i++) {
        fprobe p = fs_cases[i].p;
        bool tainted;
        int r = fs_probe_in_child(p, locked, &tainted);
        if (r == -2)
            continue; /* O_TMPFILE unsupported on this filesystem */
        if (locked) {
            if (r != fs_cases[i].locked)
                fail_msg("probe %d under the lock: got %s, want %s", p, r ? strerror(r) : "success",
                         strerror(fs_cases[i].locked));
            if (tainted)
                fail_msg("probe %d under the lock left a privileged file", p);
            continue;
        }
        if (p == F_SETXATTR_CAP || p == F_IO_URING)
            continue; /* may be off or unsupported here; the lock must refuse it regardless */
        if (r != 0)
            fail_msg("probe %d failed unlocked: %s", p, strerror(r));
        if (tainted != fs_cases[i].taints)
            fail_msg("probe %d unlocked: tainted %d", p, tainted);
    }
}

/* Root without the lock does all of it, so the refusals under the lock are the filter's. */
static void fs_unlocked_control(void **s)
{
    (void)s;
    fs_run_cases(false);
}

static void fs_locked_refuses(void **s)
{
    (void)s;
    fs_run_cases(true);
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
        cmocka_unit_test_setup_teardown(fs_unlocked_control, fs_setup, fs_teardown),
        cmocka_unit_test_setup_teardown(fs_locked_refuses, fs_setup, fs_teardown),
        cmocka_unit_test(guest_mounts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
