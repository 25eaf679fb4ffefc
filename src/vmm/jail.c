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

#include "abi/abi.h"
#include "util/lockdown.h"
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
 * backends/qemu.c); nothing else of /dev. */
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

int jail_lock(const char **what)
{
    return lockdown(what, false, false);
}

static int jail_lock_uml(const char **what)
{
    return lockdown(what, false, false);
}
