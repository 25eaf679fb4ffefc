/* The egress engine's proxy: the pool process and its per-connection workers, which read
 * the name, resolve, connect and relay. See egress_engine.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "net/allow.h"
#include "net/httpcheck.h"
#include "net/netdns.h"
#include "net/sniff.h"
#include "util/macro.h"
#include "util/time.h"
#include "util/xalloc.h"
#include "net/egress_state.h"

/* ---- the per-connection child ----------------------------------------------------------- */

typedef struct conn {
    egress_engine *e;
    const char *name; /* the fake address's name */
    size_t slot;      /* the fake address's index */
    uint16_t port;
    int g; /* the guest's connection (slirp's end is the other) */
    int64_t start_ms;
    logrec rec;
    const char *entry_text;
    bool tls; /* the first bytes were a TLS ClientHello */
    char seen[SNIFF_NAME_MAX + 1], addr[INET6_ADDRSTRLEN];
} conn;

/* The guest's first bytes, peeked (they stay queued: a refusal then closes with unread data,
 * which slirp reads as a reset and passes on to the guest as one). Returns how many. */
static size_t gather(conn *c, uint8_t *buf, int first_ms, sniff_proto *proto, sniff_result *res)
{
    int64_t start = now_mono_ms(), deadline = start + FIRST_BYTES_MS;
    size_t have = 0;
    *proto = SNIFF_UNKNOWN;
    *res = SNIFF_MORE;
    for (;;) {
        ssize_t n = recv(c->g, buf, SNIFF_MAX, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0)
            return have; /* the guest closed before saying anything decisive */
        if (n > 0 && (size_t)n != have) {
            have = (size_t)n;
            *proto = sniff_protocol(buf, have);
            if (*proto == SNIFF_TLS)
                *res = sniff_tls_sni(buf, have, c->seen);
            else if (*proto == SNIFF_HTTP)
                *res = sniff_http_host(buf, have, c->seen);
            else
                *res = *proto == SNIFF_OTHER ? SNIFF_NONE : SNIFF_MORE;
            if (*res != SNIFF_MORE || have >= SNIFF_MAX)
                return have;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return have;
        }
        /* Nothing yet after first_ms: a protocol whose server speaks first. Once bytes came,
         * the message they start gets the whole FIRST_BYTES_MS. */
        int left = poll_timeout_until(have ? deadline : start + first_ms, now_mono_ms());
        if (left == 0)
            return have;
        if (have) /* more may come after what is queued: poll says readable either way */
            poll(NULL, 0, left < 5 ? left : 5);
        else
            poll(&(struct pollfd){.fd = c->g, .events = POLLIN}, 1, left);
    }
}

/* Whether the first bytes name the fake address's name; sets rec's reason when not. */
static bool name_matches(conn *c, const allow_entry *entry)
{
    uint8_t *buf = xmalloc(SNIFF_MAX);
    bool explicit_port = entry->port != 0;
    sniff_proto proto;
    sniff_result res;
    size_t have = gather(c, buf, explicit_port ? FIRST_BYTES_PORT : FIRST_BYTES_MS, &proto, &res);
    free(buf);
    c->tls = proto == SNIFF_TLS;
    if (res == SNIFF_FOUND) {
        c->rec.seen = c->seen;
        if (streq(c->seen, c->name) || c->e->weaken_sni)
            return true;
        c->rec.reason = proto == SNIFF_TLS ? "the TLS server name (SNI) is another name"
                                           : "the HTTP Host is another name";
        return false;
    }
    if (explicit_port && (proto != SNIFF_HTTP || c->e->weaken_sni))
        return true; /* NAME:PORT: the name itself decides (TLS without SNI included) */
    if (c->e->weaken_sni && have)
        return true;
    c->rec.reason = proto == SNIFF_TLS    ? "TLS without a readable server name (SNI)"
                    : proto == SNIFF_HTTP ? "HTTP request without exactly one Host"
                    : have                ? "neither TLS nor HTTP (name ports 80 and 443 need one)"
                                          : "no request within the time allowed";
    return false;
}

static int connect_within(const struct addrinfo *ai, int ms)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t l = sizeof err;
    if (poll(&p, 1, ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
        close(fd);
        errno = err ? err : ETIMEDOUT;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

static void cache_lock(resolved *r)
{
    while (__atomic_exchange_n(&r->lock, 1, __ATOMIC_ACQUIRE))
        ;
}

static void cache_unlock(resolved *r)
{
    __atomic_store_n(&r->lock, 0, __ATOMIC_RELEASE);
}

static resolved *cache_of(conn *c)
{
    return &c->e->shared->cache[c->slot];
}

/* Whether the address passes the rebinding rule; sets rec's reason when not. */
static bool address_ok(conn *c, int family, const void *raw)
{
    inet_ntop(family, raw, c->addr, sizeof c->addr);
    const np_rule *rule = NULL;
    if (netpolicy_check_addr(c->e->rebind, family == AF_INET ? 4 : 6, raw, IPPROTO_TCP, c->port,
                             &rule) == NP_PASS)
        return true;
    c->rec.decision = "deny";
    c->rec.reason = "the name resolves into a range only a CIDR entry may open";
    c->rec.rule = rule ? rule->why : "refused range";
    return false;
}

/* A connection to the address a child resolved for this name lately, or -1. */
static int connect_cached(conn *c)
{
    resolved *r = cache_of(c), copy;
    cache_lock(r);
    copy = *r;
    cache_unlock(r);
    if (!streq(copy.name, c->name) || now_mono_ms() >= copy.expires_ms ||
        !address_ok(c, copy.family, copy.addr))
        return -1;
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (copy.family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        *sin = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(c->port)};
        memcpy(&sin->sin_addr, copy.addr, 4);
        len = sizeof *sin;
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        *sin6 = (struct sockaddr_in6){.sin6_family = AF_INET6, .sin6_port = htons(c->port)};
        memcpy(&sin6->sin6_addr, copy.addr, 16);
        len = sizeof *sin6;
    }
    struct addrinfo ai = {.ai_family = copy.family,
                          .ai_socktype = SOCK_STREAM,
                          .ai_addr = (struct sockaddr *)&ss,
                          .ai_addrlen = len};
    return connect_within(&ai, CONNECT_MS);
}

static void cache_store(conn *c, int family, const void *raw)
{
    resolved *r = cache_of(c);
    cache_lock(r);
    memcpy(r->name, c->name, sizeof r->name);
    r->family = family;
    memcpy(r->addr, raw, family == AF_INET ? 4 : 16);
    r->expires_ms = now_mono_ms() + RESOLVED_MS;
    cache_unlock(r);
}

/* Resolve the name here and connect to an address the rebinding rule allows: the upstream
 * fd, or -1 with rec's decision and reason set. */
static int connect_upstream(conn *c)
{
    int fd = connect_cached(c);
    if (fd >= 0) {
        c->rec.addr = c->addr;
        return fd;
    }
    c->rec.decision = "deny";
    c->rec.reason = NULL;
    c->rec.rule = c->entry_text;
    char port[8];
    snprintf(port, sizeof port, "%u", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gr = getaddrinfo(c->name, port, &hints, &res);
    if (gr != 0) {
        c->rec.decision = "error";
        c->rec.reason = "the name does not resolve";
        return -1;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        const void *raw =
            ai->ai_family == AF_INET
                ? (const void *)&((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr
                : (const void *)&((struct sockaddr_in6 *)(void *)ai->ai_addr)->sin6_addr;
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        if (!address_ok(c, ai->ai_family, raw)) {
            err = -1;
            continue;
        }
        fd = connect_within(ai, CONNECT_MS);
        if (fd >= 0)
            cache_store(c, ai->ai_family, raw);
        if (fd < 0 && !err) {
            err = errno;
            c->rec.decision = "error";
            c->rec.reason = "cannot connect";
        }
    }
    freeaddrinfo(res);
    c->rec.addr = c->addr[0] ? c->addr : NULL;
    return fd;
}

/* A plain relay between the guest's connection g and upstream u: pre (the guest's first
 * bytes, already read from g) goes up first; what goes up is fed to ls when not NULL. 0, or
 * -1 when a side failed. */
static int egress_relay_plain(int g, const uint8_t *pre, size_t pre_len, int u, leak_scan *ls,
                              relay_stats *st)
{
    if (pre_len && relay_send_all(u, pre, pre_len) < 0)
        return -1;
    st->up += pre_len;
    if (ls)
        leak_scan_feed(ls, pre, pre_len);
    uint8_t *buf = xmalloc(RELAY_BUF);
    int fds[2] = {g, u};
    bool open_in[2] = {true, true}; /* g still sends / u still sends */
    int rc = 0;
    while (open_in[0] || open_in[1]) {
        struct pollfd p[2] = {{.fd = open_in[0] ? g : -1, .events = POLLIN},
                              {.fd = open_in[1] ? u : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (!p[i].revents)
                continue;
            ssize_t r = recv(fds[i], buf, RELAY_BUF, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                open_in[i] = false;
                shutdown(fds[1 - i], SHUT_WR);
                if (r < 0) {
                    rc = -1;
                    open_in[1 - i] = false;
                }
                continue;
            }
            if (relay_send_all(fds[1 - i], buf, (size_t)r) < 0) {
                rc = -1;
                open_in[0] = open_in[1] = false;
                break;
            }
            if (i == 0) {
                st->up += (uint64_t)r;
                if (ls)
                    leak_scan_feed(ls, buf, (size_t)r);
            } else
                st->down += (uint64_t)r;
        }
    }
    free(buf);
    return rc;
}

/* Close every inherited fd but the n in keep (ascending; -1s ignored). */
static void close_except(const int *keep, size_t n)
{
    unsigned lo = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < (int)lo)
            continue;
        if ((unsigned)keep[i] > lo)
            close_range(lo, (unsigned)keep[i] - 1, 0);
        lo = (unsigned)keep[i] + 1;
    }
    close_range(lo, ~0U, 0);
}

static void sort_fds(int *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            int t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* A proxy process's start: it dies with its parent (checked after asking: the parent may
 * have gone before), signals as a fresh process has them, and only the fds in keep (n of
 * them) stay open. */
static void proxy_start(pid_t parent, int *keep, size_t n)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(0);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    sort_fds(keep, n);
    close_except(keep, n);
}

/* One guest connection g to the fake address slot (name) on port: decide, connect, relay,
 * log; then the process ends. */
static _noreturn_ void proxy_conn(egress_engine *e, size_t slot, const char *name, uint16_t port,
                                  int g)
{
    conn c = {.e = e, .name = name, .slot = slot, .port = port, .g = g, .start_ms = now_mono_ms()};
    c.rec = (logrec){.kind = "tcp", .name = name, .port = port, .decision = "deny"};
    const allow_entry *entry = allowlist_match(&e->allow, name, port);
    if (!entry) { /* the list has no such port for it (cannot happen: we listen on its ports) */
        c.rec.reason = "port not allowed for this name";
        elog(e, &c.rec);
        _exit(0);
    }
    c.rec.rule = c.entry_text = entry->text;
    int u = -1;
    if (name_matches(&c, entry))
        u = connect_upstream(&c);
    if (u < 0) {
        elog(e, &c.rec); /* closing g with its bytes unread: the guest sees a reset */
        _exit(0);
    }
    c.rec.decision = "allow";
    c.rec.reason = NULL;
    /* The first bytes, peeked above, now read for good. */
    uint8_t *pre = xmalloc(SNIFF_MAX);
    ssize_t pre_len = recv(g, pre, SNIFF_MAX, MSG_DONTWAIT);
    if (pre_len < 0)
        pre_len = 0;
    relay_stats st = {0};
    int rc;
    if (e->secrets && secrets_for_host(e->secrets, name)) {
        /* a host a secret goes to: the broker (TLS terminated with the sandbox's CA). Plain
         * TCP there goes through it too, but no value does (refused: cleartext). */
        rc = secrets_relay(g, pre, (size_t)pre_len, u, name, c.tls, e->secrets, &st);
        c.rec.brokered = true;
    } else if (!c.tls && entry->port == 0 && !e->weaken_sni) {
        /* plain HTTP on a name entry: every request must name the host (httpcheck.h) */
        rc = http_relay_checked(g, pre, (size_t)pre_len, u, name, e->secrets, &st);
    } else {
        /* any other host: passed as it is; with secrets, a plain stream is searched for
         * placeholders (a TLS stream is opaque here: its host cannot get a value either) */
        leak_scan ls;
        bool scan = e->secrets && e->secrets->n > 0;
        if (scan)
            leak_scan_init(&ls, e->secrets, name);
        rc = egress_relay_plain(g, pre, (size_t)pre_len, u, scan ? &ls : NULL, &st);
        if (scan)
            st.leaks = ls.leaks;
    }
    free(pre);
    if (rc < 0)
        c.rec.reason = st.error ? st.error : "a side failed during the relay";
    if (st.refused) /* a later request on the connection was not for its host */
        c.rec.decision = "deny";
    if (st.leaks)
        c.rec.reason = "attempted leak: a secret's placeholder sent to a host it does not list";
    else if (c.rec.brokered && st.cleartext && rc == 0)
        c.rec.reason = "refused: cleartext (a secret's value goes only inside TLS that bluebox "
                       "verified; its placeholder went as it is)";
    c.rec.stats = true;
    c.rec.st = st;
    c.rec.ms = mono_ms_since(c.start_ms);
    elog(e, &c.rec);
    _exit(0);
}

/* ---- the pool --------------------------------------------------------------------------- */

/* A fork per connection cost the connection its setup time twice: the engine's loop (and with
 * it every frame of the guest) stalled through fork() and the copy-on-write faults after it,
 * and the child started cold. So the engine forks once, a pool process, and hands each
 * connection over a SOCK_SEQPACKET socket (the guest's fd with SCM_RIGHTS, and a handoff) to
 * whichever of the pool's waiting workers takes it; the pool forks the replacement off the
 * engine's loop. A worker is still one process per connection with the engine's state as it
 * was at the pool's fork (the allowlist, secrets, log fd and rebinding policy are set before
 * the loop starts and never change; the fake address's name comes with the fd, and the
 * resolved-address cache is in the shared memory). Workers die with the pool, the pool with
 * the engine (PR_SET_PDEATHSIG); workers and pool together stay within MAX_CHILDREN. */

/* A worker: waits for one connection, then serves it. It keeps only the hand-off socket
 * (until it has its connection), the pipe telling the pool it was taken, and the log. */
static _noreturn_ void pool_worker(egress_engine *e, pid_t pool, int ctl, int taken)
{
    int keep[] = {ctl, taken, e->log_fd};
    proxy_start(pool, keep, e->log_fd >= 0 ? 3 : 2);
    /* Touched now, not on the connection's path: the first faults of a fresh fork. */
    void *warm = xmalloc(RELAY_BUF);
    memset(warm, 0, RELAY_BUF);
    free(warm);
    handoff h;
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof h};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t r;
    do
        r = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    close(ctl); /* one connection per worker: the channel goes before any guest byte is read */
    pid_t self = getpid(); /* tells the pool this worker holds a connection (r > 0) or not */
    ssize_t w = r > 0 ? write(taken, &self, sizeof self) : 0;
    (void)w;
    close(taken);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (r != (ssize_t)sizeof h || !cm || cm->cmsg_level != SOL_SOCKET ||
        cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int)))
        _exit(0); /* the engine is gone (or sent nothing usable) */
    int g;
    memcpy(&g, CMSG_DATA(cm), sizeof g);
    h.name[SNIFF_NAME_MAX] = '\0';
    if (h.slot >= FAKE_N || !h.name[0])
        _exit(0);
    proxy_conn(e, h.slot, h.name, h.port, g);
}

/* The workers holding a connection, by pid (the pool's own bookkeeping). */
typedef struct {
    pid_t v[MAX_CHILDREN];
    size_t n;
} busy_set;

/* Whether pid was one of them (it is dropped). */
static bool busy_take(busy_set *b, pid_t pid)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i] == pid) {
            b->v[i] = b->v[--b->n];
            return true;
        }
    return false;
}

/* The pool: keeps POOL_IDLE workers waiting on ctl, reaps those that ended; a reaped worker
 * that held a connection gives its slot back to the engine's count. */
static _noreturn_ void pool_main(egress_engine *e, pid_t engine, int ctl)
{
    int keep[] = {ctl, e->log_fd};
    proxy_start(engine, keep, e->log_fd >= 0 ? 2 : 1);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK), taken[2];
    if (sfd < 0 || pipe2(taken, O_CLOEXEC | O_NONBLOCK) < 0)
        _exit(1);
    pid_t self = getpid(), dead;
    int kids = 0, idle = 0;
    busy_set busy = {0};
    for (;;) {
        /* Who took a connection, before reaping: a worker writes its pid before it can end,
         * so each one reaped below is known by then. */
        pid_t took;
        while (read(taken[0], &took, sizeof took) == (ssize_t)sizeof took) {
            idle--;
            if (busy.n < ELEMENTSOF(busy.v))
                busy.v[busy.n++] = took;
        }
        while ((dead = waitpid(-1, NULL, WNOHANG)) > 0) {
            kids--;
            if (busy_take(&busy, dead))
                __atomic_sub_fetch(&e->shared->conns, 1, __ATOMIC_SEQ_CST);
            else
                idle--; /* an idle worker ended without a connection (killed) */
        }
        if (idle < 0)
            idle = 0;
        bool failed = false;
        while (idle < POOL_IDLE && kids < MAX_CHILDREN - 1 && !failed) {
            pid_t pid = fork();
            if (pid == 0)
                pool_worker(e, self, ctl, taken[1]);
            failed = pid < 0;
            if (pid > 0)
                kids++, idle++;
        }
        struct pollfd p[2] = {{.fd = taken[0], .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, failed ? 100 : -1) < 0 && errno != EINTR)
            _exit(1);
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) > 0)
            ;
    }
}

/* Fork the pool (its end of the hand-off socket is pool_end). 0, or -1 with errno. */
int pool_spawn(egress_engine *e)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    /* a new pool: the old one's workers die with it (PR_SET_PDEATHSIG) */
    __atomic_store_n(&e->shared->conns, 0, __ATOMIC_SEQ_CST);
    pid_t engine = getpid(), pid = fork();
    if (pid == 0)
        pool_main(e, engine, sv[1]);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return -1;
    }
    e->pool_fd = sv[0];
    e->pool_pid = pid;
    return 0;
}

void pool_gone(egress_engine *e)
{
    if (e->pool_fd >= 0)
        close(e->pool_fd);
    e->pool_fd = -1;
    if (e->pool_pid > 0)
        kill(e->pool_pid, SIGKILL); /* the VMM's relay reaps it (SIGCHLD) */
    e->pool_pid = 0;
}

/* Hand g to a worker, counted in conns first (its worker may end before this returns): 0, or
 * -1 when the pool is gone. */
int pool_send(egress_engine *e, const fake *f, uint16_t port, int g)
{
    handoff h = {.slot = (uint32_t)(f - e->fakes), .port = port};
    memcpy(h.name, f->name, sizeof h.name);
    char cbuf[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {.iov_base = &h, .iov_len = sizeof h};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &g, sizeof g);
    ssize_t w;
    __atomic_add_fetch(&e->shared->conns, 1, __ATOMIC_SEQ_CST);
    do
        w = sendmsg(e->pool_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w == (ssize_t)sizeof h)
        return 0;
    __atomic_sub_fetch(&e->shared->conns, 1, __ATOMIC_SEQ_CST);
    return -1;
}
