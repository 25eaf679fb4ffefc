/* The network engine's policy: which guest frames reach the user-mode stack. See netpolicy.h. */
#include "net/netpolicy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/xalloc.h"

#define ETH_HLEN      14
#define ETHERTYPE_IP4 0x0800
#define ETHERTYPE_ARP 0x0806
#define ETHERTYPE_IP6 0x86dd
#define IP4_MF        0x2000
#define IP4_DF        0x4000
#define IP4_OFFMASK   0x1fff
#define TCP_FIN       0x01
#define TCP_SYN       0x02
#define TCP_RST       0x04
#define TCP_ACK       0x10
#define MAX_EXT_HDRS  8

struct netpolicy {
    np_rule *rules;
    size_t n, cap;
    np_action dflt;
};

/* What the policy needs from one frame. */
typedef np_pkt pkt;

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16)), put16(p + 2, (uint16_t)v);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)be16(p) << 16 | be16(p + 2);
}

/* ---- rules ------------------------------------------------------------------------------ */

netpolicy *netpolicy_new(np_action dflt)
{
    netpolicy *p = xmalloc(sizeof *p);
    *p = (netpolicy){.dflt = dflt};
    return p;
}

void netpolicy_free(netpolicy *p)
{
    if (!p)
        return;
    free(p->rules);
    free(p);
}

size_t netpolicy_n_rules(const netpolicy *p)
{
    return p->n;
}

static int parse_cidr(const char *cidr, np_rule *r)
{
    char buf[INET6_ADDRSTRLEN + 8];
    if (strlen(cidr) >= sizeof buf)
        return -1;
    strcpy(buf, cidr);
    char *slash = strchr(buf, '/');
    if (slash)
        *slash = '\0';
    if (inet_pton(AF_INET, buf, r->addr) == 1)
        r->family = 4;
    else if (inet_pton(AF_INET6, buf, r->addr) == 1)
        r->family = 6;
    else
        return -1;
    unsigned max = r->family == 4 ? 32 : 128;
    r->prefix = (uint8_t)max;
    if (slash) {
        char *end;
        errno = 0;
        unsigned long bits = strtoul(slash + 1, &end, 10);
        if (errno || end == slash + 1 || *end || bits > max)
            return -1;
        r->prefix = (uint8_t)bits;
    }
    return 0;
}

int netpolicy_add(netpolicy *p, const char *cidr, uint8_t proto, uint16_t port, np_action action,
                  const char *why)
{
    np_rule r = {.proto = proto, .port = port, .action = action, .why = why};
    if (parse_cidr(cidr, &r) < 0) {
        errno = EINVAL;
        return -1;
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 32;
        p->rules = xreallocarray(p->rules, p->cap, sizeof *p->rules);
    }
    p->rules[p->n++] = r;
    return 0;
}

/* The user-mode stack's own services, answered inside it (slirp: 10.0.2.2 gateway, 10.0.2.3
 * DNS). DNS is forwarded to the container's resolver; everything else slirp would turn into a
 * real socket to that address in the container's network, so only these pass. */
static const struct {
    const char *cidr;
    uint8_t proto;
    uint16_t port;
} stack_services[] = {
    {"10.0.2.3", IPPROTO_UDP, 53}, {"10.0.2.3", IPPROTO_TCP, 53},
    {"10.0.2.2", IPPROTO_UDP, 67}, {"255.255.255.255", IPPROTO_UDP, 67},
    {"10.0.2.2", IPPROTO_ICMP, 0}, {"10.0.2.3", IPPROTO_ICMP, 0},
};

/* Not the internet (RFC 6890 and friends). */
static const struct {
    const char *cidr, *why;
} not_internet[] = {
    {"0.0.0.0/8", "this network"},
    {"10.0.0.0/8", "private range"},
    {"100.64.0.0/10", "carrier-grade NAT range"},
    {"127.0.0.0/8", "loopback"},
    {"169.254.0.0/16", "link-local and cloud metadata"},
    {"172.16.0.0/12", "private range"},
    {"192.0.0.0/24", "IETF protocol assignments"},
    {"192.168.0.0/16", "private range"},
    {"198.18.0.0/15", "benchmarking range"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved and broadcast"},
    {"::/96", "IPv6 unspecified, loopback and IPv4-compatible"},
    {"::ffff:0:0/96", "IPv4-mapped IPv6"},
    {"64:ff9b::/96", "NAT64"},
    {"64:ff9b:1::/48", "local NAT64"},
    {"2002::/16", "6to4"},
    {"fc00::/7", "IPv6 unique local"},
    {"fe80::/10", "IPv6 link-local"},
    {"fec0::/10", "IPv6 site-local"},
    {"ff00::/8", "IPv6 multicast"},
};

void netpolicy_add_default(netpolicy *p)
{
    for (size_t i = 0; i < ELEMENTSOF(stack_services); i++)
        (void)netpolicy_add(p, stack_services[i].cidr, stack_services[i].proto,
                            stack_services[i].port, NP_PASS, "the network stack's own service");
    netpolicy_add_not_internet(p);
}

void netpolicy_add_not_internet(netpolicy *p)
{
    for (size_t i = 0; i < ELEMENTSOF(not_internet); i++)
        (void)netpolicy_add(p, not_internet[i].cidr, 0, 0, NP_REFUSE, not_internet[i].why);
}

int netpolicy_add_list(netpolicy *p, const char *list, const char *why)
{
    size_t before = p->n;
    _cleanup_free_ char *copy = xstrdup(list);
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
        if (netpolicy_add(p, w, 0, 0, NP_REFUSE, why) < 0) {
            p->n = before;
            errno = EINVAL;
            return -1;
        }
    return 0;
}

/* ---- parsing ---------------------------------------------------------------------------- */

/* IPv4 at f[ETH_HLEN]; 0, or -1 when malformed. */
static int parse_ip4(const uint8_t *f, size_t len, pkt *k)
{
    const uint8_t *ip = f + ETH_HLEN;
    if (len < ETH_HLEN + 20 || ip[0] >> 4 != 4)
        return -1;
    size_t ihl = (size_t)(ip[0] & 0xf) * 4, total = be16(ip + 2);
    if (ihl < 20 || total < ihl || ETH_HLEN + total > len)
        return -1;
    uint16_t frag = be16(ip + 6);
    *k = (pkt){.family = 4, .proto = ip[9], .src = ip + 12, .dst = ip + 16, .opens = true};
    if (frag & (IP4_MF | IP4_OFFMASK))
        return 0; /* a fragment: ports unknown */
    if (k->proto == IPPROTO_TCP || k->proto == IPPROTO_UDP) {
        if (total < ihl + (k->proto == IPPROTO_TCP ? 20 : 8))
            return -1; /* a truncated transport header the stack would drop too */
        k->port_known = true;
        k->l4 = (uint16_t)(ETH_HLEN + ihl);
        k->port = be16(ip + ihl + 2);
        if (k->proto == IPPROTO_TCP)
            k->opens = (ip[ihl + 13] & (TCP_SYN | TCP_ACK)) == TCP_SYN;
    }
    return 0;
}

/* IPv6 at f[ETH_HLEN], walking extension headers to the transport; 0, or -1 when malformed or
 * routed (a routing header names more destinations than the one we decide on). */
static int parse_ip6(const uint8_t *f, size_t len, pkt *k)
{
    const uint8_t *ip = f + ETH_HLEN;
    if (len < ETH_HLEN + 40 || ip[0] >> 4 != 6)
        return -1;
    size_t end = ETH_HLEN + 40 + (size_t)be16(ip + 4);
    if (end > len)
        return -1;
    *k = (pkt){.family = 6, .src = ip + 8, .dst = ip + 24, .opens = true};
    uint8_t nh = ip[6];
    size_t off = ETH_HLEN + 40;
    bool frag = false;
    for (int i = 0;; i++) {
        if (i > MAX_EXT_HDRS)
            return -1;
        if (nh == 0 || nh == 60) { /* hop-by-hop, destination options */
            if (off + 8 > end)
                return -1;
            size_t l = ((size_t)f[off + 1] + 1) * 8;
            nh = f[off];
            off += l;
        } else if (nh == 44) { /* fragment */
            if (off + 8 > end)
                return -1;
            frag = true;
            nh = f[off];
            off += 8;
        } else if (nh == 43) { /* routing */
            return -1;
        } else {
            break;
        }
        if (off > end)
            return -1;
    }
    k->proto = nh;
    if (frag)
        return 0;
    if (nh == IPPROTO_TCP || nh == IPPROTO_UDP) {
        if (off + (nh == IPPROTO_TCP ? 20 : 8) > end)
            return -1;
        k->port_known = true;
        k->l4 = (uint16_t)off;
        k->port = be16(f + off + 2);
        if (nh == IPPROTO_TCP)
            k->opens = (f[off + 13] & (TCP_SYN | TCP_ACK)) == TCP_SYN;
    }
    return 0;
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, unsigned bits)
{
    size_t whole = bits / 8;
    if (memcmp(a, net, whole) != 0)
        return false;
    unsigned rest = bits % 8;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (net[whole] & mask);
}

static bool rule_matches(const np_rule *r, const pkt *k)
{
    if (r->family != k->family || !prefix_match(k->dst, r->addr, r->prefix))
        return false;
    if (r->proto && r->proto != k->proto)
        return false;
    if (!r->port)
        return true;
    if (!k->port_known) /* a fragment: never let it through by port, always refuse it */
        return r->action != NP_PASS;
    return r->port == k->port;
}

static np_action decide(const netpolicy *p, const pkt *k, const np_rule **ret_rule)
{
    for (size_t i = 0; i < p->n; i++)
        if (rule_matches(&p->rules[i], k)) {
            if (ret_rule)
                *ret_rule = &p->rules[i];
            return p->rules[i].action;
        }
    return p->dflt;
}

np_action netpolicy_check_addr(const netpolicy *p, uint8_t family, const uint8_t *addr,
                               uint8_t proto, uint16_t port, const np_rule **ret_rule)
{
    if (ret_rule)
        *ret_rule = NULL;
    pkt k = {.family = family,
             .proto = proto,
             .dst = addr,
             .src = addr,
             .port_known = true,
             .opens = true,
             .port = port};
    return decide(p, &k, ret_rule);
}

int netpolicy_peek(const uint8_t *frame, size_t len, np_pkt *ret)
{
    if (len < ETH_HLEN)
        return -1;
    switch (be16(frame + 12)) {
    case ETHERTYPE_IP4:
        return parse_ip4(frame, len, ret);
    case ETHERTYPE_IP6:
        return parse_ip6(frame, len, ret);
    default:
        return -1;
    }
}

np_action netpolicy_check(const netpolicy *p, const uint8_t *frame, size_t len,
                          const np_rule **ret_rule)
{
    if (ret_rule)
        *ret_rule = NULL;
    if (len < ETH_HLEN)
        return NP_DROP;
    pkt k;
    switch (be16(frame + 12)) {
    case ETHERTYPE_ARP:
        return NP_PASS; /* answered by the stack for its own addresses, opens no socket */
    case ETHERTYPE_IP4:
        if (parse_ip4(frame, len, &k) < 0)
            return NP_DROP;
        break;
    case ETHERTYPE_IP6:
        if (parse_ip6(frame, len, &k) < 0)
            return NP_DROP;
        break;
    default:
        return NP_DROP;
    }
    /* A TCP segment that opens nothing belongs to a connection the stack already has (one the
     * host opened through a forward: the guest answers its real address) or to none, and then
     * the stack drops it with a reset; only a SYN makes it connect (libslirp: tcp_input). */
    if (!k.opens)
        return NP_PASS;
    return decide(p, &k, ret_rule);
}

/* ---- refusal frames --------------------------------------------------------------------- */

uint32_t np_csum_add(uint32_t sum, const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += be16(buf + i);
    if (len & 1)
        sum += (uint32_t)buf[len - 1] << 8;
    return sum;
}

uint16_t np_csum_fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)sum;
}

/* No ICMP error or reset answers a datagram to or from a broadcast or multicast address
 * (RFC 1122 3.2.2, 4.2.2.12), nor one from the unspecified address. */
static bool ip4_answerable(const uint8_t *ip)
{
    uint32_t src = be32(ip + 12), dst = be32(ip + 16);
    return src != 0 && src >> 28 != 0xe && src != 0xffffffff && dst >> 28 != 0xe &&
           dst != 0xffffffff;
}

/* Ethernet and IPv4 headers of a reply to the frame f (whose IPv4 header is ip) carrying
 * payload bytes of proto; the caller fills out + ETH_HLEN + 20 onwards. */
static void reply_headers(const uint8_t *f, const uint8_t *ip, uint8_t *out, uint8_t proto,
                          size_t payload)
{
    memcpy(out, f + 6, 6);
    memcpy(out + 6, f, 6);
    put16(out + 12, ETHERTYPE_IP4);
    uint8_t *h = out + ETH_HLEN;
    memset(h, 0, 20);
    h[0] = 0x45;
    put16(h + 2, (uint16_t)(20 + payload));
    put16(h + 6, IP4_DF);
    h[8] = 64;
    h[9] = proto;
    memcpy(h + 12, ip + 16, 4);
    memcpy(h + 16, ip + 12, 4);
    put16(h + 10, (uint16_t)~np_csum_fold(np_csum_add(0, h, 20)));
}

/* The 20-byte reset (checksum left 0) answering TCP segment t of `seg` bytes: RFC 793's
 * reset generation, for IPv4 and IPv6 alike. */
static void rst_segment(const uint8_t *t, size_t seg, uint8_t *r)
{
    uint8_t flags = t[13];
    size_t doff = (size_t)(t[12] >> 4) * 4;
    size_t data = doff >= 20 && doff <= seg ? seg - doff : 0;
    uint32_t seq = 0, ack = 0;
    uint8_t rflags = TCP_RST;
    if (flags & TCP_ACK) {
        seq = be32(t + 8);
    } else {
        ack = be32(t + 4) + (uint32_t)data + !!(flags & TCP_SYN) + !!(flags & TCP_FIN);
        rflags |= TCP_ACK;
    }
    memset(r, 0, 20);
    memcpy(r, t + 2, 2);
    memcpy(r + 2, t, 2);
    put32(r + 4, seq);
    put32(r + 8, ack);
    r[12] = 5 << 4;
    r[13] = rflags;
}

static size_t tcp_reset(const uint8_t *f, const uint8_t *ip, size_t ihl, size_t total, uint8_t *out)
{
    const uint8_t *t = ip + ihl;
    if (t[13] & TCP_RST)
        return 0; /* never answer a reset */
    reply_headers(f, ip, out, IPPROTO_TCP, 20);
    uint8_t *r = out + ETH_HLEN + 20;
    rst_segment(t, total >= ihl ? total - ihl : 0, r);
    uint8_t pseudo[12] = {0};
    memcpy(pseudo, ip + 16, 4);
    memcpy(pseudo + 4, ip + 12, 4);
    pseudo[9] = IPPROTO_TCP;
    pseudo[11] = 20;
    put16(r + 16, (uint16_t)~np_csum_fold(np_csum_add(np_csum_add(0, pseudo, 12), r, 20)));
    return ETH_HLEN + 40;
}

static size_t icmp_prohibited(const uint8_t *f, const uint8_t *ip, size_t ihl, size_t total,
                              uint8_t *out)
{
    size_t quote = ihl + 8 < total ? ihl + 8 : total;
    reply_headers(f, ip, out, IPPROTO_ICMP, 8 + quote);
    uint8_t *c = out + ETH_HLEN + 20;
    memset(c, 0, 8);
    c[0] = 3;  /* destination unreachable */
    c[1] = 13; /* communication administratively prohibited */
    memcpy(c + 8, ip, quote);
    put16(c + 2, (uint16_t)~np_csum_fold(np_csum_add(0, c, 8 + quote)));
    return ETH_HLEN + 20 + 8 + quote;
}

/* The same for IPv6 (RFC 4443 2.4 e): no answer to a multicast destination or a multicast or
 * unspecified source. */
static bool ip6_answerable(const uint8_t *ip)
{
    static const uint8_t zero[16];
    return ip[8] != 0xff && ip[24] != 0xff && memcmp(ip + 8, zero, 16) != 0;
}

/* Ethernet and IPv6 headers of a reply to f (IPv6 header ip) carrying payload bytes of proto;
 * the caller fills out + ETH_HLEN + 40 onwards. */
static void reply_headers6(const uint8_t *f, const uint8_t *ip, uint8_t *out, uint8_t proto,
                           size_t payload)
{
    memcpy(out, f + 6, 6);
    memcpy(out + 6, f, 6);
    put16(out + 12, ETHERTYPE_IP6);
    uint8_t *h = out + ETH_HLEN;
    memset(h, 0, 40);
    h[0] = 6 << 4;
    put16(h + 4, (uint16_t)payload);
    h[6] = proto;
    h[7] = 64;
    memcpy(h + 8, ip + 24, 16);
    memcpy(h + 24, ip + 8, 16);
}

/* The checksum of an upper-layer body of len bytes under the IPv6 header h (RFC 8200 8.1). */
static uint16_t csum6(const uint8_t *h, uint8_t proto, const uint8_t *body, size_t len)
{
    uint8_t pseudo[40] = {0};
    memcpy(pseudo, h + 8, 32);
    put32(pseudo + 32, (uint32_t)len);
    pseudo[39] = proto;
    return (uint16_t)~np_csum_fold(np_csum_add(np_csum_add(0, pseudo, 40), body, len));
}

static size_t tcp_reset6(const uint8_t *f, const uint8_t *ip, const np_pkt *k, size_t end,
                         uint8_t *out)
{
    const uint8_t *t = f + k->l4;
    if (t[13] & TCP_RST)
        return 0;
    reply_headers6(f, ip, out, IPPROTO_TCP, 20);
    uint8_t *r = out + ETH_HLEN + 40;
    rst_segment(t, end - k->l4, r);
    put16(r + 16, csum6(out + ETH_HLEN, IPPROTO_TCP, r, 20));
    return ETH_HLEN + 40 + 20;
}

static size_t icmp6_prohibited(const uint8_t *f, const uint8_t *ip, size_t end, uint8_t *out)
{
    size_t plen = end - ETH_HLEN, quote = plen < NP_QUOTE6_MAX ? plen : NP_QUOTE6_MAX;
    reply_headers6(f, ip, out, IPPROTO_ICMPV6, 8 + quote);
    uint8_t *c = out + ETH_HLEN + 40;
    memset(c, 0, 8);
    c[0] = 1; /* destination unreachable */
    c[1] = 1; /* communication with the destination administratively prohibited */
    memcpy(c + 8, ip, quote);
    put16(c + 2, csum6(out + ETH_HLEN, IPPROTO_ICMPV6, c, 8 + quote));
    return ETH_HLEN + 40 + 8 + quote;
}

static size_t refusal6(const uint8_t *frame, size_t len, uint8_t *out)
{
    pkt k;
    if (parse_ip6(frame, len, &k) < 0 || !k.port_known)
        return 0;
    const uint8_t *ip = frame + ETH_HLEN;
    if (!ip6_answerable(ip) || frame[6] & 1)
        return 0;
    size_t end = ETH_HLEN + 40 + (size_t)be16(ip + 4);
    if (k.proto == IPPROTO_TCP)
        return tcp_reset6(frame, ip, &k, end, out);
    if (k.proto == IPPROTO_UDP)
        return icmp6_prohibited(frame, ip, end, out);
    return 0;
}

size_t netpolicy_refusal(const uint8_t *frame, size_t len, uint8_t *out, size_t cap)
{
    pkt k;
    if (cap < NP_REPLY_MAX || len < ETH_HLEN)
        return 0;
    if (be16(frame + 12) == ETHERTYPE_IP6)
        return refusal6(frame, len, out);
    if (be16(frame + 12) != ETHERTYPE_IP4 || parse_ip4(frame, len, &k) < 0 || !k.port_known)
        return 0;
    const uint8_t *ip = frame + ETH_HLEN;
    if (!ip4_answerable(ip) || frame[6] & 1) /* nor a multicast ethernet source */
        return 0;
    size_t ihl = (size_t)(ip[0] & 0xf) * 4, total = be16(ip + 2);
    if (k.proto == IPPROTO_TCP)
        return tcp_reset(frame, ip, ihl, total, out);
    if (k.proto == IPPROTO_UDP)
        return icmp_prohibited(frame, ip, ihl, total, out);
    return 0;
}
