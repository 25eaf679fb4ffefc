/* Unit tests for bluebox's own DNS responder: queries parsed (and hostile ones refused), replies
 * carrying the question and one A record, and the reply frame's addresses, ports and checksums
 * (verified by an independent routine). */
#include "unit.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "net/netdns.h"

static uint16_t sum16(const uint8_t *b, size_t n, uint32_t s)
{
    for (size_t i = 0; i < n; i++)
        s += i % 2 ? b[i] : (uint32_t)b[i] << 8;
    while (s > 0xffff)
        s = (s >> 16) + (s & 0xffff);
    return (uint16_t)s;
}

/* A query message for name (dotted) and qtype; returns its length. */
static size_t query(uint8_t *m, const char *name, uint16_t qtype)
{
    uint8_t h[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(m, h, 12);
    size_t off = 12;
    const char *p = name;
    while (*p) {
        size_t l = strcspn(p, ".");
        m[off++] = (uint8_t)l;
        memcpy(m + off, p, l);
        off += l;
        p += l + (p[l] == '.');
    }
    m[off++] = 0;
    m[off++] = (uint8_t)(qtype >> 8), m[off++] = (uint8_t)qtype;
    m[off++] = 0, m[off++] = 1;
    return off;
}

/* The query in an ethernet/IPv4/UDP frame from 10.0.2.15:40000 to 10.0.2.3:53. */
static size_t frame(uint8_t *f, const uint8_t *m, size_t ml)
{
    memset(f, 0, 42);
    memcpy(f, "\x52\x55\x0a\x00\x02\x02", 6);
    memcpy(f + 6, "\x52\x54\x00\x12\x34\x56", 6);
    f[12] = 0x08;
    uint8_t *ip = f + 14;
    ip[0] = 0x45;
    ip[2] = (uint8_t)((28 + ml) >> 8), ip[3] = (uint8_t)(28 + ml);
    ip[8] = 64, ip[9] = 17;
    inet_pton(AF_INET, "10.0.2.15", ip + 12);
    inet_pton(AF_INET, "10.0.2.3", ip + 16);
    uint8_t *u = ip + 20;
    u[0] = 0x9c, u[1] = 0x40, u[3] = 53;
    u[4] = (uint8_t)((8 + ml) >> 8), u[5] = (uint8_t)(8 + ml);
    memcpy(u + 8, m, ml);
    return 42 + ml;
}

static void parse_and_answer(void **state)
{
    uint8_t m[512], out[DNS_REPLY_MAX];
    size_t ml = query(m, "Deb.Example.ORG", DNS_TYPE_A);
    dns_query q;
    assert_int_equal(dns_parse_query(m, ml, &q), 0);
    assert_true(q.name_ok);
    assert_string_equal(q.name, "deb.example.org");
    assert_int_equal(q.qtype, DNS_TYPE_A);
    assert_int_equal(q.qend, ml);
    const uint8_t a4[4] = {10, 0, 2, 100};
    size_t l = dns_reply(m, &q, DNS_NOERROR, a4, 60, out, sizeof out);
    assert_int_equal(l, ml + 16);
    assert_int_equal(out[0], 0x12);
    assert_int_equal(out[2] & 0x80, 0x80); /* a response */
    assert_int_equal(out[3] & 0x0f, 0);
    assert_int_equal(out[7], 1); /* one answer */
    assert_memory_equal(out + l - 4, a4, 4);
    l = dns_reply(m, &q, DNS_NXDOMAIN, NULL, 60, out, sizeof out);
    assert_int_equal(l, ml);
    assert_int_equal(out[3] & 0x0f, DNS_NXDOMAIN);
    assert_int_equal(out[7], 0);
}

static void hostile_queries(void **state)
{
    uint8_t m[600];
    dns_query q;
    size_t ml = query(m, "a.org", DNS_TYPE_A);
    for (size_t cut = 0; cut < ml; cut++) /* every truncation */
        assert_int_equal(dns_parse_query(m, cut, &q), -1);
    m[2] |= 0x80; /* a response, not a query */
    assert_int_equal(dns_parse_query(m, ml, &q), -1);
    ml = query(m, "a.org", DNS_TYPE_A);
    m[5] = 2; /* two questions */
    assert_int_equal(dns_parse_query(m, ml, &q), -1);
    ml = query(m, "a.org", DNS_TYPE_A);
    m[12] = 0xc0; /* a compression pointer */
    assert_int_equal(dns_parse_query(m, ml, &q), -1);
    /* a name longer than DNS allows */
    char big[400];
    memset(big, 'a', sizeof big);
    for (size_t i = 60; i < sizeof big; i += 61)
        big[i] = '.';
    big[sizeof big - 1] = '\0';
    ml = query(m, big, DNS_TYPE_A);
    assert_int_equal(dns_parse_query(m, ml, &q), -1);
    /* bytes that are not a host name: parsed, but never a name the allowlist has */
    ml = query(m, "ex\"fil.org", 16);
    assert_int_equal(dns_parse_query(m, ml, &q), 0);
    assert_false(q.name_ok);
}

static void reply_frame(void **state)
{
    uint8_t m[512], f[600], d[DNS_REPLY_MAX], out[DNS_REPLY_MAX + 64];
    size_t ml = query(m, "x.org", DNS_TYPE_AAAA);
    size_t fl = frame(f, m, ml);
    const uint8_t *p;
    size_t pl;
    uint32_t dns;
    inet_pton(AF_INET, "10.0.2.3", &dns);
    assert_int_equal(dns_frame_payload(f, fl, dns, &p, &pl), 1);
    assert_int_equal(pl, ml);
    dns_query q;
    assert_int_equal(dns_parse_query(p, pl, &q), 0);
    size_t dl = dns_reply(p, &q, DNS_NOERROR, NULL, 60, d, sizeof d);
    size_t ol = dns_frame_reply(f, fl, d, dl, out, sizeof out);
    assert_int_equal(ol, 42 + dl);
    assert_memory_equal(out, f + 6, 6);
    assert_memory_equal(out + 14 + 12, f + 14 + 16, 4); /* from the DNS address */
    assert_memory_equal(out + 14 + 16, f + 14 + 12, 4); /* to the guest */
    assert_int_equal(out[34] << 8 | out[35], 53);
    assert_int_equal(out[36] << 8 | out[37], 40000);
    assert_int_equal(sum16(out + 14, 20, 0), 0xffff);
    uint8_t pseudo[12] = {0};
    memcpy(pseudo, out + 26, 8);
    pseudo[9] = 17;
    pseudo[10] = (uint8_t)((8 + dl) >> 8), pseudo[11] = (uint8_t)(8 + dl);
    assert_int_equal(sum16(out + 34, 8 + dl, sum16(pseudo, 12, 0)), 0xffff);
    /* not DNS: another port, another address; a fragment is unreadable */
    f[14 + 20 + 3] = 54;
    assert_int_equal(dns_frame_payload(f, fl, dns, &p, &pl), 0);
    f[14 + 20 + 3] = 53;
    f[14 + 6] = 0x20; /* MF */
    assert_int_equal(dns_frame_payload(f, fl, dns, &p, &pl), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_and_answer),
        cmocka_unit_test(hostile_queries),
        cmocka_unit_test(reply_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
