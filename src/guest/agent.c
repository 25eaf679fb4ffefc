/* The in-guest agent: one poll loop serving any number of connections. Every byte a peer
 * sends is hostile until its hello proves the index our challenge named (a value of the
 * hash chain in chain.h: the guest holds only the chain's head, never the token): at most
 * AGENT_MAX_UNAUTH such peers, each closed AGENT_HELLO_MS after it connected, a wrong proof
 * closed without a word.
 * An authenticated session runs one command (no shell) in its own session and process
 * group, relays stdin/stdout/stderr as frames with back-pressure in both directions (a slow
 * peer stops the command's output being read, it never makes us buffer more), applies the
 * timeout, and kills the group when the peer goes away. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "abi/chain.h"
#include "abi/msg.h"
#include "pathexec.h"
#include "abi/proto.h"
#include "stdin_relay.h"
#include "util/env.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Unauthenticated peers held at once; past it the one silent longest goes. Room for a burst
 * of hundreds of execs, each of which speaks as soon as it hears its challenge. */
#define AGENT_MAX_UNAUTH 256
/* What unauthenticated peers' half-read hellos may hold together; past it the largest goes. */
#define AGENT_UNAUTH_BYTES ((size_t)16 << 20)
#define AGENT_HELLO_MS     3000
/* Connections waiting for us to accept them. A full queue made the guest's kernel answer
 * with SYN cookies, and a connection whose last ACK it then dropped was never heard of
 * again while its client waited for the challenge (the kernel caps this at somaxconn). */
#define AGENT_BACKLOG 4096
/* Descriptors one connection may hold: its socket, the command's stdin, stdout, stderr and
 * the exec error pipe; and some for everything else. */
#define FDS_PER_CONN 5
/* Commands started in one round of the loop, at most (agent_serve). */
#define STARTS_PER_ROUND 8
#define FDS_RESERVED     32
/* Output queued for a peer before we stop reading the command's pipes. */
#define OUT_HIGH ((size_t)256 * 1024)
/* Stdin queued for a command before we stop reading the peer. */
#define IN_HIGH ((size_t)1024 * 1024)
/* After the command exits, how long a background process holding its stdout may keep the
 * session open. */
#define DRAIN_MS 1000
#define CHUNK    65536

typedef enum { C_HELLO, C_WAIT_GO, C_RUNNING, C_CLOSING } conn_state;

typedef struct conn {
    int fd;
    conn_state st;
    long long hello_deadline; /* AGENT_HELLO_MS after the challenge left (or the accept) */
    bool challenged;          /* the challenge is all in the socket: the clock runs from then */
    frame_decoder dec;
    uint8_t *out; /* frames for the peer */
    size_t out_len, out_off, out_cap;
    stdin_relay in; /* the command's stdin; with a pty in.fd == cout == master */
    agent_hello req;
    bool holds_index; /* the challenge's index, not yet proven */
    uint32_t epoch, index;
    pid_t pid;
    int cout, cerr, errpipe; /* our ends; with a pty cerr = -1 */
    bool exited, timed_out;
    bool evict; /* an unauthenticated peer holding too much: closed when next served */
    int status;
    long long deadline, exited_at;
    strbuf start_err;
    struct conn *next;
} conn;

typedef struct agent {
    const agent_config *cfg;
    int lfd, sigfd;
    conn *conns;
    size_t unauth, nconns;
    size_t max_conns;     /* what the descriptor limit leaves room for */
    bool accept_full;     /* accept failed for want of descriptors: wait for a close */
    struct rlimit nofile; /* the limit commands get (ours is raised) */
    chain_state chain;
    char kernel[65];
} agent;

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void queue(conn *c, uint8_t type, const void *data, size_t n)
{
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    frame_append(&c->out, &c->out_len, &c->out_cap, type, data, n);
}

static void queue_exit(conn *c, int code, bool timed_out, const char *msg)
{
    agent_exit x = {.code = code, .timed_out = timed_out, .err = (char *)msg};
    size_t len;
    _cleanup_free_ char *s = exit_encode(&x, &len);
    queue(c, FRAME_EXIT, s, len);
    c->st = C_CLOSING;
}

static void kill_group(conn *c)
{
    if (c->pid > 0 && !c->exited)
        kill(-c->pid, SIGKILL);
}

static void conn_free(agent *a, conn *c)
{
    if (c->st == C_HELLO)
        a->unauth--;
    a->nconns--;
    a->accept_full = false;
    if (c->holds_index)
        chain_release(&a->chain, c->epoch, c->index);
    kill_group(c); /* the peer is gone: so is its command (waitpid(-1) reaps it) */
    close_fd(&c->fd);
    if (c->cout != c->in.fd)
        close_fd(&c->cout);
    stdin_relay_done(&c->in);
    close_fd(&c->cerr);
    close_fd(&c->errpipe);
    frame_decoder_done(&c->dec);
    free(c->out);
    free(c->start_err.s);
    hello_clear(&c->req);
    free(c);
}

/* ---- starting a command ---------------------------------------------------------------- */

/* The command's environment: the base, with the request's variables replacing or added. */
static char **command_env(const agent_config *cfg, const strv *req)
{
    strv env = {0};
    for (char *const *e = cfg->env; e && *e; e++) {
        size_t k = strcspn(*e, "=");
        bool replaced = false;
        for (size_t i = 0; i < req->n && !replaced; i++)
            replaced = strncmp(req->v[i], *e, k + 1) == 0;
        if (!replaced)
            strv_add(&env, *e);
    }
    for (size_t i = 0; i < req->n; i++)
        strv_add(&env, req->v[i]);
    if (!env.v)
        strv_add(&env, "PATH=" EXEC_DEFAULT_PATH);
    return env.v;
}

/* In the vfork child: no allocation, no stdio; one write and out. */
static _noreturn_ void child_fail(int errpipe, const char *what, const char *arg)
{
    int e = errno;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s%s%s: %s", what, arg ? " " : "", arg ? arg : "",
                     strerrordesc_np(e) ? strerrordesc_np(e) : "error");
    (void)!write(errpipe, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    _exit(ABI_EXIT_NOSTART);
}

/* The child of vfork (a process costs far more to copy in a uml guest than to start): only
 * system calls here, and everything it needs prepared by the parent. */
typedef struct child_args {
    int *fds; /* the command's stdio: three */
    int errpipe;
    const char *pts;
    char **env, **sh_argv;
} child_args;

static _noreturn_ void exec_child(const agent *a, const conn *c, const child_args *ca)
{
    const agent_config *cfg = a->cfg;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    setsid(); /* its own session and process group: the group is killed as one */
    setrlimit(RLIMIT_NOFILE, &a->nofile); /* the limit we were given, not the one we raised */
    int errpipe = ca->errpipe;
    int fds[3] = {ca->fds[0], ca->fds[1], ca->fds[2]}; /* ours: vfork shares the parent's memory */
    if (ca->pts) {
        int t = open(ca->pts, O_RDWR);
        if (t < 0 || ioctl(t, TIOCSCTTY, 0) < 0)
            child_fail(errpipe, "cannot open the terminal", ca->pts);
        fds[0] = fds[1] = fds[2] = t;
    }
    for (int i = 0; i < 3; i++)
        if (dup2(fds[i], i) < 0)
            child_fail(errpipe, "cannot set up stdio", NULL);
    if (ca->pts && fds[0] > STDERR_FILENO) /* opened without O_CLOEXEC: the command's stdio only */
        close(fds[0]);
    if (cfg->set_ids &&
        (setgroups(cfg->n_groups, cfg->groups) < 0 || setgid(cfg->gid) < 0 || setuid(cfg->uid) < 0))
        child_fail(errpipe, "cannot switch to the sandbox's user", NULL);
    const char *dir = c->req.dir ? c->req.dir : cfg->dir;
    if (chdir(dir) < 0)
        child_fail(errpipe, "cannot change to directory", dir);
    exec_in_path(c->req.argv.v[0], c->req.argv.v, ca->env, ca->sh_argv); /* its PATH, not ours */
    child_fail(errpipe, "cannot run", c->req.argv.v[0]);
}

static __attribute__((noinline)) pid_t spawn_child(const agent *a, const conn *c,
                                                   const child_args *ca)
{
    /* vfork on purpose (see exec_child): the child makes only system calls, then execs. */
    pid_t pid = vfork(); // NOLINT(clang-analyzer-security.insecureAPI.vfork)
    if (pid == 0)
        exec_child(a, c, ca); // NOLINT(clang-analyzer-unix.Vfork)
    return pid;
}

static int open_stdio(conn *c, int theirs[3], char **ret_pts)
{
    if (c->req.tty) {
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        const char *name = m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0 ? ptsname(m) : NULL;
        if (!name) {
            if (m >= 0)
                close(m);
            return -1;
        }
        *ret_pts = xstrdup(name);
        if (c->req.rows && c->req.cols) {
            struct winsize ws = {.ws_row = (unsigned short)c->req.rows,
                                 .ws_col = (unsigned short)c->req.cols};
            ioctl(m, TIOCSWINSZ, &ws);
        }
        stdin_relay_init(&c->in, m, true);
        c->cout = m;
        return 0;
    }
    int p[3][2];
    for (int i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0) {
            for (int j = 0; j < i; j++)
                close(p[j][0]), close(p[j][1]);
            return -1;
        }
    stdin_relay_init(&c->in, p[0][1], false);
    theirs[0] = p[0][0];
    c->cout = p[1][0], theirs[1] = p[1][1];
    c->cerr = p[2][0], theirs[2] = p[2][1];
    return 0;
}

static void start_command(agent *a, conn *c)
{
    int theirs[3] = {-1, -1, -1}, ep[2];
    _cleanup_free_ char *pts = NULL;
    if (open_stdio(c, theirs, &pts) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
        _cleanup_free_ char *m =
            xasprintf("cannot set up the command's stdio: %s", strerror(errno));
        queue_exit(c, ABI_EXIT_NOSTART, false, m);
        return;
    }
    char **env = command_env(a->cfg, &c->req.env);
    _cleanup_free_ char **sh_argv = exec_script_argv(c->req.argv.v);
    child_args ca = {.fds = theirs, .errpipe = ep[1], .pts = pts, .env = env, .sh_argv = sh_argv};
    pid_t pid = spawn_child(a, c, &ca);
    int e = errno;
    strv envv = {.v = env};
    for (envv.n = 0; env[envv.n]; envv.n++)
        ;
    strv_clear(&envv);
    close(ep[1]);
    for (int i = 0; i < 3; i++)
        if (theirs[i] >= 0)
            close(theirs[i]);
    if (pid < 0) {
        close(ep[0]);
        _cleanup_free_ char *m = xasprintf("cannot start the command: %s", strerror(e));
        queue_exit(c, ABI_EXIT_NOSTART, false, m);
        return;
    }
    c->pid = pid;
    c->errpipe = ep[0];
    set_nonblock(c->errpipe);
    set_nonblock(c->in.fd);
    if (c->cout != c->in.fd)
        set_nonblock(c->cout);
    if (c->cerr >= 0)
        set_nonblock(c->cerr);
    if (c->req.timeout_seconds > 0)
        c->deadline = now_mono_ms() + (long long)c->req.timeout_seconds * 1000;
    c->st = C_RUNNING;
}

/* ---- frames from the peer --------------------------------------------------------------- */

/* Whether the hello proves the index this connection was given; a proven index is spent.
 * A client asked to rotate may bring the next epoch's head. */
static bool proven(agent *a, conn *c)
{
    uint8_t proof[SHA256_LEN];
    if (!c->req.proof || hex_decode(c->req.proof, proof, sizeof proof) < 0)
        return false;
    bool ok = chain_verify(&a->chain, c->epoch, c->index, proof);
    explicit_bzero(proof, sizeof proof);
    c->holds_index = false; /* spent, or (a wrong value) given back by chain_verify */
    if (!ok)
        return false;
    uint8_t next[SHA256_LEN];
    if (c->req.next_head && hex_decode(c->req.next_head, next, sizeof next) == 0)
        chain_rotate(&a->chain, c->epoch, next);
    return true;
}

/* Returns false when the connection must close now (silence for anyone unauthenticated). */
static bool on_hello(agent *a, conn *c, const frame *f)
{
    _cleanup_error_ bb_error *err = NULL;
    int r = hello_decode((const char *)f->data, f->len, &c->req, &err);
    if (!proven(a, c))
        return false;
    a->unauth--;
    c->st = C_WAIT_GO;
    size_t len;
    _cleanup_free_ char *ready = ready_encode(a->kernel, &len);
    queue(c, FRAME_READY, ready, len);
    if (r < 0)
        queue_exit(c, ABI_EXIT_SETUP, false, err->msg);
    else if (c->req.argv.n == 0)
        queue_exit(c, 0, false, NULL); /* a ping */
    return true;
}

static bool on_frame(agent *a, conn *c, const frame *f)
{
    if (c->st == C_HELLO)
        return f->type == FRAME_HELLO && on_hello(a, c, f);
    if (c->st == C_WAIT_GO) {
        if (f->type != FRAME_GO)
            return false;
        start_command(a, c);
        return true;
    }
    if (c->st != C_RUNNING)
        return true; /* the exit frame is on its way; late input does not matter */
    switch (f->type) {
    case FRAME_STDIN:
        stdin_relay_add(&c->in, f->data, f->len);
        return true;
    case FRAME_STDIN_EOF:
        stdin_relay_eof(&c->in);
        return true;
    case FRAME_WINSIZE: {
        unsigned rows, cols;
        if (c->in.pty && winsize_decode((const char *)f->data, f->len, &rows, &cols, NULL) == 0) {
            struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
            ioctl(c->in.fd, TIOCSWINSZ, &ws);
        }
        return true;
    }
    case FRAME_SIGNAL: {
        int sig;
        if (signal_decode((const char *)f->data, f->len, &sig, NULL) == 0 && !c->exited)
            kill(-c->pid, sig);
        return true;
    }
    default:
        return false;
    }
}

/* Unauthenticated peers may together hold AGENT_UNAUTH_BYTES of half-read hellos; past it the
 * one holding most goes (c itself: false). The others are only marked: the serving loop
 * may be walking past them. */
static bool unauth_within_bounds(agent *a, conn *c)
{
    size_t total = 0;
    conn *big = NULL;
    for (conn *o = a->conns; o; o = o->next) {
        if (o->st != C_HELLO || o->evict)
            continue;
        total += o->dec.cap;
        if (!big || o->dec.cap > big->dec.cap)
            big = o;
    }
    if (total <= AGENT_UNAUTH_BYTES || !big)
        return true;
    if (big == c)
        return false;
    big->evict = true;
    return true;
}

static bool read_peer(agent *a, conn *c)
{
    uint8_t buf[CHUNK];
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    if (n == 0)
        return false;
    size_t off = 0;
    while (off < (size_t)n) {
        size_t used = 0;
        frame f;
        int k = frame_decoder_feed(&c->dec, buf + off, (size_t)n - off, &used, &f, NULL);
        if (k < 0)
            return false;
        off += used;
        if (k == 1 && !on_frame(a, c, &f))
            return false;
    }
    if (c->st == C_HELLO && !unauth_within_bounds(a, c))
        return false;
    if (c->st == C_RUNNING)
        stdin_relay_push(&c->in);
    return true;
}

static bool flush_peer(conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno == EAGAIN;
        c->out_off += (size_t)w;
    }
    return true;
}

/* ---- the command's side ----------------------------------------------------------------- */

/* Read what the command wrote into a frame. */
static void read_output(conn *c, int *fd, uint8_t type)
{
    uint8_t buf[CHUNK];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* EOF, or EIO from a pty whose every user has gone */
        if (*fd == c->in.fd) {
            c->cout = -1;
            close_fd(&c->in.fd);
        } else {
            close_fd(fd);
        }
        return;
    }
    queue(c, type, buf, (size_t)n);
}

static void read_errpipe(conn *c)
{
    char buf[512];
    ssize_t n = read(c->errpipe, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n > 0 && c->start_err.len < 4096) {
        sb_putn(&c->start_err, buf, (size_t)n);
        return;
    }
    close_fd(&c->errpipe);
}

static void maybe_finish(conn *c, long long now)
{
    if (c->st != C_RUNNING || !c->exited || c->errpipe >= 0)
        return;
    bool open_out = c->cout >= 0 || c->cerr >= 0;
    if (open_out && c->out_len - c->out_off >= OUT_HIGH)
        c->exited_at = now; /* the peer is slow, not the command: wait for it */
    if (open_out && now - c->exited_at < DRAIN_MS)
        return;
    int code = WIFSIGNALED(c->status) ? 128 + WTERMSIG(c->status) : WEXITSTATUS(c->status);
    if (c->timed_out)
        queue_exit(c, ABI_EXIT_TIMEOUT, true, NULL);
    else if (c->start_err.len)
        queue_exit(c, ABI_EXIT_NOSTART, false, c->start_err.s);
    else
        queue_exit(c, code, false, NULL);
}

static void reap(agent *a)
{
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        for (conn *c = a->conns; c; c = c->next)
            if (c->pid == p && !c->exited) {
                c->exited = true;
                c->status = st;
                c->exited_at = now_mono_ms();
            }
}

/* ---- the loop --------------------------------------------------------------------------- */

/* The cap is full: the peer that has been silent longest goes, so a flood of silent
 * connections cannot keep the owner (who speaks at once) out. */
static void evict_oldest_unauth(agent *a)
{
    conn **oldest = NULL;
    for (conn **pp = &a->conns; *pp; pp = &(*pp)->next)
        if ((*pp)->st == C_HELLO && (!oldest || (*pp)->hello_deadline <= (*oldest)->hello_deadline))
            oldest = pp;
    if (!oldest)
        return;
    conn *c = *oldest;
    *oldest = c->next;
    conn_free(a, c);
}

/* Returns false when nothing more is waiting (or nothing more can be taken now). */
static bool accept_peer(agent *a)
{
    int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
        /* Out of descriptors: the listener stays readable, so stop watching it until a
         * connection closes; the rest wait in the backlog meanwhile. */
        if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) &&
            a->nconns > 0)
            a->accept_full = true;
        return errno == EINTR || errno == ECONNABORTED;
    }
    if (a->unauth >= AGENT_MAX_UNAUTH)
        evict_oldest_unauth(a);
    agent_challenge ch = {.rotate = chain_wants_rotation(&a->chain)};
    if (!chain_reserve(&a->chain, &ch.epoch, &ch.index)) {
        close(fd); /* every index is out: the next authenticated client rotates */
        return true;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = xcalloc(1, sizeof *c);
    *c = (conn){.fd = fd,
                .st = C_HELLO,
                .hello_deadline = now_mono_ms() + AGENT_HELLO_MS,
                .in = {.fd = -1},
                .cout = -1,
                .cerr = -1,
                .errpipe = -1,
                .holds_index = true,
                .epoch = ch.epoch,
                .index = ch.index,
                .next = a->conns};
    frame_decoder_init(&c->dec);
    size_t len;
    _cleanup_free_ char *greeting = challenge_encode(&ch, &len);
    queue(c, FRAME_CHALLENGE, greeting, len);
    if (flush_peer(c) && c->out_off == c->out_len) { /* a fresh socket takes it at once */
        c->challenged = true;
        c->hello_deadline = now_mono_ms() + AGENT_HELLO_MS;
    }
    a->conns = c;
    a->unauth++;
    a->nconns++;
    return true;
}

/* Whether to take more connections now: not while the descriptors are spent. */
static bool accepting(const agent *a)
{
    return !a->accept_full && a->nconns < a->max_conns && a->chain.nout < CHAIN_OUT;
}

typedef struct slots {
    size_t sock, cin, cout, cerr, errp;
} slots;

static size_t add_pfd(struct pollfd **v, size_t *n, size_t *cap, int fd, short ev)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 32;
        *v = xreallocarray(*v, *cap, sizeof **v);
    }
    (*v)[*n] = (struct pollfd){.fd = fd, .events = ev};
    return (*n)++;
}

static int next_timeout(const agent *a, long long now)
{
    long long t = -1;
    for (const conn *c = a->conns; c; c = c->next) {
        long long d = -1;
        if (c->st == C_HELLO)
            d = c->hello_deadline;
        else if (c->st == C_RUNNING && c->exited)
            d = c->exited_at + DRAIN_MS;
        else if (c->st == C_RUNNING && c->deadline && !c->timed_out)
            d = c->deadline;
        if (d >= 0 && (t < 0 || d < t))
            t = d;
    }
    if (t < 0)
        return -1;
    return poll_timeout_until(t, now);
}

/* Per-connection work after poll. Returns false when the connection is done. */
static bool service(agent *a, conn *c, const struct pollfd *p, const slots *s, long long now)
{
    if (c->evict)
        return false;
    /* What arrived is read before the deadline is looked at: a round of ours that took long
     * (many commands started) must not cost a peer that answered in time. */
    if (p[s->sock].revents & (POLLIN | POLLHUP | POLLERR) && !read_peer(a, c))
        return false;
    if (c->st == C_HELLO && c->challenged && now >= c->hello_deadline)
        return false;
    if (c->st == C_RUNNING) {
        if (s->errp && p[s->errp].revents)
            read_errpipe(c);
        if (s->cout && p[s->cout].revents && c->cout >= 0)
            read_output(c, &c->cout, FRAME_STDOUT);
        if (s->cerr && p[s->cerr].revents && c->cerr >= 0)
            read_output(c, &c->cerr, FRAME_STDERR);
        if (s->cin && p[s->cin].revents)
            stdin_relay_push(&c->in);
        if (c->deadline && !c->exited && !c->timed_out && now >= c->deadline) {
            c->timed_out = true;
            kill_group(c);
        }
        maybe_finish(c, now);
    }
    if (!flush_peer(c))
        return false;
    if (c->st == C_HELLO && !c->challenged && c->out_off == c->out_len) {
        /* The peer's silence counts from when it could hear us, not from a busy accept. */
        c->challenged = true;
        c->hello_deadline = now_mono_ms() + AGENT_HELLO_MS;
    }
    return !(c->st == C_CLOSING && c->out_off == c->out_len);
}

static void fill(conn *c, bool may_read, struct pollfd **v, size_t *n, size_t *cap, slots *s)
{
    bool room_out = c->out_len - c->out_off < OUT_HIGH;
    bool room_in = stdin_relay_queued(&c->in) < IN_HIGH;
    short sev = (short)((c->st != C_CLOSING && room_in && may_read ? POLLIN : 0) |
                        (c->out_off < c->out_len ? POLLOUT : 0));
    *s = (slots){0};
    s->sock = add_pfd(v, n, cap, c->fd, sev);
    if (c->st != C_RUNNING)
        return;
    if (c->errpipe >= 0)
        s->errp = add_pfd(v, n, cap, c->errpipe, POLLIN);
    if (c->cout >= 0 && room_out)
        s->cout = add_pfd(v, n, cap, c->cout, POLLIN);
    if (c->cerr >= 0 && room_out)
        s->cerr = add_pfd(v, n, cap, c->cerr, POLLIN);
    if (stdin_relay_wants_write(&c->in))
        s->cin = add_pfd(v, n, cap, c->in.fd, POLLOUT);
}

static int agent_listen(const agent_config *cfg, bb_error **err)
{
    if (cfg->listen_fd > 0) {
        if (listen(cfg->listen_fd, AGENT_BACKLOG) < 0)
            return bb_fail_errno(err, errno, "agent: listen");
        set_nonblock(cfg->listen_fd);
        return cfg->listen_fd;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return bb_fail_errno(err, errno, "agent: socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons(ABI_AGENT_PORT),
                             .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, AGENT_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        return bb_fail_errno(err, e, "agent: cannot listen on port %d", ABI_AGENT_PORT);
    }
    return fd;
}

/* Hundreds of commands at once need more descriptors than the usual soft limit of 1024:
 * take the hard limit (commands get the old one back, exec_child), and never accept more
 * connections than it leaves room for. */
static void raise_nofile(agent *a)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) < 0)
        lim = (struct rlimit){1024, 1024};
    a->nofile = lim;
    if (lim.rlim_cur < lim.rlim_max) {
        struct rlimit up = {lim.rlim_max, lim.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            lim = up;
    }
    rlim_t fds = lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > 65536 ? 65536 : lim.rlim_cur;
    a->max_conns = fds > 2 * FDS_RESERVED ? (size_t)(fds - FDS_RESERVED) / FDS_PER_CONN : 8;
}

static void drain_signals(int sigfd)
{
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) == sizeof si)
        ;
}

int agent_serve(const agent_config *cfg, bb_error **err)
{
    agent a = {.cfg = cfg};
    chain_state_init(&a.chain, cfg->head);
    struct utsname u;
    snprintf(a.kernel, sizeof a.kernel, "%s", uname(&u) == 0 ? u.release : "unknown");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    a.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (a.sigfd < 0)
        return bb_fail_errno(err, errno, "agent: signalfd");
    a.lfd = agent_listen(cfg, err);
    if (a.lfd < 0)
        return -1;
    raise_nofile(&a);
    _cleanup_free_ struct pollfd *v = NULL;
    _cleanup_free_ slots *sl = NULL;
    size_t cap = 0, slcap = 0;
    for (;;) {
        size_t n = 0, nconn = 0;
        add_pfd(&v, &n, &cap, a.sigfd, POLLIN);
        add_pfd(&v, &n, &cap, accepting(&a) ? a.lfd : -1, POLLIN);
        for (conn *c = a.conns; c; c = c->next)
            nconn++;
        if (nconn > slcap) {
            slcap = nconn * 2;
            sl = xreallocarray(sl, slcap, sizeof *sl);
        }
        /* Starting a command is the costly step in a uml guest (a vfork and an exec under
         * ptrace), and nothing else is served meanwhile: so a round reads the go of at most
         * STARTS_PER_ROUND peers, the ones waiting longest (the list is newest first), and
         * hellos keep being answered while a burst of commands starts. */
        size_t waiting = 0, i = 0;
        for (conn *c = a.conns; c; c = c->next)
            waiting += c->st == C_WAIT_GO;
        size_t held = waiting > STARTS_PER_ROUND ? waiting - STARTS_PER_ROUND : 0;
        for (conn *c = a.conns; c; c = c->next) {
            bool hold = c->st == C_WAIT_GO && held > 0;
            held -= hold;
            fill(c, !hold, &v, &n, &cap, &sl[i++]);
        }
        int pr = poll(v, n, next_timeout(&a, now_mono_ms()));
        if (pr < 0 && errno != EINTR)
            return bb_fail_errno(err, errno, "agent: poll");
        if (pr < 0)
            continue;
        if (v[0].revents) {
            drain_signals(a.sigfd);
            reap(&a);
        }
        long long now = now_mono_ms();
        /* Connections accepted below are served from the next round on. */
        i = 0;
        for (conn **pp = &a.conns; *pp;) {
            conn *c = *pp;
            if (i >= nconn) {
                pp = &c->next;
                continue;
            }
            if (!service(&a, c, v, &sl[i++], now)) {
                *pp = c->next;
                conn_free(&a, c);
            } else {
                pp = &c->next;
            }
        }
        /* Everything waiting, up to what the descriptors allow: a connection left in the
         * backlog is one the guest's kernel may answer with a SYN cookie. */
        if (v[1].revents & POLLIN)
            while (accepting(&a) && accept_peer(&a))
                ;
    }
}

int agent_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    _cleanup_free_ char *hex = env_take_secret(ABI_ENV_AGENT_HEAD);
    agent_config cfg = {0};
    if (hex_decode(hex, cfg.head, sizeof cfg.head) < 0) {
        fprintf(stderr, "bluebox __agent: no %s (it is set by bluebox up)\n", ABI_ENV_AGENT_HEAD);
        return 2;
    }
    extern char **environ;
    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    cfg.env = environ;
    cfg.dir = cwd ? cwd : "/";
    _cleanup_error_ bb_error *err = NULL;
    agent_serve(&cfg, &err);
    fprintf(stderr, "bluebox __agent: %s\n", err ? err->msg : "stopped");
    return 1;
}
