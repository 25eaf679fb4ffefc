/* Egress by name: bluebox's DNS responder, fake addresses and the per-connection proxy. See
 * egress_engine.h. */
#include "net/egress_engine.h"

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

egress_engine *egress_new(Slirp *slirp, const char *allow, const secrets *sec, egress_send_fn *send,
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
    egress_engine *e = xmalloc(sizeof *e);
    *e = (egress_engine){.slirp = slirp,
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

netpolicy *egress_rebind_policy(egress_engine *e)
{
    return e->rebind;
}

/* Give f's address up. tell_slirp: take its forwards out of slirp too (not at teardown, where
 * slirp_cleanup frees them: libslirp 4.7's slirp_remove_guestfwd leaks a forward's socket
 * path, about 32 bytes, so only a recycled address pays that). */
static void fake_release(egress_engine *e, fake *f, bool tell_slirp)
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

void egress_free(egress_engine *e)
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

static uint32_t fake_addr(const egress_engine *e, const fake *f)
{
    return htonl(0x0a000200u | (uint32_t)(FAKE_FIRST + (f - e->fakes)));
}

/* Whether a (IPv4, network order) is in the fake address pool. */
static bool is_fake(const uint8_t *a)
{
    return a[0] == 10 && a[1] == 0 && a[2] == 2 && a[3] >= FAKE_FIRST;
}

/* Listen for name's connections to fake f on each port it may use, and tell slirp. */
static int fake_register(egress_engine *e, fake *f, const char *name)
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
static fake *fake_for(egress_engine *e, const char *name, const char *rule)
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

static bool answer_dns(egress_engine *e, const uint8_t *frame, size_t len, const uint8_t *m,
                       size_t mlen)
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

static void refuse(egress_engine *e, const uint8_t *frame, size_t len, const np_pkt *k,
                   const char *why)
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

bool egress_frame(egress_engine *e, const uint8_t *frame, size_t len)
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

/* ---- polling ---------------------------------------------------------------------------- */

void egress_poll_fill(egress_engine *e, pollvec *pv)
{
    e->pv_start = pv->n;
    for (size_t i = 0; i < FAKE_N; i++)
        for (size_t k = 0; k < e->fakes[i].nports; k++)
            pollvec_add(pv, e->fakes[i].listen_fd[k], POLLIN);
    e->pv_n = pv->n - e->pv_start;
}

/* Whether one more connection would wait for a worker: MAX_CHILDREN - 1 (the pool is one)
 * are handed over and not yet ended. */
static bool pool_full(const egress_engine *e)
{
    return __atomic_load_n(&e->shared->conns, __ATOMIC_SEQ_CST) >= MAX_CHILDREN - 1;
}

static void accept_conn(egress_engine *e, fake *f, size_t k)
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

void egress_poll_done(egress_engine *e, const pollvec *pv)
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
