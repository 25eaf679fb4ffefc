/* The lock every process of bluebox-vmm takes before it touches what the guest controls:
 * the machine (vmm/jail.h), the VMM itself and the file server (src/fsd). See lockdown.h. */
#include "util/lockdown.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/macro.h"

static int drop_caps(void)
{
    static const int setup_caps[] = {CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SETPCAP}; /* SETPCAP last */
    for (size_t i = 0; i < ELEMENTSOF(setup_caps); i++)
        if (prctl(PR_CAPBSET_READ, setup_caps[i]) == 1 && prctl(PR_CAPBSET_DROP, setup_caps[i]) < 0)
            return -1;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    for (size_t i = 0; i < ELEMENTSOF(setup_caps); i++) {
        uint32_t bit = 1u << setup_caps[i]; /* all below 32 */
        d[0].effective &= ~bit;
        d[0].permitted &= ~bit;
        d[0].inheritable &= ~bit;
    }
    return (int)syscall(SYS_capset, &h, d);
}

#define NS_FLAGS                                                                                   \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |     \
     CLONE_NEWCGROUP)
#define RET_ERRNO(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
#define RET_ALLOW    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define REFUSE(nr)   BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), RET_ERRNO(EPERM)
/* The low 32 bits of argument i: x86_64 is little-endian, and uid_t, gid_t, mode_t and the
 * open flags are 32-bit (the kernel reads modes as umode_t, the low 16 bits of these). */
#define LD_ARG(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))

/* Modes that would make a host file run as its owner or group: refused whatever else they
 * hold. S_ISVTX and the permission bits stay the guest's business. */
#define PRIV_MODE (S_ISUID | S_ISGID)
/* The kernel's __O_TMPFILE bit (glibc's O_TMPFILE adds O_DIRECTORY to it). */
#define TMPFILE_BIT 020000000
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif

/* nr whose mode argument m carries PRIV_MODE: EPERM. Each of these blocks decides its
 * syscall for good (it ends in RET_ALLOW), because the accumulator no longer holds nr. */
#define MODE_ARG(nr, m)                                                                            \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), LD_ARG(m),                                    \
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PRIV_MODE, 0, 1), RET_ERRNO(EPERM), RET_ALLOW
/* The open family: the mode m counts only when the flags f create a file. */
#define CREATE_MODE(nr, f, m)                                                                      \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 6), LD_ARG(f),                                    \
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_CREAT | TMPFILE_BIT, 0, 3), LD_ARG(m),              \
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PRIV_MODE, 0, 1), RET_ERRNO(EPERM), RET_ALLOW
/* The chown family: the new owner u and group g each ours or -1 (unchanged). */
#define OWNER_ARGS(nr, u, g, uid, gid)                                                             \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 8), LD_ARG(u),                                    \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uid), 1, 0),                                          \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, UINT32_MAX, 0, 3), LD_ARG(g),                          \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (gid), 2, 0),                                          \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, UINT32_MAX, 1, 0), RET_ERRNO(EPERM), RET_ALLOW

/* Stacked on podman's filter, which lets the first group through because the container
 * started with CAP_SYS_ADMIN. Nothing of ours needs any of them after the pivot.
 *
 * The second group keeps host files from carrying privilege. hostfs performs the guest's
 * chmod, chown, create and mknod on the real host files as this process, which under root
 * podman is host root with CAP_CHOWN and CAP_FOWNER: a guest `chown 0:0; chmod 4755` in
 * /data or an rw mount would leave a setuid-root file on the host, and a chown could hand
 * a file to any host user. The guest kernel cannot be trusted to refuse (guest root loads
 * modules into it), so the host kernel refuses here, whatever UML asks:
 *   - setuid/setgid bits in chmod, in a created file's mode and in mknod: EPERM;
 *   - chown to any owner but this process's own uid and gid (or -1): EPERM. Under rootless
 *     podman those are the user's (or, strict, a subordinate) ids; under root podman, root;
 *     either way every host file stays inside the sandbox's own identity;
 *   - the set*id family: a process that could become another uid would create files owned
 *     by it. UML never changes its ids;
 *   - extended attributes: a security.capability xattr is file capabilities for whoever
 *     runs the file, and ACLs hand files to other users. hostfs has no xattr support;
 *   - openat2 (its mode is behind a pointer, out of a filter's reach): ENOSYS, so a caller
 *     falls back to openat; io_uring (its opens never pass this filter): ENOSYS. UML and
 *     bluebox-vmm use neither.
 * mkdir needs no rule: the kernel drops S_ISUID and S_ISGID from mkdir's mode, and a
 * directory's inherited S_ISGID needs a setgid parent, which these rules never make. */
static int install_filter(bool xattrs, bool owners)
{
#ifdef __x86_64__
    uint32_t uid = (uint32_t)getuid(), gid = (uint32_t)getgid();
    /* The file server (src/fsd) keeps the guest's ownership in user xattrs: for it the
     * *setxattr rules match no syscall. Without CAP_SYS_ADMIN and CAP_SETFCAP (the launch's
     * six have neither) only user.* and ACL names are writable at all, and the server
     * writes nothing but user.bluebox.* names it builds itself. */
#define XATTR_NR(nr) (xattrs ? UINT32_MAX : (uint32_t)(nr))
    /* A build step's file server (`owners`) writes the image's owners and modes,
     * setuid programs included, into the step's layer: the container's root, which is in
     * container storage. */
#define OWN_NR(nr) (owners ? UINT32_MAX : (uint32_t)(nr))
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        RET_ERRNO(EPERM),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
        RET_ERRNO(EPERM),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1), /* flags out of reach */
        RET_ERRNO(ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat2, 0, 1), /* mode out of reach */
        RET_ERRNO(ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __NR_io_uring_setup, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, __NR_io_uring_register, 1, 0),
        RET_ERRNO(ENOSYS),
        REFUSE(__NR_mount),
        REFUSE(__NR_umount2),
        REFUSE(__NR_pivot_root),
        REFUSE(__NR_chroot),
        REFUSE(__NR_unshare),
        REFUSE(__NR_setns),
        REFUSE(__NR_fsopen),
        REFUSE(__NR_fsconfig),
        REFUSE(__NR_fsmount),
        REFUSE(__NR_fspick),
        REFUSE(__NR_move_mount),
        REFUSE(__NR_open_tree),
        REFUSE(__NR_mount_setattr),
        REFUSE(__NR_bpf),
        REFUSE(__NR_perf_event_open),
        REFUSE(__NR_userfaultfd),
        REFUSE(__NR_keyctl),
        REFUSE(__NR_add_key),
        REFUSE(__NR_request_key),
        REFUSE(__NR_init_module),
        REFUSE(__NR_finit_module),
        REFUSE(__NR_delete_module),
        REFUSE(__NR_kexec_load),
        REFUSE(__NR_kexec_file_load),
        REFUSE(__NR_quotactl),
        REFUSE(__NR_syslog),
        /* Host files carry no privilege (see above). */
        REFUSE(__NR_setuid),
        REFUSE(__NR_setgid),
        REFUSE(__NR_setreuid),
        REFUSE(__NR_setregid),
        REFUSE(__NR_setresuid),
        REFUSE(__NR_setresgid),
        REFUSE(__NR_setfsuid),
        REFUSE(__NR_setfsgid),
        REFUSE(__NR_setgroups),
        REFUSE(XATTR_NR(__NR_setxattr)),
        REFUSE(XATTR_NR(__NR_lsetxattr)),
        REFUSE(XATTR_NR(__NR_fsetxattr)),
        REFUSE(XATTR_NR(__NR_setxattrat)),
        REFUSE(XATTR_NR(__NR_removexattr)),
        REFUSE(XATTR_NR(__NR_lremovexattr)),
        REFUSE(XATTR_NR(__NR_fremovexattr)),
        REFUSE(XATTR_NR(__NR_removexattrat)),
        MODE_ARG(OWN_NR(__NR_chmod), 1),
        MODE_ARG(OWN_NR(__NR_fchmod), 1),
        MODE_ARG(OWN_NR(__NR_fchmodat), 2),
        MODE_ARG(OWN_NR(__NR_fchmodat2), 2),
        MODE_ARG(OWN_NR(__NR_creat), 1),
        MODE_ARG(OWN_NR(__NR_mknod), 1),
        MODE_ARG(OWN_NR(__NR_mknodat), 2),
        CREATE_MODE(OWN_NR(__NR_open), 1, 2),
        CREATE_MODE(OWN_NR(__NR_openat), 2, 3),
        OWNER_ARGS(OWN_NR(__NR_chown), 1, 2, uid, gid),
        OWNER_ARGS(OWN_NR(__NR_fchown), 1, 2, uid, gid),
        OWNER_ARGS(OWN_NR(__NR_lchown), 1, 2, uid, gid),
        OWNER_ARGS(OWN_NR(__NR_fchownat), 2, 3, uid, gid),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        LD_ARG(0),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NS_FLAGS, 0, 1),
        RET_ERRNO(EPERM),
        RET_ALLOW,
    };
#undef XATTR_NR
#undef OWN_NR
    struct sock_fprog prog = {.len = ELEMENTSOF(f), .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
#else
    errno = ENOSYS; /* bluebox-vmm is built for x86_64 only */
    return -1;
#endif
}

int lockdown(const char **what, bool xattrs, bool owners)
{
    *what = "dropping CAP_SYS_ADMIN and CAP_SETPCAP";
    if (drop_caps() < 0)
        return -1;
    *what = "the seccomp filter";
    return install_filter(xattrs, owners);
}
