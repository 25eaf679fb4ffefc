/* libFuzzer target: bluebox's DNS responder over frames from a hostile guest. Checks: no read
 * past the frame (ASan); a parsed query's name is printable and, when name_ok, a valid host
 * name; the reply fits DNS_REPLY_MAX, echoes the id and question and, framed, goes back to the
 * sender with valid IPv4 and UDP checksums. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/netdns.h"
#include "net/netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static void one_message(const uint8_t *f, size_t flen, const uint8_t *m, size_t mlen)
{
    dns_query q;
    if (dns_parse_query(m, mlen, &q) < 0)
        return;
    CHECK(q.qend <= mlen && strlen(q.name) <= SNIFF_NAME_MAX + 1);
    for (const char *p = q.name; *p; p++)
        CHECK(*p > 0x20 && *p < 0x7f);
    static const uint8_t a4[4] = {10, 0, 2, 100};
    uint8_t d[DNS_REPLY_MAX], out[DNS_REPLY_MAX + 64];
    size_t dl = dns_reply(m, &q, q.name_ok ? DNS_NOERROR : DNS_NXDOMAIN, q.name_ok ? a4 : NULL, 60,
                          d, sizeof d);
    CHECK(dl >= q.qend && dl <= DNS_REPLY_MAX);
    CHECK(memcmp(d, m, 2) == 0 && memcmp(d + 12, m + 12, q.qend - 12) == 0);
    if (!f)
        return;
    size_t ol = dns_frame_reply(f, flen, d, dl, out, sizeof out);
    CHECK(ol == 42 + dl);
    CHECK(np_csum_fold(np_csum_add(0, out + 14, 20)) == 0xffff);
    CHECK(memcmp(out + 30, f + 26, 4) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *b = malloc(size ? size : 1);
    memcpy(b, data, size);
    uint32_t dns;
    inet_pton(AF_INET, "10.0.2.3", &dns);
    const uint8_t *m;
    size_t ml;
    if (dns_frame_payload(b, size, dns, &m, &ml) == 1) {
        CHECK(m >= b && m + ml <= b + size);
        one_message(b, size, m, ml);
    }
    one_message(NULL, 0, b, size); /* the input as a bare DNS message too */
    free(b);
    return 0;
}
