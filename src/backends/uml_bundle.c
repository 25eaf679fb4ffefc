/* The uml VMM bundle (see uml_bundle.h): find the inputs, name the bundle after their stat
 * data, and build it once in a temporary directory that is renamed into place. */
#include "uml_bundle.h"
#include "qemu_bundle.h"

#include <archive.h>
#include <dirent.h>
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/home.h"
#include "util/elf.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* Bump when the bundle's layout or contents change in a way old bundles lack. */
#define BUNDLE_FORMAT      "bluebox-uml-bundle-3"
#define QEMU_BUNDLE_FORMAT "bluebox-qemu-bundle-1"
#define MAX_LIBS           128
#define STALE_TMP_SEC      3600

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__riscv) && __riscv_xlen == 64
#define MULTIARCH "riscv64-linux-gnu"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MULTIARCH "powerpc64le-linux-gnu"
#elif defined(__s390x__)
#define MULTIARCH "s390x-linux-gnu"
#else
#error "unknown multiarch triplet"
#endif

static const char *const lib_dirs[] = {
    "/lib/" MULTIARCH, "/usr/lib/" MULTIARCH, "/lib64", "/usr/lib64", "/lib", "/usr/lib",
};

/* Names the bundle uses for its own files; a library called so would overwrite one. */
static const char *const reserved[] = {ABI_VMM_KERNEL,  "ld.so",      "bluebox-vmm",
                                       ABI_VMM_OVERLAY, ABI_VMM_FUSE, ABI_VMM_VIRTIOFS,
                                       ABI_VMM_XSTATE,  ABI_VMM_UNAME};

/* Debian's user-mode-linux keeps the kernel's modules in <dir>/<release>/. The guest init
 * loads these from the bundle: overlay for its RAM layer, fuse and virtiofs (in that
 * order: virtiofs needs fuse) for /data and rw mounts served by the file server. None
 * has other dependencies. */
typedef struct guest_module {
    const char *name; /* in the bundle */
    const char *rel;  /* under <dir>/<release>/ */
    const char *what; /* what the guest needs it for, in errors */
} guest_module;

static const guest_module guest_modules[] = {
    {ABI_VMM_OVERLAY, "kernel/fs/overlayfs/overlay.ko", "the guest's RAM layer"},
    {ABI_VMM_FUSE, "kernel/fs/fuse/fuse.ko", "/data and rw mounts"},
    {ABI_VMM_VIRTIOFS, "kernel/fs/fuse/virtiofs.ko", "/data and rw mounts"},
};
#define MODINFO_MAX (64u << 20)

typedef struct input {
    char *name; /* file name in the bundle (qemu's initramfs: the name in the archive) */
    char *src;  /* host path it is copied from */
    struct stat st;
    mode_t mode;
    bool set_interp;
    bool in_initrd; /* qemu: packed into ABI_QEMU_INITRD, not copied */
} input;

typedef struct plan {
    input *v;
    size_t n;
    uint64_t hash;
    bool qemu; /* a qemu bundle (qemu_bundle.h), not uml's */
} plan;

static void plan_clear(plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].name);
        free(p->v[i].src);
    }
    free(p->v);
    *p = (plan){0};
}

static inline void plan_clearp(plan *p)
{
    plan_clear(p);
}

const char *uml_kernel_path(void)
{
    const char *k = getenv("BLUEBOX_UML_KERNEL");
    return k && *k ? k : "/usr/bin/linux.uml";
}

/* $BLUEBOX_UML_MODULES or /usr/lib/uml/modules: <release>/kernel/... of the kernel. */
static const char *uml_modules_dir(void)
{
    const char *d = getenv("BLUEBOX_UML_MODULES");
    return d && *d ? d : "/usr/lib/uml/modules";
}

/* Whether the file holds `needle` (bounded read; only when building or choosing). */
static bool file_holds(const char *path, const char *needle, size_t n)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    return read_file(path, MODINFO_MAX, &data, &len, NULL) == 0 && memmem(data, len, needle, n);
}

static bool kernel_is_release(const char *kernel, const char *release)
{
    _cleanup_free_ char *banner = xasprintf("Linux version %s ", release);
    return file_holds(kernel, banner, strlen(banner));
}

/* Whether the kernel names its release at all: a file that does not is a stand-in (the
 * tests' /bin/true), whose bundle has no module to match. */
static bool kernel_has_banner(const char *kernel)
{
    static const char banner[] = "Linux version ";
    return file_holds(kernel, banner, strlen(banner));
}

/* The kernel's module directory: the one release directory that has overlay.ko, or, when
 * several do, the one the kernel's banner names; NULL when there is none (a kernel that
 * needs one is refused when the bundle is built, see check_modules). */
static char *find_release_dir(const char *kernel)
{
    const char *dir = uml_modules_dir();
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_strv_ strv releases = {0}, found = {0};
    if (dfd >= 0 && list_dir_at(dfd, &releases, NULL) == 0)
        for (size_t i = 0; i < releases.n; i++) {
            _cleanup_free_ char *p =
                xasprintf("%s/%s/%s", dir, releases.v[i], guest_modules[0].rel);
            if (path_exists(p))
                strv_add(&found, releases.v[i]);
        }
    for (size_t i = 0; i < found.n; i++)
        if (found.n == 1 || kernel_is_release(kernel, found.v[i]))
            return xasprintf("%s/%s", dir, found.v[i]);
    return NULL;
}

/* The module must be the kernel's own build: its vermagic starts with the release the
 * kernel's banner names. Checked once, when the bundle is built; a real kernel (one with a
 * banner) without a module is refused here too, not at its first boot. */
static int check_module(const char *kernel, const guest_module *gm, const char *module,
                        bb_error **err)
{
    if (!kernel_has_banner(kernel))
        return 0;
    if (!module)
        return bb_fail(err, ENOENT,
                       "the uml backend needs the %s module of %s (%s/<release>/%s) for %s; "
                       "reinstall user-mode-linux",
                       gm->name, kernel, uml_modules_dir(), gm->rel, gm->what);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if (read_file(module, MODINFO_MAX, &data, &len, err) < 0)
        return -1;
    static const char key[] = "vermagic=";
    const char *v = memmem(data, len, key, strlen(key));
    const char *end = v ? memchr(v, '\0', len - (size_t)(v - data)) : NULL;
    if (!end)
        return bb_fail(err, ENOEXEC, "%s has no vermagic: not a kernel module", module);
    v += strlen(key);
    _cleanup_free_ char *release = xstrndup(v, strcspn(v, " "));
    if (!*release || !kernel_is_release(kernel, release))
        return bb_fail(err, ENOEXEC,
                       "%s was built for kernel %s, not for %s; install the user-mode-linux "
                       "package whose kernel and modules match",
                       module, release, kernel);
    return 0;
}

static bool is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *uml_vmm_locate(const char *self)
{
    const char *env = getenv("BLUEBOX_VMM");
    if (env && *env)
        return xstrdup(env);
    if (!self)
        return NULL;
    const char *slash = strrchr(self, '/');
    _cleanup_free_ char *dir = slash ? xstrndup(self, (size_t)(slash - self)) : xstrdup(".");
    if (!*dir) {
        free(dir);
        dir = xstrdup("/");
    }
    const char *rel[] = {"bluebox-vmm", "../libexec/bluebox/bluebox-vmm"};
    for (size_t i = 0; i < ELEMENTSOF(rel); i++) {
        _cleanup_free_ char *p = path_join(dir, rel[i]);
        if (is_exec_file(p))
            return steal_pointer(&p);
    }
    return NULL;
}

static void add_input(plan *p, const char *name, const char *src, const struct stat *st,
                      mode_t mode, bool set_interp, bool in_initrd)
{
    p->v = xreallocarray(p->v, p->n + 1, sizeof *p->v);
    p->v[p->n++] = (input){.name = xstrdup(name),
                           .src = xstrdup(src),
                           .st = *st,
                           .mode = mode,
                           .set_interp = set_interp,
                           .in_initrd = in_initrd};
}

static bool plan_has(const plan *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (streq(p->v[i].name, name))
            return true;
    return false;
}

/* Open and inspect one input; `what` names it in errors. */
static int inspect_input(const char *path, const char *what, elf_info *e, struct stat *st,
                         bb_error **err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s %s", what, path);
    if (fstat(fd, st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", path);
    return elf_inspect_fd(fd, path, e, err);
}

/* Find a library the way the loader would on this host: the first file of that name in the
 * search directories that is an ELF object of this machine. */
static int resolve_lib(const char *name, const char *needed_by, char **ret_path, elf_info *e,
                       struct stat *st, bb_error **err)
{
    for (size_t i = 0; i < ELEMENTSOF(lib_dirs); i++) {
        _cleanup_free_ char *path = path_join(lib_dirs[i], name);
        if (inspect_input(path, "library", e, st, NULL) < 0)
            continue;
        *ret_path = steal_pointer(&path);
        return 0;
    }
    return bb_fail(err, ENOENT,
                   "cannot find %s (needed by %s) in /lib/%s, /usr/lib/%s, /lib64, /usr/lib64, "
                   "/lib or /usr/lib",
                   name, needed_by, MULTIARCH, MULTIARCH);
}

/* Add every library in `queue` and, transitively, what they need. */
static int add_libs(plan *p, strv *queue, strv *needed_by, bb_error **err)
{
    for (size_t i = 0; i < queue->n; i++) {
        const char *name = queue->v[i];
        if (plan_has(p, name))
            continue;
        for (size_t j = 0; j < ELEMENTSOF(reserved); j++)
            if (streq(name, reserved[j]))
                return bb_fail(err, EINVAL,
                               "%s needs a library called %s, a name the VMM "
                               "bundle uses for itself",
                               needed_by->v[i], name);
        if (p->n >= MAX_LIBS)
            return bb_fail(err, E2BIG, "the VMM bundle would need more than %d libraries",
                           MAX_LIBS);
        _cleanup_free_ char *path = NULL;
        _cleanup_elf_info_ elf_info e = {0};
        struct stat st;
        if (resolve_lib(name, needed_by->v[i], &path, &e, &st, err) < 0)
            return -1;
        add_input(p, name, path, &st, 0644, false, false);
        for (size_t k = 0; k < e.needed.n; k++) {
            strv_add(queue, e.needed.v[k]);
            strv_add(needed_by, path);
        }
    }
    return 0;
}

static void fnv(uint64_t *h, const void *data, size_t n)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 0x100000001b3ull;
    }
}

static void fnv_u64(uint64_t *h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    fnv(h, b, sizeof b);
}

static uint64_t plan_hash(const plan *p)
{
    uint64_t h = 0xcbf29ce484222325ull;
    fnv(&h, BUNDLE_FORMAT, sizeof BUNDLE_FORMAT);
    fnv(&h, ABI_VMM_LOADER, sizeof ABI_VMM_LOADER);
    if (p->qemu) /* bump when the qemu bundle's own files (initramfs, vmlinux) change */
        fnv(&h, QEMU_BUNDLE_FORMAT, sizeof QEMU_BUNDLE_FORMAT);
    for (size_t i = 0; i < p->n; i++) {
        const input *in = &p->v[i];
        fnv(&h, in->name, strlen(in->name) + 1);
        fnv(&h, in->src, strlen(in->src) + 1);
        fnv_u64(&h, (uint64_t)in->st.st_dev);
        fnv_u64(&h, (uint64_t)in->st.st_ino);
        fnv_u64(&h, (uint64_t)in->st.st_size);
        fnv_u64(&h, (uint64_t)in->st.st_mtim.tv_sec);
        fnv_u64(&h, (uint64_t)in->st.st_mtim.tv_nsec);
        fnv_u64(&h, (uint64_t)in->st.st_ctim.tv_sec);
        fnv_u64(&h, (uint64_t)in->st.st_ctim.tv_nsec);
        fnv_u64(&h, in->mode | (in->set_interp ? 0x10000u : 0) | (in->in_initrd ? 0x20000u : 0));
    }
    return h;
}

/* Whether this CPU's XSAVE area is larger than UML_XSTATE_BYTES: the bundle then must hold
 * ABI_VMM_XSTATE, or every guest process dies. */
static bool uml_needs_xstate_shim(void)
{
    unsigned a, b, c, d;
    /* CPUID.(EAX=0DH,ECX=0):ECX: the XSAVE area of every feature the CPU supports. */
    return __get_cpuid_count(0xd, 0, &a, &b, &c, &d) && c > UML_XSTATE_BYTES;
}

/* The path of a file installed beside bluebox-vmm. */
static char *beside_vmm(const char *vmm_path, const char *name)
{
    const char *slash = strrchr(vmm_path, '/');
    _cleanup_free_ char *dir =
        slash ? xstrndup(vmm_path, (size_t)(slash - vmm_path)) : xstrdup(".");
    return path_join(*dir ? dir : "/", name);
}

/* A preload shim installed beside bluebox-vmm (its only library is the C library, which
 * linux.uml already brings). A missing one is an error when `needed`, else left out. */
static int add_shim(plan *p, const char *vmm_path, const char *name, bool needed, const char *why,
                    bb_error **err)
{
    _cleanup_free_ char *path = beside_vmm(vmm_path, name);
    _cleanup_elf_info_ elf_info e = {0};
    struct stat st;
    if (access(path, F_OK) < 0)
        return needed
                   ? bb_fail(err, ENOENT, "%s: %s is missing beside bluebox-vmm; reinstall bluebox",
                             why, path)
                   : 0;
    if (inspect_input(path, "a shim", &e, &st, err) < 0)
        return -1;
    add_input(p, name, path, &st, 0644, false, false);
    return 0;
}

static int plan_make(const char *vmm_path, plan *p, bb_error **err)
{
    const char *kernel = uml_kernel_path();
    _cleanup_elf_info_ elf_info ke = {0};
    _cleanup_elf_info_ elf_info ve = {0};
    _cleanup_elf_info_ elf_info le = {0};
    struct stat st;

    if (inspect_input(kernel, "the UML kernel", &ke, &st, err) < 0)
        return bb_prefix(err, "uml backend");
    if (!ke.interp)
        return bb_fail(err, ENOEXEC,
                       "%s has no program interpreter; the uml backend expects "
                       "Debian's dynamically linked linux.uml",
                       kernel);
    if (strlen(ABI_VMM_LOADER) + 1 > ke.interp_size)
        return bb_fail(err, ENAMETOOLONG,
                       "%s: its program interpreter field (%s) is too short for %s", kernel,
                       ke.interp, ABI_VMM_LOADER);
    add_input(p, ABI_VMM_KERNEL, kernel, &st, 0755, true, false);

    if (inspect_input(ke.interp, "the dynamic loader", &le, &st, err) < 0)
        return bb_prefix(err, "uml backend");
    add_input(p, "ld.so", ke.interp, &st, 0755, false, false);

    if (!vmm_path)
        return bb_fail(err, ENOENT,
                       "cannot find bluebox-vmm; install it beside bluebox or "
                       "set BLUEBOX_VMM to its path");
    if (inspect_input(vmm_path, "bluebox-vmm", &ve, &st, err) < 0)
        return bb_prefix(err, "uml backend");
    if (!ve.interp || !streq(ve.interp, ABI_VMM_LOADER))
        return bb_fail(err, ENOEXEC,
                       "%s uses the program interpreter %s, not %s: bluebox-vmm must be linked "
                       "with -Wl,--dynamic-linker=%s -Wl,-rpath,%s",
                       vmm_path, ve.interp ? ve.interp : "(none, static)", ABI_VMM_LOADER,
                       ABI_VMM_LOADER, ABI_VMM_DIR);
    add_input(p, "bluebox-vmm", vmm_path, &st, 0755, false, false);
    /* uname.c keeps the host's kernel version out of the guest's /proc/cpuinfo, so no bundle
     * is made without it; xstate.c is needed where the CPU's XSAVE area is larger than
     * Debian's UML kernel can save (AVX-512, AMX). */
    if (add_shim(p, vmm_path, ABI_VMM_UNAME, true,
                 "the host's kernel version would show in the guest", err) < 0 ||
        add_shim(p, vmm_path, ABI_VMM_XSTATE, uml_needs_xstate_shim(),
                 "this CPU's XSAVE area is larger than Debian's UML kernel can save", err) < 0)
        return bb_prefix(err, "uml backend");

    _cleanup_free_ char *release = find_release_dir(kernel);
    for (size_t i = 0; release && i < ELEMENTSOF(guest_modules); i++) {
        _cleanup_free_ char *m = path_join(release, guest_modules[i].rel);
        if (stat(m, &st) < 0)
            continue; /* refused by check_modules when the bundle is built */
        add_input(p, guest_modules[i].name, m, &st, 0644, false, false);
    }

    _cleanup_strv_ strv queue = {0};
    _cleanup_strv_ strv needed_by = {0};
    for (size_t i = 0; i < ke.needed.n; i++) {
        strv_add(&queue, ke.needed.v[i]);
        strv_add(&needed_by, kernel);
    }
    for (size_t i = 0; i < ve.needed.n; i++) {
        strv_add(&queue, ve.needed.v[i]);
        strv_add(&needed_by, vmm_path);
    }
    if (add_libs(p, &queue, &needed_by, err) < 0)
        return bb_prefix(err, "uml backend");
    p->hash = plan_hash(p);
    return 0;
}


static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int copy_fd(int in, int out, const char *src, bb_error **err)
{
    size_t cap = 1 << 17;
    _cleanup_free_ char *buf = xmalloc(cap);
    for (;;) {
        ssize_t n = read(in, buf, cap);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "cannot read %s", src);
        }
        if (n == 0)
            return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return bb_fail_errno(err, errno, "cannot write the VMM bundle");
            }
            off += w;
        }
    }
}

static int install_one(int dirfd, const input *in, bb_error **err)
{
    _cleanup_close_ int src = open(in->src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (src < 0)
        return bb_fail_errno(err, errno, "cannot open %s", in->src);
    struct stat st;
    if (fstat(src, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", in->src);
    if (!same_file(&st, &in->st))
        return bb_fail(err, EAGAIN,
                       "%s changed while the VMM bundle was being built; run "
                       "the command again",
                       in->src);
    _cleanup_close_ int dst =
        openat(dirfd, in->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, in->mode);
    if (dst < 0)
        return bb_fail_errno(err, errno, "cannot create %s in the VMM bundle", in->name);
    if (copy_fd(src, dst, in->src, err) < 0)
        return -1;
    if (in->set_interp) {
        if (elf_set_interp_fd(dst, in->name, ABI_VMM_LOADER, err) < 0)
            return -1;
        _cleanup_elf_info_ elf_info e = {0};
        if (elf_inspect_fd(dst, in->name, &e, err) < 0)
            return -1;
        if (!e.interp || !streq(e.interp, ABI_VMM_LOADER))
            return bb_fail(err, EIO, "rewriting the program interpreter of %s did not stick",
                           in->src);
    }
    /* Explicitly, whatever the umask: containers with a uid map read it as "other". */
    if (fchmod(dst, in->mode) < 0 || fsync(dst) < 0)
        return bb_fail_errno(err, errno, "cannot finish %s in the VMM bundle", in->name);
    return 0;
}

/* A temporary build directory removed on every early return. */
static void tmpdir_cleanup(char **p)
{
    if (*p)
        (void)rm_rf(*p, NULL);
    free(*p);
}

static int write_initrd(int dirfd, const plan *p, bb_error **err);
static bool stale_tmp(int dfd, const char *name);
static void write_vmlinux(int dirfd, const plan *p);

static int build(const plan *p, const char *parent, const char *dir, bb_error **err)
{
    for (size_t m = 0; !p->qemu && m < ELEMENTSOF(guest_modules); m++) {
        const char *src = NULL;
        for (size_t i = 0; i < p->n; i++)
            if (streq(p->v[i].name, guest_modules[m].name))
                src = p->v[i].src;
        if (check_module(p->v[0].src, &guest_modules[m], src, err) < 0)
            return bb_prefix(err, "cannot build the VMM bundle");
    }
    _cleanup_free_ char *tmpl = xasprintf("%s/.%s-%016llx.tmp-XXXXXX", parent,
                                          p->qemu ? "qemu" : "uml", (unsigned long long)p->hash);
    if (!mkdtemp(tmpl))
        return bb_fail_errno(err, errno, "cannot create a directory in %s", parent);
    _cleanup_(tmpdir_cleanup) char *tmp = steal_pointer(&tmpl);
    _cleanup_close_ int dirfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", tmp);
    for (size_t i = 0; i < p->n; i++)
        if (!p->v[i].in_initrd && install_one(dirfd, &p->v[i], err) < 0)
            return bb_prefix(err, "cannot build the VMM bundle");
    if (p->qemu && write_initrd(dirfd, p, err) < 0)
        return bb_prefix(err, "cannot build the qemu guest's initramfs");
    if (p->qemu)
        write_vmlinux(dirfd, p);
    if (fchmod(dirfd, 0755) < 0 || fsync(dirfd) < 0)
        return bb_fail_errno(err, errno, "cannot finish %s", tmp);
    if (rename(tmp, dir) == 0) {
        free(steal_pointer(&tmp));
        return 0;
    }
    /* Another bluebox built the same bundle first: theirs is as good as ours. */
    if ((errno == EEXIST || errno == ENOTEMPTY) && is_dir(dir))
        return 0;
    return bb_fail_errno(err, errno, "cannot move the VMM bundle into place at %s", dir);
}

/* A bundle in use is one whose INUSE_FILE someone holds a shared flock on: bluebox from the
 * moment it picks the bundle until it exits (a run's whole life, an up until its agent
 * answers), and bluebox-vmm in the container for the container's whole life (vmm/main.c). Pruning
 * removes only a bundle whose exclusive lock it gets, and holds that lock while it removes
 * it; a bluebox that then gets its shared lock on a removed bundle sees it gone (no links)
 * and builds it anew. Every bundle holds bluebox-vmm. */
#define INUSE_FILE "bluebox-vmm"

/* This process's holds (fds kept open until it exits), by bundle path. */
static strv held_dirs;

/* 1: held (or holding is not possible: nothing to prune it then either, see prune_qemu);
 * 0: the bundle went away meanwhile, build it again. */
static int hold(const char *dir)
{
    for (size_t i = 0; i < held_dirs.n; i++)
        if (streq(held_dirs.v[i], dir))
            return 1;
    _cleanup_free_ char *f = path_join(dir, INUSE_FILE);
    int fd = open(f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT && !is_dir(dir) ? 0 : 1;
    while (flock(fd, LOCK_SH) < 0 && errno == EINTR)
        ;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_nlink == 0 || !is_dir(dir)) {
        close(fd);
        return 0;
    }
    strv_add(&held_dirs, dir); /* fd stays open, O_CLOEXEC: the hold lasts until we exit */
    return 1;
}

/* Remove the qemu bundles other than `keep` (a name in `parent`) that nothing uses, and
 * builders' temporary directories older than an hour. Best effort: a bundle left behind is
 * disk space, never a failed launch. */
static void prune_qemu(const char *parent, const char *keep)
{
    _cleanup_close_ int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_strv_ strv names = {0};
    if (dfd < 0 || list_dir_at(dfd, &names, NULL) < 0)
        return;
    for (size_t i = 0; i < names.n; i++) {
        const char *n = names.v[i];
        if (strncmp(n, ".qemu-", 6) == 0 && strstr(n, ".tmp-") && stale_tmp(dfd, n)) {
            (void)rm_rf_at(dfd, n, NULL);
            continue;
        }
        if (strncmp(n, "qemu-", 5) != 0 || streq(n, keep))
            continue;
        _cleanup_free_ char *f = xasprintf("%s/%s", n, INUSE_FILE);
        _cleanup_close_ int fd = openat(dfd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0)
            continue; /* a sandbox runs from it, or one is about to */
        if (fd < 0 && errno != ENOENT)
            continue;
        (void)rm_rf_at(dfd, n, NULL);
    }
}

static int ensure(const char *home_root, const plan *p, char **ret_dir, bb_error **err)
{
    _cleanup_free_ char *parent = path_join(home_root, "vmm");
    const char *kind = p->qemu ? "qemu" : "uml";
    _cleanup_free_ char *name = xasprintf("%s-%016llx", kind, (unsigned long long)p->hash);
    _cleanup_free_ char *dir = path_join(parent, name);
    bool built = false;
    for (int tries = 0;; tries++) {
        if (!is_dir(dir)) {
            if (mkdir_p(home_root, HOME_DIR_MODE, err) < 0 || mkdir_p(parent, 0755, err) < 0 ||
                build(p, parent, dir, err) < 0)
                return -1;
            built = true;
        }
        /* A uml bundle is about 20 MB and stays; a qemu one is about 120 MB, so each new one
         * replaces the old ones nothing uses. */
        if (!p->qemu || hold(dir) == 1)
            break;
        if (tries == 3)
            return bb_fail(err, EAGAIN, "the VMM bundle %s keeps disappearing", dir);
    }
    if (built && p->qemu)
        prune_qemu(parent, name);
    *ret_dir = steal_pointer(&dir);
    return 0;
}

/* One plan of each kind is kept for the life of the process: one run asks for it up to three
 * times (the isolation cache, the direct launch's template, the launch itself), and making
 * one reads every ELF file again. It is reused for the same kernel (or QEMU), modules directory,
 * VMM and guest binary while every input still stats as it did when the plan was made, so a
 * long-lived `bluebox serve` sees a package upgrade at its next boot. */
typedef struct plan_memo {
    plan p;
    char *key; /* what it was made from: the kernel (or QEMU), the VMM, the guest binary */
} plan_memo;

static plan_memo memos[2]; /* [0] uml, [1] qemu */

static int plan_make_qemu(const char *vmm_path, const char *guest_bin, plan *p, bb_error **err);

static int plan_get(bool qemu, const char *vmm_path, const char *guest_bin, const plan **ret,
                    bb_error **err)
{
    plan_memo *m = &memos[qemu];
    _cleanup_free_ char *key =
        xasprintf("%s\n%s\n%s\n%s", qemu ? qemu_binary_path() : uml_kernel_path(),
                  qemu ? "" : uml_modules_dir(), vmm_path ? vmm_path : "",
                  guest_bin ? guest_bin : "");
    bool current = m->key && streq(m->key, key);
    for (size_t i = 0; current && i < m->p.n; i++) {
        struct stat st;
        current = stat(m->p.v[i].src, &st) == 0 && same_file(&st, &m->p.v[i].st);
    }
    if (!current) {
        _cleanup_(plan_clearp) plan p = {0};
        int r = qemu ? plan_make_qemu(vmm_path, guest_bin, &p, err)
                     : plan_make(vmm_path, &p, err);
        if (r < 0)
            return -1;
        plan_clear(&m->p);
        free(m->key);
        m->p = p;
        p = (plan){0};
        m->key = steal_pointer(&key);
    }
    *ret = &m->p;
    return 0;
}

int uml_bundle_fingerprint(const char *vmm_path, uint64_t *ret, bb_error **err)
{
    const plan *p;
    if (plan_get(false, vmm_path, NULL, &p, err) < 0)
        return -1;
    *ret = p->hash;
    return 0;
}

int uml_bundle_ensure(const char *home_root, const char *vmm_path, char **ret_dir, bb_error **err)
{
    const plan *p;
    if (plan_get(false, vmm_path, NULL, &p, err) < 0)
        return -1;
    return ensure(home_root, p, ret_dir, err);
}

static bool stale_tmp(int dfd, const char *name)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    return time(NULL) - st.st_mtim.tv_sec > STALE_TMP_SEC;
}

int uml_bundle_prune(const char *home_root, const char *keep_dir, bb_error **err)
{
    _cleanup_free_ char *parent = path_join(home_root, "vmm");
    const char *keep = NULL;
    if (keep_dir) {
        const char *slash = strrchr(keep_dir, '/');
        keep = slash ? slash + 1 : keep_dir;
    }
    _cleanup_close_ int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "cannot open %s", parent);
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
    _cleanup_closedir_ DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        return bb_fail_errno(err, errno, "cannot read %s", parent);
    }
    _cleanup_strv_ strv doomed = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        bool bundle = strncmp(n, "uml-", 4) == 0 && !(keep && streq(n, keep));
        bool tmp = strncmp(n, ".uml-", 5) == 0 && strstr(n, ".tmp-") && stale_tmp(dfd, n);
        if (bundle || tmp)
            strv_add(&doomed, n);
    }
    for (size_t i = 0; i < doomed.n; i++)
        if (rm_rf_at(dfd, doomed.v[i], err) < 0)
            return bb_prefix(err, "cannot remove an old VMM bundle");
    return 0;
}

/* ---- The qemu bundle (qemu_bundle.h) ---- */

const char *qemu_binary_path(void)
{
    const char *q = getenv("BLUEBOX_QEMU");
    return q && *q ? q : "/usr/bin/" ABI_VMM_QEMU;
}

const char *qemu_bios_path(void)
{
    const char *b = getenv("BLUEBOX_QEMU_BIOS");
    return b && *b ? b : "/usr/share/qemu/" ABI_QEMU_BIOS;
}

/* The release of the newest /boot/vmlinuz-<release> whose release ends in `flavour`. */
static char *newest_kernel(const char *flavour)
{
    _cleanup_close_ int dfd = open("/boot", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_strv_ strv names = {0};
    if (dfd < 0 || list_dir_at(dfd, &names, NULL) < 0)
        return NULL;
    const char *best = NULL;
    static const char prefix[] = "vmlinuz-";
    for (size_t i = 0; i < names.n; i++) {
        const char *n = names.v[i];
        size_t len = strlen(n), fl = strlen(flavour);
        if (strncmp(n, prefix, strlen(prefix)) != 0 || len < fl || !streq(n + len - fl, flavour))
            continue;
        if (!best || strverscmp(n, best) > 0)
            best = n;
    }
    return best ? xstrdup(best + strlen(prefix)) : NULL;
}

int qemu_kernel_find(char **ret_kernel, char **ret_modules, bb_error **err)
{
    const char *k = getenv("BLUEBOX_QEMU_KERNEL");
    const char *m = getenv("BLUEBOX_QEMU_MODULES");
    if (k && *k) {
        if (!m || !*m)
            return bb_fail(err, EINVAL,
                           "BLUEBOX_QEMU_KERNEL is set, so BLUEBOX_QEMU_MODULES must name its "
                           "modules directory too (/lib/modules/<release>)");
        *ret_kernel = xstrdup(k);
        *ret_modules = xstrdup(m);
        return 0;
    }
    _cleanup_free_ char *release = newest_kernel("-cloud-amd64");
    if (!release)
        return bb_fail(err, ENOENT,
                       "backend: qemu boots the distribution's kernel and found none in /boot "
                       "(Debian: apt-get install linux-image-cloud-amd64; or set "
                       "BLUEBOX_QEMU_KERNEL and BLUEBOX_QEMU_MODULES)");
    *ret_kernel = xasprintf("/boot/vmlinuz-%s", release);
    *ret_modules = xasprintf("/lib/modules/%s", release);
    return 0;
}

/* Where each module of ABI_QEMU_MODULES and ABI_QEMU_NET_MODULES is under
 * /lib/modules/<release>/. */
static const struct {
    const char *name, *rel;
} qemu_modules[] = {
    {"virtio_ring", "kernel/drivers/virtio/virtio_ring.ko"},
    {"virtio", "kernel/drivers/virtio/virtio.ko"},
    {"virtio_mmio", "kernel/drivers/virtio/virtio_mmio.ko"},
    {"fuse", "kernel/fs/fuse/fuse.ko"},
    {"virtiofs", "kernel/fs/fuse/virtiofs.ko"},
    {"overlay", "kernel/fs/overlayfs/overlay.ko"},
    {"qemu_fw_cfg", "kernel/drivers/firmware/qemu_fw_cfg.ko"},
    {"virtio_blk", "kernel/drivers/block/virtio_blk.ko"},        /* data_limit's disk */
    {"virtio_console", "kernel/drivers/char/virtio_console.ko"}, /* hvc0: the VMM's log */
    /* ABI_QEMU_NET_MODULES */
    {"failover", "kernel/net/core/failover.ko"},
    {"net_failover", "kernel/drivers/net/net_failover.ko"},
    {"virtio_net", "kernel/drivers/net/virtio_net.ko"},
};

static int add_file(plan *p, const char *name, const char *src, const char *what, mode_t mode,
                    bool set_interp, bool in_initrd, bb_error **err)
{
    _cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return bb_fail_errno(err, errno, "cannot open %s %s", what, src);
    if (!S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s %s is not a regular file", what, src);
    add_input(p, name, src, &st, mode, set_interp, in_initrd);
    return 0;
}

/* An option ROM QEMU loads to boot the kernel, from the firmware's directory. */
static int add_rom(plan *p, const char *name, bb_error **err)
{
    const char *bios = qemu_bios_path();
    const char *slash = strrchr(bios, '/');
    _cleanup_free_ char *dir = slash ? xstrndup(bios, (size_t)(slash - bios)) : xstrdup(".");
    _cleanup_free_ char *src = path_join(*dir ? dir : "/", name);
    return add_file(p, name, src, "QEMU's option ROM", 0644, false, false, err);
}

static int plan_make_qemu(const char *vmm_path, const char *guest_bin, plan *p, bb_error **err)
{
    p->qemu = true;
    const char *qemu = qemu_binary_path();
    _cleanup_elf_info_ elf_info qe = {0};
    _cleanup_elf_info_ elf_info ve = {0};
    _cleanup_elf_info_ elf_info le = {0};
    struct stat st;
    if (inspect_input(qemu, "QEMU", &qe, &st, err) < 0)
        return bb_prefix(err, "qemu backend (Debian: apt-get install qemu-system-x86)");
    if (!qe.interp || strlen(ABI_VMM_LOADER) + 1 > qe.interp_size)
        return bb_fail(err, ENOEXEC, "%s: not a dynamically linked QEMU the bundle can carry",
                       qemu);
    add_input(p, ABI_VMM_QEMU, qemu, &st, 0755, true, false);
    if (inspect_input(qe.interp, "the dynamic loader", &le, &st, err) < 0)
        return bb_prefix(err, "qemu backend");
    add_input(p, "ld.so", qe.interp, &st, 0755, false, false);
    if (!vmm_path)
        return bb_fail(err, ENOENT,
                       "cannot find bluebox-vmm; install it beside bluebox or set BLUEBOX_VMM");
    if (inspect_input(vmm_path, "bluebox-vmm", &ve, &st, err) < 0)
        return bb_prefix(err, "qemu backend");
    add_input(p, "bluebox-vmm", vmm_path, &st, 0755, false, false);
    /* Debian builds TCG as a module QEMU loads at start (QEMU_MODULE_DIR: the bundle); a QEMU
     * with TCG built in has none. */
    static const char tcg[] = "/usr/lib/" MULTIARCH "/qemu/accel-tcg-x86_64.so";
    _cleanup_elf_info_ elf_info te = {0};
    if (access(tcg, F_OK) == 0) {
        if (inspect_input(tcg, "QEMU's TCG module", &te, &st, err) < 0)
            return bb_prefix(err, "qemu backend");
        add_input(p, "accel-tcg-x86_64.so", tcg, &st, 0644, false, false);
        for (size_t i = 0; i < te.needed.n; i++) {
            /* queued below with QEMU's own */
            strv_add(&qe.needed, te.needed.v[i]);
        }
    }
    _cleanup_free_ char *kernel = NULL, *modules = NULL;
    if (qemu_kernel_find(&kernel, &modules, err) < 0 ||
        add_file(p, ABI_QEMU_BIOS, qemu_bios_path(), "QEMU's microvm firmware", 0644, false, false,
                 err) < 0 ||
        add_rom(p, "pvh.bin", err) < 0 || add_rom(p, "linuxboot_dma.bin", err) < 0 ||
        add_file(p, ABI_QEMU_KERNEL, kernel, "the guest kernel", 0644, false, false, err) < 0 ||
        add_file(p, "init", guest_bin, "the static bluebox", 0755, false, true, err) < 0)
        return -1;
    for (size_t i = 0; i < ELEMENTSOF(qemu_modules); i++) {
        _cleanup_free_ char *src = path_join(modules, qemu_modules[i].rel);
        _cleanup_free_ char *name = xasprintf("modules/%s.ko", qemu_modules[i].name);
        if (add_file(p, name, src, "the guest kernel's module", 0644, false, true, err) < 0)
            return bb_prefix(err, "qemu backend (%s needs its modules installed)", kernel);
    }
    _cleanup_strv_ strv queue = {0};
    _cleanup_strv_ strv needed_by = {0};
    for (size_t i = 0; i < qe.needed.n; i++) {
        strv_add(&queue, qe.needed.v[i]);
        strv_add(&needed_by, qemu);
    }
    for (size_t i = 0; i < ve.needed.n; i++) {
        strv_add(&queue, ve.needed.v[i]);
        strv_add(&needed_by, vmm_path);
    }
    if (add_libs(p, &queue, &needed_by, err) < 0)
        return bb_prefix(err, "qemu backend");
    p->hash = plan_hash(p);
    return 0;
}

/* The initramfs: an uncompressed "newc" cpio (no decompression to wait for under TCG) of the
 * static bluebox as /init, the modules, the marker and a console node. */
static void cpio_header(strbuf *b, const char *name, mode_t mode, uint64_t size, unsigned rmaj,
                        unsigned rmin, unsigned ino)
{
    sb_printf(b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, (unsigned)mode,
              0u, 0u, S_ISDIR(mode) ? 2u : 1u, 0u, (unsigned)size, 0u, 0u, rmaj, rmin,
              (unsigned)strlen(name) + 1, 0u);
    sb_putn(b, name, strlen(name) + 1);
    while (b->len % 4)
        sb_putn(b, "", 1);
}

static int write_initrd(int dirfd, const plan *p, bb_error **err)
{
    _cleanup_sb_ strbuf b = {0};
    unsigned ino = 1;
    cpio_header(&b, "dev", S_IFDIR | 0755, 0, 0, 0, ino++);
    cpio_header(&b, "dev/console", S_IFCHR | 0600, 0, 5, 1, ino++);
    cpio_header(&b, "modules", S_IFDIR | 0755, 0, 0, 0, ino++);
    cpio_header(&b, &ABI_QEMU_MARKER[1], S_IFREG | 0644, 0, 0, 0, ino++);
    for (size_t i = 0; i < p->n; i++) {
        const input *in = &p->v[i];
        if (!in->in_initrd)
            continue;
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(in->src, 256u << 20, &data, &len, err) < 0)
            return -1;
        if ((uint64_t)len != (uint64_t)in->st.st_size)
            return bb_fail(err, EAGAIN,
                           "%s changed while the bundle was being built; run the "
                           "command again",
                           in->src);
        cpio_header(&b, in->name, S_IFREG | in->mode, len, 0, 0, ino++);
        sb_putn(&b, data, len);
        while (b.len % 4)
            sb_putn(&b, "", 1);
    }
    cpio_header(&b, "TRAILER!!!", 0, 0, 0, 0, 0);
    _cleanup_close_ int fd =
        openat(dirfd, ABI_QEMU_INITRD, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", ABI_QEMU_INITRD);
    if (write_full(fd, b.s, b.len, ABI_QEMU_INITRD, err) < 0)
        return -1;
    if (fchmod(fd, 0644) < 0 || fsync(fd) < 0)
        return bb_fail_errno(err, errno, "cannot finish %s", ABI_QEMU_INITRD);
    return 0;
}

/* PVH: QEMU boots an uncompressed ELF kernel that carries the PVH entry note straight into
 * 64-bit mode, skipping the bzImage's real-mode setup and its decompressor, which under TCG
 * is a second of emulated work (measured: 4.7 s → 3.0-3.6 s to power-off). The bzImage's
 * payload (boot protocol 2.08+: setup_sects at 0x1f1, payload_offset and payload_length at
 * 0x248) is decompressed with libarchive's filters (Debian's cloud kernel: LZ4; gzip, xz,
 * zstd alike) into ABI_QEMU_VMLINUX. Anything unexpected leaves it out: the bzImage boots. */
#define ELF_NOTE_PVH 18u /* XEN_ELFNOTE_PHYS32_ENTRY */
#define VMLINUX_MAX  (512u << 20)

static bool has_pvh_note(const char *elf, size_t len)
{
    static const char name[] = "Xen";
    for (size_t off = 0; off + 16 <= len && off < (64u << 20); off += 4) {
        const uint8_t *n = (const uint8_t *)elf + off;
        uint32_t namesz =
            (uint32_t)n[0] | (uint32_t)n[1] << 8 | (uint32_t)n[2] << 16 | (uint32_t)n[3] << 24;
        uint32_t type =
            (uint32_t)n[8] | (uint32_t)n[9] << 8 | (uint32_t)n[10] << 16 | (uint32_t)n[11] << 24;
        if (namesz == 4 && type == ELF_NOTE_PVH && memcmp(n + 12, name, 4) == 0)
            return true;
    }
    return false;
}

static void write_vmlinux(int dirfd, const plan *p)
{
    const char *src = NULL;
    for (size_t i = 0; i < p->n; i++)
        if (streq(p->v[i].name, ABI_QEMU_KERNEL))
            src = p->v[i].src;
    _cleanup_free_ char *bz = NULL;
    size_t len = 0;
    if (!src || read_file(src, 64u << 20, &bz, &len, NULL) < 0 || len < 0x250 ||
        memcmp(bz + 0x202, "HdrS", 4) != 0)
        return;
    const uint8_t *h = (const uint8_t *)bz;
    size_t setup = ((size_t)(h[0x1f1] ? h[0x1f1] : 4) + 1) * 512;
    size_t off =
        (size_t)h[0x248] | (size_t)h[0x249] << 8 | (size_t)h[0x24a] << 16 | (size_t)h[0x24b] << 24;
    size_t plen =
        (size_t)h[0x24c] | (size_t)h[0x24d] << 8 | (size_t)h[0x24e] << 16 | (size_t)h[0x24f] << 24;
    if (setup + off > len || plen > len - setup - off)
        return;
    struct archive *a = archive_read_new();
    archive_read_support_filter_all(a);
    archive_read_support_format_raw(a);
    struct archive_entry *e;
    _cleanup_sb_ strbuf out = {0};
    if (archive_read_open_memory(a, bz + setup + off, plen) == ARCHIVE_OK &&
        archive_read_next_header(a, &e) == ARCHIVE_OK) {
        char buf[1 << 16];
        la_ssize_t n;
        while ((n = archive_read_data(a, buf, sizeof buf)) > 0 && out.len < VMLINUX_MAX)
            sb_putn(&out, buf, (size_t)n);
    }
    archive_read_free(a);
    if (out.len < 64 ||
        memcmp(out.s,
               "\x7f"
               "ELF",
               4) != 0 ||
        !has_pvh_note(out.s, out.len))
        return;
    _cleanup_close_ int fd =
        openat(dirfd, ABI_QEMU_VMLINUX, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || write_full(fd, out.s, out.len, ABI_QEMU_VMLINUX, NULL) < 0 ||
        fchmod(fd, 0644) < 0 || fsync(fd) < 0)
        (void)unlinkat(dirfd, ABI_QEMU_VMLINUX, 0);
}

int qemu_bundle_ensure(const char *home_root, const char *vmm_path, const char *guest_bin,
                       char **ret_dir, bb_error **err)
{
    const plan *p;
    if (plan_get(true, vmm_path, guest_bin, &p, err) < 0)
        return -1;
    return ensure(home_root, p, ret_dir, err);
}

int qemu_bundle_fingerprint(const char *vmm_path, const char *guest_bin, uint64_t *ret,
                            bb_error **err)
{
    const plan *p;
    if (plan_get(true, vmm_path, guest_bin, &p, err) < 0)
        return -1;
    *ret = p->hash;
    return 0;
}

void qemu_bundle_usage(const char *home_root, int *ret_n, long long *ret_bytes)
{
    _cleanup_free_ char *parent = path_join(home_root, "vmm");
    _cleanup_close_ int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_strv_ strv names = {0};
    *ret_n = 0;
    *ret_bytes = 0;
    if (dfd < 0 || list_dir_at(dfd, &names, NULL) < 0)
        return;
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_close_ int bfd =
            strncmp(names.v[i], "qemu-", 5) == 0
                ? openat(dfd, names.v[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                : -1;
        _cleanup_strv_ strv files = {0};
        if (bfd < 0 || list_dir_at(bfd, &files, NULL) < 0)
            continue;
        (*ret_n)++;
        for (size_t j = 0; j < files.n; j++) {
            struct stat st;
            if (fstatat(bfd, files.v[j], &st, AT_SYMLINK_NOFOLLOW) == 0)
                *ret_bytes += (long long)st.st_blocks * 512;
        }
    }
}
