/* libFuzzer target: the network policy over ethernet frames from a hostile guest. Checks: no
 * read past the frame (ASan), a frame that passes and could open something (not a TCP segment
 * without SYN or with ACK) never goes to loopback or link-local (the metadata address), and a
 * refusal frame fits NP_REPLY_MAX, carries a valid IPv4 header checksum (IPv4) and goes back to
 * the frame's sender (IPv4 and IPv6). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static netpolicy *policy(void)
{
    static netpolicy *p;
    if (!p) {
        p = netpolicy_new(NP_PASS);
        netpolicy_add_default(p);
        CHECK(netpolicy_add_list(p, "203.0.113.7,2001:db8::1", "host") == 0);
    }
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan sees any read past the frame */
    uint8_t *f = malloc(size ? size : 1);
    memcpy(f, data, size);
    np_action a = netpolicy_check(policy(), f, size, NULL);
    size_t ihl = size > 14 ? (size_t)(f[14] & 0xf) * 4 : 0;
    bool tcp_opener = size > 14 + ihl + 13 && f[23] == 6 && (f[14 + ihl + 13] & 0x12) == 0x02;
    bool opens = size >= 34 && (f[23] != 6 || tcp_opener); /* other TCP passes by design */
    if (a == NP_PASS && opens && f[12] == 0x08 && f[13] == 0x00) {
        CHECK(f[30] != 127);
        CHECK(!(f[30] == 169 && f[31] == 254));
    }
    uint8_t out[NP_REPLY_MAX];
    size_t n = netpolicy_refusal(f, size, out, sizeof out);
    CHECK(n <= sizeof out);
    if (n && f[12] == 0x86 && f[13] == 0xdd) { /* IPv6: a reset or ICMPv6, to the sender */
        CHECK(n >= 54 && memcmp(out, f + 6, 6) == 0 && out[12] == 0x86 && out[13] == 0xdd);
        CHECK(memcmp(out + 38, f + 22, 16) == 0);
    } else if (n) {
        CHECK(n >= 34 && memcmp(out, f + 6, 6) == 0);
        CHECK(np_csum_fold(np_csum_add(0, out + 14, 20)) == 0xffff);
        CHECK(memcmp(out + 30, f + 26, 4) == 0); /* to the sender */
    }
    free(f);
    return 0;
}
