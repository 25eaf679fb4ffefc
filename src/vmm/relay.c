/* The relay between the machine's control line and our stdio. See relay.h. */
#include "vmm/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/json.h"
#include "util/time.h"
#include "util/xalloc.h"
#include "vmm/vmm.h"

/* Stop reading our stdin while this much is still waiting to go to the guest. */
#define OUT_HIGH (1u << 20)
/* After the exit frame, how long the guest gets to power off before we kill it. */
#define POWEROFF_GRACE_MS 3000
/* From fork to the guest's ready frame; a boot takes well under a second. */
#define BOOT_TIMEOUT_MS 30000
/* How much of the end of UML's log is read to show its last messages. */
#define LOG_TAIL 65536

static volatile sig_atomic_t unused_signal;
static void note_signal(int sig)
{
    /* Never runs while the signals are blocked; installed so that, as PID 1 of the
     * container, we receive them at all (init ignores signals it has no handler for). */
    unused_signal = sig;
}

static const int relayed_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGWINCH};

int relay_signals(sigset_t *old)
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
        vmm_die("signalfd: %s", strerror(errno));
    return fd;
}

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
        if (r->m->spec_copied)
            (void)unlink(ABI_SPEC_PATH);
        ring_ready(r, f);
        /* The workload starts only after G: cap the data disk first (disklimit.h). */
        if (r->disk->path && disk_limit_apply(r->disk, r->vm) < 0) {
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
    if (!r->vm_alive)
        return;
    if (r->m->stop(r->vm, &r->vm_status))
        r->vm_alive = false;
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
        if (p == r->vm && r->vm_alive) {
            r->vm_status = status;
            r->vm_alive = false;
            kill(-r->vm, SIGKILL);
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
static void print_log_line(const machine *m, const char *line)
{
    fprintf(stderr, "bluebox-vmm: %s: ", m->name);
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
static void show_log_tail(const machine *m, int fd)
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
        print_log_line(m, lines[i % ELEMENTSOF(lines)]);
}

static int finish(relay *r)
{
    restore_tty(r);
    if (r->have_exit)
        return r->exit_code;
    if (r->failure)
        fprintf(stderr, "bluebox-vmm: %s; its last messages follow\n", r->failure);
    else if (WIFSIGNALED(r->vm_status))
        fprintf(stderr,
                "bluebox-vmm: the guest kernel was killed by signal %d before the "
                "command finished; its last messages follow\n",
                WTERMSIG(r->vm_status));
    else
        fprintf(stderr,
                "bluebox-vmm: the guest kernel stopped before the command finished "
                "(exit status %d); its last messages follow\n",
                WEXITSTATUS(r->vm_status));
    show_log_tail(r->m, r->log_fd);
    /* bluebox reports our last line: the reason rather than the machine's last warning. */
    const char *note = r->m->failure_note(r->ready);
    if (note && *note)
        fprintf(stderr, "bluebox-vmm: %s%s\n",
                r->failure ? r->failure : "the guest kernel stopped before it was ready", note);
    return ABI_EXIT_SETUP;
}

/* Something on the lifeline: the release byte (the VM belongs to a file now: stop watching)
 * or EOF, the last owner gone. Returns whether the owner is gone. */
static bool owner_gone(relay *r)
{
    char c;
    ssize_t n = read(r->lifeline, &c, 1);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return false;
    close(r->lifeline);
    r->lifeline = -1;
    return !(n == 1 && c == ABI_LIFELINE_RELEASE);
}

static int relay_loop(relay *r)
{
    for (;;) {
        if (!r->vm_alive && !r->sock_open)
            return finish(r);
        int timeout = -1;
        if (r->have_exit) {
            /* Reported: the guest is powering off; give it a moment, then make sure. */
            int64_t left = POWEROFF_GRACE_MS - mono_ms_since(r->exit_at_ms);
            if (left <= 0)
                kill_guest(r);
            if (!r->vm_alive)
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
        if (r->failure && !r->vm_alive)
            return finish(r);
        r->pv.n = 0;
        pollvec_add(&r->pv, r->sigfd, POLLIN);
        pollvec_add(&r->pv, r->sock_open ? r->sock : -1,
                    (short)(POLLIN | (r->ready && r->out_off < r->out_len ? POLLOUT : 0)));
        pollvec_add(&r->pv, stdin_wanted(r) ? STDIN_FILENO : -1, POLLIN);
        pollvec_add(&r->pv, r->lifeline, POLLIN);
        net_poll_fill(r->net, &r->pv, &timeout);
        int pr = poll(r->pv.v, r->pv.n, timeout);
        if (pr < 0 && errno != EINTR)
            vmm_die("poll: %s", strerror(errno));
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
        if (p[3].revents && owner_gone(r)) {
            /* No one is left to read the output or stop the VM, and a VM without an owner
             * would go on writing a /data that reset or restore may be replacing. */
            kill_guest(r);
            restore_tty(r);
            fprintf(stderr, "bluebox-vmm: the bluebox that owns this VM is gone; stopped it\n");
            return 128 + SIGKILL;
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

int relay_run(relay *r, bool tty)
{
    frame_decoder_init(&r->dec);
    fcntl(r->sock, F_SETFL, fcntl(r->sock, F_GETFL) | O_NONBLOCK);
    tty_setup(r, tty);
    int code = relay_loop(r);
    frame_decoder_done(&r->dec);
    free(r->out);
    free(r->pv.v);
    stdin_ring_close(&r->ring);
    return code;
}
