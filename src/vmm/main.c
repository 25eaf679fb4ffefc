/* bluebox-vmm: the uml and qemu backends' process inside the podman container. It records
 * its own OCI process (argv, env, cwd, ids, hostname) as the launch spec on the exec tmpfs,
 * starts the file server and the network (net/slirp.h), boots the machine (machine.h: the
 * UML kernel or QEMU) as its child with one serial line on a socketpair as the control
 * channel, and relays agent frames between that line and its own stdio (relay.h). The
 * guest's console goes to a log on the tmpfs, shown only when the guest dies without
 * reporting an exit code. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi.h"
#include "fsd/serve.h"
#include "abi/spec.h"
#include "net/secrets.h"
#include "net/slirp.h"
#include "net/tlsbroker.h"
#include "util/time.h"
#include "util/xalloc.h"
#include "vmm/disklimit.h"
#include "vmm/exports.h"
#include "vmm/jail.h"
#include "vmm/machine.h"
#include "vmm/relay.h"
#include "vmm/stdin_ring_writer.h"
#include "vmm/vmm.h"

/* security/weaken's lifeline (bluebox-vmm-weak only): lifeline_take. */
#define WEAKEN_LIFELINE "BLUEBOX_WEAKEN_LIFELINE"

/* Our own control variables: consumed here, never part of the workload's environment. */
static const char *const control_vars[] = {
    ABI_ENV_DATA_DISK,    ABI_ENV_FORWARD,    ABI_ENV_MODE,         ABI_ENV_NETWORK,
    ABI_ENV_RAM_MIB,      "BLUEBOX_UML_ARGS", ABI_ENV_USER,         "BLUEBOX_FSD_MAX_FDS",
    "BLUEBOX_UML_HOSTFS", ABI_ENV_NET_DENY,   "BLUEBOX_WEAKEN_NET", ABI_ENV_NET_ALLOW,
    ABI_ENV_NET_LOG,      ABI_ENV_SANDBOX,    "BLUEBOX_WEAKEN_DNS", "BLUEBOX_WEAKEN_SNI",
    ABI_ENV_VMM_KIND,     ABI_ENV_QEMU_ACCEL, ABI_ENV_CPUS,         "BLUEBOX_QEMU_CMDLINE",
    ABI_ENV_BUILD,        ABI_ENV_LIFELINE,   WEAKEN_LIFELINE,
};

void vmm_die(const char *fmt, ...)
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
        vmm_die(ABI_ENV_RAM_MIB " must be a number of MiB between " ABI_STR(
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
        vmm_die(ABI_ENV_MODE " must be run, shell, probe or agent, not '%s'", mode);
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
    /* We run as the container's root (src/backends/uml.c); the workload's user is the image's
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
static bool fs_served(const machine *m, const char *path, bool file, unsigned long f)
{
    if (m->serves_all)
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

static unsigned spec_mount_flags(const machine *m, const char *path, unsigned long f)
{
    struct stat st;
    bool file = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    return (f & MS_RDONLY ? SPEC_MOUNT_RO : 0) | (f & MS_NOSUID ? SPEC_MOUNT_NOSUID : 0) |
           (f & MS_NODEV ? SPEC_MOUNT_NODEV : 0) | (f & MS_NOEXEC ? SPEC_MOUNT_NOEXEC : 0) |
           (file ? SPEC_MOUNT_FILE : 0) | (fs_served(m, path, file, f) ? SPEC_MOUNT_FS : 0);
}

/* The guest's root is the image under a RAM layer; /data and the Bluefile's mounts are
 * mounts of their own, as the container has them (jail_guest_mount() is the same rule the
 * jail binds the hostfs ones by). A read-only container root stays read-only. */
static void spec_mounts(launch_spec *s, const machine *mach)
{
    _cleanup_(jail_mounts_clearp) jail_mounts m = {0};
    if (jail_mounts_read(&m) < 0)
        vmm_die("cannot read the container's mounts: %s", strerror(errno));
    for (size_t i = 0; i < m.n; i++) {
        const char *p = m.points.v[i];
        if (streq(p, "/")) {
            s->root_flags = m.flags[i] & MS_RDONLY ? SPEC_ROOT_RO : 0;
            continue;
        }
        if (!jail_guest_mount(p))
            continue;
        if (!spec_mount_path_ok(p))
            vmm_die("cannot hand the mount %s to the guest: not a plain absolute path", p);
        spec_add_mount(s, p, spec_mount_flags(mach, p, m.flags[i]));
    }
}

static void write_spec(const launch_spec *s)
{
    size_t len;
    _cleanup_free_ char *data = spec_encode(s, &len);
    if (len > SPEC_MAX)
        vmm_die("the command line and environment are too large (%zu bytes)", len);
    _cleanup_close_ int fd =
        open(ABI_SPEC_PATH, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        vmm_die("cannot create the launch spec %s: %s (is the tmpfs %s mounted?)", ABI_SPEC_PATH,
                strerror(errno), ABI_MEM_DIR);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            vmm_die("cannot write the launch spec: %s", strerror(errno));
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
        vmm_die("%s", err->msg);
    if (vmm_secrets.n == 0)
        return;
    static const char *const trust[] = TLSBROKER_TRUST_FILES;
    if (tlsbroker_start(&vmm_secrets, trust, ELEMENTSOF(trust), &err) < 0)
        vmm_die("%s", err->msg);
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

/* The lifeline (runtime/lifeline.h): the inherited read end of a pipe whose write ends only
 * the VM's owners hold; -1 when the launch has none (a build step, the isolation probe). An
 * fd that is no pipe is refused: a VM told it has an owner must be able to see it go. */
static int lifeline_take(void)
{
    const char *v = getenv(ABI_ENV_LIFELINE);
    if (!v)
        return -1;
    char *end = NULL;
    long fd = strtol(v, &end, 10);
    struct stat st;
    if (!*v || *end || fd < 3 || fd > 64 || fstat((int)fd, &st) < 0 || !S_ISFIFO(st.st_mode))
        vmm_die(ABI_ENV_LIFELINE "=%s names no inherited pipe", v);
    (void)fcntl((int)fd, F_SETFD, FD_CLOEXEC); /* never the guest kernel's */
#ifdef BB_WEAKEN_KNOBS
    /* security/weaken's lifeline: a VMM that ignores its owner, so that the escape suite's
     * lifeline check can be seen to fail. */
    const char *weak = getenv(WEAKEN_LIFELINE);
    if (weak && streq(weak, "1"))
        return -1;
#endif
    return (int)fd;
}

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

/* UML's console log, made before boot and kept open: the guest sees /.bluebox/mem and may
 * replace the path with a symlink (to /dev/zero, say) or a FIFO, never this file, which is
 * where the tail is read from. -1 when it cannot be made (the console then goes nowhere).
 * Appended to: QEMU writes its guest's console there through a second open of its own
 * (vmm/qemu_argv.h), beside its stderr on this one. */
static int open_log(void)
{
    int fd = open(
        VMM_LOG, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return -1;
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        vmm_die("no command to run (usage: bluebox-vmm COMMAND [ARG...])");
    _cleanup_spec_ launch_spec spec = {0};
    /* Not dumpable before the secrets are read: UML's process (same uid and capabilities, and
     * guest root can load modules into that kernel) must not ptrace us or read our memory,
     * nor a core dump hold the values. Our forks inherit it; UML's exec resets its own. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        vmm_die("cannot make bluebox-vmm undumpable: %s", strerror(errno));
    secrets_setup(&spec);
    spec_fill(&spec, argc, argv);
#ifdef BB_WEAKEN_KNOBS
    weaken_secrets(&spec);
#endif
    const machine *mach = machine_get();
    spec_mounts(&spec, mach);
    /* A build step (runtime/buildvm.h): the guest writes the container's root in place,
     * through the file server (exports_fill). */
    const char *build = getenv(ABI_ENV_BUILD);
    if (build && streq(build, "1"))
        spec.root_flags |= SPEC_ROOT_BUILD;
    unsigned mib = ram_mib();
    vmm_net *net =
        net_setup(getenv(ABI_ENV_NETWORK), getenv(ABI_ENV_FORWARD), &vmm_secrets, mach->link);
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
        vmm_die("%s", why);
    /* Only a run or a shell has a stdin to carry. */
    stdin_ring ring = {.fd = -1};
    if (spec.mode == SPEC_RUN || spec.mode == SPEC_SHELL)
        (void)stdin_ring_open(&ring);
    exports ex = {0};
    exports_fill(&ex, &spec, mach->serves_all);
    _cleanup_strv_ strv kargv = {0};
    machine_conf mc = {
        .dir = dir, .ram_mib = mib, .ex = &ex, .net = net, .disk = &disk, .ring = &ring};
    mach->argv(&mc, &kargv);
    write_spec(&spec);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        vmm_die("socketpair: %s", strerror(errno));
    sigset_t old;
    relay r = {.m = mach,
               .sock = sv[0],
               .log_fd = open_log(),
               .stdin_open = true,
               .sock_open = true,
               .vm_alive = true,
               .net = net,
               .lifeline = lifeline_take(),
               .disk = &disk,
               .ring = ring};
    r.sigfd = relay_signals(&old);
    r.started_ms = now_mono_ms();
    /* The file server listens before the machine boots: virtio_uml connects while it probes. Its
     * messages go to UML's log, shown when the guest dies. */
    if (ex.n) {
        _cleanup_error_ bb_error *err = NULL;
        if (fsd_server_start(ex.v, ex.n, spec.root_flags & SPEC_ROOT_BUILD, r.log_fd, &err) < 0)
            vmm_die("cannot start the file server for %s: %s", ex.v[0].path, err->msg);
    }
    machine_io io = {.dir = dir,
                     .serial = sv[1],
                     .net = net_peer_fd(net),
                     .log_fd = r.log_fd,
                     .mask = &old,
                     .served = &ex.unjailed};
    r.vm = mach->start(kargv.v, &io);
    exports_clear(&ex);
    close(sv[1]);
    net_peer_close(net);
    int code = relay_run(&r, spec.tty);
    net_free(net);
    fflush(stdout);
    return code;
}
