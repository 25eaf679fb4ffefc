/* Host side of the agent protocol (see client.h). */
#include "agent_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "core/runlog.h"
#include "abi/chain.h"
#include "util/time.h"
#include "util/xalloc.h"

#define DIAL_MS 2000
/* The agent answers a hello at once when idle. A silence this long is a lost connection,
 * not a slow guest: the 30 s stalls once seen under twenty execs at once were connections
 * the VMM's forward had dropped (its listen backlog of 1, see net/slirp.c). */
#define HANDSHAKE_MS 30000
/* Stdin queued for the agent before we stop reading our stdin. */
#define OUT_HIGH ((size_t)1024 * 1024)
#define CHUNK    65536
/* How long after the command's timeout the agent may still be silent: it kills the group at
 * the timeout and reports within a second or so; only a broken or hostile guest takes this. */
#define EXIT_GRACE_MS 15000

static int parse_addr(const char *addr, struct sockaddr_in *sa)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || colon - addr > 15)
        return -1;
    char host[16];
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || *end || port < 1 || port > 65535)
        return -1;
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

/* Connect to "127.0.0.1:<port>" (2 s at most). */
static int agent_connect(const char *addr, agent_conn *ret, bb_error **err)
{
    *ret = (agent_conn){.fd = -1};
    struct sockaddr_in sa;
    if (parse_addr(addr, &sa) < 0)
        return bb_fail(err, EINVAL, "bad agent address \"%s\"", addr);
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return bb_fail_errno(err, errno, "socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (errno != EINPROGRESS)
            return bb_fail_errno(err, errno, "cannot connect to the agent at %s", addr);
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int r;
        while ((r = poll(&p, 1, DIAL_MS)) < 0 && errno == EINTR)
            ;
        if (r == 0)
            return bb_fail(err, ETIMEDOUT, "the agent at %s did not accept within 2s", addr);
        int e = 0;
        socklen_t el = sizeof e;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (r < 0 || e)
            return bb_fail_errno(err, r < 0 ? errno : e, "cannot connect to the agent at %s", addr);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    ret->fd = steal_fd(&fd);
    ret->handshake_ms = HANDSHAKE_MS;
    frame_decoder_init(&ret->dec);
    return 0;
}

void agent_conn_close(agent_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    frame_decoder_done(&c->dec);
    c->fd = -1;
}

/* Refuse an agent that reports this host's own kernel: that is a container, not a VM. */
static int agent_kernel_gate(const char *guest_kernel, bb_error **err)
{
    struct utsname u;
    if (uname(&u) < 0)
        return bb_fail_errno(err, errno, "uname");
    if (streq(u.release, guest_kernel))
        return bb_fail(err, EPERM,
                       "not isolated: the agent reports the host's own kernel %s. This is a "
                       "container, not a microVM; refusing to run anything in it",
                       guest_kernel);
    return 0;
}

static void set_timeout(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* One frame, blocking (within the handshake timeout). */
static int read_one(agent_conn *c, frame *f, bb_error **err)
{
    int r = frame_read(c->fd, &c->dec, f, err);
    if (r == 0)
        return bb_fail(err, ECONNRESET, "the agent closed the connection");
    if (r < 0 && err && *err && (*err)->status == EAGAIN)
        return bb_prefix(err, "the agent did not answer within %dms", c->handshake_ms);
    return r < 0 ? -1 : 0;
}

/* The agent's challenge names a chain value; the hello carries it (and the next epoch's
 * head when asked). Every copy of a value derived from the token is wiped once sent. */
static int send_hello(agent_conn *c, const char *token, const agent_hello *h, bb_error **err)
{
    frame f;
    if (read_one(c, &f, err) < 0)
        return -1;
    agent_challenge ch;
    if (f.type != FRAME_CHALLENGE)
        return bb_fail(err, EPROTO, "agent protocol error: expected a challenge frame");
    if (challenge_decode((const char *)f.data, f.len, &ch, err) < 0)
        return -1;
    uint8_t v[SHA256_LEN];
    char proof[2 * SHA256_LEN + 1], next[2 * SHA256_LEN + 1];
    chain_value(token, ch.epoch, ch.index, v);
    hex_encode(v, sizeof v, proof);
    agent_hello hh = *h;
    hh.proof = proof;
    hh.next_head = NULL;
    if (ch.rotate && ch.epoch < CHAIN_EPOCH_MAX) {
        chain_value(token, ch.epoch + 1, CHAIN_LEN, v);
        hex_encode(v, sizeof v, next);
        hh.next_head = next;
    }
    explicit_bzero(v, sizeof v);
    size_t len;
    char *hello = hello_encode(&hh, &len);
    explicit_bzero(proof, sizeof proof);
    int r = frame_write(c->fd, FRAME_HELLO, hello, len, err);
    explicit_bzero(hello, len);
    free(hello);
    return r;
}

/* Read the agent's challenge, send the hello with the chain value (chain.h) derived from
 * token that answers it (h->proof and h->next_head are filled in here), and wait for the
 * ready frame; *ret_kernel is the kernel it reports, which has already passed
 * agent_kernel_gate. */
static int agent_handshake(agent_conn *c, const char *token, const agent_hello *h,
                           char **ret_kernel, bb_error **err)
{
    set_timeout(c->fd, c->handshake_ms);
    if (send_hello(c, token, h, err) < 0)
        return -1;
    frame f;
    if (read_one(c, &f, err) < 0)
        return -1;
    if (f.type != FRAME_READY)
        return bb_fail(err, EPROTO, "agent protocol error: expected a ready frame");
    _cleanup_free_ char *kernel = NULL;
    if (ready_decode((const char *)f.data, f.len, &kernel, err) < 0 ||
        agent_kernel_gate(kernel, err) < 0)
        return -1;
    set_timeout(c->fd, 0);
    *ret_kernel = steal_pointer(&kernel);
    return 0;
}

int agent_ping(const char *addr, const char *token, int timeout_ms, char **ret_kernel,
               bb_error **err)
{
    _cleanup_agent_conn_ agent_conn c = {.fd = -1};
    if (agent_connect(addr, &c, err) < 0)
        return -1;
    c.handshake_ms = timeout_ms;
    agent_hello h = {0};
    _cleanup_free_ char *kernel = NULL;
    if (agent_handshake(&c, token, &h, &kernel, err) < 0)
        return -1;
    set_timeout(c.fd, timeout_ms);
    frame f;
    if (read_one(&c, &f, err) < 0)
        return -1;
    agent_exit x;
    if (f.type != FRAME_EXIT || exit_decode((const char *)f.data, f.len, &x, err) < 0)
        return bb_fail(err, EPROTO, "agent protocol error: a ping got no exit frame");
    int code = x.code;
    free(x.err);
    if (code != 0)
        return bb_fail(err, EPROTO, "the agent answered a ping with code %d", code);
    *ret_kernel = steal_pointer(&kernel);
    return 0;
}

int agent_open(const char *addr, const char *token, const agent_hello *h, agent_conn *c,
               char **ret_kernel, bb_error **err)
{
    /* The agent keeps at most AGENT_MAX_UNAUTH (256) connections waiting for their hello and
     * drops the oldest beyond that, and closes one that stays silent for 3 s; a flood of other
     * peers can make ours one of them. A connection closed before the ready frame ran
     * nothing, so it is tried again, a few times. */
    int r = -1;
    for (int attempt = 0; attempt < 5; attempt++) {
        if (attempt > 0) {
            bb_error_clear(err);
            agent_conn_close(c);
            *c = (agent_conn){.fd = -1};
            usleep((useconds_t)(50000 << attempt));
        }
        r = agent_connect(addr, c, err);
        if (r == 0)
            r = agent_handshake(c, token, h, ret_kernel, err);
        if (r == 0 || !err || !*err || (*err)->status != ECONNRESET)
            break;
    }
    return r;
}

/* ---- the session ------------------------------------------------------------------------ */

typedef struct sess {
    agent_conn *c;
    const agent_io *io;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    bool stdin_open, done;
    int forwarded; /* an interrupting signal already went to the remote group */
    int stop_sig;  /* a second one came: we hang up */
    agent_exit x;
} sess;

static void queue(sess *s, uint8_t type, const void *data, size_t n)
{
    if (s->out_off == s->out_len)
        s->out_off = s->out_len = 0;
    frame_append(&s->out, &s->out_len, &s->out_cap, type, data, n);
}

static void send_winsize(sess *s)
{
    struct winsize ws;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0)
        return;
    size_t len;
    _cleanup_free_ char *w = winsize_encode(ws.ws_row, ws.ws_col, &len);
    queue(s, FRAME_WINSIZE, w, len);
}

static int on_frame(sess *s, const frame *f, bb_error **err)
{
    switch (f->type) {
    case FRAME_STDOUT:
    case FRAME_STDERR:
        payload_write(f->type == FRAME_STDOUT ? STDOUT_FILENO : STDERR_FILENO, f->data, f->len);
        runlog_write(s->io->log, f->data, f->len);
        return 0;
    case FRAME_EXIT:
        if (exit_decode((const char *)f->data, f->len, &s->x, err) < 0)
            return -1;
        s->done = true;
        return 0;
    default:
        return bb_fail(err, EPROTO, "agent protocol error: unexpected frame '%c'", f->type);
    }
}

static int read_sock(sess *s, bb_error **err)
{
    uint8_t buf[CHUNK];
    ssize_t n = read(s->c->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return bb_fail(err, ECONNRESET, "the connection to the agent was lost");
    for (size_t off = 0; off < (size_t)n && !s->done;) {
        size_t used = 0;
        frame f;
        int k = frame_decoder_feed(&s->c->dec, buf + off, (size_t)n - off, &used, &f, err);
        if (k < 0)
            return -1;
        off += used;
        if (k == 1 && on_frame(s, &f, err) < 0)
            return -1;
    }
    return 0;
}

static void read_stdin(sess *s)
{
    uint8_t buf[CHUNK];
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        s->stdin_open = false;
        queue(s, FRAME_STDIN_EOF, NULL, 0);
        return;
    }
    queue(s, FRAME_STDIN, buf, (size_t)n);
}

static int flush_sock(sess *s, bb_error **err)
{
    while (s->out_off < s->out_len) {
        ssize_t w = send(s->c->fd, s->out + s->out_off, s->out_len - s->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w < 0)
            return bb_fail(err, ECONNRESET, "the connection to the agent was lost");
        s->out_off += (size_t)w;
    }
    return 0;
}

static void on_signals(sess *s, int sigfd)
{
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGWINCH) {
            if (s->io->tty)
                send_winsize(s);
            continue;
        }
        if (s->forwarded) {
            s->stop_sig = (int)si.ssi_signo;
            continue;
        }
        s->forwarded = (int)si.ssi_signo;
        size_t len;
        _cleanup_free_ char *k = signal_encode((int)si.ssi_signo, &len);
        queue(s, FRAME_SIGNAL, k, len);
    }
}

static int relay(sess *s, int sigfd, bb_error **err)
{
    int64_t deadline = s->io->timeout_seconds > 0
                           ? now_mono_ms() + (int64_t)s->io->timeout_seconds * 1000 + EXIT_GRACE_MS
                           : -1;
    while (!s->done) {
        struct pollfd p[3] = {
            {.fd = sigfd, .events = POLLIN},
            {.fd = s->c->fd, .events = (short)(POLLIN | (s->out_off < s->out_len ? POLLOUT : 0))},
            {.fd = s->stdin_open && s->out_len - s->out_off < OUT_HIGH ? STDIN_FILENO : -1,
             .events = POLLIN},
        };
        int pr = poll(p, 3, poll_timeout_until(deadline, now_mono_ms()));
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "poll");
        }
        if (pr == 0) /* silent until past the deadline: pending data would have woken us */
            return bb_fail(err, ETIMEDOUT,
                           "the agent did not report the command's end within %ds of its "
                           "timeout (timeout_seconds: %d)",
                           EXIT_GRACE_MS / 1000, s->io->timeout_seconds);
        if (p[0].revents)
            on_signals(s, sigfd);
        if (s->stop_sig) {
            int r = bb_fail(err, EINTR,
                            "interrupted again: hung up on the agent, which ends the "
                            "command when its client is gone");
            if (err && *err)
                (*err)->exit = 128 + s->stop_sig;
            return r;
        }
        if (p[1].revents & (POLLIN | POLLHUP | POLLERR) && read_sock(s, err) < 0)
            return -1;
        if (p[2].revents)
            read_stdin(s);
        if (flush_sock(s, err) < 0)
            return -1;
    }
    return 0;
}

int agent_session(agent_conn *c, const agent_io *io, agent_exit *ret, bb_error **err)
{
    sess s = {.c = c, .io = io, .stdin_open = io->forward_stdin};
    queue(&s, FRAME_GO, NULL, 0);
    if (!io->forward_stdin)
        queue(&s, FRAME_STDIN_EOF, NULL, 0);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);

    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGWINCH);
    sigprocmask(SIG_BLOCK, &mask, &old);
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    sigaction(SIGPIPE, &ign, &old_pipe);
    int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    struct termios saved;
    bool raw = io->tty && isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    if (raw) {
        struct termios t = saved;
        cfmakeraw(&t);
        raw = tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0;
    }
    int r = sigfd < 0 ? bb_fail_errno(err, errno, "signalfd") : relay(&s, sigfd, err);
    if (raw)
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved);
    if (sigfd >= 0)
        close(sigfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    free(s.out);
    if (r < 0) {
        free(s.x.err);
        return -1;
    }
    *ret = s.x;
    return 0;
}
