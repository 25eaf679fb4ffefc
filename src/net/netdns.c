/* bluebox's own DNS responder. See netdns.h. */
#include "net/netdns.h"

#include <string.h>

#include "net/netpolicy.h"

#define ETH_HLEN 14

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

int dns_parse_query(const uint8_t *m, size_t len, dns_query *q)
{
    if (len < 12 || len > 65535)
        return -1;
    *q = (dns_query){.id = be16(m), .flags = be16(m + 2)};
    /* QR = 0, opcode QUERY, not truncated; one question, no answers or authority (an EDNS OPT
     * record in the additional section is fine: we ignore it). */
    if (q->flags & 0x8000 || (q->flags >> 11 & 0xf) != 0 || q->flags & 0x0200 || be16(m + 4) != 1 ||
        be16(m + 6) || be16(m + 8))
        return -1;
    size_t off = 12, n = 0;
    q->name_ok = true;
    for (;;) {
        if (off >= len)
            return -1;
        size_t l = m[off++];
        if (l == 0)
            break;
        if (l > 63 || off + l > len || n + l + 1 > SNIFF_NAME_MAX + 1)
            return -1; /* a pointer, a reserved label type, or too long */
        if (n)
            q->name[n++] = '.';
        for (size_t i = 0; i < l; i++) {
            uint8_t c = m[off + i];
            if (c == '\0' || c == '.' || c > 0x7e || c < 0x21) {
                q->name_ok = false;
                c = '?';
            }
            q->name[n++] = (char)c;
        }
        off += l;
    }
    q->name[n] = '\0';
    if (off + 4 > len)
        return -1;
    q->qtype = be16(m + off);
    q->qclass = be16(m + off + 2);
    q->qend = off + 4;
    if (q->name_ok)
        q->name_ok = sniff_name_ok(q->name);
    return 0;
}

size_t dns_reply(const uint8_t *m, const dns_query *q, int rcode, const uint8_t *a4, uint32_t ttl,
                 uint8_t *out, size_t cap)
{
    size_t need = q->qend + (a4 ? 16 : 0);
    if (cap < DNS_REPLY_MAX || need > cap)
        return 0;
    memcpy(out, m, q->qend);
    /* QR, AA, RD as asked, RA; the rcode. */
    put16(out + 2, (uint16_t)(0x8000 | 0x0400 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xf)));
    put16(out + 4, 1);
    put16(out + 6, a4 ? 1 : 0);
    put16(out + 8, 0);
    put16(out + 10, 0);
    if (!a4)
        return q->qend;
    uint8_t *r = out + q->qend;
    put16(r, 0xc00c); /* the question's name */
    put16(r + 2, DNS_TYPE_A);
    put16(r + 4, 1);
    put16(r + 6, (uint16_t)(ttl >> 16));
    put16(r + 8, (uint16_t)ttl);
    put16(r + 10, 4);
    memcpy(r + 12, a4, 4);
    return need;
}

int dns_frame_payload(const uint8_t *f, size_t len, uint32_t dns_addr, const uint8_t **ret_payload,
                      size_t *ret_len)
{
    if (len < ETH_HLEN + 20 || be16(f + 12) != 0x0800)
        return 0;
    const uint8_t *ip = f + ETH_HLEN;
    if (ip[0] >> 4 != 4 || ip[9] != 17 || memcmp(ip + 16, &dns_addr, 4) != 0)
        return 0;
    size_t ihl = (size_t)(ip[0] & 0xf) * 4, total = be16(ip + 2);
    if (ihl < 20 || total < ihl + 8 || ETH_HLEN + total > len || be16(ip + 6) & 0x3fff)
        return -1; /* malformed, or a fragment (MF or an offset) */
    const uint8_t *u = ip + ihl;
    if (be16(u + 2) != 53)
        return 0;
    size_t ul = be16(u + 4);
    if (ul < 8 || ul > total - ihl)
        return -1;
    *ret_payload = u + 8;
    *ret_len = ul - 8;
    return 1;
}

size_t dns_frame_reply(const uint8_t *f, size_t len, const uint8_t *d, size_t dlen, uint8_t *out,
                       size_t cap)
{
    const uint8_t *ip = f + ETH_HLEN;
    size_t ihl = (size_t)(ip[0] & 0xf) * 4;
    const uint8_t *u = ip + ihl;
    size_t total = ETH_HLEN + 20 + 8 + dlen;
    if (len < ETH_HLEN + ihl + 8 || total > cap || dlen > 65535 - 28)
        return 0;
    memcpy(out, f + 6, 6);
    memcpy(out + 6, f, 6);
    put16(out + 12, 0x0800);
    uint8_t *h = out + ETH_HLEN;
    memset(h, 0, 20);
    h[0] = 0x45;
    put16(h + 2, (uint16_t)(20 + 8 + dlen));
    put16(h + 6, 0x4000);
    h[8] = 64;
    h[9] = 17;
    memcpy(h + 12, ip + 16, 4);
    memcpy(h + 16, ip + 12, 4);
    put16(h + 10, (uint16_t)~np_csum_fold(np_csum_add(0, h, 20)));
    uint8_t *r = h + 20;
    memcpy(r, u + 2, 2);
    memcpy(r + 2, u, 2);
    put16(r + 4, (uint16_t)(8 + dlen));
    put16(r + 6, 0);
    memcpy(r + 8, d, dlen);
    uint8_t pseudo[12] = {0};
    memcpy(pseudo, h + 12, 8);
    pseudo[9] = 17;
    put16(pseudo + 10, (uint16_t)(8 + dlen));
    uint16_t c = (uint16_t)~np_csum_fold(np_csum_add(np_csum_add(0, pseudo, 12), r, 8 + dlen));
    put16(r + 6, c ? c : 0xffff);
    return total;
}
