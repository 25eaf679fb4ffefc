/* nosuid: exec a program (diod) under a seccomp filter that refuses (EPERM) every call that
 * would leave a setuid/setgid bit or an xattr (file capabilities) on the host:
 * chmod/fchmod/fchmodat/fchmodat2, open/openat/creat, mknod/mknodat with S_ISUID|S_ISGID in
 * the mode; every *setxattr. openat2 and io_uring_setup: ENOSYS (mode behind a pointer /
 * opens that bypass seccomp). Same rules as bluebox's VMM filter (src/vmm/jail.c) minus the
 * chown and set*id rules, which a server doing real ownership needs. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>

#define ARG(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define NR offsetof(struct seccomp_data, nr)
#define DENY_IF_SUID(nr, argn) \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 3), \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG(argn)), \
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 06000, 0, 1), \
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM), \
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR)
#define RET_IF(nr, ret) \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1), BPF_STMT(BPF_RET | BPF_K, ret)

int main(int argc, char **argv)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        DENY_IF_SUID(SYS_chmod, 1), DENY_IF_SUID(SYS_fchmod, 1), DENY_IF_SUID(SYS_fchmodat, 2),
        DENY_IF_SUID(452 /* fchmodat2 */, 2), DENY_IF_SUID(SYS_open, 2), DENY_IF_SUID(SYS_openat, 3),
        DENY_IF_SUID(SYS_creat, 1), DENY_IF_SUID(SYS_mknod, 1), DENY_IF_SUID(SYS_mknodat, 2),
        RET_IF(SYS_setxattr, SECCOMP_RET_ERRNO | EPERM), RET_IF(SYS_lsetxattr, SECCOMP_RET_ERRNO | EPERM),
        RET_IF(SYS_fsetxattr, SECCOMP_RET_ERRNO | EPERM),
        RET_IF(SYS_openat2, SECCOMP_RET_ERRNO | ENOSYS), RET_IF(SYS_io_uring_setup, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (argc < 2) return fprintf(stderr, "usage: nosuid PROG ARGS...\n"), 2;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
        return perror("seccomp"), 1;
    execvp(argv[1], argv + 1);
    perror("exec");
    return 127;
}
