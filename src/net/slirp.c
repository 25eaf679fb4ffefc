/* bluebox-vmm's bridge network: UML's bess vector transport or a stream link (QEMU) <->
 * libslirp. See slirp.h. */
#include "net/slirp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <slirp/libslirp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "net/egress_engine.h"
#include "net/frameq.h"
#include "net/netpolicy.h"
#include "net/netstream.h"
#include "util/time.h"
#include "util/xalloc.h"

/* We listen here; UML binds its own end at UML_SOCK and connects when the guest brings the
 * interface up. Both on the exec tmpfs, which only this container sees. */
#define NET_SOCK     ABI_MEM_DIR "/net.sock"
#define UML_SOCK     ABI_MEM_DIR "/net-uml.sock"
#define MAX_FORWARDS 16
/* Connections to a forwarded port that may wait for libslirp to accept them (the kernel caps
 * it at net.core.somaxconn); see prepare_forward_listeners. */
#define FORWARD_BACKLOG 4096
/* Frames are at most MTU + ethernet header; leave room for anything larger UML might send.
 * On a stream link, a longer length cuts the link (netstream.h). */
#define FRAME_MAX 65536
/* NET_LINK_MTU, on both sides (the guest's device and libslirp): a frame costs the same
 * handful of host syscalls whatever its size, so jumbo frames carry an exec's output about
 * 2.8 times as fast as 1500-byte ones (70 -> 195 MiB/s measured, bench/serve_bench.py).
 * Larger ones went faster still (240+ MiB/s at 65000) but each needs a high-order atomic
 * allocation in the guest's receive path; 9000 is the common jumbo size. The guest's
 * connections out are libslirp's to terminate: the internet never sees this MTU. */
#define LINK_MTU NET_LINK_MTU
/* Frames waiting for UML's end of the link (frameq.h), at most. */
#define OUTQ_CAP (8u << 20)
#define STR_(x)  #x
#define STR(x)   STR_(x)

typedef struct ntimer {
    SlirpTimerCb cb;
    void *opaque;
    int64_t expire_ms; /* -1: not armed */
    struct ntimer *next;
} ntimer;

struct vmm_net {
    Slirp *slirp;
    net_link link;
    int listen_fd, conn_fd; /* bess: UML connects to listen_fd; stream: conn_fd from the start */
    int peer_fd;            /* stream: the far end, until the VMM has it */
    netstream_rx rx;        /* stream: a frame not yet whole */
    ntimer *timers;
    /* Where this round's fds start in the caller's poll set. */
    size_t listen_idx, conn_idx;
    pollvec *pv;
    netpolicy *policy;     /* bridge: what the guest may reach; NULL in restricted mode */
    frameq outq;           /* frames for the guest that its link could not take yet */
    egress_engine *egress; /* bridge with an allowlist: decides every frame instead of policy */
    uint64_t frames_in, frames_out, dropped_out, refused_in;
};

static _noreturn_ void net_die(const char *fmt, ...) _printf_(1, 2);
static _noreturn_ void net_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bluebox-vmm: network: ", stderr);
    vfprintf(stderr, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized): va_start is above
    fputc('\n', stderr);
    va_end(ap);
    exit(ABI_EXIT_SETUP);
}

/* ---- slirp's callbacks ------------------------------------------------------------------ */

static ssize_t cb_send_packet(const void *buf, size_t len, void *opaque)
{
    vmm_net *n = opaque;
    if (n->conn_fd < 0) {
        n->dropped_out++;
        return (ssize_t)len; /* the guest's interface is down: slirp may drop, TCP retries */
    }
    if (n->link == NET_LINK_STREAM) {
        if (netstream_send(n->conn_fd, &n->outq, buf, len, OUTQ_CAP) > 0)
            n->frames_out++;
        else
            n->dropped_out++; /* as below; a failed socket is seen by the reader */
        return (ssize_t)len;
    }
    ssize_t w = -1;
    errno = EAGAIN;
    if (frameq_empty(&n->outq)) /* never ahead of frames already waiting */
        do
            w = send(n->conn_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
    if (w >= 0 || (errno == EAGAIN && frameq_push(&n->outq, buf, len, OUTQ_CAP)))
        n->frames_out++;
    else
        n->dropped_out++; /* UML is far behind (or gone): drop, as a full NIC ring does */
    return (ssize_t)len;
}

static void cb_guest_error(const char *msg, void *opaque)
{
    (void)msg, (void)opaque; /* the guest's own misbehaviour; not the user's business */
}

static int64_t cb_clock_get_ns(void *opaque)
{
    return now_mono_ns();
}

static void *cb_timer_new(SlirpTimerCb cb, void *cb_opaque, void *opaque)
{
    vmm_net *n = opaque;
    ntimer *t = xmalloc(sizeof *t);
    *t = (ntimer){.cb = cb, .opaque = cb_opaque, .expire_ms = -1, .next = n->timers};
    n->timers = t;
    return t;
}

static void cb_timer_free(void *timer, void *opaque)
{
    vmm_net *n = opaque;
    for (ntimer **p = &n->timers; *p; p = &(*p)->next)
        if (*p == timer) {
            *p = ((ntimer *)timer)->next;
            free(timer);
            return;
        }
}

static void cb_timer_mod(void *timer, int64_t expire_ms, void *opaque)
{
    ((ntimer *)timer)->expire_ms = expire_ms;
}

static void cb_register_poll_fd(int fd, void *opaque)
{
}

static void cb_unregister_poll_fd(int fd, void *opaque)
{
}

static void cb_notify(void *opaque)
{
}

static const SlirpCb callbacks = {
    .send_packet = cb_send_packet,
    .guest_error = cb_guest_error,
    .clock_get_ns = cb_clock_get_ns,
    .timer_new = cb_timer_new,
    .timer_free = cb_timer_free,
    .timer_mod = cb_timer_mod,
    .register_poll_fd = cb_register_poll_fd,
    .unregister_poll_fd = cb_unregister_poll_fd,
    .notify = cb_notify,
};

/* ---- setup ------------------------------------------------------------------------------ */

static struct in_addr ip4(const char *s)
{
    struct in_addr a;
    inet_pton(AF_INET, s, &a);
    return a;
}

static void add_forwards(vmm_net *n, const char *spec)
{
    _cleanup_free_ char *copy = xstrdup(spec);
    char *save = NULL;
    size_t count = 0;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        unsigned long port = strtoul(w, &end, 10);
        if (errno || *end || end == w || port < 1 || port > 65535)
            net_die(ABI_ENV_FORWARD " must be a comma-separated list of ports, not '%s'", spec);
        if (++count > MAX_FORWARDS)
            net_die(ABI_ENV_FORWARD " names more than %d ports", MAX_FORWARDS);
        /* Any address of the container's namespace (podman's -p lands there), to the same
         * port on the guest. */
        if (slirp_add_hostfwd(n->slirp, 0, (struct in_addr){.s_addr = htonl(INADDR_ANY)}, (int)port,
                              ip4("10.0.2.15"), (int)port) < 0)
            net_die("cannot forward port %lu into the guest: %s", port, strerror(errno));
    }
}

/* The container's default gateway from /proc/net/route, in network byte order; 0: none. */
static uint32_t default_gateway(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/net/route", "re");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        char iface[64];
        unsigned dest, gw;
        if (sscanf(line, "%63s %x %x", iface, &dest, &gw) == 3 && dest == 0 && gw != 0)
            return gw; /* printed as the bytes of the __be32 read as a host integer */
    }
    return 0;
}

/* Forwards are for the host alone. podman's port mapping reaches the container from the
 * bridge gateway (root: the host's DNAT is masqueraded), from the container's own address
 * (rootless: rootlesskit's child connects locally) or from loopback; other containers on
 * podman's bridge come from their own addresses. A filter on each listening socket drops
 * their SYNs, so they never reach the guest.
 * libslirp listens with a backlog of 1 and accepts one connection per poll round: a burst
 * of execs overflowed it, the kernel answered with SYN cookies, and a client whose last ACK
 * was then dropped for the full queue believed itself connected to a socket that had never
 * heard of it. The agent speaks first, so nothing ever came: exec waited out its 30 s. So
 * each listener gets a backlog as deep as the kernel allows. */
#define MAX_SOURCES 16
static void prepare_forward_listeners(void)
{
    uint32_t ok[MAX_SOURCES]; /* host byte order, as BPF loads them */
    size_t n = 0;
    uint32_t gw = default_gateway();
    if (gw)
        ok[n++] = ntohl(gw);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0)
        for (struct ifaddrs *i = ifs; i && n < MAX_SOURCES; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
                ok[n++] = ntohl(((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr.s_addr);
    freeifaddrs(ifs);

    struct sock_filter f[MAX_SOURCES + 5];
    size_t k = 0;
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)SKF_NET_OFF + 12);
    for (size_t i = 0; i < n; i++) /* a match jumps to ACCEPT, past the rest */
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ok[i],
                                              (uint8_t)(n - i - 1 + 2), 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xff000000);
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x7f000000, 0, 1);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffff); /* ACCEPT */
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);          /* drop */
    struct sock_fprog prog = {.len = (unsigned short)k, .filter = f};
    for (int fd = 3; fd < 1024; fd++) {
        int listening = 0, domain = 0;
        socklen_t len = sizeof listening;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening)
            continue;
        len = sizeof domain;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0 || domain != AF_INET)
            continue;
        if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0)
            net_die("cannot restrict who may use the forwarded ports: %s", strerror(errno));
        if (listen(fd, FORWARD_BACKLOG) < 0)
            net_die("cannot widen a forwarded port's backlog: %s", strerror(errno));
    }
}

/* The addresses of the container's own interfaces: slirp's sockets to them would reach the
 * VMM's own listeners (the forwarded ports) and whatever else shares the namespace. */
static void refuse_own_addresses(netpolicy *p)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        net_die("cannot list the container's addresses: %s", strerror(errno));
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        char a[INET6_ADDRSTRLEN];
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        const void *raw =
            i->ifa_addr->sa_family == AF_INET
                ? (const void *)&((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr
                : (const void *)&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr;
        if (inet_ntop(i->ifa_addr->sa_family, raw, a, sizeof a))
            (void)netpolicy_add(p, a, 0, 0, NP_REFUSE, "the container's own address");
    }
    freeifaddrs(ifs);
}

/* The host's own addresses (which may be public) come from bluebox in ABI_ENV_NET_DENY; the
 * container's gateway (podman's bridge, the host again) and own addresses are read here. */
static void add_host_refusals(netpolicy *p)
{
    const char *deny = getenv(ABI_ENV_NET_DENY);
    if (deny && *deny && netpolicy_add_list(p, deny, "the host's own address or subnet") < 0)
        net_die(ABI_ENV_NET_DENY " must be a comma-separated list of addresses and CIDRs, not '%s'",
                deny);
    uint32_t gw = default_gateway();
    char a[INET_ADDRSTRLEN];
    if (gw && inet_ntop(AF_INET, &gw, a, sizeof a))
        (void)netpolicy_add(p, a, 0, 0, NP_REFUSE, "the container's gateway (the host)");
    refuse_own_addresses(p);
}

/* bridge's safe default: the internet, not the host, the LAN or other containers. */
static netpolicy *bridge_policy(void)
{
#ifdef BB_WEAKEN_KNOBS
    const char *weak = getenv("BLUEBOX_WEAKEN_NET");
    if (weak && streq(weak, "1"))
        return NULL; /* security/weaken's net-open: the escape suite's host/LAN checks must fail */
#endif
    netpolicy *p = netpolicy_new(NP_PASS);
    netpolicy_add_default(p);
    add_host_refusals(p);
    return p;
}

static void egress_send(const void *frame, size_t len, void *opaque)
{
    (void)cb_send_packet(frame, len, opaque);
}

/* bridge with an allowlist (ABI_ENV_NET_ALLOW set, even empty): the egress engine decides. */
static egress_engine *allowlist_engine(vmm_net *n, const char *allow, const secrets *sec)
{
    _cleanup_free_ char *why = NULL;
    egress_engine *e = egress_new(n->slirp, allow, sec, egress_send, n, &why);
    if (!e)
        net_die("%s", why);
    add_host_refusals(egress_rebind_policy(e));
    return e;
}

/* UML binds its end of the vector link and connects to ours when the guest brings it up. */
static void listen_bess(vmm_net *n)
{
    n->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->listen_fd < 0)
        net_die("socket: %s", strerror(errno));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, NET_SOCK);
    unlink(NET_SOCK);
    unlink(UML_SOCK);
    if (bind(n->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(n->listen_fd, 4) < 0)
        net_die("cannot listen on %s: %s", NET_SOCK, strerror(errno));
}

/* QEMU's stream netdev takes its end as an inherited fd: no path anyone else could connect
 * to, and the link is up from the start. */
static void pair_stream(vmm_net *n)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        net_die("socketpair: %s", strerror(errno));
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0)
        net_die("fcntl: %s", strerror(errno));
    n->conn_fd = sv[0];
    n->peer_fd = sv[1];
    netstream_rx_init(&n->rx, FRAME_MAX);
}

vmm_net *net_setup(const char *mode, const char *forward, const secrets *sec, net_link link)
{
    /* none with forwards (an up sandbox's agent port): libslirp's restricted mode, in which
     * the guest reaches nothing at all and only the host forwards reach the guest. */
    bool restricted = false;
    if (!mode || !*mode || streq(mode, "none")) {
        if (!forward || !*forward)
            return NULL;
        restricted = true;
    } else if (!streq(mode, "bridge")) {
        net_die(ABI_ENV_NETWORK " must be none or bridge, not '%s'", mode);
    }

    vmm_net *n = xmalloc(sizeof *n);
    *n = (vmm_net){.link = link, .listen_fd = -1, .conn_fd = -1, .peer_fd = -1};
    if (link == NET_LINK_STREAM)
        pair_stream(n);
    else
        listen_bess(n);

    SlirpConfig cfg = {
        .version = 4,
        .restricted = restricted,
        .in_enabled = true,
        .vnetwork = ip4("10.0.2.0"),
        .vnetmask = ip4("255.255.255.0"),
        .vhost = ip4("10.0.2.2"),
        .in6_enabled = false,
        .vdhcp_start = ip4("10.0.2.15"),
        .vnameserver = ip4("10.0.2.3"),
        /* 10.0.2.2 is a gateway, never the host's 127.0.0.1: the host's loopback stays out
         * of reach, as with krun. */
        .disable_host_loopback = true,
        .enable_emu = false,
        .if_mtu = LINK_MTU,
        .if_mru = LINK_MTU,
    };
    n->slirp = slirp_new(&cfg, &callbacks, n);
    if (!n->slirp)
        net_die("cannot start the user-mode network stack (libslirp)");
    const char *allow = getenv(ABI_ENV_NET_ALLOW);
    if (!restricted && allow)
        n->egress = allowlist_engine(n, allow, sec);
    else if (!restricted)
        n->policy = bridge_policy();
    if (forward && *forward) {
        add_forwards(n, forward);
        prepare_forward_listeners();
    }
    return n;
}

void net_kernel_args(const vmm_net *n, strv *argv)
{
    if (!n || n->link != NET_LINK_BESS)
        return;
    strv_add(argv, "vec0:transport=bess,mtu=" STR(LINK_MTU) ",src=" UML_SOCK ",dst=" NET_SOCK);
}

int net_peer_fd(const vmm_net *n)
{
    return n ? n->peer_fd : -1;
}

void net_peer_close(vmm_net *n)
{
    if (n && n->peer_fd >= 0) {
        close(n->peer_fd);
        n->peer_fd = -1;
    }
}

/* ---- the poll loop ---------------------------------------------------------------------- */

static int cb_add_poll(int fd, int events, void *opaque)
{
    short ev = 0;
    if (events & SLIRP_POLL_IN)
        ev |= POLLIN;
    if (events & SLIRP_POLL_OUT)
        ev |= POLLOUT;
    if (events & SLIRP_POLL_PRI)
        ev |= POLLPRI;
    return (int)pollvec_add(((vmm_net *)opaque)->pv, fd, ev);
}

static int cb_get_revents(int idx, void *opaque)
{
    const pollvec *pv = ((vmm_net *)opaque)->pv;
    if (idx < 0 || (size_t)idx >= pv->n)
        return 0;
    short r = pv->v[idx].revents;
    int ev = 0;
    if (r & POLLIN)
        ev |= SLIRP_POLL_IN;
    if (r & POLLOUT)
        ev |= SLIRP_POLL_OUT;
    if (r & POLLPRI)
        ev |= SLIRP_POLL_PRI;
    if (r & (POLLERR | POLLNVAL))
        ev |= SLIRP_POLL_ERR;
    if (r & POLLHUP)
        ev |= SLIRP_POLL_HUP;
    return ev;
}

void net_poll_fill(vmm_net *n, pollvec *pv, int *timeout_ms)
{
    if (!n)
        return;
    n->pv = pv;
    n->listen_idx = pollvec_add(pv, n->listen_fd, POLLIN);
    n->conn_idx = pollvec_add(pv, n->conn_fd, frameq_empty(&n->outq) ? POLLIN : POLLIN | POLLOUT);
    uint32_t t = *timeout_ms < 0 ? UINT32_MAX : (uint32_t)*timeout_ms;
    int64_t now = now_mono_ms();
    for (ntimer *tm = n->timers; tm; tm = tm->next)
        if (tm->expire_ms >= 0) {
            uint32_t left = (uint32_t)poll_timeout_until(tm->expire_ms, now);
            if (left < t)
                t = left;
        }
    if (n->egress)
        egress_poll_fill(n->egress, pv);
    slirp_pollfds_fill(n->slirp, &t, cb_add_poll, n);
    *timeout_ms = t == UINT32_MAX ? -1 : (int)(t > INT_MAX ? INT_MAX : t);
}

static void accept_guest(vmm_net *n)
{
    int fd = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    /* The guest brought its interface down and up again: the newest connection is it. */
    if (n->conn_fd >= 0)
        close(n->conn_fd);
    frameq_clear(&n->outq); /* they were for the old connection */
    n->conn_fd = fd;
}

/* The policy's word on one guest frame; a refused one is answered at once (a TCP reset, an
 * ICMP unreachable), so the guest's program fails fast instead of timing out. */
static bool policy_allows(vmm_net *n, const uint8_t *frame, size_t len)
{
    np_action a = netpolicy_check(n->policy, frame, len, NULL);
    if (a == NP_PASS)
        return true;
    n->refused_in++;
    if (a == NP_REFUSE) {
        uint8_t reply[NP_REPLY_MAX];
        size_t l = netpolicy_refusal(frame, len, reply, sizeof reply);
        if (l)
            cb_send_packet(reply, l, n);
    }
    return false;
}

/* One frame from the guest, whichever its link: the egress engine or the policy, then slirp. */
static void guest_frame(const uint8_t *frame, size_t len, void *opaque)
{
    vmm_net *n = opaque;
    n->frames_in++;
    if (n->egress && egress_frame(n->egress, frame, len))
        return;
    if (n->policy && !policy_allows(n, frame, len))
        return;
    slirp_input(n->slirp, frame, (int)len);
}

static void link_down(vmm_net *n)
{
    close(n->conn_fd);
    n->conn_fd = -1;
    frameq_clear(&n->outq);
    if (n->link == NET_LINK_STREAM)
        netstream_rx_reset(&n->rx);
}

/* Whatever arrived on the stream, each whole frame on its way. A length past FRAME_MAX is a
 * guest (or its VMM) that does not speak the framing: its link goes, and nothing else. */
static void read_stream(vmm_net *n)
{
    for (int i = 0; i < 64; i++) { /* bounded, as below */
        size_t room;
        uint8_t *p = netstream_rx_space(&n->rx, &room);
        ssize_t r = recv(n->conn_fd, p, room, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return;
        if (r <= 0 || netstream_rx_commit(&n->rx, (size_t)r, guest_frame, n) < 0) {
            link_down(n);
            return;
        }
    }
}

static void read_guest(vmm_net *n)
{
    if (n->link == NET_LINK_STREAM) {
        read_stream(n);
        return;
    }
    static uint8_t buf[FRAME_MAX];
    for (int i = 0; i < 256; i++) { /* bounded: let the rest of the loop run too */
        ssize_t r = recv(n->conn_fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return;
        if (r <= 0) {
            link_down(n);
            return;
        }
        guest_frame(buf, (size_t)r, n);
    }
}

static void run_timers(vmm_net *n)
{
    /* A callback may re-arm, add or free timers: rescan after each one. */
    for (bool again = true; again;) {
        again = false;
        int64_t now = now_mono_ms();
        for (ntimer *t = n->timers; t; t = t->next)
            if (t->expire_ms >= 0 && t->expire_ms <= now) {
                t->expire_ms = -1;
                t->cb(t->opaque);
                again = true;
                break;
            }
    }
}

void net_poll_done(vmm_net *n, const pollvec *pv, bool poll_failed)
{
    if (!n)
        return;
    n->pv = (pollvec *)pv;
    if (!poll_failed) {
        if (n->egress)
            egress_poll_done(n->egress, pv);
        if (pv->v[n->listen_idx].revents & POLLIN)
            accept_guest(n);
        short rev =
            n->conn_fd >= 0 && pv->v[n->conn_idx].fd == n->conn_fd ? pv->v[n->conn_idx].revents : 0;
        if ((rev & POLLOUT) && frameq_flush(&n->outq, n->conn_fd) < 0)
            rev = POLLHUP; /* read_guest sees the end and closes */
        if (rev & ~POLLOUT)
            read_guest(n);
    }
    slirp_pollfds_poll(n->slirp, poll_failed, cb_get_revents, n);
    run_timers(n);
    n->pv = NULL;
}

void net_free(vmm_net *n)
{
    if (!n)
        return;
    egress_free(n->egress);
    slirp_cleanup(n->slirp);
    netpolicy_free(n->policy);
    while (n->timers) {
        ntimer *t = n->timers;
        n->timers = t->next;
        free(t);
    }
    if (n->conn_fd >= 0)
        close(n->conn_fd);
    net_peer_close(n);
    frameq_clear(&n->outq);
    netstream_rx_free(&n->rx);
    if (n->listen_fd >= 0) {
        close(n->listen_fd);
        unlink(NET_SOCK);
    }
    free(n);
}
