/* The HTTP side of `bluebox serve` (server.h). evhttp parses HTTP; every request other
 * than /v1/version is handled by a worker process (fork, then api_handle_stream() in the
 * child), so the event loop never blocks on a VM: 50 execs at once are 50 workers while the
 * loop keeps answering. A worker writes "<status>\n" and then the body (or NDJSON lines)
 * into a pipe, which the loop relays to the client. A client that goes away has its
 * worker's process group killed (SIGTERM, then SIGKILL), which ends the command in the
 * guest (the agent kills what its client left).
 *
 * Who may talk: the socket is created under umask 077 in a directory that is ours and not
 * group/world writable, and every connection's SO_PEERCRED uid is checked against ours
 * before evhttp reads a byte of it (new_bev), and again for every
 * request. */
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "api.h"
#include "util/fs.h"
#include "util/sha256.h"
#include "util/time.h"
#include "util/xalloc.h"

#define MAX_BODY        (64 << 20)
#define MAX_HEADERS     (64 << 10)
#define HEADER_TIMEOUT  10 /* s: reading a request, and a kept-alive connection's idleness */
#define MAX_CONNECTIONS 2048
#define MAX_WORKERS     256 /* requests being answered at once; more wait as 503 busy */
#define KILL_GRACE_S    5
#define STOP_GRACE_S    10
/* A stream's relay: reads and writes this large cost fewer wakeups (libevent's defaults are
 * 16 KiB); and once this much waits for a slow client, the worker's pipe is not read until it
 * has drained, so the client's pace reaches the command in the guest and memory stays
 * bounded. */
#define STREAM_IO   (256 << 10)
#define STREAM_HIGH (1 << 20)

typedef struct worker worker;

static struct rlimit nofile0; /* RLIMIT_NOFILE as serve was started (raise_nofile) */

typedef struct server {
    struct event_base *base;
    struct evhttp *http;
    struct evconnlistener *listener;
    api_ctx ctx;
    uid_t uid;
    char *path;
    worker *workers;
    int nworkers;
    int64_t idle_ms, last_ms;
    struct stat exe;
    bool stopping;
    int64_t stop_deadline;
} server;

struct worker {
    server *s;
    pid_t pid;
    struct evhttp_request *req; /* NULL once the client is gone */
    struct evhttp_connection *evcon;
    int pipe_fd;           /* the worker's replies */
    struct event *pipe_ev; /* readable; not armed while a stream's client catches up */
    struct evbuffer *in;   /* read from the pipe, not yet passed on */
    struct evbuffer *acc;  /* a non-streaming reply, until the worker is done */
    bool stream, started, have_status, gone, paused;
    int status;
    struct event *kill_timer;
    worker *next;
};

/* ---- the socket -------------------------------------------------------------------------- */

/* The default socket: <root>/bluebox.sock, or when that is too long for sun_path,
 * $XDG_RUNTIME_DIR/bluebox-<12 hex of sha256(root)>.sock; never /tmp. */
static int api_socket_path(const char *root, char **ret, bb_error **err)
{
    char *p = path_join(root, "bluebox.sock");
    if (strlen(p) <= 103) {
        *ret = p;
        return 0;
    }
    free(p);
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (!xdg || xdg[0] != '/')
        return bb_fail(err, ENAMETOOLONG,
                       "the socket path %s/bluebox.sock is too long for a Unix socket and "
                       "XDG_RUNTIME_DIR is not set; use a shorter BLUEBOX_HOME or serve --socket "
                       "PATH in a directory only you can write",
                       root);
    uint8_t h[SHA256_LEN];
    sha256(root, strlen(root), h);
    *ret = xasprintf("%s/bluebox-%02x%02x%02x%02x%02x%02x.sock", xdg, h[0], h[1], h[2], h[3], h[4],
                     h[5]);
    if (strlen(*ret) > 103) {
        free(*ret);
        *ret = NULL;
        return bb_fail(err, ENAMETOOLONG, "XDG_RUNTIME_DIR is too long for a Unix socket path");
    }
    return 0;
}

/* The socket's directory: a directory (not a symlink), ours, not group/world writable. */
static int check_dir(const char *path, bb_error **err)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return bb_fail(err, EINVAL, "the socket path must be absolute: %s", path);
    *(slash == dir ? slash + 1 : slash) = 0;
    struct stat st;
    if (lstat(dir, &st) < 0)
        return bb_fail_errno(err, errno, "the socket's directory %s", dir);
    if (!S_ISDIR(st.st_mode))
        return bb_fail(err, ENOTDIR, "the socket's directory %s is not a directory", dir);
    if (st.st_uid != getuid())
        return bb_fail(err, EPERM,
                       "the socket's directory %s is not yours (uid %u); serve in a directory "
                       "only you can write",
                       dir, (unsigned)st.st_uid);
    if (st.st_mode & 022)
        return bb_fail(err, EPERM,
                       "the socket's directory %s is writable by others (mode %04o); chmod go-w "
                       "it or serve elsewhere",
                       dir, (unsigned)(st.st_mode & 07777));
    return 0;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* What is at the path already: nothing, a stale socket (removed), one that answers
 * (already serving), or anything else (refused: a symlink is never followed). */
static int clear_path(const char *path, bb_error **err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "%s", path);
    if (!S_ISSOCK(st.st_mode))
        return bb_fail(err, EEXIST,
                       "%s exists and is not a socket (%s); remove it or serve --socket elsewhere",
                       path, S_ISLNK(st.st_mode) ? "a symlink, which is never followed" : "a file");
    if (st.st_uid != getuid())
        return bb_fail(err, EPERM, "%s is another user's socket", path);
    if (connect_to(path) == 0)
        return bb_fail(err, EADDRINUSE, "already serving on %s", path);
    if (unlink(path) < 0)
        return bb_fail_errno(err, errno, "cannot remove the stale socket %s", path);
    return 0;
}

static int listen_on(const char *path, bb_error **err)
{
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return bb_fail(err, ENAMETOOLONG, "the socket path is too long: %s", path);
    if (check_dir(path, err) < 0)
        return -1;
    /* one server starting at a time per path: the second one sees the first's socket */
    _cleanup_free_ char *lock = xasprintf("%s.lock", path);
    mode_t old = umask(077);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
        umask(old);
        return bb_fail_errno(err, errno, "cannot lock %s", lock);
    }
    int fd = -1;
    if (clear_path(path, err) == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, path, strlen(path) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(path, 0600) < 0 ||
            listen(fd, 512) < 0) {
            bb_fail_errno(err, errno, "cannot listen on %s", path);
            if (fd >= 0)
                close(fd);
            fd = -1;
        }
    }
    umask(old);
    close(lfd); /* the lock file stays: removing it would race the next server's lock */
    return fd;
}

/* ---- who is asking ----------------------------------------------------------------------- */

static bool peer_ok(server *s, int fd)
{
#ifdef BB_WEAKEN_PEERCRED
    (void)s;
    (void)fd;
    return true; /* security/weaken only: the check the escape suite must see fail */
#else
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        return false;
    if (cr.uid == s->uid)
        return true;
    fprintf(stderr, "bluebox: serve: refused a connection from uid %u (pid %d): not the owner\n",
            (unsigned)cr.uid, (int)cr.pid);
    return false;
#endif
}

/* Each connection's peer is checked before evhttp reads a byte of it. libevent 2.1's evhttp
 * has no accept hook, but it asks us for each connection's bufferevent (evhttp_set_bevcb)
 * and then sets the accepted fd on it before returning to the loop; an event made active
 * here runs before the loop polls that fd, so the check comes first. A refused peer's
 * socket is shut down: evhttp reads its end and drops the connection unanswered. */
typedef struct pending {
    server *s;
    struct bufferevent *bev;
    struct event *ev;
} pending;

static void on_new_conn(evutil_socket_t unused, short what, void *arg)
{
    (void)unused;
    (void)what;
    pending *p = arg;
    int fd = bufferevent_getfd(p->bev);
    if (fd >= 0 && (!peer_ok(p->s, fd) || fd >= MAX_CONNECTIONS + 64))
        shutdown(fd, SHUT_RDWR); /* fd numbers count open files: past the cap, refuse */
    event_free(p->ev);
    free(p);
}

static struct bufferevent *new_bev(struct event_base *base, void *arg)
{
    pending *p = xcalloc(1, sizeof *p);
    p->s = arg;
    p->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    p->ev = event_new(base, -1, 0, on_new_conn, p);
    event_active(p->ev, EV_TIMEOUT, 0);
    return p->bev;
}

/* The fd under an evhttp connection. */
static int conn_fd(struct evhttp_connection *evcon)
{
    struct bufferevent *b = evhttp_connection_get_bufferevent(evcon);
    return b ? bufferevent_getfd(b) : -1;
}

/* ---- workers ----------------------------------------------------------------------------- */

static void worker_free(worker *w)
{
    server *s = w->s;
    for (worker **p = &s->workers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    s->nworkers--;
    s->last_ms = now_mono_ms();
    if (w->evcon)
        evhttp_connection_set_closecb(w->evcon, NULL, NULL);
    if (w->pipe_ev)
        event_free(w->pipe_ev);
    if (w->pipe_fd >= 0)
        close(w->pipe_fd);
    if (w->in)
        evbuffer_free(w->in);
    if (w->acc)
        evbuffer_free(w->acc);
    if (w->kill_timer)
        event_free(w->kill_timer);
    free(w);
}

static void on_kill_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker *w = arg;
    kill(-w->pid, SIGKILL);
}

static void worker_kill(worker *w)
{
    if (w->kill_timer)
        return;
    kill(-w->pid, SIGTERM);
    w->kill_timer = evtimer_new(w->s->base, on_kill_timer, w);
    struct timeval tv = {KILL_GRACE_S, 0};
    evtimer_add(w->kill_timer, &tv);
}

static void on_client_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    worker *w = arg;
    w->req = NULL;
    w->evcon = NULL;
    w->gone = true;
    if (w->paused) { /* its pipe must be read again, or the worker's end is never seen */
        w->paused = false;
        event_add(w->pipe_ev, NULL);
    }
    worker_kill(w);
}

static void json_headers(struct evhttp_request *req, const char *type)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_remove_header(h, "Content-Type");
    evhttp_add_header(h, "Content-Type", type);
}

static void send_json(struct evhttp_request *req, int status, const char *body, size_t len)
{
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, body, len);
    json_headers(req, "application/json");
    evhttp_send_reply(req, status, status == 200 ? "OK" : "Error", b);
    evbuffer_free(b);
}

/* The worker's "<status>\n" line, once it is whole. */
static bool take_status(worker *w, struct evbuffer *in)
{
    size_t n;
    char *line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF);
    if (!line)
        return false;
    w->status = atoi(line);
    free(line);
    w->have_status = true;
    if (w->stream && w->status == 200 && w->req) {
        json_headers(w->req, "application/x-ndjson");
        evhttp_send_reply_start(w->req, 200, "OK");
        w->started = true;
    }
    return true;
}

/* All a stream has sent so far is out: read the worker's pipe again. */
static void on_chunk_sent(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    worker *w = arg;
    if (w->paused) {
        w->paused = false;
        event_add(w->pipe_ev, NULL);
    }
}

/* Pass on what the worker wrote: a stream's lines as they come, a reply once whole. */
static void take_input(worker *w)
{
    struct evbuffer *in = w->in;
    if (!w->have_status && !take_status(w, in))
        return;
    if (w->started) {
        if (w->req && evbuffer_get_length(in)) {
            evhttp_send_reply_chunk_with_cb(w->req, in, on_chunk_sent, w);
            struct bufferevent *out = w->evcon ? evhttp_connection_get_bufferevent(w->evcon) : NULL;
            if (out && evbuffer_get_length(bufferevent_get_output(out)) > STREAM_HIGH) {
                event_del(w->pipe_ev);
                w->paused = true;
            }
        }
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    evbuffer_add_buffer(w->acc, in);
}

/* The worker is done (its end of the pipe closed): answer, if the client is still there. */
static void worker_done(worker *w)
{
    take_input(w);
    if (w->req) {
        if (w->started)
            evhttp_send_reply_end(w->req);
        else if (!w->have_status || w->status < 200)
            send_json(w->req, 500,
                      "{\"error\":\"the request's worker died\",\"code\":\"internal\"}", 56);
        else {
            json_headers(w->req, "application/json");
            evhttp_send_reply(w->req, w->status, w->status == 200 ? "OK" : "Error", w->acc);
        }
    }
    worker_free(w);
}

/* One read of up to STREAM_IO straight into the input buffer (libevent's own reads of a
 * pipe take 4 KiB at a time, which made a stream cost a wakeup per 4 KiB). */
static void on_pipe(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    worker *w = arg;
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(w->in, STREAM_IO, &v, 1) < 1)
        return;
    ssize_t n = read(fd, v.iov_base, v.iov_len < STREAM_IO ? v.iov_len : STREAM_IO);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        worker_done(w);
        return;
    }
    v.iov_len = (size_t)n;
    evbuffer_commit_space(w->in, &v, 1);
    take_input(w);
}

/* In the worker: write all of it to the pipe (fd 3); -1 when the server is gone. */
static int put(const char *s, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t r = write(3, s + off, n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        off += (size_t)r;
    }
    return 0;
}

static bool said_status;

static int on_line(void *opaque, const char *line, size_t len)
{
    (void)opaque;
    if (!said_status) {
        said_status = true;
        if (put("200\n", 4) < 0)
            return -1;
    }
    struct iovec v[2] = {{(void *)line, len}, {(void *)"\n", 1}};
    while (v[1].iov_len) { /* the line and its newline in one write, as a rule */
        int first = v[0].iov_len ? 0 : 1;
        ssize_t r = writev(3, v + first, 2 - first);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        for (int i = first; i < 2 && r > 0; i++) {
            size_t k = (size_t)r < v[i].iov_len ? (size_t)r : v[i].iov_len;
            v[i].iov_base = (char *)v[i].iov_base + k;
            v[i].iov_len -= k;
            r -= (ssize_t)k;
        }
    }
    return 0;
}

_noreturn_ static void worker_main(server *s, int pipe_w, const char *method, const char *path,
                                   const char *body, size_t len)
{
    setpgid(0, 0);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT};
    for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
        sigaction(sigs[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(pipe_w, 3) < 0)
        _exit(1);
    /* stderr stays the server's: a worker's warnings belong with the server's own */
    close_range(4, ~0U, 0);
    if (nofile0.rlim_max)
        setrlimit(RLIMIT_NOFILE, &nofile0);
    signal(SIGPIPE, SIG_IGN);
    /* SIGTERM to the group is for the command (its job child passes it to the guest): the
     * worker lives on to send the final line. SIGKILL still ends it. */
    signal(SIGTERM, SIG_IGN);
    api_reply out = {0};
    int st = api_handle_stream(&s->ctx, method, path, body, len, on_line, NULL, &out);
    if (!said_status) {
        char head[16];
        int n = snprintf(head, sizeof head, "%d\n", st);
        if (put(head, (size_t)n) == 0 && out.body)
            put(out.body, out.len);
    }
    _exit(0);
}

static void start_worker(server *s, struct evhttp_request *req, const char *method,
                         const char *path, const char *body, size_t len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        send_json(req, 500, "{\"error\":\"cannot make a pipe\",\"code\":\"internal\"}", 49);
        return;
    }
    pid_t server_pid = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* A worker is the server's: killed with it (kill -9 of serve), so that its job, and
         * the VM the job owns (launch/lifeline.h), never outlive it in a group of its own. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != server_pid)
            _exit(1);
        close(p[0]);
        worker_main(s, p[1], method, path, body, len);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        send_json(req, 500, "{\"error\":\"cannot fork a worker\",\"code\":\"internal\"}", 50);
        return;
    }
    setpgid(pid, pid); /* both sides, so that a kill(-pid) never misses */
    worker *w = xcalloc(1, sizeof *w);
    *w = (worker){.s = s,
                  .pid = pid,
                  .pipe_fd = -1,
                  .req = req,
                  .evcon = evhttp_request_get_connection(req),
                  .acc = evbuffer_new(),
                  .stream = api_is_stream(method, path),
                  .next = s->workers};
    s->workers = w;
    s->nworkers++;
    evutil_make_socket_nonblocking(p[0]);
    w->pipe_fd = p[0];
    w->in = evbuffer_new();
    w->pipe_ev = event_new(s->base, p[0], EV_READ | EV_PERSIST, on_pipe, w);
    if (w->stream) {
        (void)fcntl(p[0], F_SETPIPE_SZ, STREAM_IO);
        struct bufferevent *out = evhttp_connection_get_bufferevent(w->evcon);
        if (out)
            bufferevent_set_max_single_write(out, STREAM_IO);
    }
    event_add(w->pipe_ev, NULL);
    evhttp_connection_set_closecb(w->evcon, on_client_close, w);
}

/* ---- requests ---------------------------------------------------------------------------- */

static const char *method_name(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

static void on_request(struct evhttp_request *req, void *arg)
{
    server *s = arg;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (!peer_ok(s, conn_fd(evcon))) {
        evhttp_connection_free(evcon);
        return;
    }
    s->last_ms = now_mono_ms();
    if (s->stopping) {
        send_json(req, 503, "{\"error\":\"the server is stopping\",\"code\":\"internal\"}", 53);
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *raw = uri ? evhttp_uri_get_path(uri) : NULL;
    size_t plen = 0;
    _cleanup_free_ char *path = raw ? evhttp_uridecode(raw, 0, &plen) : NULL;
    if (!path || strlen(path) != plen) {
        const char *m = "{\"error\":\"the path is not valid\",\"code\":\"bad_request\"}";
        send_json(req, 400, m, strlen(m));
        return;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    const char *method = method_name(evhttp_request_get_command(req));
    if (strcmp(path, "/v1/version") == 0) { /* no worker: the cheap liveness check */
        api_reply out = {0};
        int st = api_handle(&s->ctx, method, path, body, len, &out);
        send_json(req, st, out.body, out.len);
        api_reply_clear(&out);
        return;
    }
    if (s->nworkers >= MAX_WORKERS) {
        const char *m = "{\"error\":\"too many requests at once; try again\",\"code\":\"busy\"}";
        send_json(req, 503, m, strlen(m));
        return;
    }
    start_worker(s, req, method, path, body, len);
}

/* ---- lifetime ---------------------------------------------------------------------------- */

static void reap(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

static void stop(server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    evconnlistener_disable(s->listener);
    unlink(s->path);
    s->stop_deadline = now_mono_ms() + STOP_GRACE_S * 1000;
    for (worker *w = s->workers; w; w = w->next)
        kill(-w->pid, SIGTERM); /* an exec's command is told (TERM), its stream ends */
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    server *s = arg;
    fprintf(stderr, "bluebox: serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    stop(s);
}

static bool exe_changed(const server *s)
{
    struct stat st;
    if (stat("/proc/self/exe", &st) < 0) /* the path it was run from is gone: replaced */
        return true;
    /* /proc/self/exe is the running file; a replaced one shows as "(deleted)" */
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0)
        return false;
    buf[n] = 0;
    if (strstr(buf, " (deleted)"))
        return true;
    return st.st_ino != s->exe.st_ino || st.st_mtim.tv_sec != s->exe.st_mtim.tv_sec ||
           st.st_mtim.tv_nsec != s->exe.st_mtim.tv_nsec;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    server *s = arg;
    if (s->stopping) {
        if (!s->workers || now_mono_ms() > s->stop_deadline) {
            for (worker *w = s->workers; w; w = w->next)
                kill(-w->pid, SIGKILL);
            event_base_loopexit(s->base, NULL);
        }
        return;
    }
    /* a client that went away while its command is silent: evhttp reads nothing while a
     * request is being answered, so look at the socket */
    for (worker *w = s->workers; w; w = w->next) {
        if (!w->evcon || w->gone)
            continue;
        char c;
        int cfd = conn_fd(w->evcon);
        ssize_t r = cfd < 0 ? 0 : recv(cfd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            w->gone = true;
            worker_kill(w);
        }
    }
    if (s->workers)
        return;
    malloc_trim(0); /* a large body or reply freed: give the memory back while idle */
    int64_t idle = now_mono_ms() - s->last_ms;
    if (s->idle_ms > 0 && idle >= s->idle_ms) {
        fprintf(stderr, "bluebox: serve: idle, stopping\n");
        stop(s);
    } else if (exe_changed(s)) {
        fprintf(stderr, "bluebox: serve: the bluebox executable changed, stopping\n");
        stop(s);
    }
}

/* The server's own limit on open files goes up for its connections; workers put back the
 * one it was started with (podman passes it on to containers, whose runtime refuses one
 * above the host's default hard limit). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        nofile0 = rl;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int api_serve(const api_serve_opts *o, bb_error **err)
{
    server s = {.ctx = {.root = o->root, .via = "api"},
                .uid = getuid(),
                .idle_ms = o->idle_ms,
                .last_ms = now_mono_ms()};
    if (o->socket)
        s.path = xstrdup(o->socket);
    else if (api_socket_path(o->root, &s.path, err) < 0)
        return -1;
    if (!o->socket && mkdir_p(o->root, 0700, err) < 0)
        return -1;
    stat("/proc/self/exe", &s.exe);
    raise_nofile();
    int fd = listen_on(s.path, err);
    if (fd < 0) {
        free(s.path);
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    s.base = event_base_new();
    s.http = evhttp_new(s.base);
    evhttp_set_max_body_size(s.http, MAX_BODY);
    evhttp_set_max_headers_size(s.http, MAX_HEADERS);
    evhttp_set_timeout(s.http, HEADER_TIMEOUT);
    evhttp_set_allowed_methods(s.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                           EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(s.http, "application/json");
    evhttp_set_bevcb(s.http, new_bev, &s);
    evhttp_set_gencb(s.http, on_request, &s);
    struct evhttp_bound_socket *bound = evhttp_accept_socket_with_handle(s.http, fd);
    if (!bound) {
        close(fd);
        unlink(s.path);
        evhttp_free(s.http);
        event_base_free(s.base);
        bb_fail(err, EIO, "cannot serve on %s", s.path);
        free(s.path);
        return -1;
    }
    s.listener = evhttp_bound_socket_get_listener(bound);
    struct event *ev_int = evsignal_new(s.base, SIGINT, on_signal, &s);
    struct event *ev_term = evsignal_new(s.base, SIGTERM, on_signal, &s);
    struct event *ev_chld = evsignal_new(s.base, SIGCHLD, reap, &s);
    struct event *tick = event_new(s.base, -1, EV_PERSIST, on_tick, &s);
    struct timeval sec = {1, 0};
    evsignal_add(ev_int, NULL);
    evsignal_add(ev_term, NULL);
    evsignal_add(ev_chld, NULL);
    evtimer_add(tick, &sec);
    fprintf(stderr, "bluebox: serving on %s\n", s.path);
    event_base_dispatch(s.base);
    struct stat st;
    if (!s.stopping && lstat(s.path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(s.path);
    for (worker *w = s.workers, *next; w; w = next) {
        next = w->next;
        worker_free(w);
    }
    event_free(ev_int);
    event_free(ev_term);
    event_free(ev_chld);
    event_free(tick);
    evhttp_free(s.http);
    event_base_free(s.base);
    free(s.path);
    return 0;
}
