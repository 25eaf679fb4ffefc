/* The uml guest init. The kernel runs the static bluebox as PID 1 (init=/.bluebox/bluebox)
 * with the container's filesystem as its root through hostfs. It mounts the kernel
 * filesystems, reads and deletes the launch spec bluebox-vmm left on the exec tmpfs, builds
 * the guest's own root (root.c: the image under a RAM layer) and switches into it, opens
 * the control serial line, runs the command there as the spec's user with the spec's env
 * and cwd, relays its stdio as agent frames, reaps every process, sends the exit frame and
 * powers off. PID 1 must never exit (that is a kernel panic): every failure becomes an E
 * frame, an X frame with a non-zero code and a power-off. */
#include "init.h"
#include "bootmark.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "agent.h"
#include "abi/chain.h"
#include "abi/proto.h"
#include "guest/cainstall.h"
#include "guest/cpuinfo.h"
#include "guest/datadisk.h"
#include "guest/root.h"
#include "abi/spec.h"
#include "guest/stdin_relay.h"
#include "guest/stdin_ring.h"
#include "guest/user.h"
#include "util/fs.h"
#include "util/time.h"
#include "util/xalloc.h"

/* UML's first serial line (ssl0=fd:K on the host side). */
#define SERIAL_DEV   "/dev/ttyS0"
#define TMPFS_MAGIC_ 0x01021994
/* The X frame carries ABI_EXIT_SETUP or ABI_EXIT_NOSTART when the command never ran. */
/* After the command exits, how long its stdout/stderr may still drain (background
 * processes holding the pipes would otherwise keep the sandbox up forever). */
#define DRAIN_MS 250
/* Stop reading stdin frames while this much is waiting for the command to read. */
#define STDIN_HIGH (1u << 20)
/* The most of /etc/motd an interactive shell shows. */
#define MOTD_MAX (64u << 10)

static int serial = -1;
/* stdin in bulk (abi/abi.h): opened before the ready frame, which says whether we have it. */
static stdin_ring_reader ring = {.fd = -1};

static _noreturn_ void power_off(void)
{
    sync();
    reboot(RB_POWER_OFF);
    /* Not a guest kernel (or not PID 1): nothing to power off. */
    _exit(ABI_EXIT_SETUP);
}

static void send_exit(int code, const char *why)
{
    if (serial < 0)
        return;
    _cleanup_free_ char *msg = NULL;
    if (why) {
        /* The message travels in an E frame; the X frame only says there was one. */
        msg = xasprintf("{\"code\":%d,\"err\":\"guest setup failed\"}", code);
    } else {
        msg = xasprintf("{\"code\":%d}", code);
    }
    frame_write(serial, FRAME_EXIT, msg, strlen(msg), NULL);
    tcdrain(serial);
}

/* Report a failure before the command started and power off. */
static _noreturn_ void fail(const char *fmt, ...) _printf_(1, 2);
static _noreturn_ void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *m = xvasprintf(fmt, ap);
    va_end(ap);
    _cleanup_free_ char *line = xasprintf("bluebox: guest init: %s\n", m);
    if (serial >= 0)
        frame_write(serial, FRAME_STDERR, line, strlen(line), NULL);
    else
        (void)!write(STDERR_FILENO, line, strlen(line)); /* the kernel console: UML's log */
    send_exit(ABI_EXIT_SETUP, m);
    power_off();
}

static void mount_one(const char *src, const char *dir, const char *type, unsigned long flags,
                      const char *data)
{
    mkdir(dir, 0755);
    if (mount(src, dir, type, flags, data) < 0 && errno != EBUSY)
        fail("cannot mount %s on %s: %s", type, dir, strerror(errno));
}

static bool is_tmpfs(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == TMPFS_MAGIC_;
}

static void mount_kernel_fs(bool qemu)
{
    const unsigned long nosuid = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    /* Through hostfs these paths first show the container's own mounts; ours go on top. On
     * qemu the boot root is the initramfs (a tmpfs itself), whose /dev is empty. */
    if (qemu || !is_tmpfs("/dev")) /* uml: CONFIG_DEVTMPFS_MOUNT usually did it already */
        mount_one("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
    mount_one("proc", "/proc", "proc", nosuid, NULL);
    mount_one("sysfs", "/sys", "sysfs", nosuid, NULL);
    mount_one("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620");
    struct stat st;
    if (lstat("/dev/ptmx", &st) < 0)
        (void)!symlink("pts/ptmx", "/dev/ptmx");
    mount_one("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
    /* No uevent helper: each device or module added from here on (overlay, fuse, virtio-fs,
     * loop) would otherwise exec the image's /sbin/hotplug, and on uml every exec, even of a
     * file that is not there, costs a new host process (~2 ms; bench/boot_profile.py). */
    _cleanup_close_ int fd = open("/proc/sys/kernel/hotplug", O_WRONLY | O_CLOEXEC);
    if (fd >= 0)
        (void)!write(fd, "\n", 1);
}

static void open_serial(void)
{
    serial = open(SERIAL_DEV, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (serial < 0)
        fail("cannot open the control line %s: %s", SERIAL_DEV, strerror(errno));
    struct termios t;
    if (tcgetattr(serial, &t) < 0)
        fail("cannot read the control line's settings: %s", strerror(errno));
    /* Frames are binary: no echo, no CR/NL mapping, no flow-control characters. */
    cfmakeraw(&t);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(serial, TCSANOW, &t) < 0)
        fail("cannot set the control line raw: %s", strerror(errno));
    /* Until now the line was cooked (and before the open, UML dropped what arrived): the
     * host holds stdin back until this frame says the line is ready. */
    struct utsname u;
    bool have_ring = stdin_ring_reader_open(&ring);
    _cleanup_free_ char *ready =
        xasprintf("{\"kernel\":\"%s\",\"ring\":%s}", uname(&u) == 0 ? u.release : "",
                  have_ring ? "true" : "false");
    frame_write(serial, FRAME_READY, ready, strlen(ready), NULL);
}

static void loopback_up(void)
{
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        fail("cannot find the loopback interface: %s", strerror(errno));
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        fail("cannot bring up the loopback interface: %s", strerror(errno));
}

/* network: bridge (or none with the agent's forward). bluebox-vmm gives the kernel a device
 * only then, wired to libslirp: UML's vector device vec0, QEMU's virtio-net eth0 (whose MTU the
 * device sets). The guest is 10.0.2.15/24, its gateway 10.0.2.2, its DNS 10.0.2.3. */
#define NET_DEV  (guest_root_is_qemu() ? ABI_QEMU_NET_DEV : "vec0")
#define NET_ADDR "10.0.2.15"
#define NET_MASK "255.255.255.0"
#define NET_GW   "10.0.2.2"
#define NET_DNS  "10.0.2.3"

static void set_addr(struct sockaddr *sa, const char *ip)
{
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    *in = (struct sockaddr_in){.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &in->sin_addr);
}

/* Whether the VMM gave the guest its network device. Asked of sysfs: if_nametoindex() of a
 * device that is not there makes the kernel call modprobe (netdev-NAME, CAP_NET_ADMIN), an
 * exec of the image's modprobe that cannot find a module and cost 10-40 ms of every boot
 * (bench/boot_profile.py). */
static bool net_dev_present(void)
{
    char path[64];
    snprintf(path, sizeof path, "/sys/class/net/%s", NET_DEV);
    return access(path, F_OK) == 0;
}

static void network_up(void)
{
    if (!net_dev_present())
        return; /* network: none */
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        fail("socket: %s", strerror(errno));
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, NET_DEV);
    set_addr(&ifr.ifr_addr, NET_ADDR);
    if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
        fail("cannot set the address of %s: %s", NET_DEV, strerror(errno));
    set_addr(&ifr.ifr_netmask, NET_MASK);
    if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
        fail("cannot set the netmask of %s: %s", NET_DEV, strerror(errno));
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        fail("cannot read the flags of %s: %s", NET_DEV, strerror(errno));
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        fail("cannot bring up %s: %s", NET_DEV, strerror(errno));
    struct rtentry rt = {.rt_flags = RTF_UP | RTF_GATEWAY, .rt_dev = (char *)NET_DEV};
    set_addr(&rt.rt_dst, "0.0.0.0");
    set_addr(&rt.rt_genmask, "0.0.0.0");
    set_addr(&rt.rt_gateway, NET_GW);
    if (ioctl(s, SIOCADDRT, &rt) < 0)
        fail("cannot add the default route via %s: %s", NET_GW, strerror(errno));
}

/* The root of a machine of its own (root.c); /etc/resolv.conf names slirp's DNS. */
static void root_setup(const launch_spec *spec)
{
    _cleanup_error_ bb_error *err = NULL;
    if (guest_root_setup(spec, net_dev_present() ? NET_DNS : NULL, &err) < 0)
        fail("%s", err->msg);
}

/* The sandbox CA of the VMM's TLS broker, when it brokers secrets (cainstall.h): trusted
 * before any workload runs. */
static void ca_setup(launch_spec *spec)
{
    if (!spec->ca_pem)
        return;
    _cleanup_strv_ strv shared = {0};
    for (size_t i = 0; i < spec->n_mounts; i++)
        strv_add(&shared, spec->mounts[i].path);
    _cleanup_error_ bb_error *err = NULL;
    if (ca_install("", spec->ca_pem, spec->root_flags & SPEC_ROOT_RO, &shared, &spec->env, &err) <
        0)
        fail("%s", err->msg);
}

/* ps and top work on UML's /proc/cpuinfo (cpuinfo.c). */
static void cpuinfo_fix(void)
{
    _cleanup_error_ bb_error *err = NULL;
    if (cpuinfo_setup(&err) < 0)
        fail("%s", err->msg);
}

/* qemu: QEMU hands the spec over as a fw_cfg file (vmm/qemu_argv.h). It stays readable to guest
 * root through the fw_cfg ports; it holds nothing the guest does not have anyway (its own
 * command, environment with secrets as placeholders, user, and for up the agent's chain
 * head, which the guest's agent holds in memory). */
#define QEMU_SPEC "/sys/firmware/qemu_fw_cfg/by_name/" ABI_QEMU_SPEC_FWCFG "/raw"

static void read_spec(launch_spec *spec)
{
    _cleanup_error_ bb_error *err = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    const char *path = guest_root_is_qemu() ? QEMU_SPEC : ABI_SPEC_PATH;
    if (read_file(path, SPEC_MAX, &data, &len, &err) < 0)
        fail("no launch spec (%s); bluebox-vmm writes it before the guest boots", err->msg);
    /* Read once: nothing in the guest may find it later. */
    if (!guest_root_is_qemu() && unlink(ABI_SPEC_PATH) < 0)
        fail("cannot remove the launch spec: %s", strerror(errno));
    int r = spec_decode(data, len, spec, &err);
    explicit_bzero(data, len); /* an up sandbox's spec carries its agent token */
    if (r < 0)
        fail("%s", err->msg);
}

/* Take the agent's chain head out of the spec's environment, so no command inherits it. */
static char *take_token(launch_spec *spec)
{
    const size_t n = strlen(ABI_ENV_AGENT_HEAD "=");
    char *token = NULL;
    size_t j = 0;
    for (size_t i = 0; i < spec->env.n; i++) {
        char *e = spec->env.v[i];
        if (strncmp(e, ABI_ENV_AGENT_HEAD "=", n) != 0) {
            spec->env.v[j++] = e;
            continue;
        }
        if (!token)
            token = xstrdup(e + n);
        explicit_bzero(e, strlen(e));
        free(e);
    }
    spec->env.n = j;
    if (spec->env.v)
        spec->env.v[j] = NULL;
    return token;
}

/* mode agent (bluebox up): PID 1 serves the agent, and reaps every orphan while it does. */
static _noreturn_ void run_agent(launch_spec *spec)
{
    _cleanup_free_ char *head = take_token(spec);
    agent_config cfg = {.env = spec->env.v,
                        .dir = spec->cwd,
                        .set_ids = true,
                        .uid = spec->uid,
                        .gid = spec->gid,
                        .groups = spec->groups,
                        .n_groups = spec->n_groups};
    if (hex_decode(head, cfg.head, sizeof cfg.head) < 0)
        fail("no agent chain head in the launch spec (it is set by bluebox up)");
    _cleanup_error_ bb_error *err = NULL;
    agent_serve(&cfg, &err);
    fail("%s", err ? err->msg : "the agent stopped");
}

typedef struct child_io {
    int in, out, err; /* our ends; for a pty all three are the master (err = -1) */
    int pty;
    char *pts;
} child_io;

static void make_pipes(child_io *io, int theirs[3])
{
    int p[3][2];
    for (int i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0)
            fail("pipe: %s", strerror(errno));
    io->in = p[0][1], theirs[0] = p[0][0];
    io->out = p[1][0], theirs[1] = p[1][1];
    io->err = p[2][0], theirs[2] = p[2][1];
    io->pty = -1;
}

static void make_pty(child_io *io, const launch_spec *spec)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
        fail("cannot allocate a terminal: %s", strerror(errno));
    char *name = ptsname(m);
    if (!name)
        fail("cannot allocate a terminal: %s", strerror(errno));
    io->pts = xstrdup(name);
    if (spec->rows && spec->cols) {
        struct winsize ws = {.ws_row = (unsigned short)spec->rows,
                             .ws_col = (unsigned short)spec->cols};
        ioctl(m, TIOCSWINSZ, &ws);
    }
    io->pty = io->in = io->out = m;
    io->err = -1;
}

static _noreturn_ void child_fail(const char *what, const char *arg)
{
    dprintf(STDERR_FILENO, "bluebox: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "",
            strerror(errno));
    _exit(ABI_EXIT_NOSTART);
}

/* In the forked child: become the command. */
static _noreturn_ void exec_command(const launch_spec *spec, const child_io *io, int theirs[3])
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    setsid();
    if (io->pty >= 0) {
        int t = open(io->pts, O_RDWR); /* the first tty a session leader opens is its own */
        if (t < 0 || ioctl(t, TIOCSCTTY, 0) < 0)
            _exit(ABI_EXIT_NOSTART);
        theirs[0] = theirs[1] = theirs[2] = t;
    }
    for (int i = 0; i < 3; i++)
        if (dup2(theirs[i], i) < 0)
            _exit(ABI_EXIT_NOSTART);
    if (io->pty >= 0 && theirs[0] > STDERR_FILENO) /* not O_CLOEXEC: stdio only */
        close(theirs[0]);
    if (setgroups(spec->n_groups, spec->groups) < 0)
        child_fail("cannot set the supplementary groups", NULL);
    if (setgid(spec->gid) < 0)
        child_fail("cannot switch to group", NULL);
    if (setuid(spec->uid) < 0)
        child_fail("cannot switch to user", NULL);
    if (chdir(spec->cwd) < 0)
        child_fail("cannot change to directory", spec->cwd);
    extern char **environ;
    environ = spec->env.v ? spec->env.v : (char *[]){NULL};
    execvp(spec->argv.v[0], spec->argv.v);
    child_fail("cannot run", spec->argv.v[0]);
}

static pid_t start_command(const launch_spec *spec, child_io *io)
{
    int theirs[3] = {-1, -1, -1};
    if (spec->tty)
        make_pty(io, spec);
    else
        make_pipes(io, theirs);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0)
        exec_command(spec, io, theirs);
    for (int i = 0; i < 3; i++)
        if (theirs[i] >= 0)
            close(theirs[i]);
    fcntl(io->in, F_SETFL, fcntl(io->in, F_GETFL) | O_NONBLOCK);
    return pid;
}

typedef struct relay {
    child_io io;
    pid_t pid;
    bool exited;
    int status;
    int64_t exited_at_ms;
    stdin_relay in; /* the command's stdin, from the host's i frames */
    frame_decoder dec;
    bool serial_open;
} relay;

/* A chunk of stdin in the ring: into the command's queue, and the ring space back to the
 * host. One that cannot be read ends stdin there, said on stderr, rather than pass on a
 * stream with a hole in it. */
static void take_ring_chunk(relay *r, const frame *f)
{
    const uint8_t *data;
    uint8_t ack[4];
    ssize_t n = stdin_ring_take(&ring, f->data, f->len, &data, ack);
    if (n < 0) {
        static const char msg[] = "bluebox: guest init: cannot read stdin from the host; "
                                  "the command's input ends here\n";
        if (!r->in.eof)
            frame_write(serial, FRAME_STDERR, msg, sizeof msg - 1, NULL);
        stdin_relay_eof(&r->in);
        return;
    }
    stdin_relay_add(&r->in, data, (size_t)n);
    frame_write(serial, FRAME_RING_ACK, ack, sizeof ack, NULL);
}

static void on_frame(relay *r, const frame *f)
{
    switch (f->type) {
    case FRAME_STDIN:
        stdin_relay_add(&r->in, f->data, f->len);
        break;
    case FRAME_STDIN_EOF:
        stdin_relay_eof(&r->in);
        break;
    case FRAME_RING:
        take_ring_chunk(r, f);
        break;
    case FRAME_WINSIZE: {
        unsigned rows = 0, cols = 0;
        char buf[128];
        size_t n = f->len < sizeof buf - 1 ? f->len : sizeof buf - 1;
        memcpy(buf, f->data, n);
        buf[n] = '\0';
        if (r->io.pty >= 0 && sscanf(buf, "{\"rows\":%u,\"cols\":%u}", &rows, &cols) == 2 &&
            rows <= 65535 && cols <= 65535) {
            struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
            ioctl(r->io.pty, TIOCSWINSZ, &ws);
        }
        break;
    }
    default:
        break;
    }
}

static void read_serial(relay *r)
{
    uint8_t buf[65536];
    ssize_t n = read(serial, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        r->serial_open = false;
        return;
    }
    size_t off = 0;
    while (off < (size_t)n) {
        size_t used = 0;
        frame f;
        int k = frame_decoder_feed(&r->dec, buf + off, (size_t)n - off, &used, &f, NULL);
        if (k < 0) { /* the host side is ours; garbage means the line is broken */
            r->serial_open = false;
            return;
        }
        off += used;
        if (k == 1)
            on_frame(r, &f);
    }
    stdin_relay_push(&r->in);
}

/* Forward what the command wrote. Returns false at EOF. */
static bool forward(int fd, uint8_t type)
{
    uint8_t buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0) /* EOF, or EIO from a pty master whose terminal every process closed */
        return false;
    frame_write(serial, type, buf, (size_t)n, NULL);
    return true;
}

static void reap(relay *r)
{
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (p == r->pid && !r->exited) {
            r->exited = true;
            r->status = st;
            r->exited_at_ms = now_mono_ms();
        }
}

static void relay_loop(relay *r, int sigfd)
{
    for (;;) {
        bool out_open = r->io.out >= 0, err_open = r->io.err >= 0;
        int timeout = -1;
        if (r->exited) {
            int64_t left = DRAIN_MS - mono_ms_since(r->exited_at_ms);
            if ((!out_open && !err_open) || left <= 0)
                return;
            timeout = (int)left;
        }
        struct pollfd p[5] = {
            {.fd = sigfd, .events = POLLIN},
            {.fd = r->serial_open && stdin_relay_queued(&r->in) < STDIN_HIGH ? serial : -1,
             .events = POLLIN},
            {.fd = r->io.out, .events = POLLIN},
            {.fd = r->io.err, .events = POLLIN},
            {.fd = stdin_relay_wants_write(&r->in) ? r->in.fd : -1, .events = POLLOUT},
        };
        if (poll(p, ELEMENTSOF(p), timeout) < 0 && errno != EINTR)
            return;
        if (p[0].revents) {
            struct signalfd_siginfo si;
            while (read(sigfd, &si, sizeof si) == sizeof si)
                ;
            reap(r);
        }
        if (p[1].revents)
            read_serial(r);
        if (p[2].revents && !forward(r->io.out, FRAME_STDOUT)) {
            if (r->io.out != r->in.fd)
                close(r->io.out);
            r->io.out = -1;
        }
        if (p[3].revents && !forward(r->io.err, FRAME_STDERR)) {
            close(r->io.err);
            r->io.err = -1;
        }
        if (p[4].revents)
            stdin_relay_push(&r->in);
    }
}

static int exit_code(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

static int signals_setup(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    signal(SIGPIPE, SIG_IGN);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0)
        fail("signalfd: %s", strerror(errno));
    return fd;
}

/* An interactive login shows the image's /etc/motd first, as login(1) does; piped shells
 * get only what their commands print. Lines end in \r\n: the host's terminal is raw. */
static void show_motd(void)
{
    _cleanup_free_ char *motd = NULL;
    size_t len = 0;
    if (read_file("/etc/motd", MOTD_MAX, &motd, &len, NULL) < 0 || len == 0)
        return;
    _cleanup_sb_ strbuf b = {0};
    for (size_t i = 0; i < len; i++) {
        if (motd[i] == '\n' && (i == 0 || motd[i - 1] != '\r'))
            sb_putn(&b, "\r", 1);
        sb_putn(&b, motd + i, 1);
    }
    frame_write(serial, FRAME_STDOUT, b.s, b.len, NULL);
}

/* mode shell: the user's login shell from the image (user.h), whatever the host asked for
 * (the host cannot see the image's /etc/passwd). */
static void login_shell(launch_spec *spec)
{
    if (spec->tty)
        show_motd();
    strv_clear(&spec->argv);
    strv_push(&spec->argv, user_login_shell(spec->uid));
    strv_add(&spec->argv, "-l");
}

int guest_init_main(int argc, char **argv)
{
    (void)argc, (void)argv; /* kernel command-line leftovers */
    guest_boot_mark("start");
    umask(022);
    int sigfd = signals_setup();
    /* A qemu guest boots from bluebox's initramfs (backends/uml_bundle.c), which marks it. */
    bool qemu = access(ABI_QEMU_MARKER, F_OK) == 0;
    mount_kernel_fs(qemu);
    guest_boot_mark("kernel filesystems");
    open_serial();
    guest_boot_mark("control line");
    if (qemu) {
        _cleanup_error_ bb_error *err = NULL;
        if (guest_root_qemu(&err) < 0)
            fail("%s", err->msg);
    }
    _cleanup_spec_ launch_spec spec = {0};
    read_spec(&spec);
    guest_boot_mark("spec");
    root_setup(&spec);
    guest_boot_mark("root");
    ca_setup(&spec);
    if (!guest_root_is_qemu()) /* a real kernel's /proc/cpuinfo needs no fixing */
        cpuinfo_fix();
    if (spec.hostname[0] && sethostname(spec.hostname, strlen(spec.hostname)) < 0)
        fail("cannot set the hostname: %s", strerror(errno));
    guest_boot_mark("cpuinfo, hostname");
    loopback_up();
    guest_boot_mark("loopback");
    network_up();
    guest_boot_mark("network");
    /* data_limit: /data is the sandbox's disk, mounted over the shared /data once
     * bluebox-vmm has capped the files it may grow (datadisk.c). */
    _cleanup_free_ char *why = NULL;
    if (datadisk_setup(serial, &why) < 0)
        fail("%s", why);
    guest_boot_mark("data disk");
    /* Once, from the image's files as they are before any workload ran: every command of an
     * up sandbox (exec, shell) runs as the same user as run. */
    _cleanup_error_ bb_error *user_err = NULL;
    if (user_apply(&spec, &user_err) < 0)
        fail("%s", user_err->msg);
    guest_boot_mark("user");
    if (spec.mode == SPEC_AGENT)
        run_agent(&spec);
    if (spec.mode == SPEC_SHELL)
        login_shell(&spec);

    relay r = {.serial_open = true};
    frame_decoder_init(&r.dec);
    r.pid = start_command(&spec, &r.io);
    guest_boot_mark("command started");
    stdin_relay_init(&r.in, r.io.in, r.io.pty >= 0);
    relay_loop(&r, sigfd);
    if (!r.exited) { /* the host line broke: nobody is listening any more */
        kill(-r.pid, SIGKILL);
        while (!r.exited)
            if (waitpid(r.pid, &r.status, 0) == r.pid)
                r.exited = true;
    }
    send_exit(exit_code(r.status), NULL);
    power_off();
}
