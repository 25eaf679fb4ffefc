/* Unit tests for the network engine's policy: crafted guest frames (truncated, with IP options,
 * fragments, IPv6 extension headers) get the right verdict, and refusal frames are well formed
 * with checksums verified here by an independent routine. */
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "util/macro.h"
#include "net/netpolicy.h"

static const uint8_t guest_mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
static const uint8_t stack_mac[6] = {0x52, 0x55, 0x0a, 0x00, 0x02, 0x02};

/* RFC 1071, written out separately from the code under test. */
static uint16_t sum16(const uint8_t *b, size_t n, uint32_t start)
{
    uint32_t s = start;
    for (size_t i = 0; i < n; i++)
        s += i % 2 ? b[i] : (uint32_t)b[i] << 8;
    while (s > 0xffff)
        s = (s >> 16) + (s & 0xffff);
    return (uint16_t)s;
}

typedef struct frame {
    uint8_t b[256];
    size_t len;
} frame;

/* An IPv4 frame from 10.0.2.15 to dst carrying proto with sport/dport; opts bytes of IP
 * options; frag is the flags/offset field. TCP gets flags and seq/ack; 4 payload bytes. */
static frame ip4(const char *dst, uint8_t proto, uint16_t dport, size_t opts, uint16_t frag,
                 uint8_t tcpflags, uint32_t seq, uint32_t ack)
{
    frame f = {0};
    memcpy(f.b, stack_mac, 6);
    memcpy(f.b + 6, guest_mac, 6);
    f.b[12] = 0x08, f.b[13] = 0x00;
    uint8_t *ip = f.b + 14;
    size_t ihl = 20 + opts, l4 = proto == IPPROTO_TCP ? 20 : 8, total = ihl + l4 + 4;
    ip[0] = (uint8_t)(0x40 | ihl / 4);
    ip[2] = (uint8_t)(total >> 8), ip[3] = (uint8_t)total;
    ip[6] = (uint8_t)(frag >> 8), ip[7] = (uint8_t)frag;
    ip[8] = 64, ip[9] = proto;
    inet_pton(AF_INET, "10.0.2.15", ip + 12);
    assert_int_equal(inet_pton(AF_INET, dst, ip + 16), 1);
    memset(ip + 20, 1, opts); /* NOPs */
    uint8_t *t = ip + ihl;
    t[0] = 0x9c, t[1] = 0x40; /* 40000 */
    t[2] = (uint8_t)(dport >> 8), t[3] = (uint8_t)dport;
    if (proto == IPPROTO_TCP) {
        for (int i = 0; i < 4; i++) {
            t[4 + i] = (uint8_t)(seq >> (24 - 8 * i));
            t[8 + i] = (uint8_t)(ack >> (24 - 8 * i));
        }
        t[12] = 5 << 4, t[13] = tcpflags;
    } else {
        t[4] = 0, t[5] = 12;
    }
    memcpy(t + l4, "data", 4);
    f.len = 14 + total;
    return f;
}

static frame syn(const char *dst, uint16_t port)
{
    return ip4(dst, IPPROTO_TCP, port, 0, 0, 0x02, 1000, 0);
}

static frame udp(const char *dst, uint16_t port)
{
    return ip4(dst, IPPROTO_UDP, port, 0, 0, 0, 0, 0);
}

/* An IPv6 frame to dst: ext is a chain of extension headers already laid out (their first
 * byte's next header is filled by the caller), first the next-header value of the fixed
 * header; then a TCP SYN to port 443. */
static frame ip6(const char *dst, uint8_t first, const uint8_t *ext, size_t n_ext)
{
    frame f = {0};
    memcpy(f.b, stack_mac, 6);
    memcpy(f.b + 6, guest_mac, 6);
    f.b[12] = 0x86, f.b[13] = 0xdd;
    uint8_t *ip = f.b + 14;
    size_t plen = n_ext + 20;
    ip[0] = 0x60;
    ip[4] = (uint8_t)(plen >> 8), ip[5] = (uint8_t)plen;
    ip[6] = first, ip[7] = 64;
    inet_pton(AF_INET6, "fec0::15", ip + 8);
    assert_int_equal(inet_pton(AF_INET6, dst, ip + 24), 1);
    if (n_ext)
        memcpy(ip + 40, ext, n_ext);
    uint8_t *t = ip + 40 + n_ext;
    t[2] = 0x01, t[3] = 0xbb, t[12] = 5 << 4, t[13] = 0x02;
    f.len = 14 + 40 + plen;
    return f;
}

static netpolicy *bridge(void)
{
    netpolicy *p = netpolicy_new(NP_PASS);
    netpolicy_add_default(p);
    assert_int_equal(netpolicy_add_list(p, "203.0.113.7,2001:db8::1", "host"), 0);
    return p;
}

static np_action verdict(const netpolicy *p, frame f)
{
    return netpolicy_check(p, f.b, f.len, NULL);
}

static void default_refuses_everything_but_the_internet(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    const char *refused[] = {"0.0.0.0",     "10.1.2.3",        "10.0.2.2",        "127.0.0.1",
                             "127.9.9.9",   "169.254.169.254", "172.16.0.1",      "172.31.255.254",
                             "192.168.1.1", "100.64.0.1",      "100.127.255.255", "192.0.0.170",
                             "198.18.0.1",  "198.19.255.255",  "224.0.0.1",       "239.1.1.1",
                             "240.0.0.1",   "255.255.255.255", "203.0.113.7"};
    for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
        const np_rule *r = NULL;
        frame f = syn(refused[i], 80);
        assert_int_equal(netpolicy_check(p, f.b, f.len, &r), NP_REFUSE);
        assert_non_null(r);
        assert_int_equal(verdict(p, udp(refused[i], 9999)), NP_REFUSE);
    }
    const char *internet[] = {"1.1.1.1",     "93.184.216.34", "172.32.0.1",    "100.128.0.1",
                              "192.169.0.1", "203.0.113.8",   "9.255.255.255", "11.0.0.0"};
    for (size_t i = 0; i < ELEMENTSOF(internet); i++) {
        const np_rule *r = (const np_rule *)1;
        frame f = syn(internet[i], 443);
        assert_int_equal(netpolicy_check(p, f.b, f.len, &r), NP_PASS);
        assert_null(r); /* the default, not a rule */
    }
    netpolicy_free(p);
}

static void stack_services_pass_and_nothing_else_on_them(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    assert_int_equal(verdict(p, udp("10.0.2.3", 53)), NP_PASS);
    assert_int_equal(verdict(p, syn("10.0.2.3", 53)), NP_PASS);
    assert_int_equal(verdict(p, udp("255.255.255.255", 67)), NP_PASS);
    assert_int_equal(verdict(p, udp("10.0.2.2", 67)), NP_PASS);
    assert_int_equal(verdict(p, ip4("10.0.2.2", IPPROTO_ICMP, 0, 0, 0, 0, 0, 0)), NP_PASS);
    /* 10.0.2.2 is a real address in the container's network for everything else */
    assert_int_equal(verdict(p, syn("10.0.2.2", 22)), NP_REFUSE);
    assert_int_equal(verdict(p, syn("10.0.2.2", 53)), NP_REFUSE);
    assert_int_equal(verdict(p, udp("10.0.2.3", 54)), NP_REFUSE);
    assert_int_equal(verdict(p, syn("10.0.2.3", 80)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.9.9.9", IPPROTO_ICMP, 0, 0, 0, 0, 0, 0)), NP_REFUSE);
    netpolicy_free(p);
}

static void fragments_never_pass_by_port(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    uint8_t out[NP_REPLY_MAX];
    /* a later fragment to a refused address: refused, and silently (no ports to answer) */
    frame f = ip4("169.254.169.254", IPPROTO_TCP, 80, 0, 100, 0x02, 1, 0);
    assert_int_equal(verdict(p, f), NP_REFUSE);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    /* its first fragment (MF set) is refused the same way */
    f = ip4("169.254.169.254", IPPROTO_TCP, 80, 0, 0x2000, 0x02, 1, 0);
    assert_int_equal(verdict(p, f), NP_REFUSE);
    /* fragments to the DNS address cannot use the port-53 rule: refused with 10/8 */
    assert_int_equal(verdict(p, ip4("10.0.2.3", IPPROTO_UDP, 53, 0, 0x2000, 0, 0, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.0.2.3", IPPROTO_UDP, 53, 0, 7, 0, 0, 0)), NP_REFUSE);
    /* fragments to the internet pass (the stack reassembles per destination) */
    assert_int_equal(verdict(p, ip4("1.1.1.1", IPPROTO_UDP, 53, 0, 7, 0, 0, 0)), NP_PASS);
    assert_int_equal(verdict(p, ip4("1.1.1.1", IPPROTO_TCP, 53, 0, 0x2000, 0, 0, 0)), NP_PASS);
    /* a policy that passes one port refuses fragments to that address */
    netpolicy *q = netpolicy_new(NP_REFUSE);
    assert_int_equal(netpolicy_add(q, "198.51.100.0/24", IPPROTO_TCP, 443, NP_PASS, "ok"), 0);
    assert_int_equal(verdict(q, ip4("198.51.100.9", IPPROTO_TCP, 443, 0, 0, 2, 0, 0)), NP_PASS);
    assert_int_equal(verdict(q, ip4("198.51.100.9", IPPROTO_TCP, 443, 0, 9, 2, 0, 0)), NP_REFUSE);
    assert_int_equal(verdict(q, ip4("198.51.100.9", IPPROTO_TCP, 80, 0, 0, 2, 0, 0)), NP_REFUSE);
    assert_int_equal(verdict(q, ip4("198.51.101.9", IPPROTO_TCP, 443, 0, 0, 2, 0, 0)), NP_REFUSE);
    netpolicy_free(q);
    netpolicy_free(p);
}

/* The guest answers a connection the host opened through a forward: its segments to the
 * host's (refused) address carry ACK and pass; a SYN, or SYN+FIN, to the same address does
 * not. Fragments stay decided by address. */
static void only_connection_openers_are_decided(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    const uint8_t passing[] = {0x12 /* SYN|ACK */, 0x10, 0x18, 0x11, 0x14, 0x04, 0x01, 0x00};
    for (size_t i = 0; i < ELEMENTSOF(passing); i++)
        assert_int_equal(verdict(p, ip4("10.88.0.1", IPPROTO_TCP, 40000, 0, 0, passing[i], 1, 1)),
                         NP_PASS);
    assert_int_equal(verdict(p, ip4("10.88.0.1", IPPROTO_TCP, 80, 0, 0, 0x02, 1, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.88.0.1", IPPROTO_TCP, 80, 0, 0, 0x03, 1, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.88.0.1", IPPROTO_TCP, 80, 0, 0, 0x22, 1, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.88.0.1", IPPROTO_TCP, 80, 0, 9, 0x10, 1, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.88.0.1", IPPROTO_TCP, 80, 0, 0x2000, 0x10, 1, 0)),
                     NP_REFUSE);
    netpolicy_free(p);
}

static void ip_options_shift_the_ports(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    assert_int_equal(verdict(p, ip4("10.0.2.3", IPPROTO_UDP, 53, 40, 0, 0, 0, 0)), NP_PASS);
    assert_int_equal(verdict(p, ip4("10.0.2.3", IPPROTO_UDP, 80, 40, 0, 0, 0, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip4("10.0.2.3", IPPROTO_TCP, 53, 4, 0, 2, 0, 0)), NP_PASS);
    netpolicy_free(p);
}

static void malformed_frames_are_dropped(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    frame good = udp("10.0.2.3", 53);
    /* every truncation of a frame that passes whole */
    for (size_t n = 0; n < good.len; n++)
        assert_int_equal(netpolicy_check(p, good.b, n, NULL), NP_DROP);
    frame f = good;
    f.b[14] = 0x44; /* IHL 4 */
    assert_int_equal(verdict(p, f), NP_DROP);
    f = good;
    f.b[14] = 0x4f; /* IHL 15: 60 bytes, past the total length */
    assert_int_equal(verdict(p, f), NP_DROP);
    f = good;
    f.b[14] = 0x65; /* version 6 in an IPv4 ethertype */
    assert_int_equal(verdict(p, f), NP_DROP);
    f = good;
    f.b[16] = 0xff; /* total length past the frame */
    assert_int_equal(verdict(p, f), NP_DROP);
    f = good;
    f.b[16] = 0, f.b[17] = 24; /* a UDP header cut by the total length */
    assert_int_equal(verdict(p, f), NP_DROP);
    f = good;
    f.b[12] = 0x81, f.b[13] = 0x00; /* VLAN */
    assert_int_equal(verdict(p, f), NP_DROP);
    f.b[12] = 0x88, f.b[13] = 0xcc; /* LLDP */
    assert_int_equal(verdict(p, f), NP_DROP);
    f.b[12] = 0x08, f.b[13] = 0x06; /* ARP */
    assert_int_equal(verdict(p, f), NP_PASS);
    netpolicy_free(p);
}

static void ipv6_equivalents(void **s)
{
    (void)s;
    netpolicy *p = bridge();
    const char *refused[] = {"::1",
                             "::",
                             "fe80::1",
                             "fc00::1",
                             "fd12::1",
                             "ff02::1",
                             "::ffff:10.0.0.1",
                             "::ffff:1.1.1.1",
                             "64:ff9b::a00:1",
                             "fec0::2",
                             "2002:a00:1::1",
                             "2001:db8::1"};
    for (size_t i = 0; i < ELEMENTSOF(refused); i++)
        assert_int_equal(verdict(p, ip6(refused[i], IPPROTO_TCP, NULL, 0)), NP_REFUSE);
    assert_int_equal(verdict(p, ip6("2001:4860::8888", IPPROTO_TCP, NULL, 0)), NP_PASS);
    uint8_t hop[8] = {IPPROTO_TCP, 0};
    assert_int_equal(verdict(p, ip6("2001:4860::8888", 0, hop, 8)), NP_PASS);
    assert_int_equal(verdict(p, ip6("fe80::1", 0, hop, 8)), NP_REFUSE);
    uint8_t routing[8] = {IPPROTO_TCP, 0};
    assert_int_equal(verdict(p, ip6("2001:4860::8888", 43, routing, 8)), NP_DROP);
    uint8_t frag[8] = {IPPROTO_TCP, 0, 0, 0x08}; /* offset 1 */
    assert_int_equal(verdict(p, ip6("::1", 44, frag, 8)), NP_REFUSE);
    uint8_t longhop[8] = {IPPROTO_TCP, 200}; /* claims 1608 bytes */
    assert_int_equal(verdict(p, ip6("2001:4860::8888", 0, longhop, 8)), NP_DROP);
    uint8_t loop[72];
    for (size_t i = 0; i < 72; i += 8)
        memset(loop + i, 0, 8), loop[i] = 60;
    assert_int_equal(verdict(p, ip6("2001:4860::8888", 60, loop, 72)), NP_DROP);
    netpolicy_free(p);
}

static void check_ip4_header(const uint8_t *r, const char *src, const char *dst, uint8_t proto)
{
    assert_memory_equal(r, guest_mac, 6);
    assert_memory_equal(r + 6, stack_mac, 6);
    assert_int_equal(r[12], 0x08);
    assert_int_equal(r[13], 0x00);
    const uint8_t *ip = r + 14;
    assert_int_equal(ip[0], 0x45);
    assert_int_equal(ip[9], proto);
    assert_int_equal(sum16(ip, 20, 0), 0xffff);
    uint8_t a[4];
    inet_pton(AF_INET, src, a);
    assert_memory_equal(ip + 12, a, 4);
    inet_pton(AF_INET, dst, a);
    assert_memory_equal(ip + 16, a, 4);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t tcp_sum(const uint8_t *ip, const uint8_t *tcp, size_t len)
{
    uint8_t pseudo[12] = {0};
    memcpy(pseudo, ip + 12, 8);
    pseudo[9] = IPPROTO_TCP;
    pseudo[10] = (uint8_t)(len >> 8), pseudo[11] = (uint8_t)len;
    return sum16(tcp, len, sum16(pseudo, 12, 0));
}

static void syn_gets_a_reset(void **s)
{
    (void)s;
    uint8_t out[NP_REPLY_MAX];
    frame f = ip4("10.0.0.5", IPPROTO_TCP, 8080, 8, 0, 0x02, 0xfffffffe, 0);
    size_t n = netpolicy_refusal(f.b, f.len, out, sizeof out);
    assert_int_equal(n, 14 + 40);
    check_ip4_header(out, "10.0.0.5", "10.0.2.15", IPPROTO_TCP);
    const uint8_t *t = out + 34;
    assert_int_equal(t[0] << 8 | t[1], 8080);
    assert_int_equal(t[2] << 8 | t[3], 40000);
    assert_int_equal(get32(t + 4), 0);
    assert_int_equal(get32(t + 8), 3); /* seq + SYN + 4 data bytes, wrapped */
    assert_int_equal(t[13], 0x14);     /* RST|ACK */
    assert_int_equal(tcp_sum(out + 14, t, 20), 0xffff);

    /* a segment with ACK: the reset takes its sequence number from the ACK (netpolicy_check
     * lets such segments through, but a policy may still refuse them by hand) */
    f = ip4("192.168.1.1", IPPROTO_TCP, 443, 0, 0, 0x18, 77, 5555);
    n = netpolicy_refusal(f.b, f.len, out, sizeof out);
    assert_int_equal(n, 54);
    t = out + 34;
    assert_int_equal(get32(t + 4), 5555);
    assert_int_equal(t[13], 0x04);
    assert_int_equal(tcp_sum(out + 14, t, 20), 0xffff);

    /* never a reset for a reset, nor towards broadcast or multicast */
    f = ip4("10.0.0.5", IPPROTO_TCP, 80, 0, 0, 0x04, 1, 0);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = syn("224.0.0.1", 80);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = syn("255.255.255.255", 80);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = syn("10.0.0.5", 80);
    f.b[6] |= 1; /* a multicast ethernet source */
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = syn("10.0.0.5", 80);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, NP_REPLY_MAX - 1), 0);
    f = ip4("10.0.0.5", IPPROTO_ICMP, 0, 0, 0, 0, 0, 0);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
}

/* The checksum over an IPv6 reply's upper-layer body (pseudo-header from its IPv6 header). */
static uint16_t sum6(const uint8_t *ip, const uint8_t *body, size_t len)
{
    uint8_t pseudo[40] = {0};
    memcpy(pseudo, ip + 8, 32);
    pseudo[34] = (uint8_t)(len >> 8), pseudo[35] = (uint8_t)len;
    pseudo[39] = ip[6];
    return sum16(body, len, sum16(pseudo, 40, 0));
}

static void check_ip6_header(const uint8_t *r, const char *src, uint8_t proto, size_t payload)
{
    assert_memory_equal(r, guest_mac, 6);
    assert_memory_equal(r + 6, stack_mac, 6);
    assert_int_equal(r[12], 0x86);
    assert_int_equal(r[13], 0xdd);
    const uint8_t *ip = r + 14;
    assert_int_equal(ip[0] >> 4, 6);
    assert_int_equal(ip[4] << 8 | ip[5], payload);
    assert_int_equal(ip[6], proto);
    uint8_t a[16];
    inet_pton(AF_INET6, src, a);
    assert_memory_equal(ip + 8, a, 16);
    inet_pton(AF_INET6, "fec0::15", a);
    assert_memory_equal(ip + 24, a, 16);
}

/* IPv6 is refused the way IPv4 is: a reset for TCP (past extension headers), ICMPv6
 * administratively prohibited for UDP; no answer where IPv4 gets none. */
static void ipv6_gets_reset_and_admin_prohibited(void **s)
{
    (void)s;
    uint8_t out[NP_REPLY_MAX];
    uint8_t hop[8] = {IPPROTO_TCP, 0};
    frame f = ip6("2001:db8::1", 0, hop, 8);
    size_t n = netpolicy_refusal(f.b, f.len, out, sizeof out);
    assert_int_equal(n, 14 + 40 + 20);
    check_ip6_header(out, "2001:db8::1", IPPROTO_TCP, 20);
    const uint8_t *t = out + 54;
    assert_int_equal(t[0] << 8 | t[1], 443);
    assert_int_equal(get32(t + 8), 1); /* seq 0 + SYN */
    assert_int_equal(t[13], 0x14);     /* RST|ACK */
    assert_int_equal(sum6(out + 14, t, 20), 0xffff);

    f = ip6("2001:db8::1", IPPROTO_UDP, NULL, 0);
    n = netpolicy_refusal(f.b, f.len, out, sizeof out);
    size_t quote = 40 + 20; /* the whole packet: it is short */
    assert_int_equal(n, 14 + 40 + 8 + quote);
    check_ip6_header(out, "2001:db8::1", IPPROTO_ICMPV6, 8 + quote);
    const uint8_t *c = out + 54;
    assert_int_equal(c[0], 1);
    assert_int_equal(c[1], 1);
    assert_memory_equal(c + 8, f.b + 14, quote);
    assert_int_equal(sum6(out + 14, c, 8 + quote), 0xffff);

    /* a long packet: the quote stops at NP_QUOTE6_MAX */
    uint8_t opts[160] = {IPPROTO_UDP, 19}; /* destination options, 160 bytes */
    f = ip6("2001:db8::1", 60, opts, 160);
    n = netpolicy_refusal(f.b, f.len, out, sizeof out);
    assert_int_equal(n, 14 + 40 + 8 + NP_QUOTE6_MAX);
    assert_int_equal(sum6(out + 14, out + 54, 8 + NP_QUOTE6_MAX), 0xffff);

    /* none for a reset, a multicast destination, the unspecified source, a later fragment,
     * a multicast ethernet source, or a buffer too small */
    f = ip6("2001:db8::1", IPPROTO_TCP, NULL, 0);
    f.b[14 + 40 + 13] = 0x04;
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = ip6("ff02::1", IPPROTO_TCP, NULL, 0);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = ip6("2001:db8::1", IPPROTO_TCP, NULL, 0);
    memset(f.b + 14 + 8, 0, 16);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    uint8_t frag[8] = {IPPROTO_TCP, 0, 0, 0x08}; /* offset 1 */
    f = ip6("2001:db8::1", 44, frag, 8);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = ip6("2001:db8::1", IPPROTO_TCP, NULL, 0);
    f.b[6] |= 1;
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, sizeof out), 0);
    f = ip6("2001:db8::1", IPPROTO_TCP, NULL, 0);
    assert_int_equal(netpolicy_refusal(f.b, f.len, out, NP_REPLY_MAX - 1), 0);
}

static void udp_gets_admin_prohibited(void **s)
{
    (void)s;
    uint8_t out[NP_REPLY_MAX];
    for (size_t opts = 0; opts <= 40; opts += 40) {
        frame f = ip4("169.254.169.254", IPPROTO_UDP, 80, opts, 0, 0, 0, 0);
        size_t n = netpolicy_refusal(f.b, f.len, out, sizeof out);
        size_t quote = 20 + opts + 8;
        assert_int_equal(n, 14 + 20 + 8 + quote);
        check_ip4_header(out, "169.254.169.254", "10.0.2.15", IPPROTO_ICMP);
        const uint8_t *c = out + 34;
        assert_int_equal(c[0], 3);
        assert_int_equal(c[1], 13);
        assert_int_equal(sum16(c, 8 + quote, 0), 0xffff);
        assert_memory_equal(c + 8, f.b + 14, quote);
        assert_int_equal(out[14 + 2] << 8 | out[14 + 3], 20 + 8 + quote);
    }
}

static void rules_are_data(void **s)
{
    (void)s;
    netpolicy *p = netpolicy_new(NP_DROP);
    assert_int_equal(netpolicy_n_rules(p), 0);
    assert_int_equal(netpolicy_add(p, "10.0.0.0/33", 0, 0, NP_PASS, "x"), -1);
    assert_int_equal(netpolicy_add(p, "10.0.0.0/", 0, 0, NP_PASS, "x"), -1);
    assert_int_equal(netpolicy_add(p, "10.0.0/8", 0, 0, NP_PASS, "x"), -1);
    assert_int_equal(netpolicy_add(p, "example.org", 0, 0, NP_PASS, "x"), -1);
    assert_int_equal(netpolicy_add(p, "::/129", 0, 0, NP_PASS, "x"), -1);
    assert_int_equal(netpolicy_add_list(p, "1.2.3.4,nope", "x"), -1);
    assert_int_equal(netpolicy_n_rules(p), 0);
    assert_int_equal(netpolicy_add(p, "198.51.100.128/25", IPPROTO_UDP, 0, NP_PASS, "a"), 0);
    assert_int_equal(netpolicy_add(p, "0.0.0.0/0", 0, 0, NP_REFUSE, "b"), 0);
    const np_rule *r;
    frame f = udp("198.51.100.200", 1);
    assert_int_equal(netpolicy_check(p, f.b, f.len, &r), NP_PASS);
    assert_string_equal(r->why, "a");
    f = udp("198.51.100.100", 1);
    assert_int_equal(netpolicy_check(p, f.b, f.len, &r), NP_REFUSE);
    assert_string_equal(r->why, "b");
    /* the default applies to IPv6 here: no IPv6 rule */
    assert_int_equal(verdict(p, ip6("2001:4860::8888", IPPROTO_TCP, NULL, 0)), NP_DROP);
    netpolicy_free(p);
    netpolicy_free(NULL);
}

/* The allowlist's rebinding rule: a resolved address in a range the default refuses passes only
 * when a CIDR entry in front names it; a public address passes. */
static void rebinding_rule_by_address(void **state)
{
    netpolicy *p = netpolicy_new(NP_PASS);
    assert_int_equal(netpolicy_add(p, "10.88.0.1", IPPROTO_TCP, 8080, NP_PASS, "10.88.0.1:8080"),
                     0);
    netpolicy_add_not_internet(p);
    uint8_t a[16] = {10, 88, 0, 1};
    const np_rule *r = NULL;
    assert_int_equal(netpolicy_check_addr(p, 4, a, IPPROTO_TCP, 8080, &r), NP_PASS);
    assert_string_equal(r->why, "10.88.0.1:8080");
    assert_int_equal(netpolicy_check_addr(p, 4, a, IPPROTO_TCP, 22, &r), NP_REFUSE);
    assert_string_equal(r->why, "private range");
    uint8_t meta[16] = {169, 254, 169, 254}, pub[16] = {203, 0, 113, 80};
    assert_int_equal(netpolicy_check_addr(p, 4, meta, IPPROTO_TCP, 80, NULL), NP_REFUSE);
    assert_int_equal(netpolicy_check_addr(p, 4, pub, IPPROTO_TCP, 443, &r), NP_PASS);
    assert_null(r);
    uint8_t v6[16] = {0xfe, 0x80};
    assert_int_equal(netpolicy_check_addr(p, 6, v6, IPPROTO_TCP, 443, NULL), NP_REFUSE);
    netpolicy_free(p);
}

/* netpolicy_peek reads what the engine decides on (destination, protocol, port, opener). */
static void peek_reads_the_frame(void **state)
{
    frame f = ip4("203.0.113.80", IPPROTO_TCP, 443, 0, 0, 0x02, 1, 0);
    np_pkt k;
    assert_int_equal(netpolicy_peek(f.b, f.len, &k), 0);
    assert_int_equal(k.family, 4);
    assert_int_equal(k.proto, IPPROTO_TCP);
    assert_int_equal(k.port, 443);
    assert_true(k.port_known && k.opens);
    assert_int_equal(k.dst[0], 203);
    assert_int_equal(netpolicy_peek(f.b, 10, &k), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_refuses_everything_but_the_internet),
        cmocka_unit_test(stack_services_pass_and_nothing_else_on_them),
        cmocka_unit_test(fragments_never_pass_by_port),
        cmocka_unit_test(only_connection_openers_are_decided),
        cmocka_unit_test(ip_options_shift_the_ports),
        cmocka_unit_test(malformed_frames_are_dropped),
        cmocka_unit_test(ipv6_equivalents),
        cmocka_unit_test(syn_gets_a_reset),
        cmocka_unit_test(udp_gets_admin_prohibited),
        cmocka_unit_test(ipv6_gets_reset_and_admin_prohibited),
        cmocka_unit_test(rules_are_data),
        cmocka_unit_test(rebinding_rule_by_address),
        cmocka_unit_test(peek_reads_the_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
