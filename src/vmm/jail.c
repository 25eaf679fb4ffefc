/* UML's view of the container: everything the guest may see through hostfs, nothing more.
 * See jail.h. */
#include "vmm/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "abi.h"
#include "util/macro.h"
#include "util/strv.h"
#include "util/xalloc.h"

/* Where the new root is assembled: on the exec tmpfs, the one place we may create a dir
 * (the container's root can be read-only). After the pivot it is an empty directory. */
#define JAIL_DIR ABI_MEM_DIR "/root"
/* ABI_MEM_DIR, the exec tmpfs: UML's memory file, pid file and log. Ours, never the guest's.
 * Everything under ABI_DIR is bluebox's (the VMM bundle, the guest init, the exec tmpfs).
 * data_limit: ABI_DATA_DISK, the /data disk image, which UML opens read-write as a block
 * device (ubd) and never as a guest mount. */

/* Never part of the guest's view: the kernel's API filesystems of the container. */
static const char *const hidden[] = {"/proc", "/sys", "/dev"};

static bool is_hidden(const char *mp)
{
    for (size_t i = 0; i < ELEMENTSOF(hidden); i++)
        if (path_within(mp, hidden[i]))
            return true;
    return path_within(mp, JAIL_DIR);
}

/* mountinfo writes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The per-mount flags a bind must carry over (in a user namespace they are locked: a
 * remount that drops one is refused, so all of them are kept). */
static unsigned long mount_flags(char *opts)
{
    static const struct {
        const char *name;
        unsigned long flag;
    } known[] = {
        {"ro", MS_RDONLY},         {"nosuid", MS_NOSUID},           {"nodev", MS_NODEV},
        {"noexec", MS_NOEXEC},     {"noatime", MS_NOATIME},         {"nodiratime", MS_NODIRATIME},
        {"relatime", MS_RELATIME}, {"strictatime", MS_STRICTATIME},
    };
    unsigned long flags = 0;
    char *save = NULL;
    for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
            if (streq(o, known[i].name))
                flags |= known[i].flag;
    return flags;
}

static int bind_as(const char *src, const char *dst, unsigned long flags)
{
    if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
        return -1;
    return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | flags, NULL);
}

/* UML's "null" channels (unused consoles and serial lines) open /dev/null by name: a /dev
 * of one node, the container's /dev/null, and nothing else of the container's /dev. */
static int dev_null(const char **what)
{
    *what = JAIL_DIR "/dev";
    if (mount("tmpfs", JAIL_DIR "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=16k") < 0)
        return -1;
    int fd = open(JAIL_DIR "/dev/null", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1;
    close(fd);
    *what = "/dev/null";
    return bind_as("/dev/null", JAIL_DIR "/dev/null", MS_NOSUID | MS_NOEXEC);
}

/* A qemu VMM using KVM also gets /dev/kvm (which bluebox passes into the container only then,
 * runtime/qemu.c); nothing else of /dev. */
static int dev_kvm(const char **what)
{
    *what = "/dev/kvm";
    int fd = open(JAIL_DIR "/dev/kvm", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return bind_as("/dev/kvm", JAIL_DIR "/dev/kvm", MS_NOSUID | MS_NOEXEC);
}

/* Files podman writes for the container itself: its hostname, and /etc/resolv.conf with
 * the host's resolvers and search domains (the VMM's libslirp reads it to forward the
 * guest's DNS). Not part of UML's view at all: the guest init writes its own. */
static const char *const podman_files[] = {"/etc/hostname", "/etc/hosts", "/etc/resolv.conf",
                                           "/run/.containerenv"};

static bool is_podman_file(const char *mp)
{
    for (size_t i = 0; i < ELEMENTSOF(podman_files); i++)
        if (streq(mp, podman_files[i]))
            return true;
    return false;
}

bool jail_guest_mount(const char *mp)
{
    if (streq(mp, "/") || is_hidden(mp) || path_within(mp, ABI_DIR) || is_podman_file(mp))
        return false;
    struct stat st;
    return stat(mp, &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode));
}

int jail_mounts_read(jail_mounts *ret)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        /* id parent major:minor root mount-point options ... */
        char *save = NULL, *field = strtok_r(line, " ", &save);
        for (int i = 1; field && i < 5; i++)
            field = strtok_r(NULL, " ", &save);
        char *opts = field ? strtok_r(NULL, " ", &save) : NULL;
        if (!field || !opts)
            continue;
        unescape(field);
        strv_add(&ret->points, field);
        ret->flags = xreallocarray(ret->flags, ret->n + 1, sizeof *ret->flags);
        ret->flags[ret->n++] = mount_flags(opts);
    }
    free(line);
    fclose(f);
    return 0;
}

void jail_mounts_clear(jail_mounts *m)
{
    strv_clear(&m->points);
    free(m->flags);
    *m = (jail_mounts){0};
}

/* What UML may write on the host: the guest's own hostfs mounts (/data, the Bluefile's rw
 * mounts) as the container has them, and the exec tmpfs. The container's root and every
 * other mount (podman's /etc files, all of /.bluebox but the exec tmpfs) are bound read-only, so
 * that not even guest root mounting hostfs by hand (`mount -t hostfs none /x -o /`) can write the
 * host disk. */
/* A build step (jail_build_mode): the file server writes the step's layer. */
static bool build_mode;

void jail_build_mode(void)
{
    build_mode = true;
}

static unsigned long jail_flags(const char *mp, unsigned long flags)
{
#ifdef BB_WEAKEN_JAIL
    /* bluebox-vmm-weak only (security/weaken, never installed): the container's flags as
     * they are, so the escape suite can show its root-disk check failing. */
    (void)mp;
    return flags;
#else
    if (jail_guest_mount(mp) || streq(mp, ABI_MEM_DIR) || streq(mp, ABI_DATA_DISK))
        return flags;
    return flags | MS_RDONLY;
#endif
}

static bool strv_has(const strv *v, const char *s)
{
    for (size_t i = 0; v && i < v->n; i++)
        if (streq(v->v[i], s))
            return true;
    return false;
}

static int jail_lock_uml(const char **what);

int jail_enter(const char **what, const strv *served, bool kvm)
{
    *what = "a mount namespace of its own";
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    *what = "the container's mounts";
    _cleanup_(jail_mounts_clearp) jail_mounts m = {0};
    if (jail_mounts_read(&m) < 0)
        return -1;
    *what = JAIL_DIR;
    if (mkdir(JAIL_DIR, 0700) < 0 && errno != EEXIST)
        return -1;
    /* The root first (mountinfo lists it first, but do not rely on it), then every mount on
     * it in the order they were made, so mounts on mounts land on top. */
    int r = 0;
    for (size_t i = 0; r == 0 && i < m.n; i++)
        if (streq(m.points.v[i], "/")) {
            *what = "the container's root";
            r = bind_as("/", JAIL_DIR, jail_flags("/", m.flags[i]));
        }
    if (r == 0)
        r = dev_null(what);
    if (r == 0 && kvm)
        r = dev_kvm(what);
    for (size_t i = 0; r == 0 && i < m.n; i++) {
        const char *p = m.points.v[i];
        if (streq(p, "/") || is_hidden(p) || is_podman_file(p) || strv_has(served, p))
            continue;
        _cleanup_free_ char *dst = xasprintf(JAIL_DIR "%s", p);
        *what = p;
        r = bind_as(p, dst, jail_flags(p, m.flags[i]));
    }
    if (r < 0)
        return -1;
    *what = "pivot_root";
    if (chdir(JAIL_DIR) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
        umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        return -1;
    return jail_lock_uml(what);
}

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
    /* A build step's file server (jail_build_mode) writes the image's owners and modes,
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

static int lock(const char **what, bool xattrs, bool owners)
{
    *what = "dropping CAP_SYS_ADMIN and CAP_SETPCAP";
    if (drop_caps() < 0)
        return -1;
    *what = "the seccomp filter";
    return install_filter(xattrs, owners);
}

int jail_lock(const char **what)
{
    return lock(what, false, false);
}

static int jail_lock_uml(const char **what)
{
    return lock(what, false, false);
}

/* A build step's server writes the step's owners, modes and setuid bits into its layer. */
int jail_lock_fsd(const char **what)
{
    return lock(what, true, build_mode);
}
