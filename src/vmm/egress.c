/* Egress by name: bluebox's DNS responder, fake addresses and the per-connection proxy. See
 * egress.h. */
#include "egress.h"

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

#include "abi.h"
#include "allow.h"
#include "httpcheck.h"
#include "netdns.h"
#include "sniff.h"
#include "util/macro.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Fake addresses: 10.0.2.FAKE_FIRST and up, inside slirp's 10.0.2.0/24 (the guest is .15,
 * DHCP hands out .15-.30, the gateway is .2 and DNS .3). When all are taken, the name resolved
 * longest ago gives its address up (its open connections stay), once the guest's DNS cache of
 * it has expired; until then new names get SERVFAIL. */
#define FAKE_FIRST 100
#define FAKE_N     (255 - FAKE_FIRST)
#define FAKE_PORTS 8
#define DNS_TTL    60
/* How long a child waits for the guest's first bytes: for a name on 80/443 (which must bring
 * TLS or HTTP) and for a TLS or HTTP message begun on any port; and for the first byte on a
 * NAME:PORT entry (whose protocol may have the server speak first). */
#define FIRST_BYTES_MS   10000
#define FIRST_BYTES_PORT 300
#define CONNECT_MS       10000
#define LOG_LINE_MAX     2048
/* Where the listeners slirp connects to live: in the container's /dev, which UML's jail does
 * not bind (src/vmm/jail.c), so the guest cannot reach the directory through hostfs to swap a
 * socket for a symlink to another one (libslirp connects by path). Made before the jail. */
#define SOCK_DIR "/dev/bluebox-egress"
/* Proxy processes at once, the pool's own included: each is a process of the container,
 * whose pids limit UML shares. */
#define MAX_CHILDREN 64
/* Workers the pool keeps forked and waiting, so that a connection never waits for a fork. */
#define POOL_IDLE 2
#define RELAY_BUF 65536

/* A name's upstream address, kept a while for the next connection's child (which would
 * otherwise ask the container's resolver again each time). */
#define RESOLVED_MS 30000

typedef struct resolved {
    int lock;
    char name[SNIFF_NAME_MAX + 1];
    int family;
    uint8_t addr[16];
    int64_t expires_ms;
} resolved;

/* Memory shared by the engine and its children. */
typedef struct shared_state {
    uint64_t logged;                         /* bytes of tcp (and the log's own) lines this boot */
    uint64_t logged_dns, logged_frame;       /* bytes of dns and frame lines: their own shares */
    uint64_t unwritten_dns, unwritten_frame; /* lines past their share: counted only */
    resolved cache[FAKE_N];                  /* by fake address slot */
    /* Connections handed to the pool and not yet ended: the engine adds one per hand-off, the
     * pool takes one off as it reaps the worker that took it. Exact, unlike the pool's own
     * counts, which a busy host's scheduler can leave behind a burst of connections. */
    int conns;
} shared_state;

/* What the engine hands a pool worker with the guest's connection (SCM_RIGHTS): the worker was
 * forked before the name may have had its fake address, so it learns both from here. */
typedef struct handoff {
    uint32_t slot; /* the fake address's index */
    uint16_t port;
    char name[SNIFF_NAME_MAX + 1];
} handoff;

typedef struct fake {
    char name[SNIFF_NAME_MAX + 1]; /* "" = free */
    uint16_t ports[FAKE_PORTS];
    int listen_fd[FAKE_PORTS];
    size_t nports;
    int64_t used_ms;
} fake;

struct egress {
    Slirp *slirp;
    allowlist allow;
    netpolicy *frames; /* what frames may reach slirp beyond DNS and the fake addresses */
    netpolicy *rebind; /* what a name may resolve into */
    egress_send_fn *send;
    void *opaque;
    fake fakes[FAKE_N];
    int log_fd;
    shared_state *shared; /* with the children */
    int pool_fd;          /* the hand-off socket to the pool's workers; -1: no pool yet */
    pid_t pool_pid;
    const char *sandbox;
    const secrets *secrets; /* vmm.c's; NULL or empty: no broker, no leak scan */
    bool weaken_dns, weaken_sni;
    size_t pv_start, pv_n; /* the listeners' slots in this round's poll set */
};

/* ---- the log ---------------------------------------------------------------------------- */

typedef struct logrec {
    const char *kind, *name, *decision, *rule, *reason, *seen, *addr;
    int port;      /* -1: none */
    bool stats;    /* bytes and duration present */
    bool brokered; /* relayed by the secrets broker: its counters present */
    relay_stats st;
    int64_t ms;
} logrec;

static void json_str(char *buf, size_t cap, size_t *off, const char *key, const char *v)
{
    if (!v || *off >= cap)
        return;
    *off += (size_t)snprintf(buf + *off, cap - *off, ",\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)v; *p && *off + 8 < cap; p++) {
        if (*p == '"' || *p == '\\')
            *off += (size_t)snprintf(buf + *off, cap - *off, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            *off += (size_t)snprintf(buf + *off, cap - *off, "\\u%04x", *p);
        else
            buf[(*off)++] = (char)*p;
    }
    if (*off + 1 < cap)
        buf[(*off)++] = '"';
}

static void elog(egress *e, const logrec *r);

/* "N dns and M frame lines not written", on the tcp share (while it has room). */
static void log_unwritten(egress *e)
{
    char why[160];
    snprintf(why, sizeof why,
             "%llu dns and %llu frame lines not written: their share of this boot's log is full",
             (unsigned long long)__atomic_load_n(&e->shared->unwritten_dns, __ATOMIC_SEQ_CST),
             (unsigned long long)__atomic_load_n(&e->shared->unwritten_frame, __ATOMIC_SEQ_CST));
    elog(e, &(logrec){.kind = "log", .port = -1, .decision = "not written", .reason = why});
}

/* Shares of EGRESS_LOG_CAP: dns lines EGRESS_LOG_DNS_CAP, frame lines EGRESS_LOG_FRAME_CAP,
 * tcp lines (what the guest's connections did) and the log's own the rest, so denials the
 * guest can make by the thousand cannot push its connections out of the log. Past its share
 * a dns or frame line is counted, and every EGRESS_LOG_UNWRITTEN_EVERY of them a summary
 * line goes to the tcp share. */
static void log_write(egress *e, const char *kind, const char *line, size_t len)
{
    bool dns = streq(kind, "dns"), frame = streq(kind, "frame");
    if (dns || frame) {
        uint64_t *used = dns ? &e->shared->logged_dns : &e->shared->logged_frame;
        uint64_t cap = dns ? EGRESS_LOG_DNS_CAP : EGRESS_LOG_FRAME_CAP;
        if (__atomic_add_fetch(used, len, __ATOMIC_SEQ_CST) > cap) {
            __atomic_fetch_sub(used, len, __ATOMIC_SEQ_CST); /* a shorter line may still fit */
            __atomic_add_fetch(dns ? &e->shared->unwritten_dns : &e->shared->unwritten_frame, 1,
                               __ATOMIC_SEQ_CST);
            uint64_t all = __atomic_load_n(&e->shared->unwritten_dns, __ATOMIC_SEQ_CST) +
                           __atomic_load_n(&e->shared->unwritten_frame, __ATOMIC_SEQ_CST);
            if (all % EGRESS_LOG_UNWRITTEN_EVERY == 0)
                log_unwritten(e);
            return;
        }
        ssize_t w;
        do
            w = write(e->log_fd, line, len);
        while (w < 0 && errno == EINTR);
        return;
    }
    const uint64_t tcp_cap = EGRESS_LOG_CAP - EGRESS_LOG_DNS_CAP - EGRESS_LOG_FRAME_CAP;
    uint64_t before = __atomic_fetch_add(&e->shared->logged, len, __ATOMIC_SEQ_CST);
    if (before + len <= tcp_cap) {
        ssize_t w;
        do
            w = write(e->log_fd, line, len);
        while (w < 0 && errno == EINTR);
        return;
    }
    if (before <= tcp_cap) { /* the line that crossed the cap says so, once */
        static const char full[] = "{\"kind\":\"log\",\"decision\":\"log full\",\"reason\":\"the "
                                   "connection log reached its size for this boot\"}\n";
        ssize_t w = write(e->log_fd, full, sizeof full - 1);
        (void)w;
    }
}

static void elog(egress *e, const logrec *r)
{
    if (e->log_fd < 0)
        return;
    char buf[LOG_LINE_MAX], ts[32] = "";
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    size_t off =
        (size_t)snprintf(buf, sizeof buf, "{\"time\":\"%s.%03ldZ\"", ts, now.tv_nsec / 1000000);
    json_str(buf, sizeof buf - 200, &off, "sandbox", e->sandbox);
    json_str(buf, sizeof buf - 200, &off, "kind", r->kind);
    json_str(buf, sizeof buf - 200, &off, "name", r->name);
    if (r->port >= 0)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ",\"port\":%d", r->port);
    json_str(buf, sizeof buf - 200, &off, "decision", r->decision);
    json_str(buf, sizeof buf - 200, &off, "rule", r->rule);
    json_str(buf, sizeof buf - 200, &off, "reason", r->reason);
    json_str(buf, sizeof buf - 200, &off, "seen", r->seen);
    json_str(buf, sizeof buf - 200, &off, "addr", r->addr);
    if (r->stats)
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ",\"bytes_up\":%llu,\"bytes_down\":%llu,\"duration_ms\":%lld",
                                (unsigned long long)r->st.up, (unsigned long long)r->st.down,
                                (long long)r->ms);
    if (r->brokered)
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ",\"brokered\":true,\"requests\":%llu,\"substituted\":%llu",
                                (unsigned long long)r->st.requests,
                                (unsigned long long)r->st.substituted);
    if (r->st.leaks)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ",\"leaks\":%llu",
                                (unsigned long long)r->st.leaks);
    off += (size_t)snprintf(buf + off, sizeof buf - off, "}\n");
    log_write(e, r->kind ? r->kind : "", buf, off < sizeof buf ? off : sizeof buf - 1);
}

/* ---- setup ------------------------------------------------------------------------------ */

static const char *const own_addrs = "the network stack's own addresses";

/* Frames in allowlist mode: DHCP and pings of the stack pass, its other addresses are refused
 * (DNS is answered before, and the fake addresses decided before), CIDR entries pass, the
 * rest is refused. */
static netpolicy *frame_policy(const allowlist *a)
{
    netpolicy *p = netpolicy_new(NP_REFUSE);
    (void)netpolicy_add(p, "10.0.2.2", IPPROTO_UDP, 67, NP_PASS, "DHCP");
    (void)netpolicy_add(p, "255.255.255.255", IPPROTO_UDP, 67, NP_PASS, "DHCP");
    (void)netpolicy_add(p, "10.0.2.2", IPPROTO_ICMP, 0, NP_PASS, own_addrs);
    (void)netpolicy_add(p, "10.0.2.3", IPPROTO_ICMP, 0, NP_PASS, own_addrs);
    (void)netpolicy_add(p, "10.0.2.0/24", 0, 0, NP_REFUSE, own_addrs);
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].cidr)
            (void)netpolicy_add(p, a->v[i].host, 0, a->v[i].port, NP_PASS, a->v[i].text);
    return p;
}

static netpolicy *rebind_policy(const allowlist *a)
{
    netpolicy *p = netpolicy_new(NP_PASS);
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].cidr)
            (void)netpolicy_add(p, a->v[i].host, IPPROTO_TCP, a->v[i].port, NP_PASS, a->v[i].text);
    netpolicy_add_not_internet(p);
    return p;
}

static bool knob(const char *name)
{
#ifdef BB_WEAKEN_KNOBS
    const char *v = getenv(name);
    return v && streq(v, "1");
#else
    (void)name;
    return false;
#endif
}

egress *egress_new(Slirp *slirp, const char *allow, const secrets *sec, egress_send_fn *send,
                   void *opaque, char **ret_why)
{
    allowlist a;
    const char *bad = allow;
    if (allowlist_parse(allow, &a, &bad) < 0) {
        *ret_why =
            xasprintf(ABI_ENV_NET_ALLOW " has an entry that is neither a host name, "
                                        "*.suffix nor a CIDR (each optionally :PORT): '%.*s'",
                      (int)strcspn(bad, ","), bad);
        return NULL;
    }
    egress *e = xmalloc(sizeof *e);
    *e = (egress){.slirp = slirp,
                  .allow = a,
                  .secrets = sec,
                  .send = send,
                  .opaque = opaque,
                  .log_fd = -1,
                  .pool_fd = -1};
    for (size_t i = 0; i < FAKE_N; i++)
        for (size_t k = 0; k < FAKE_PORTS; k++)
            e->fakes[i].listen_fd[k] = -1;
    e->frames = frame_policy(&a);
    e->rebind = rebind_policy(&a);
    e->sandbox = getenv(ABI_ENV_SANDBOX);
    e->weaken_dns = knob("BLUEBOX_WEAKEN_DNS");
    e->weaken_sni = knob("BLUEBOX_WEAKEN_SNI");
    e->shared =
        mmap(NULL, sizeof *e->shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (e->shared == MAP_FAILED) {
        *ret_why = xasprintf("cannot map the engine's shared memory: %s", strerror(errno));
        egress_free(e);
        return NULL;
    }
    if (mkdir(SOCK_DIR, 0700) < 0 && errno != EEXIST) {
        *ret_why = xasprintf("cannot make " SOCK_DIR " for the allowlist's proxy sockets: %s",
                             strerror(errno));
        egress_free(e);
        return NULL;
    }
    const char *log = getenv(ABI_ENV_NET_LOG);
    if (log && *log) {
        e->log_fd = open(log, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (e->log_fd < 0) {
            *ret_why = xasprintf("cannot open the connection log %s (" ABI_ENV_NET_LOG "): %s", log,
                                 strerror(errno));
            egress_free(e);
            return NULL;
        }
    }
    return e;
}

netpolicy *egress_rebind_policy(egress *e)
{
    return e->rebind;
}

/* Give f's address up. tell_slirp: take its forwards out of slirp too (not at teardown, where
 * slirp_cleanup frees them: libslirp 4.7's slirp_remove_guestfwd leaks a forward's socket
 * path, about 32 bytes, so only a recycled address pays that). */
static void fake_release(egress *e, fake *f, bool tell_slirp)
{
    uint32_t a = htonl(0x0a000200u | (uint32_t)(FAKE_FIRST + (f - e->fakes)));
    for (size_t k = 0; k < f->nports; k++) {
        if (tell_slirp)
            (void)slirp_remove_guestfwd(e->slirp, (struct in_addr){.s_addr = a}, f->ports[k]);
        if (f->listen_fd[k] >= 0)
            close(f->listen_fd[k]);
        f->listen_fd[k] = -1;
        char path[108];
        snprintf(path, sizeof path, SOCK_DIR "/%zu-%u.sock", (size_t)(f - e->fakes), f->ports[k]);
        unlink(path);
    }
    f->nports = 0;
    f->name[0] = '\0';
}

void egress_free(egress *e)
{
    if (!e)
        return;
    /* The count of the lines not written since the last summary, if the log has room. */
    if (e->log_fd >= 0 && e->shared && e->shared != MAP_FAILED &&
        (e->shared->unwritten_dns + e->shared->unwritten_frame) % EGRESS_LOG_UNWRITTEN_EVERY)
        log_unwritten(e);
    for (size_t i = 0; i < FAKE_N; i++)
        if (e->fakes[i].name[0])
            fake_release(e, &e->fakes[i], false);
    allowlist_clear(&e->allow);
    netpolicy_free(e->frames);
    netpolicy_free(e->rebind);
    if (e->shared && e->shared != MAP_FAILED)
        munmap(e->shared, sizeof *e->shared);
    if (e->log_fd >= 0)
        close(e->log_fd);
    if (e->pool_fd >= 0)
        close(e->pool_fd); /* idle workers see the end and exit */
    if (e->pool_pid > 0)
        kill(e->pool_pid, SIGKILL); /* busy ones with it (PR_SET_PDEATHSIG) */
    free(e);
}

/* ---- fake addresses --------------------------------------------------------------------- */

static uint32_t fake_addr(const egress *e, const fake *f)
{
    return htonl(0x0a000200u | (uint32_t)(FAKE_FIRST + (f - e->fakes)));
}

/* Whether a (IPv4, network order) is in the fake address pool. */
static bool is_fake(const uint8_t *a)
{
    return a[0] == 10 && a[1] == 0 && a[2] == 2 && a[3] >= FAKE_FIRST;
}

/* Listen for name's connections to fake f on each port it may use, and tell slirp. */
static int fake_register(egress *e, fake *f, const char *name)
{
    uint16_t ports[FAKE_PORTS];
    size_t n = allowlist_ports(&e->allow, name, ports, FAKE_PORTS);
    size_t nl = strnlen(name, SNIFF_NAME_MAX);
    memcpy(f->name, name, nl);
    f->name[nl] = '\0';
    for (size_t k = 0; k < n; k++) {
        char path[108];
        snprintf(path, sizeof path, SOCK_DIR "/%zu-%u.sock", (size_t)(f - e->fakes), ports[k]);
        unlink(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        struct in_addr ga = {.s_addr = fake_addr(e, f)};
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            listen(fd, SOMAXCONN) < 0 || slirp_add_unix(e->slirp, path, &ga, ports[k]) < 0) {
            if (fd >= 0)
                close(fd);
            fake_release(e, f, true);
            return -1;
        }
        f->ports[f->nports] = ports[k];
        f->listen_fd[f->nports++] = fd;
    }
    return 0;
}

/* The fake address standing for name, made now if it has none (NULL when none can be). */
static fake *fake_for(egress *e, const char *name, const char *rule)
{
    fake *oldest = NULL, *free_one = NULL;
    for (size_t i = 0; i < FAKE_N; i++) {
        fake *f = &e->fakes[i];
        if (f->name[0] && streq(f->name, name)) {
            f->used_ms = now_mono_ms();
            return f;
        }
        if (!f->name[0] && !free_one)
            free_one = f;
        if (f->name[0] && (!oldest || f->used_ms < oldest->used_ms))
            oldest = f;
    }
    fake *f = free_one ? free_one : oldest;
    /* An address is given to another name only when the guest's cache of it (DNS_TTL) has run
     * out: a connection to it must not reach the other name. */
    if (!free_one && now_mono_ms() - oldest->used_ms <= DNS_TTL * 1000 + 5000) {
        elog(e, &(logrec){.kind = "dns",
                          .name = name,
                          .port = -1,
                          .decision = "error",
                          .reason = "every fake address is in use (SERVFAIL)"});
        return NULL;
    }
    if (!free_one)
        fake_release(e, f, true);
    f->used_ms = now_mono_ms();
    if (fake_register(e, f, name) < 0)
        return NULL;
    char a[INET_ADDRSTRLEN];
    uint32_t addr = fake_addr(e, f);
    inet_ntop(AF_INET, &addr, a, sizeof a);
    elog(
        e,
        &(logrec){
            .kind = "dns", .name = name, .port = -1, .decision = "allow", .rule = rule, .addr = a});
    return f;
}

/* ---- frames ----------------------------------------------------------------------------- */

static bool answer_dns(egress *e, const uint8_t *frame, size_t len, const uint8_t *m, size_t mlen)
{
    dns_query q;
    if (dns_parse_query(m, mlen, &q) < 0)
        return true; /* dropped */
    const allow_entry *entry = q.name_ok ? allowlist_name_entry(&e->allow, q.name) : NULL;
    bool allowed = entry != NULL;
    if (!allowed && e->weaken_dns)
        return false; /* security/weaken's dns-open: slirp forwards it upstream */
    int rcode = DNS_NXDOMAIN;
    const uint8_t *a4 = NULL;
    uint32_t addr = 0;
    if (q.qclass != 1) {
        rcode = DNS_REFUSED;
    } else if (allowed) {
        fake *f = fake_for(e, q.name, entry->text);
        rcode = f ? DNS_NOERROR : 2 /* SERVFAIL */;
        if (f && (q.qtype == DNS_TYPE_A || q.qtype == DNS_TYPE_ANY)) {
            addr = fake_addr(e, f);
            a4 = (const uint8_t *)&addr;
        }
    } else {
        elog(e, &(logrec){.kind = "dns",
                          .name = q.name,
                          .port = -1,
                          .decision = "deny",
                          .rule = "not in the allowlist",
                          .reason = "NXDOMAIN, not forwarded"});
    }
    uint8_t d[DNS_REPLY_MAX], out[DNS_REPLY_MAX + 64];
    size_t dl = dns_reply(m, &q, rcode, a4, DNS_TTL, d, sizeof d);
    size_t fl = dl ? dns_frame_reply(frame, len, d, dl, out, sizeof out) : 0;
    if (fl)
        e->send(out, fl, e->opaque);
    return true;
}

static const char *proto_name(uint8_t p)
{
    return p == IPPROTO_TCP ? "tcp" : p == IPPROTO_UDP ? "udp" : p == IPPROTO_ICMP ? "icmp" : "ip";
}

static void refuse(egress *e, const uint8_t *frame, size_t len, const np_pkt *k, const char *why)
{
    uint8_t reply[NP_REPLY_MAX];
    size_t l = netpolicy_refusal(frame, len, reply, sizeof reply);
    if (l)
        e->send(reply, l, e->opaque);
    /* Logged: what a program tried to open (TCP, UDP). Not the kernel's own chatter (ICMP,
     * IPv6 neighbour discovery, multicast), which would fill the log with nothing to act on. */
    bool multicast =
        k->family == 4 ? (k->dst[0] >> 4) == 0xe || k->dst[0] == 0xff : k->dst[0] == 0xff;
    if ((k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP) || multicast)
        return;
    char a[INET6_ADDRSTRLEN] = "";
    inet_ntop(k->family == 4 ? AF_INET : AF_INET6, k->dst, a, sizeof a);
    elog(e, &(logrec){.kind = "frame",
                      .name = a,
                      .port = k->port_known ? k->port : -1,
                      .decision = "deny",
                      .rule = why,
                      .reason = proto_name(k->proto)});
}

bool egress_frame(egress *e, const uint8_t *frame, size_t len)
{
    const uint8_t *m;
    size_t mlen;
    uint32_t dns = htonl(0x0a000203u);
    int d = dns_frame_payload(frame, len, dns, &m, &mlen);
    if (d < 0)
        return true;
    if (d > 0)
        return answer_dns(e, frame, len, m, mlen);
    np_pkt k;
    if (netpolicy_peek(frame, len, &k) == 0 && k.family == 4 && is_fake(k.dst)) {
        const fake *f = &e->fakes[k.dst[3] - FAKE_FIRST];
        if (k.proto == IPPROTO_TCP && !k.opens)
            return false; /* a segment of a connection slirp has (or resets) */
        for (size_t i = 0; f->name[0] && k.proto == IPPROTO_TCP && k.port_known && i < f->nports;
             i++)
            if (f->ports[i] == k.port)
                return false;
        refuse(e, frame, len, &k,
               f->name[0] ? "port not allowed for this name" : "no name resolved to this address");
        return true;
    }
    const np_rule *rule = NULL;
    np_action a = netpolicy_check(e->frames, frame, len, &rule);
    if (a == NP_PASS)
        return false;
    if (a == NP_REFUSE && netpolicy_peek(frame, len, &k) == 0)
        refuse(e, frame, len, &k, rule ? rule->why : "not in the allowlist");
    return true;
}

/* ---- the per-connection child ----------------------------------------------------------- */

typedef struct conn {
    egress *e;
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

int egress_relay_plain(int g, const uint8_t *pre, size_t pre_len, int u, leak_scan *ls,
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
static _noreturn_ void proxy_conn(egress *e, size_t slot, const char *name, uint16_t port, int g)
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
        /* a host a secret goes to: the broker (TLS terminated with the sandbox's CA) */
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
static _noreturn_ void pool_worker(egress *e, pid_t pool, int ctl, int taken)
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
static _noreturn_ void pool_main(egress *e, pid_t engine, int ctl)
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
static int pool_spawn(egress *e)
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

static void pool_gone(egress *e)
{
    if (e->pool_fd >= 0)
        close(e->pool_fd);
    e->pool_fd = -1;
    if (e->pool_pid > 0)
        kill(e->pool_pid, SIGKILL); /* vmm.c reaps it (SIGCHLD) */
    e->pool_pid = 0;
}

/* Hand g to a worker, counted in conns first (its worker may end before this returns): 0, or
 * -1 when the pool is gone. */
static int pool_send(egress *e, const fake *f, uint16_t port, int g)
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

/* ---- polling ---------------------------------------------------------------------------- */

void egress_poll_fill(egress *e, pollvec *pv)
{
    e->pv_start = pv->n;
    for (size_t i = 0; i < FAKE_N; i++)
        for (size_t k = 0; k < e->fakes[i].nports; k++)
            pollvec_add(pv, e->fakes[i].listen_fd[k], POLLIN);
    e->pv_n = pv->n - e->pv_start;
}

/* Whether one more connection would wait for a worker: MAX_CHILDREN - 1 (the pool is one)
 * are handed over and not yet ended. */
static bool pool_full(const egress *e)
{
    return __atomic_load_n(&e->shared->conns, __ATOMIC_SEQ_CST) >= MAX_CHILDREN - 1;
}

static void accept_conn(egress *e, fake *f, size_t k)
{
    /* Drain it: slirp connects to the listener with a blocking connect() (libslirp's
     * open_unix), which a full backlog would stall, and the whole VMM with it. The backlog
     * (SOMAXCONN) is far above the connections one round of guest frames can open (256). */
    for (int i = 0; i < 1024; i++) {
        int g = accept4(f->listen_fd[k], NULL, NULL, SOCK_CLOEXEC);
        if (g < 0)
            return;
        const char *why = NULL;
        if (e->pool_fd < 0 && pool_spawn(e) < 0)
            why = "cannot fork the proxy";
        else if (pool_full(e))
            why = "too many connections at once";
        else if (pool_send(e, f, f->ports[k], g) < 0) {
            /* the pool ended (killed): a new one, once */
            pool_gone(e);
            if (pool_spawn(e) < 0 || pool_send(e, f, f->ports[k], g) < 0)
                why = "the proxy pool is gone";
        }

        if (why)
            elog(e, &(logrec){.kind = "tcp",
                              .name = f->name,
                              .port = f->ports[k],
                              .decision = why[0] == 't' ? "deny" : "error",
                              .reason = why});
        close(g);
    }
}

void egress_poll_done(egress *e, const pollvec *pv)
{
    /* The pool, forked in the loop (after the jail, and before the guest's first connection):
     * the same state a fork per connection had. */
    if (e->pool_fd < 0)
        (void)pool_spawn(e); /* failing, the first connection tries again and logs why */
    /* Listeners may have changed since the fill (a name's address recycled): match by fd. */
    for (size_t j = e->pv_start; j < e->pv_start + e->pv_n && j < pv->n; j++) {
        if (!(pv->v[j].revents & POLLIN) || pv->v[j].fd < 0)
            continue;
        for (size_t i = 0; i < FAKE_N; i++)
            for (size_t k = 0; k < e->fakes[i].nports; k++)
                if (e->fakes[i].listen_fd[k] == pv->v[j].fd)
                    accept_conn(e, &e->fakes[i], k);
    }
}
