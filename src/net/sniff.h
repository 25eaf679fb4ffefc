/* The name a connection is for, read from its first bytes: the server name (SNI) of a TLS
 * ClientHello, the Host of an HTTP/1.x request head, and the name a DNS query asks for. Pure
 * functions over hostile guest bytes: every read is bounded by the length given, nothing is
 * kept between calls. The egress engine (egress_engine.c) decides with them; the fuzz targets
 * (tests/fuzz/fuzz_sniff.c) and unit tests (tests/unit/test_sniff.c) drive them directly. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A DNS name as text, without the trailing dot. */
#define SNIFF_NAME_MAX 253
/* The most of a connection's first bytes the engine gathers before it decides: a ClientHello
 * may span several TLS records and TCP segments, but not more than this. */
#define SNIFF_MAX 16384

typedef enum sniff_result {
    SNIFF_NONE = -1, /* not this protocol, malformed, or no name in it: decide without one */
    SNIFF_MORE = 0,  /* a prefix of a message that may still carry the name: gather more */
    SNIFF_FOUND = 1, /* the name is in out, lower-case */
} sniff_result;

typedef enum sniff_proto {
    SNIFF_UNKNOWN, /* too few bytes to tell */
    SNIFF_TLS,     /* a TLS handshake record */
    SNIFF_HTTP,    /* an HTTP/1.x request line ("GET /x HTTP/1.1") */
    SNIFF_OTHER,
} sniff_proto;

sniff_proto sniff_protocol(const uint8_t *b, size_t len);
/* The first host_name of the server_name extension of the ClientHello that b starts with
 * (handshake records reassembled). A ClientHello without the extension: SNIFF_NONE. */
sniff_result sniff_tls_sni(const uint8_t *b, size_t len, char out[SNIFF_NAME_MAX + 1]);
/* The Host header of the request head b starts with, without a port. Two Host headers, or none,
 * or a head longer than SNIFF_MAX: SNIFF_NONE. */
sniff_result sniff_http_host(const uint8_t *b, size_t len, char out[SNIFF_NAME_MAX + 1]);
/* A host name as the allowlist knows them: LDH labels (and '_') of 1-63 bytes, at most
 * SNIFF_NAME_MAX in all, one trailing dot allowed (and removed). Lower-cases s in place. */
bool sniff_name_ok(char *s);
