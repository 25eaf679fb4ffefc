/* bluebox-vmm: the uml backend's process inside the podman container. It records its own
 * OCI process (argv, env, cwd, ids, hostname) as the launch spec on the exec tmpfs, boots
 * the UML kernel as its child with one serial line on a socketpair as the control channel,
 * and relays agent frames between that line and its own stdio: stdin → I/i (its bytes
 * through the stdin ring, stdin_ring.h, once the guest has it), O/E → stdout/stderr, X → its
 * exit code. UML's console output goes to a log on the tmpfs, shown only
 * when the guest dies without reporting an exit code. With BLUEBOX_NETWORK=bridge the guest
 * also gets a vec0 device wired to libslirp here (net.c). */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "agent/proto.h"
#include "guest/spec.h"
#include "util/json.h"
#include "util/time.h"
#include "util/xalloc.h"
#include "fsd/server.h"
#include "vmm/disklimit.h"
#include "vmm/jail.h"
#include "vmm/net.h"
#include "vmm/qemu.h"
#include "vmm/secrets.h"
#include "vmm/stdin_ring.h"
#include "vmm/tlsbroker.h"

#define UML_LOG   ABI_MEM_DIR "/uml.log"
#define SERIAL_FD 3
#define NET_FD    4 /* qemu: the network's stream socket (net.h) */
/* Stop reading our stdin while this much is still waiting to go to the guest. */
#define OUT_HIGH (1u << 20)
/* After the exit frame, how long the guest gets to power off before we kill it. */
#define POWEROFF_GRACE_MS 3000
/* From fork to the guest's ready frame; a boot takes well under a second. */
#define BOOT_TIMEOUT_MS 30000
/* How much of the end of UML's log is read to show its last messages. */
#define LOG_TAIL 65536

/* Boot-time trims for Debian's UML kernel: initcalls a sandbox does not need. */
static const char *const kernel_trims[] = {
    "quiet",
    "pty.legacy_count=0",
    ("initcall_blacklist=strp_dev_init,init_zswap,raid6_select_algo,init_jfs_fs,init_btrfs_fs,"
     "init_xfs_fs"),
    "cryptomgr.notests",
    /* Skips the delay-loop calibration, 40-60 ms of every boot (bench/boot_profile.py). The
     * value only scales udelay()'s busy loops, which no device of this guest times anything
     * by; it is what the calibration finds on a 2020s x86 host. */
    "lpj=6725632",
    /* A kernel panic ends UML (here it aborts) instead of spinning forever; should a
     * kernel restart itself instead, its second ready frame tells us and we stop it. */
    "panic=1",
};

/* Our own control variables: consumed here, never part of the workload's environment. */
static const char *const control_vars[] = {
    ABI_ENV_DATA_DISK,    ABI_ENV_FORWARD,    ABI_ENV_MODE,         ABI_ENV_NETWORK,
    ABI_ENV_RAM_MIB,      "BLUEBOX_UML_ARGS", ABI_ENV_USER,         "BLUEBOX_FSD_MAX_FDS",
    "BLUEBOX_UML_HOSTFS", ABI_ENV_NET_DENY,   "BLUEBOX_WEAKEN_NET", ABI_ENV_NET_ALLOW,
    ABI_ENV_NET_LOG,      ABI_ENV_SANDBOX,    "BLUEBOX_WEAKEN_DNS", "BLUEBOX_WEAKEN_SNI",
    ABI_ENV_VMM_KIND,     ABI_ENV_QEMU_ACCEL, ABI_ENV_CPUS,         "BLUEBOX_QEMU_CMDLINE",
    ABI_ENV_BUILD,
};

/* The qemu backend (vmm/qemu.h): QEMU instead of UML, every shared directory and the
 * container's root through the file server. */
static bool qemu_mode(void)
{
    const char *k = getenv(ABI_ENV_VMM_KIND);
    return k && streq(k, "qemu");
}

static void die(const char *fmt, ...) _printf_(1, 2) _noreturn_;
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bluebox-vmm: ", stderr);
    vfprintf(stderr, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized): va_start is above
    fputc('\n', stderr);
    va_end(ap);
    exit(ABI_EXIT_SETUP);
}

static bool is_control_var(const char *kv)
{
    for (size_t i = 0; i < ELEMENTSOF(control_vars); i++) {
        size_t n = strlen(control_vars[i]);
        if (strncmp(kv, control_vars[i], n) == 0 && kv[n] == '=')
            return true;
    }
    /* podman sets TMPDIR for UML's memory file; the workload never asked for it. */
    return streq(kv, "TMPDIR=" ABI_MEM_DIR);
}

static unsigned ram_mib(void)
{
    const char *s = getenv(ABI_ENV_RAM_MIB);
    if (!s || !*s)
        return 512;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < ABI_UML_MIN_RAM_MIB || v > ABI_UML_MAX_RAM_MIB)
        die(ABI_ENV_RAM_MIB " must be a number of MiB between " ABI_STR(
                ABI_UML_MIN_RAM_MIB) " and " ABI_STR(ABI_UML_MAX_RAM_MIB) ", not '%s'",
            s);
    return (unsigned)v;
}

static void spec_fill(launch_spec *s, int argc, char **argv)
{
    const char *mode = getenv(ABI_ENV_MODE);
    if (!mode || !*mode)
        mode = "run";
    if (spec_mode_parse(mode, &s->mode) < 0)
        die(ABI_ENV_MODE " must be run, shell, probe or agent, not '%s'", mode);
    for (int i = 1; i < argc; i++)
        strv_add(&s->argv, argv[i]);
    extern char **environ;
    for (char **e = environ; *e; e++)
        if (strchr(*e, '=') && **e != '=' && !is_control_var(*e))
            strv_add(&s->env, *e);
    char *cwd = getcwd(NULL, 0);
    s->cwd = cwd ? cwd : xstrdup("/");
    char host[HOST_NAME_MAX + 1] = "";
    if (gethostname(host, sizeof host) < 0)
        host[0] = '\0';
    host[HOST_NAME_MAX] = '\0';
    s->hostname = xstrdup(host);
    s->uid = getuid();
    s->gid = getgid();
    int n = getgroups(0, NULL);
    s->groups = xreallocarray(NULL, n > 0 ? (size_t)n : 1, sizeof *s->groups);
    n = getgroups(n, s->groups);
    s->n_groups = n > 0 ? (size_t)n : 0;
    /* We run as the container's root (src/runtime/uml.c); the workload's user is the image's
     * USER, which the guest init resolves in the image's own /etc/passwd and /etc/group. */
    const char *user = getenv(ABI_ENV_USER);
    s->user = xstrdup(user ? user : "");
    /* The command gets a terminal when podman gave us one (-t): a shell's piped stdin, or a
     * run's without -t, reaches it through plain pipes, with no echo or prompt noise. */
    s->tty = isatty(STDIN_FILENO);
    struct winsize ws;
    if (s->tty && ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
        s->rows = ws.ws_row;
        s->cols = ws.ws_col;
    }
}

/* Whether the file server gives the guest this writable directory (else hostfs does).
 * /data with a disk image is the guest's own ext4; BLUEBOX_UML_HOSTFS=1 is a debugging
 * and benchmarking aid that keeps every mount on hostfs, as before the file server. */
static bool fs_served(const char *path, bool file, unsigned long f)
{
    if (qemu_mode())
        return true; /* a qemu guest has no hostfs: read-only ones are served read-only, a
                      * single file through a directory of its own (stage_file) */
    if (streq(path, ABI_FORK_LOWER))
        return !file; /* read-only, and served read-only (exports_fill) */
    const char *hostfs = getenv("BLUEBOX_UML_HOSTFS");
    const char *disk = getenv(ABI_ENV_DATA_DISK);
    if (file || (f & MS_RDONLY) || (hostfs && streq(hostfs, "1")))
        return false;
    return !(streq(path, "/data") && disk && *disk);
}

static unsigned spec_mount_flags(const char *path, unsigned long f)
{
    struct stat st;
    bool file = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    return (f & MS_RDONLY ? SPEC_MOUNT_RO : 0) | (f & MS_NOSUID ? SPEC_MOUNT_NOSUID : 0) |
           (f & MS_NODEV ? SPEC_MOUNT_NODEV : 0) | (f & MS_NOEXEC ? SPEC_MOUNT_NOEXEC : 0) |
           (file ? SPEC_MOUNT_FILE : 0) | (fs_served(path, file, f) ? SPEC_MOUNT_FS : 0);
}

/* The guest's root is the image under a RAM layer; /data and the Bluefile's mounts are
 * mounts of their own, as the container has them (jail_guest_mount() is the same rule the
 * jail binds the hostfs ones by). A read-only container root stays read-only. */
static void spec_mounts(launch_spec *s)
{
    _cleanup_(jail_mounts_clearp) jail_mounts m = {0};
    if (jail_mounts_read(&m) < 0)
        die("cannot read the container's mounts: %s", strerror(errno));
    for (size_t i = 0; i < m.n; i++) {
        const char *p = m.points.v[i];
        if (streq(p, "/")) {
            s->root_flags = m.flags[i] & MS_RDONLY ? SPEC_ROOT_RO : 0;
            continue;
        }
        if (!jail_guest_mount(p))
            continue;
        if (!spec_mount_path_ok(p))
            die("cannot hand the mount %s to the guest: not a plain absolute path", p);
        spec_add_mount(s, p, spec_mount_flags(p, m.flags[i]));
    }
}

static void write_spec(const launch_spec *s)
{
    size_t len;
    _cleanup_free_ char *data = spec_encode(s, &len);
    if (len > SPEC_MAX)
        die("the command line and environment are too large (%zu bytes)", len);
    _cleanup_close_ int fd =
        open(ABI_SPEC_PATH, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        die("cannot create the launch spec %s: %s (is the tmpfs %s mounted?)", ABI_SPEC_PATH,
            strerror(errno), ABI_MEM_DIR);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            die("cannot write the launch spec: %s", strerror(errno));
        off += (size_t)w;
    }
}

/* The sandbox's secrets (secrets.h), read from the host's fd before anything else runs:
 * the fd is closed and its variable gone before the spec copies our environment and long
 * before UML starts. With any, the TLS broker's CA is made now and goes into the spec for
 * the guest to trust. The egress proxy's children use both (secrets_relay()). */
static secrets vmm_secrets;

static void secrets_setup(launch_spec *spec)
{
    _cleanup_error_ bb_error *err = NULL;
    if (secrets_load_env(&vmm_secrets, &err) < 0)
        die("%s", err->msg);
    if (vmm_secrets.n == 0)
        return;
    static const char *const trust[] = TLSBROKER_TRUST_FILES;
    if (tlsbroker_start(&vmm_secrets, trust, ELEMENTSOF(trust), &err) < 0)
        die("%s", err->msg);
    spec->ca_pem = xstrdup(tlsbroker_ca_pem(vmm_secrets.broker));
}

#ifdef BB_WEAKEN_KNOBS
/* security/weaken's secret-env (bluebox-vmm-weak only, never installed): each placeholder
 * in the guest's environment replaced by its real value, so the escape suite's
 * secret-in-guest check can be seen to fail. */
static void weaken_secrets(launch_spec *spec)
{
    const char *weak = getenv("BLUEBOX_WEAKEN_SECRETS");
    if (!weak || !streq(weak, "1"))
        return;
    for (size_t i = 0; i < spec->env.n; i++) {
        char *eq = strchr(spec->env.v[i], '=');
        const secret *sec = NULL;
        for (size_t k = 0; eq && k < vmm_secrets.n; k++)
            if (streq(eq + 1, vmm_secrets.v[k].placeholder))
                sec = &vmm_secrets.v[k];
        if (!sec)
            continue;
        char *kv = xasprintf("%.*s=%s", (int)(eq - spec->env.v[i]), spec->env.v[i], sec->value);
        free(spec->env.v[i]);
        spec->env.v[i] = kv;
    }
}
#endif

static char *vmm_dir(void)
{
    char *self = realpath("/proc/self/exe", NULL);
    if (!self)
        return xstrdup(ABI_VMM_DIR);
    char *slash = strrchr(self, '/');
    if (slash && slash != self)
        *slash = '\0';
    return self;
}

/* The file server's exports: the spec's SPEC_MOUNT_FS mounts, in order. `unjailed`: the
 * mounts the VMM's own view leaves out (jail_enter), the served ones and their staging. */
typedef struct exports {
    fsd_export *v;
    size_t n;
    strv paths, socks, unjailed;
} exports;

static void exports_clear(exports *e)
{
    free(e->v);
    strv_clear(&e->paths);
    strv_clear(&e->socks);
    strv_clear(&e->unjailed);
    *e = (exports){0};
}

/* qemu: a single-file mount reaches the guest as the one entry of a directory the file
 * server exports: a tiny tmpfs of its own on the exec tmpfs, the container's mount of the
 * file bound onto an empty file in it (the bind keeps that mount's flags, read-only
 * included), then the tmpfs made read-only, so the guest can write the file (when the
 * mount is rw) and nothing else there. The guest binds the entry onto the path (guest/root.c),
 * as uml's guest does from its hostfs parent. Returns the directory. */
static char *stage_file(exports *e, const char *path)
{
    const char *slash = strrchr(path, '/'); /* spec_mount_path_ok: absolute, a name */
    const char *name = slash ? slash + 1 : path;
    char *dir = xasprintf(ABI_MEM_DIR "/file%zu", e->n);
    _cleanup_free_ char *file = xasprintf("%s/%s", dir, name);
    if (mkdir(dir, 0700) < 0 || mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                      "size=4k,nr_inodes=4,mode=0755") < 0)
        die("cannot stage the mount %s for the guest (%s): %s", path, dir, strerror(errno));
    int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || close(fd) < 0 || mount(path, file, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0)
        die("cannot stage the mount %s for the guest: %s", path, strerror(errno));
    strv_add(&e->unjailed, path);
    strv_add(&e->unjailed, file);
    return dir;
}

static fsd_export *export_add(exports *e, const char *path)
{
    strv_add(&e->paths, path);
    strv_add(&e->unjailed, path);
    strv_push(&e->socks, xasprintf(ABI_MEM_DIR "/fs%zu.sock", e->n));
    e->v = xreallocarray(e->v, e->n + 1, sizeof *e->v);
    fsd_export *x = &e->v[e->n];
    *x = (fsd_export){.path = e->paths.v[e->n], .sock_path = e->socks.v[e->n]};
    e->n++;
    return x;
}

static void exports_fill(exports *e, const launch_spec *s)
{
    /* qemu: the container's root first, read-only, its own mount alone (fsd/server.h), with
     * the image's owners and modes as they are. */
    /* A build step (SPEC_ROOT_BUILD, uml or qemu): the same, written (the step's layer), which
     * the guest makes its root. */
    bool build = s->root_flags & SPEC_ROOT_BUILD;
    if (qemu_mode() || build) {
        fsd_export *x = export_add(e, "/");
        x->one_mount = x->real_owners = true;
        x->read_only = !build;
        snprintf(x->tag, sizeof x->tag, "%s", ABI_QEMU_ROOT_TAG);
    }
    size_t k = 0;
    for (size_t i = 0; i < s->n_mounts; i++) {
        if (!(s->mounts[i].flags & SPEC_MOUNT_FS))
            continue;
        _cleanup_free_ char *staged =
            s->mounts[i].flags & SPEC_MOUNT_FILE ? stage_file(e, s->mounts[i].path) : NULL;
        fsd_export *x = export_add(e, staged ? staged : s->mounts[i].path);
        x->read_only = s->mounts[i].flags & SPEC_MOUNT_RO;
        snprintf(x->tag, sizeof x->tag, SPEC_FS_TAG "%zu", k++);
    }
}

/* The host's TSC rate in kHz from /proc/cpuinfo's "cpu MHz" (TCG's guest TSC counts the
 * host's), 0 when unknown. */
static unsigned host_tsc_khz(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        double mhz;
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 && mhz > 0 && mhz < 1e6)
            return (unsigned)(mhz * 1000);
    }
    return 0;
}

static unsigned env_unsigned(const char *name, unsigned dflt, unsigned max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v == 0 || v > max)
        die("%s must be a number between 1 and %u, not '%s'", name, max, s);
    return (unsigned)v;
}

static void qemu_cmdline(strv *a, const char *dir, unsigned mib, const exports *ex, int serial_fd,
                         const vmm_net *net, const disk_limit *disk)
{
    const char *accel = getenv(ABI_ENV_QEMU_ACCEL);
    if (!accel || (!streq(accel, "kvm") && !streq(accel, "tcg")))
        die(ABI_ENV_QEMU_ACCEL " must be kvm or tcg");
    _cleanup_free_ qemu_dev *devs = xreallocarray(NULL, ex->n ? ex->n : 1, sizeof *devs);
    for (size_t i = 0; i < ex->n; i++)
        devs[i] = (qemu_dev){.sock = ex->v[i].sock_path, .tag = ex->v[i].tag};
    _cleanup_free_ char *vmlinux = xasprintf("%s/" ABI_QEMU_VMLINUX, dir);
    qemu_conf c = {.dir = dir,
                   .pvh = access(vmlinux, R_OK) == 0,
                   .kvm = streq(accel, "kvm"),
                   .ram_mib = mib,
                   .cpus = env_unsigned(ABI_ENV_CPUS, 1, 64),
                   .tsc_khz = host_tsc_khz(),
                   .serial_fd = serial_fd,
                   .net_fd = net ? NET_FD : 0,
                   .net_mtu = NET_LINK_MTU,
                   .spec_path = ABI_SPEC_PATH,
                   .devs = devs,
                   .n_devs = ex->n,
                   .extra_cmdline = getenv("BLUEBOX_QEMU_CMDLINE"),
                   .data_disk = disk->path,
                   .console_log = UML_LOG};
    qemu_argv(&c, a);
}

static void kernel_argv(strv *a, const char *dir, unsigned mib, const vmm_net *net,
                        const disk_limit *disk, const stdin_ring *ring, const exports *ex)
{
    strv_push(a, xasprintf("%s/" ABI_VMM_KERNEL, dir));
    strv_push(a, xasprintf("mem=%uM", mib));
    strv_add(a, "root=/dev/root");
    strv_add(a, "rootfstype=hostfs");
    strv_add(a, "rootflags=/");
    strv_add(a, "rw");
    strv_add(a, "init=" ABI_GUEST_BINARY);
    /* UML keeps its pid file and management socket under ~/.uml by default. */
    strv_add(a, "uml_dir=" ABI_MEM_DIR "/");
    for (size_t i = 0; i < ELEMENTSOF(kernel_trims); i++)
        strv_add(a, kernel_trims[i]);
    /* Only the two lines in use exist: `null` would register all 16 consoles and 64 serial
     * lines, and each device's uevent execs the kernel's uevent helper, which on uml is a new
     * host process even for a missing file (~2 ms each, ~150 ms a boot). */
    strv_add(a, "con=none");
    /* The kernel's console (warnings and worse under `quiet`, panics) goes to the log. */
    strv_add(a, "con0=null,fd:2");
    strv_add(a, "ssl=none");
    strv_push(a, xasprintf("ssl0=fd:%d,fd:%d", SERIAL_FD, SERIAL_FD));
    net_kernel_args(net, a);
    disk_limit_kernel_args(disk, a);
    stdin_ring_kernel_args(ring, a);
    /* Each export is a virtio-fs device (id 26) over vhost-user on its socket. */
    for (size_t i = 0; i < ex->n; i++)
        strv_push(a, xasprintf("virtio_uml.device=%s:26", ex->v[i].sock_path));
    /* Debugging aid (e.g. initcall_debug): extra words for the kernel command line. */
    const char *extra = getenv("BLUEBOX_UML_ARGS");
    if (extra) {
        _cleanup_free_ char *copy = xstrdup(extra);
        char *save = NULL;
        for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
            strv_add(a, w);
    }
}

static volatile sig_atomic_t unused_signal;
static void note_signal(int sig)
{
    /* Never runs while the signals are blocked; installed so that, as PID 1 of the
     * container, we receive them at all (init ignores signals it has no handler for). */
    unused_signal = sig;
}

static const int relayed_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGWINCH};

static int signals_setup(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    struct sigaction sa = {.sa_handler = note_signal, .sa_flags = SA_RESTART};
    for (size_t i = 0; i < ELEMENTSOF(relayed_signals); i++) {
        sigaddset(&set, relayed_signals[i]);
        sigaction(relayed_signals[i], &sa, NULL);
    }
    sigprocmask(SIG_BLOCK, &set, old);
    /* A reader that went away is handled where we write, not by dying. */
    signal(SIGPIPE, SIG_IGN);
    int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0)
        die("signalfd: %s", strerror(errno));
    return fd;
}

/* UML's console log, made before boot and kept open: the guest sees /.bluebox/mem and may
 * replace the path with a symlink (to /dev/zero, say) or a FIFO, never this file, which is
 * where the tail is read from. -1 when it cannot be made (the console then goes nowhere).
 * Appended to: QEMU writes its guest's console there through a second open of its own
 * (vmm/qemu.h), beside its stderr on this one. */
static int open_log(void)
{
    int fd = open(
        UML_LOG, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* LD_PRELOAD for UML: the shims of the bundle that are there; NULL when none is. */
static char *uml_preload(const char *dir)
{
    /* uname.c hides the host's kernel from the guest's /proc/cpuinfo (the bundle always has
     * it); xstate.c saves guest FPU state that Debian's UML cannot hold on AVX-512/AMX hosts. */
    static const char *const shims[] = {ABI_VMM_UNAME, ABI_VMM_XSTATE};
    strbuf b = {0};
    for (size_t i = 0; i < ELEMENTSOF(shims); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, shims[i]);
        if (access(path, R_OK) == 0)
            sb_printf(&b, "%s%s", b.s ? ":" : "LD_PRELOAD=", path);
    }
    return b.s ? sb_steal(&b) : NULL;
}

/* Fork and exec UML in its own process group (it forks helpers; we kill them as one). */
static pid_t start_uml(char **argv, const char *dir, int serial, int net, int log_fd,
                       const sigset_t *mask, const strv *served)
{
    int log =
        log_fd >= 0 ? fcntl(log_fd, F_DUPFD_CLOEXEC, 0) : open("/dev/null", O_WRONLY | O_CLOEXEC);
    _cleanup_free_ char *ld = xasprintf("LD_LIBRARY_PATH=%s", dir);
    _cleanup_free_ char *tmp = xasprintf("TMPDIR=%s", ABI_MEM_DIR);
    _cleanup_free_ char *preload = qemu_mode() ? NULL : uml_preload(dir);
    /* qemu: its TCG accelerator is a loadable module, which the bundle holds (QEMU would
     * look in the host's directory, which is not in the container). */
    _cleanup_free_ char *modules = qemu_mode() ? xasprintf("QEMU_MODULE_DIR=%s", dir) : NULL;
    char *envp[] = {ld, tmp, preload ? preload : modules, preload ? modules : NULL, NULL};
    /* Opened here: the kernel's view of the container has no /dev. */
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        const char *what = "";
        const char *accel = getenv(ABI_ENV_QEMU_ACCEL);
        if (jail_enter(&what, served, qemu_mode() && accel && streq(accel, "kvm")) < 0) {
            dprintf(2, "bluebox-vmm: cannot give the kernel its view of the container (%s): %s\n",
                    what, strerror(errno));
            _exit(ABI_EXIT_SETUP);
        }
        /* Above the fds it is dup'ed to first: dup2 onto itself would keep it close-on-exec,
         * and the serial line's dup2 would replace it at SERIAL_FD. */
        if (net >= 0 && (net = fcntl(net, F_DUPFD_CLOEXEC, NET_FD + 1)) < 0)
            _exit(ABI_EXIT_SETUP);
        if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 ||
            dup2(serial, SERIAL_FD) < 0 || (net >= 0 && dup2(net, NET_FD) < 0))
            _exit(ABI_EXIT_SETUP);
        for (size_t i = 0; i < ELEMENTSOF(relayed_signals); i++)
            signal(relayed_signals[i], SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, mask, NULL);
        execve(argv[0], argv, envp);
        dprintf(2, "bluebox-vmm: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(ABI_EXIT_SETUP);
    }
    setpgid(pid, pid); /* also here: no race with a kill before the child ran */
    const char *what = "";
    if (jail_lock(&what) < 0)
        die("%s: %s", what, strerror(errno));
    if (null >= 0)
        close(null);
    if (log >= 0)
        close(log);
    return pid;
}

typedef struct relay {
    int sock, sigfd;
    int log_fd; /* UML's console log, opened before boot */
    pid_t uml;
    bool uml_alive;
    int uml_status;
    bool stdin_open, sock_open, tty_raw;
    bool ready; /* the guest set its end of the line raw (R frame): input may flow */
    int64_t started_ms;
    const char *failure; /* why we stopped the guest ourselves */
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    frame_decoder dec;
    bool have_exit;
    int exit_code;
    int64_t exit_at_ms;
    struct termios saved_tty;
    vmm_net *net; /* NULL for network: none */
    const disk_limit *disk;
    stdin_ring ring; /* stdin in bulk, once the guest said it reads it */
    pollvec pv;
} relay;

static void queue(relay *r, uint8_t type, const void *data, size_t n)
{
    if (r->out_off == r->out_len)
        r->out_off = r->out_len = 0;
    frame_append(&r->out, &r->out_len, &r->out_cap, type, data, n);
}

static void send_winsize(relay *r)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
        return;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "{\"rows\":%u,\"cols\":%u}", ws.ws_row, ws.ws_col);
    queue(r, FRAME_WINSIZE, buf, (size_t)n);
}

static int exit_code_of(const frame *f)
{
    json_error_t jerr;
    _cleanup_json_ json_t *o = json_loadb((const char *)f->data, f->len, 0, &jerr);
    json_t *code = json_object_get(o, "code");
    int c =
        json_is_integer(code) && json_integer_value(code) >= 0 && json_integer_value(code) <= 255
            ? (int)json_integer_value(code)
            : ABI_EXIT_SETUP;
    return c;
}

static void kill_guest(relay *r);

/* The ready frame says whether the guest reads stdin from the ring. Once it has the device
 * open, the file's name is of no more use: nothing in the guest should find it. */
static void ring_ready(relay *r, const frame *f)
{
    json_error_t jerr;
    _cleanup_json_ json_t *o = json_loadb((const char *)f->data, f->len, 0, &jerr);
    if (r->ring.fd < 0 || !json_is_true(json_object_get(o, "ring")))
        return;
    r->ring.usable = true;
    unlink(ABI_STDIN_RING);
}

static void on_frame(relay *r, const frame *f)
{
    /* Once the guest is being stopped for a failure, nothing more it says counts: a guest
     * kernel that restarted runs init again, whose own failure (no spec: it was read once)
     * and exit frame may arrive in the same read as its ready frame, and must not stand in
     * for the reason. */
    if (r->failure)
        return;
    switch (f->type) {
    case FRAME_STDOUT:
        payload_write(STDOUT_FILENO, f->data, f->len);
        break;
    case FRAME_STDERR:
        payload_write(STDERR_FILENO, f->data, f->len);
        break;
    case FRAME_READY:
        if (r->ready) {
            r->failure = "the guest kernel crashed and restarted";
            kill_guest(r);
        }
        r->ready = true;
        /* qemu: QEMU read the spec into the guest's fw_cfg at its start; the file goes. */
        if (qemu_mode())
            (void)unlink(ABI_SPEC_PATH);
        ring_ready(r, f);
        /* The workload starts only after G: cap the data disk first (disklimit.h). */
        if (r->disk->path && disk_limit_apply(r->disk, r->uml) < 0) {
            r->failure = "cannot cap the /data disk at its size (RLIMIT_FSIZE)";
            kill_guest(r);
        } else if (r->disk->path) {
            queue(r, FRAME_GO, NULL, 0);
        }
        break;
    case FRAME_RING_ACK:
        /* One that gives back more than is out changes nothing; said once. */
        if (!stdin_ring_ack(&r->ring, f->data, f->len) && !r->ring.warned) {
            r->ring.warned = true;
            fprintf(stderr, "bluebox-vmm: bad stdin acknowledgement from the guest\n");
        }
        break;
    case FRAME_EXIT:
        if (!r->have_exit) {
            r->have_exit = true;
            r->exit_code = exit_code_of(f);
            r->exit_at_ms = now_mono_ms();
        }
        break;
    default:
        break; /* nothing else is meaningful from the guest on this line */
    }
}

static void read_sock(relay *r)
{
    uint8_t buf[65536];
    ssize_t n = read(r->sock, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        r->sock_open = false;
        return;
    }
    size_t off = 0;
    while (off < (size_t)n && !r->dec.failed) {
        size_t used = 0;
        frame f;
        _cleanup_error_ bb_error *err = NULL;
        int k = frame_decoder_feed(&r->dec, buf + off, (size_t)n - off, &used, &f, &err);
        off += used;
        if (k < 0) {
            fprintf(stderr, "bluebox-vmm: bad data from the guest: %s\n", err->msg);
            r->sock_open = false;
            return;
        }
        if (k == 1)
            on_frame(r, &f);
    }
}

static void read_stdin(relay *r)
{
    uint8_t buf[ABI_STDIN_RING_CHUNK];
    size_t room = stdin_ring_room(&r->ring);
    ssize_t n = read(STDIN_FILENO, buf, r->ring.usable ? room : sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        r->stdin_open = false;
        queue(r, FRAME_STDIN_EOF, NULL, 0);
        return;
    }
    uint8_t where[8];
    if (r->ring.usable && stdin_ring_put(&r->ring, buf, (size_t)n, where))
        queue(r, FRAME_RING, where, sizeof where);
    else /* in order with the ring's chunks: the guest takes frames as they come */
        queue(r, FRAME_STDIN, buf, (size_t)n);
}

/* Room for more of stdin: the line's queue is short and, with the ring, the ring has some. */
static bool stdin_wanted(const relay *r)
{
    return r->ready && r->stdin_open && !r->have_exit && r->out_len - r->out_off < OUT_HIGH &&
           (!r->ring.usable || stdin_ring_room(&r->ring) > 0);
}

static void flush_sock(relay *r)
{
    if (!r->ready)
        return;
    while (r->out_off < r->out_len) {
        ssize_t w = send(r->sock, r->out + r->out_off, r->out_len - r->out_off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) { /* the guest is gone; what it did not read no longer matters */
            r->out_off = r->out_len;
            return;
        }
        r->out_off += (size_t)w;
    }
}

static void kill_guest(relay *r)
{
    if (!r->uml_alive)
        return;
    kill(-r->uml, SIGKILL);
    kill(r->uml, SIGKILL);
    /* ECHILD: reaped already; never left "alive" for the main loop to kill again forever. */
    if (waitpid(r->uml, &r->uml_status, 0) == r->uml || errno == ECHILD)
        r->uml_alive = false;
}

/* Reap every exited child: UML itself, and as the container's PID 1 the host processes UML
 * leaves behind. UML is recognised wherever it turns up: reaping it in the catch-all without
 * noticing (it exits between two waitpid calls) once left a build step's VMM waiting for a
 * guest that was gone, forever.
 *
 * UML dead by itself (killed from the host, a crash) takes its process group with it: the
 * host processes it made for guest processes share its file table, the agent socket's far end
 * among them, and one cloned just as UML died asks its new parent, us as PID 1, to trace it
 * and stops forever, keeping that socket open and this loop waiting on it. (The group's
 * number cannot be reused while a member is left; nothing else here makes a group.) */
static void reap_children(relay *r)
{
    int status;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0)
        if (p == r->uml && r->uml_alive) {
            r->uml_status = status;
            r->uml_alive = false;
            kill(-r->uml, SIGKILL);
        }
}

static void restore_tty(relay *r)
{
    if (r->tty_raw)
        tcsetattr(STDIN_FILENO, TCSADRAIN, &r->saved_tty);
    r->tty_raw = false;
}

/* Returns the signal that asks us to stop, or 0. */
static int read_signals(relay *r)
{
    struct signalfd_siginfo si;
    int stop = 0;
    while (read(r->sigfd, &si, sizeof si) == sizeof si) {
        switch (si.ssi_signo) {
        case SIGCHLD:
            reap_children(r);
            break;
        case SIGWINCH:
            send_winsize(r);
            break;
        default:
            stop = (int)si.ssi_signo;
            break;
        }
    }
    return stop;
}

/* The log holds what the guest printed on its console: never let it reach the user's
 * terminal as control sequences. */
static void print_log_line(const char *line)
{
    fputs(qemu_mode() ? "bluebox-vmm: qemu: " : "bluebox-vmm: uml: ", stderr);
    for (const unsigned char *c = (const unsigned char *)line; *c && *c != '\n'; c++) {
        if (*c == '\r' && (c[1] == '\0' || c[1] == '\n'))
            continue; /* a tty's line end (qemu's hvc0) */
        if (*c >= 0x20 && *c < 0x7f)
            fputc(*c, stderr);
        else
            fprintf(stderr, "\\x%02x", *c);
    }
    fputc('\n', stderr);
}

/* The last lines of the log, read from the fd kept since before boot: only its end (the
 * guest can make the file as big as the tmpfs), in one bounded read. */
static void show_log_tail(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    off_t off = st.st_size > LOG_TAIL ? st.st_size - LOG_TAIL : 0;
    _cleanup_free_ char *buf = xmalloc(LOG_TAIL + 1);
    ssize_t n = pread(fd, buf, LOG_TAIL, off);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *p = buf;
    if (off > 0) { /* a partial first line */
        char *nl = memchr(buf, '\n', (size_t)n);
        p = nl ? nl + 1 : buf + n;
    }
    const char *lines[8] = {0};
    size_t k = 0;
    for (char *save = NULL, *line = strtok_r(p, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        /* Stack dumps say nothing to a user; the lines around them do. Nor do UML's notes on
         * the console and serial lines left out on purpose (kernel_argv: con=none). */
        if (line[0] == ' ' || line[0] == '\t' || streq(line, "Stack:") ||
            streq(line, "Call Trace:") || startswith(line, "setup_one_line failed for device"))
            continue;
        lines[k++ % ELEMENTSOF(lines)] = line;
    }
    size_t first = k > ELEMENTSOF(lines) ? k - ELEMENTSOF(lines) : 0;
    for (size_t i = first; i < k; i++)
        print_log_line(lines[i % ELEMENTSOF(lines)]);
}

static int finish(relay *r)
{
    restore_tty(r);
    if (r->have_exit)
        return r->exit_code;
    if (r->failure)
        fprintf(stderr, "bluebox-vmm: %s; its last messages follow\n", r->failure);
    else if (WIFSIGNALED(r->uml_status))
        fprintf(stderr,
                "bluebox-vmm: the guest kernel was killed by signal %d before the "
                "command finished; its last messages follow\n",
                WTERMSIG(r->uml_status));
    else
        fprintf(stderr,
                "bluebox-vmm: the guest kernel stopped before the command finished "
                "(exit status %d); its last messages follow\n",
                WEXITSTATUS(r->uml_status));
    show_log_tail(r->log_fd);
    /* bluebox reports our last line: on qemu, the reason rather than QEMU's last warning. */
    const char *accel = getenv(ABI_ENV_QEMU_ACCEL);
    if (qemu_mode() && r->failure)
        fprintf(stderr, "bluebox-vmm: %s%s\n", r->failure,
                !r->ready && accel && streq(accel, "kvm")
                    ? " on KVM (a host whose KVM cannot run a standard guest kernel, such as a "
                      "nested paravirtual one, never boots it; " ABI_ENV_QEMU_ACCEL
                      "=tcg runs it emulated)"
                    : "");
    return ABI_EXIT_SETUP;
}

static int relay_loop(relay *r)
{
    for (;;) {
        if (!r->uml_alive && !r->sock_open)
            return finish(r);
        int timeout = -1;
        if (r->have_exit) {
            /* Reported: the guest is powering off; give it a moment, then make sure. */
            int64_t left = POWEROFF_GRACE_MS - mono_ms_since(r->exit_at_ms);
            if (left <= 0)
                kill_guest(r);
            if (!r->uml_alive)
                return finish(r);
            timeout = (int)left;
        } else if (!r->ready) {
            int64_t left = BOOT_TIMEOUT_MS - mono_ms_since(r->started_ms);
            if (left <= 0) {
                r->failure = "the guest kernel did not come up within 30 seconds";
                kill_guest(r);
                return finish(r);
            }
            timeout = (int)left;
        }
        if (r->failure && !r->uml_alive)
            return finish(r);
        r->pv.n = 0;
        pollvec_add(&r->pv, r->sigfd, POLLIN);
        pollvec_add(&r->pv, r->sock_open ? r->sock : -1,
                    (short)(POLLIN | (r->ready && r->out_off < r->out_len ? POLLOUT : 0)));
        pollvec_add(&r->pv, stdin_wanted(r) ? STDIN_FILENO : -1, POLLIN);
        net_poll_fill(r->net, &r->pv, &timeout);
        int pr = poll(r->pv.v, r->pv.n, timeout);
        if (pr < 0 && errno != EINTR)
            die("poll: %s", strerror(errno));
        net_poll_done(r->net, &r->pv, pr < 0);
        struct pollfd *p = r->pv.v;
        if (p[0].revents) {
            int sig = read_signals(r);
            if (sig) {
                kill_guest(r);
                restore_tty(r);
                return 128 + sig;
            }
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
            read_sock(r);
        if (r->sock_open && (p[1].revents & POLLOUT))
            flush_sock(r);
        if (p[2].revents)
            read_stdin(r);
        if (r->sock_open && r->out_off < r->out_len)
            flush_sock(r);
    }
}

static void tty_setup(relay *r, bool tty)
{
    if (!tty || tcgetattr(STDIN_FILENO, &r->saved_tty) < 0)
        return;
    struct termios raw = r->saved_tty;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0)
        r->tty_raw = true;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        die("no command to run (usage: bluebox-vmm COMMAND [ARG...])");
    _cleanup_spec_ launch_spec spec = {0};
    /* Not dumpable before the secrets are read: UML's process (same uid and capabilities, and
     * guest root can load modules into that kernel) must not ptrace us or read our memory,
     * nor a core dump hold the values. Our forks inherit it; UML's exec resets its own. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        die("cannot make bluebox-vmm undumpable: %s", strerror(errno));
    secrets_setup(&spec);
    spec_fill(&spec, argc, argv);
#ifdef BB_WEAKEN_KNOBS
    weaken_secrets(&spec);
#endif
    spec_mounts(&spec);
    /* A build step (runtime/buildvm.h): the guest writes the container's root in place,
     * through the file server (exports_fill). */
    const char *build = getenv(ABI_ENV_BUILD);
    if (build && streq(build, "1")) {
        spec.root_flags |= SPEC_ROOT_BUILD;
        jail_build_mode();
    }
    unsigned mib = ram_mib();
    vmm_net *net = net_setup(getenv(ABI_ENV_NETWORK), getenv(ABI_ENV_FORWARD), &vmm_secrets,
                             qemu_mode() ? NET_LINK_STREAM : NET_LINK_BESS);
    _cleanup_free_ char *dir = vmm_dir();
    /* Our bundle is in use while we live: bluebox removes an old one only when it can lock
     * this file exclusively (runtime/uml_bundle.c). The fd stays open, unread. */
    _cleanup_free_ char *inuse = xasprintf("%s/bluebox-vmm", dir);
    int inuse_fd = open(inuse, O_RDONLY | O_CLOEXEC);
    if (inuse_fd >= 0)
        (void)flock(inuse_fd, LOCK_SH);
    disk_limit disk;
    const char *why = NULL;
    if (!disk_limit_init(&disk, &why))
        die("%s", why);
    /* Only a run or a shell has a stdin to carry. */
    stdin_ring ring = {.fd = -1};
    if (spec.mode == SPEC_RUN || spec.mode == SPEC_SHELL)
        (void)stdin_ring_open(&ring);
    exports ex = {0};
    exports_fill(&ex, &spec);
    _cleanup_strv_ strv kargv = {0};
    if (qemu_mode())
        qemu_cmdline(&kargv, dir, mib, &ex, SERIAL_FD, net, &disk);
    else
        kernel_argv(&kargv, dir, mib, net, &disk, &ring, &ex);
    write_spec(&spec);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        die("socketpair: %s", strerror(errno));
    sigset_t old;
    relay r = {.sock = sv[0],
               .log_fd = open_log(),
               .stdin_open = true,
               .sock_open = true,
               .uml_alive = true,
               .net = net,
               .disk = &disk,
               .ring = ring};
    r.sigfd = signals_setup(&old);
    frame_decoder_init(&r.dec);
    r.started_ms = now_mono_ms();
    /* The file server listens before UML boots: virtio_uml connects while it probes. Its
     * messages go to UML's log, shown when the guest dies. */
    if (ex.n) {
        _cleanup_error_ bb_error *err = NULL;
        if (fsd_server_start(ex.v, ex.n, r.log_fd, &err) < 0)
            die("cannot start the file server for %s: %s", ex.v[0].path, err->msg);
    }
    r.uml = start_uml(kargv.v, dir, sv[1], net_peer_fd(net), r.log_fd, &old, &ex.unjailed);
    exports_clear(&ex);
    close(sv[1]);
    net_peer_close(net);
    fcntl(r.sock, F_SETFL, fcntl(r.sock, F_GETFL) | O_NONBLOCK);
    tty_setup(&r, spec.tty);
    int code = relay_loop(&r);
    frame_decoder_done(&r.dec);
    free(r.out);
    free(r.pv.v);
    stdin_ring_close(&r.ring);
    net_free(net);
    fflush(stdout);
    return code;
}
