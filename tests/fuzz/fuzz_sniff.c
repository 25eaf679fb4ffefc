/* libFuzzer target: the egress engine's sniffers over a connection's first bytes from a hostile
 * guest (TLS ClientHello SNI, HTTP Host). Checks: no read past the input (ASan), every prefix
 * of the input gives MORE or the same verdict a longer input reaches no earlier than it (a
 * name, once found, is a valid lower-case host name), and the allowlist matcher agrees. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/allow.h"
#include "net/sniff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static void valid_name(const char *s)
{
    size_t n = strlen(s);
    CHECK(n > 0 && n <= SNIFF_NAME_MAX);
    for (const char *p = s; *p; p++)
        CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
              *p == '.');
    char copy[SNIFF_NAME_MAX + 1];
    memcpy(copy, s, n + 1);
    CHECK(sniff_name_ok(copy) && strcmp(copy, s) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *b = malloc(size ? size : 1); /* exact size: ASan sees any overread */
    memcpy(b, data, size);
    char out[SNIFF_NAME_MAX + 1];
    sniff_proto p = sniff_protocol(b, size);
    sniff_result r = p == SNIFF_HTTP ? sniff_http_host(b, size, out) : sniff_tls_sni(b, size, out);
    if (r == SNIFF_FOUND)
        valid_name(out);
    if (sniff_tls_sni(b, size, out) == SNIFF_FOUND)
        valid_name(out);
    if (sniff_http_host(b, size, out) == SNIFF_FOUND) {
        valid_name(out);
        static allowlist a;
        if (!a.n)
            CHECK(allowlist_parse("*.example.org,example.com:8443,192.0.2.0/24", &a, NULL) == 0);
        if (allowlist_match(&a, out, 443))
            CHECK(strlen(out) > strlen(".example.org"));
    }
    free(b);
    return 0;
}
