/* The uml guest's root filesystem. The kernel boots with the container's filesystem as its
 * root through hostfs; the jail (src/vmm/jail.c) gives UML that root read-only. Guest init
 * turns it into a machine of its own: the image read-only under a writable layer in guest
 * RAM (overlayfs over a tmpfs), so that every user can write /, /tmp, /home, /var, /root
 * as on a real machine and none of it reaches the host disk; then /data and the Bluefile's
 * mounts as hostfs mounts of their own (the only paths whose writes reach the host), and
 * bluebox-written /etc/hosts, /etc/hostname and /etc/resolv.conf instead of podman's. With
 * `readonly: true` the root stays read-only (a read-only overlay: our /etc files over the
 * image, no writable layer) and only /tmp is a tmpfs. */
#include "root.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "abi/abi.h"
#include "bootmark.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* The exec tmpfs of the container: a directory that exists in every uml container, used
 * only as a mount point. After the switch it is out of reach under the new root. */
#define LAYER_DIR ABI_MEM_DIR
#define UPPER_DIR LAYER_DIR "/upper"
#define WORK_DIR  LAYER_DIR "/work"
#define NEW_ROOT  LAYER_DIR "/root"
#define ETC_LAYER LAYER_DIR "/etc-layer"
/* In every uml container (the exec tmpfs): a mount point for a moment, in the new root. */
#define SCRATCH_DIR ABI_MEM_DIR
/* The RAM layer (and a read-only root's /tmp) may take up to half of the guest's memory
 * (ram_mib): tmpfs pages are the guest's own RAM, so a run that fills it gets ENOSPC and the
 * guest keeps the other half for its programs. The host never sees a byte of it. */
#define LAYER_SIZE "size=50%"
#define LOCALHOSTS "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

/* The kernel filesystems init mounted on the boot root, moved into the new one. */
static const char *const moved[] = {"/dev", "/proc", "/sys"};

/* qemu: where the container's root is mounted in the initramfs (guest_root_qemu). */
#define QEMU_LOWER "/.bluebox-root"
static bool qemu_guest;

bool guest_root_is_qemu(void)
{
    return qemu_guest;
}

/* A kernel module of the VMM bundle (src/backends/uml_bundle.c puts them there), or on qemu of
 * the initramfs (src/backends/uml_bundle.c). */
static int load_module(const char *name, bb_error **err)
{
    _cleanup_free_ char *path =
        xasprintf("%s/%s", qemu_guest ? ABI_QEMU_MODULE_DIR : ABI_VMM_DIR, name);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno,
                             "cannot open %s (the VMM bundle is older than this bluebox; "
                             "run the command again to rebuild it)",
                             path);
    if (syscall(SYS_finit_module, fd, "", 0) == 0 || errno == EEXIST)
        return 0;
    int e = errno;
    struct utsname u;
    if (e == ENOEXEC)
        return bb_fail(err, e,
                       "%s was not built for this guest kernel (%s); install matching "
                       "kernel and modules",
                       path, uname(&u) == 0 ? u.release : "?");
    return bb_fail_errno(err, e, "cannot load %s", path);
}

static int bind_ro(const char *src, const char *dst)
{
    if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
        return -1;
    return mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

static int mkdir_in(const char *dir, bb_error **err)
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return bb_fail_errno(err, errno, "cannot create %s", dir);
    return 0;
}

/* bluebox's /etc files. podman's copies carry the host's details (its /etc/hosts entries,
 * its resolvers and search domains): the launch asks for no /etc/hosts (--no-hosts), the
 * jail leaves podman's other files out of UML's view, and the guest gets these. */
typedef struct etc_file {
    const char *name;
    char *text;
} etc_file;

static void etc_files(const launch_spec *spec, const char *nameserver, etc_file ret[3])
{
    ret[0] = (etc_file){"hosts", spec->hostname[0]
                                     ? xasprintf(LOCALHOSTS "127.0.1.1\t%s\n", spec->hostname)
                                     : xstrdup(LOCALHOSTS)};
    ret[1] = (etc_file){"resolv.conf", nameserver ? xasprintf("nameserver %s\n", nameserver)
                                                  : xstrdup("# network: none\n")};
    ret[2] = (etc_file){"hostname", xasprintf("%s\n", spec->hostname)};
}

static int write_new(int dirfd, const char *name, const char *text, bb_error **err)
{
    _cleanup_close_ int fd =
        openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot write /etc/%s", name);
    _cleanup_free_ char *what = xasprintf("/etc/%s", name);
    return write_full(fd, text, strlen(text), what, err);
}

/* On the RAM layer: replace what the image has (the guest may edit them afterwards). */
static int put_etc(const etc_file files[3], bb_error **err)
{
    mkdir("/etc", 0755);
    _cleanup_close_ int etc = open("/etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (etc < 0)
        return bb_fail_errno(err, errno, "cannot open /etc");
    for (size_t i = 0; i < 3; i++) {
        if (unlinkat(etc, files[i].name, 0) < 0 && errno != ENOENT)
            return bb_fail_errno(err, errno, "cannot replace /etc/%s", files[i].name);
        if (write_new(etc, files[i].name, files[i].text, err) < 0)
            return -1;
    }
    return 0;
}

/* For a read-only root: the files in ETC_LAYER/etc, the top layer of a read-only overlay. */
static int put_etc_layer(const etc_file files[3], bb_error **err)
{
    if (mkdir_in(ETC_LAYER, err) < 0 || mkdir_in(ETC_LAYER "/etc", err) < 0)
        return -1;
    _cleanup_close_ int etc = open(ETC_LAYER "/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (etc < 0)
        return bb_fail_errno(err, errno, "cannot open %s/etc", ETC_LAYER);
    for (size_t i = 0; i < 3; i++)
        if (write_new(etc, files[i].name, files[i].text, err) < 0)
            return -1;
    return 0;
}

/* NEW_ROOT: the image under a RAM layer; or (readonly) a read-only overlay of our /etc
 * files over the image, with no writable layer at all. */
static int assemble(bool readonly, const etc_file files[3], bb_error **err)
{
    if (mount("tmpfs", LAYER_DIR, "tmpfs", 0,
              readonly ? "size=1m,mode=0755" : LAYER_SIZE ",mode=0755") < 0)
        return bb_fail_errno(err, errno, "cannot mount the RAM layer on %s", LAYER_DIR);
    if (mkdir_in(NEW_ROOT, err) < 0 || load_module(ABI_VMM_OVERLAY, err) < 0)
        return -1;
    const char *lower = qemu_guest ? QEMU_LOWER : "/";
    if (readonly) {
        if (put_etc_layer(files, err) < 0)
            return -1;
        _cleanup_free_ char *opts = xasprintf("lowerdir=" ETC_LAYER ":%s", lower);
        if (mount("overlay", NEW_ROOT, "overlay", MS_RDONLY, opts) < 0)
            return bb_fail_errno(err, errno, "cannot mount the read-only root (overlay)");
        return 0;
    }
    if (mkdir_in(UPPER_DIR, err) < 0 || mkdir_in(WORK_DIR, err) < 0)
        return -1;
    _cleanup_free_ char *opts =
        xasprintf("lowerdir=%s,upperdir=" UPPER_DIR ",workdir=" WORK_DIR, lower);
    if (mount("overlay", NEW_ROOT, "overlay", 0, opts) < 0)
        return bb_fail_errno(err, errno, "cannot mount the root's RAM layer (overlay)");
    return 0;
}

/* qemu: bluebox's own directory in the new root is a small read-only tmpfs holding the
 * static bluebox (the initramfs's /init, bound read-only: the agent and the probe run it)
 * and the scratch mount point; nothing of the container's /.bluebox reaches the guest. */
static int qemu_own(bb_error **err)
{
    const char *own = NEW_ROOT ABI_DIR, *bin = NEW_ROOT ABI_GUEST_BINARY;
    (void)mkdir(own, 0755); /* in the image's root already, as a rule: podman made it */
    if (mount("tmpfs", own, "tmpfs", MS_NOSUID | MS_NODEV, "size=16k,mode=0755") < 0)
        return bb_fail_errno(err, errno, "cannot mount %s", ABI_DIR);
    int fd = open(bin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", ABI_GUEST_BINARY);
    close(fd);
    if (mkdir_in(NEW_ROOT SCRATCH_DIR, err) < 0)
        return -1;
    if (bind_ro("/init", bin) < 0 ||
        mount(NULL, own, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        return bb_fail_errno(err, errno, "cannot make %s read-only", ABI_DIR);
    return 0;
}

/* Whether QEMU gave the guest a network device (virtio device id 1; vmm/qemu_argv.h): only then
 * is its driver worth loading, which costs a boot under TCG a little. */
static bool virtio_net_present(void)
{
    _cleanup_closedir_ DIR *d = opendir("/sys/bus/virtio/devices");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *path = xasprintf("/sys/bus/virtio/devices/%s/device", e->d_name);
        char id[16] = "";
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (f && fgets(id, sizeof id, f) && strtoul(id, NULL, 16) == 1)
            return true;
    }
    return false;
}

static int load_modules(const char *const *modules, size_t n, bb_error **err)
{
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *name = xasprintf("%s.ko", modules[i]);
        if (load_module(name, err) < 0)
            return -1;
    }
    return 0;
}

int guest_root_qemu(bb_error **err)
{
    qemu_guest = true;
    static const char *const modules[] = ABI_QEMU_MODULES;
    static const char *const net_modules[] = ABI_QEMU_NET_MODULES;
    if (load_modules(modules, ELEMENTSOF(modules), err) < 0 ||
        (virtio_net_present() && load_modules(net_modules, ELEMENTSOF(net_modules), err) < 0))
        return -1;
    if (mkdir_in(QEMU_LOWER, err) < 0 || mkdir_p(LAYER_DIR, 0755, err) < 0)
        return -1;
    if (mount(ABI_QEMU_ROOT_TAG, QEMU_LOWER, "virtiofs", MS_RDONLY | MS_NODEV, NULL) < 0)
        return bb_fail_errno(err, errno, "cannot mount the container's root (virtio-fs %s)",
                             ABI_QEMU_ROOT_TAG);
    return 0;
}

/* As switch_root does: the kernel filesystems move along, the new root moves onto /, and
 * init chroots into it (every process it starts inherits that root). */
static int switch_into(bb_error **err)
{
    for (size_t i = 0; i < ELEMENTSOF(moved); i++) {
        _cleanup_free_ char *dst = xasprintf(NEW_ROOT "%s", moved[i]);
        mkdir(dst, 0755); /* in the image already, as a rule */
        if (mount(moved[i], dst, NULL, MS_MOVE, NULL) < 0)
            return bb_fail_errno(err, errno, "cannot move %s into the new root", moved[i]);
    }
    if (chdir(NEW_ROOT) < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 ||
        chdir("/") < 0)
        return bb_fail_errno(err, errno, "cannot switch into the new root");
    return 0;
}

static unsigned long mount_flags(const spec_mount *m)
{
    return (m->flags & SPEC_MOUNT_RO ? MS_RDONLY : 0) |
           (m->flags & SPEC_MOUNT_NOSUID ? MS_NOSUID : 0) |
           (m->flags & SPEC_MOUNT_NODEV ? MS_NODEV : 0) |
           (m->flags & SPEC_MOUNT_NOEXEC ? MS_NOEXEC : 0);
}

/* The mount point of a single file (in the image already, or made here on a scratch tmpfs);
 * returns its parent directory. */
static char *file_mount_point(const spec_mount *m)
{
    const char *slash = strrchr(m->path, '/');
    char *parent = slash == m->path ? xstrdup("/") : xstrndup(m->path, (size_t)(slash - m->path));
    (void)mkdir_p(parent, 0755, NULL);
    int fd = open(m->path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    return parent;
}

/* With the file's directory mounted on SCRATCH_DIR for a moment: the file bound from there
 * onto its mount point with the mount's flags, and the directory let go. */
static int bind_from_scratch(const spec_mount *m, bb_error **err)
{
    _cleanup_free_ char *src = xasprintf(SCRATCH_DIR "/%s", strrchr(m->path, '/') + 1);
    int r = mount(src, m->path, NULL, MS_BIND, NULL);
    if (r == 0)
        r = mount(NULL, m->path, NULL, MS_BIND | MS_REMOUNT | mount_flags(m), NULL);
    int e = errno;
    umount2(SCRATCH_DIR, MNT_DETACH);
    if (r < 0)
        return bb_fail_errno(err, e, "cannot mount %s", m->path);
    return 0;
}

/* A single file mounted from the host: hostfs mounts directories only, so its parent is
 * mounted for a moment on SCRATCH_DIR and the file bound from there. hostfs opens the host
 * path, which in the jail is the file's own mount, writable only when declared rw. */
static int file_mount(const spec_mount *m, bb_error **err)
{
    _cleanup_free_ char *parent = file_mount_point(m);
    if (mount("none", SCRATCH_DIR, "hostfs", MS_NOSUID | MS_NODEV, parent) < 0)
        return bb_fail_errno(err, errno, "cannot mount %s", m->path);
    return bind_from_scratch(m, err);
}

static int hostfs_mount(const spec_mount *m, bb_error **err)
{
    unsigned long flags = mount_flags(m);
    if (m->flags & SPEC_MOUNT_FILE)
        return file_mount(m, err);
    /* podman made the mount point in the container's root already; under a read-only
     * root's scratch tmpfs it is made here. */
    (void)mkdir_p(m->path, 0755, NULL);
    /* hostfs takes the host path as its data: the container path, which the jail keeps. */
    if (mount("none", m->path, "hostfs", flags, m->path) < 0)
        return bb_fail_errno(err, errno, "cannot mount %s", m->path);
    return 0;
}

/* bluebox's own files (the guest init and agent, the VMM bundle) stay read-only in the
 * guest too, not copies on the RAM layer a workload could change for later execs: a
 * read-only hostfs mount of /.bluebox, which the jail also binds read-only on the host. */
static int mount_own(bb_error **err)
{
    if (qemu_guest)
        return 0; /* qemu_own did it before the switch */
    if (mount("none", ABI_DIR, "hostfs", MS_RDONLY | MS_NOSUID | MS_NODEV, ABI_DIR) < 0)
        return bb_fail_errno(err, errno, "cannot mount %s", ABI_DIR);
    return 0;
}

/* qemu: a single file from the file server, the one entry of the k-th export (a directory
 * bluebox-vmm stages for it, vmm/exports.c stage_file): that export on SCRATCH_DIR for a moment and
 * the entry bound from there, as file_mount does from hostfs. */
static int fs_file_mount(const spec_mount *m, const char *tag, bb_error **err)
{
    free(file_mount_point(m));
    if (mount(tag, SCRATCH_DIR, "virtiofs",
              MS_NOSUID | MS_NODEV | (m->flags & SPEC_MOUNT_RO ? MS_RDONLY : 0), NULL) < 0)
        return bb_fail_errno(err, errno, "cannot mount %s (virtio-fs %s)", m->path, tag);
    return bind_from_scratch(m, err);
}

/* A writable directory from the file server (src/fsd): virtio-fs, the k-th device. The
 * server keeps the ownership and modes the guest sets, for every user, across runs. */
static int fs_mount(const spec_mount *m, size_t k, bb_error **err)
{
    char tag[32];
    snprintf(tag, sizeof tag, SPEC_FS_TAG "%zu", k);
    if (m->flags & SPEC_MOUNT_FILE)
        return fs_file_mount(m, tag, err);
    (void)mkdir_p(m->path, 0755, NULL);
    if (mount(tag, m->path, "virtiofs", mount_flags(m), NULL) < 0)
        return bb_fail_errno(err, errno, "cannot mount %s (virtio-fs %s)", m->path, tag);
    return 0;
}

/* A fork's /data: an overlay the guest kernel makes of the parent's /data
 * (ABI_FORK_LOWER, served read-only) under the fork's own layers (served on /data: upper/
 * and work/). The two virtio-fs mounts are made on a scratch tmpfs and detached once the
 * overlay holds them, so the workload sees the overlay alone. Plain whiteouts, no redirects
 * and no metacopy: the upper layer stays what the host's diff and apply read (data/fork.h). */
#define FORK_LOWER  SCRATCH_DIR "/lower"
#define FORK_LAYERS SCRATCH_DIR "/layers"
#define FORK_OVERLAY_OPTS                                                                          \
    "lowerdir=" FORK_LOWER ",upperdir=" FORK_LAYERS "/upper,workdir=" FORK_LAYERS                  \
    "/work,redirect_dir=off,index=off,metacopy=off,xino=off"

static int fork_mount(const spec_mount *data, size_t data_k, size_t lower_k, bb_error **err)
{
    char tag[32];
    if (mount("tmpfs", SCRATCH_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=16k,mode=0700") < 0 ||
        mkdir(FORK_LOWER, 0700) < 0 || mkdir(FORK_LAYERS, 0700) < 0)
        return bb_fail_errno(err, errno, "cannot prepare the fork's /data");
    snprintf(tag, sizeof tag, SPEC_FS_TAG "%zu", lower_k);
    int r = mount(tag, FORK_LOWER, "virtiofs", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
    const char *what = "the parent's /data";
    if (r == 0) {
        snprintf(tag, sizeof tag, SPEC_FS_TAG "%zu", data_k);
        r = mount(tag, FORK_LAYERS, "virtiofs", MS_NOSUID | MS_NODEV, NULL);
        what = "the fork's layers";
    }
    if (r == 0) {
        (void)mkdir_p(data->path, 0755, NULL);
        r = mount("overlay", data->path, "overlay", mount_flags(data), FORK_OVERLAY_OPTS);
        what = "the overlay";
    }
    int e = errno;
    umount2(SCRATCH_DIR, MNT_DETACH);
    if (r < 0)
        return bb_fail_errno(err, e, "cannot mount the fork's /data (%s)", what);
    return 0;
}

/* The index among the served mounts of the fork's lower layer, or -1 for no fork. */
static ssize_t fork_lower_index(const launch_spec *spec)
{
    size_t k = 0;
    for (size_t i = 0; i < spec->n_mounts; i++) {
        if (!(spec->mounts[i].flags & SPEC_MOUNT_FS))
            continue;
        if (streq(spec->mounts[i].path, ABI_FORK_LOWER))
            return (ssize_t)k;
        k++;
    }
    return -1;
}

static int mount_shared(const launch_spec *spec, bb_error **err)
{
    size_t k = 0;
    for (size_t i = 0; !qemu_guest && i < spec->n_mounts; i++) /* qemu: loaded at boot */
        if ((spec->mounts[i].flags & SPEC_MOUNT_FS) && k++ == 0 &&
            (load_module(ABI_VMM_FUSE, err) < 0 || load_module(ABI_VMM_VIRTIOFS, err) < 0))
            return -1;
    ssize_t lower = fork_lower_index(spec);
    k = 0;
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const spec_mount *m = &spec->mounts[i];
        if (streq(m->path, ABI_FORK_LOWER)) {
            k++; /* mounted with /data */
            continue;
        }
        if (lower >= 0 && streq(m->path, "/data") && (m->flags & SPEC_MOUNT_FS)) {
            if (fork_mount(m, k++, (size_t)lower, err) < 0)
                return -1;
            continue;
        }
        if ((m->flags & SPEC_MOUNT_FS ? fs_mount(m, k++, err) : hostfs_mount(m, err)) < 0)
            return -1;
    }
    return 0;
}

/* A read-only root still has a writable /tmp, /run and /var/tmp, as podman --read-only
 * gives a container: tmpfs in guest RAM. */
static int scratch_dirs(bb_error **err)
{
    static const char *const dirs[] = {"/tmp", "/run", "/var/tmp"};
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        struct stat st;
        if (lstat(dirs[i], &st) < 0 || !S_ISDIR(st.st_mode))
            continue; /* a read-only root cannot gain one */
        if (mount("tmpfs", dirs[i], "tmpfs", MS_NOSUID | MS_NODEV, LAYER_SIZE ",mode=1777") < 0)
            return bb_fail_errno(err, errno, "cannot mount a tmpfs on %s", dirs[i]);
    }
    return 0;
}

/* A step's result, the step marked for the boot profile (init.h). */
static bool failed(int r, const char *step)
{
    guest_boot_mark(step);
    return r < 0;
}

/* A build step (SPEC_ROOT_BUILD): the container's root, the step's layer, served written
 * with its real owners by the file server (virtio-fs ABI_QEMU_ROOT_TAG, vmm/exports.c exports_fill)
 * becomes the root, so that what the step writes keeps the owners, modes, setuid bits and
 * file capabilities it set (hostfs made every new file UML's uid's and has no xattrs).
 * bluebox's /etc files are bound over the image's from the tmpfs on LAYER_DIR, so that none
 * of them is written into the image; one the image lacks is made empty, as podman build
 * makes it. */
static int build_root(const etc_file files[3], bb_error **err)
{
    if (mount("tmpfs", LAYER_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755") <
        0)
        return bb_fail_errno(err, errno, "cannot mount a tmpfs on %s", LAYER_DIR);
    if (mkdir_in(NEW_ROOT, err) < 0)
        return -1;
    if (qemu_guest) {
        /* Mounted read-only at boot (guest_root_qemu); the server writes this export. */
        if (mount(NULL, QEMU_LOWER, NULL, MS_REMOUNT | MS_NODEV, NULL) < 0 ||
            mount(QEMU_LOWER, NEW_ROOT, NULL, MS_MOVE, NULL) < 0)
            return bb_fail_errno(err, errno, "cannot make the step's root writable (virtio-fs %s)",
                                 ABI_QEMU_ROOT_TAG);
    } else if (load_module(ABI_VMM_FUSE, err) < 0 || load_module(ABI_VMM_VIRTIOFS, err) < 0) {
        return -1;
    } else if (mount(ABI_QEMU_ROOT_TAG, NEW_ROOT, "virtiofs", MS_NODEV, NULL) < 0) {
        return bb_fail_errno(err, errno, "cannot mount the step's root (virtio-fs %s)",
                             ABI_QEMU_ROOT_TAG);
    }
    _cleanup_close_ int dir = open(LAYER_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return bb_fail_errno(err, errno, "cannot open %s", LAYER_DIR);
    for (size_t i = 0; i < 3; i++) {
        _cleanup_free_ char *src = xasprintf(LAYER_DIR "/%s", files[i].name);
        _cleanup_free_ char *dst = xasprintf(NEW_ROOT "/etc/%s", files[i].name);
        struct stat st;
        if (lstat(dst, &st) < 0) {
            int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (fd < 0)
                continue; /* no /etc: nothing to bind over */
            close(fd);
        } else if (!S_ISREG(st.st_mode)) {
            continue; /* a symlink (systemd-resolved's, say) stays the image's */
        }
        if (write_new(dir, files[i].name, files[i].text, err) < 0)
            return -1;
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
            return bb_fail_errno(err, errno, "cannot mount over /etc/%s", files[i].name);
    }
    return 0;
}

int guest_root_setup(const launch_spec *spec, const char *nameserver, bb_error **err)
{
    if (spec->root_flags & SPEC_ROOT_BUILD) {
        etc_file files[3];
        etc_files(spec, nameserver, files);
        int r = build_root(files, err) < 0 || (qemu_guest && qemu_own(err) < 0) ||
                        switch_into(err) < 0 || mount_own(err) < 0 || mount_shared(spec, err) < 0
                    ? -1
                    : 0;
        for (size_t i = 0; i < 3; i++)
            free(files[i].text);
        return r;
    }
    bool readonly = spec->root_flags & SPEC_ROOT_RO;
    etc_file files[3];
    etc_files(spec, nameserver, files);
    /* A read-only root's scratch tmpfs first: the container had podman's there, and the
     * shared mounts (a mount under /tmp, say) go on top of them as they did. */
    int r = failed(assemble(readonly, files, err), "root overlay") ||
                    (qemu_guest && qemu_own(err) < 0) || switch_into(err) < 0 ||
                    (readonly && scratch_dirs(err) < 0) || mount_own(err) < 0 ||
                    failed(mount_shared(spec, err), "shared mounts") ||
                    (!readonly && put_etc(files, err) < 0)
                ? -1
                : 0;
    for (size_t i = 0; i < 3; i++)
        free(files[i].text);
    return r;
}
