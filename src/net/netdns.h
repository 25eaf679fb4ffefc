/* bluebox's own DNS responder for allowlist mode: the guest's queries to the user-mode stack's
 * DNS address are answered here, from the allowlist, and never forwarded upstream. Pure
 * functions over hostile guest bytes (tests/unit/test_netdns.c, tests/fuzz/fuzz_netdns.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/sniff.h"

#define DNS_TYPE_A    1
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_ANY  255
#define DNS_NOERROR   0
#define DNS_FORMERR   1
#define DNS_NXDOMAIN  3
#define DNS_NOTIMP    4
#define DNS_REFUSED   5
/* A reply is the query's header and question and at most one A record: it always fits. */
#define DNS_REPLY_MAX (12 + 256 + 4 + 16)

typedef struct dns_query {
    uint16_t id, flags, qtype, qclass;
    size_t qend;  /* where the question ends in the message */
    bool name_ok; /* name is a host name (sniff_name_ok); else it has other bytes */
    char name[SNIFF_NAME_MAX + 2]; /* lower-case, no trailing dot; "" for the root */
} dns_query;

/* One standard query with one question, uncompressed (as resolvers send them). 0, or -1 for
 * anything else (a response, another opcode, several questions, pointers, truncation): those
 * are dropped unanswered. */
int dns_parse_query(const uint8_t *m, size_t len, dns_query *q);
/* The reply to q (whose message is m): rcode, and an A record of a4 (4 bytes, network order)
 * when a4 is not NULL. Written to out (cap >= DNS_REPLY_MAX); returns its length. */
size_t dns_reply(const uint8_t *m, const dns_query *q, int rcode, const uint8_t *a4, uint32_t ttl,
                 uint8_t *out, size_t cap);

/* An ethernet frame's UDP payload when it is an IPv4 datagram to dns_addr (network order) port
 * 53: 1 and *ret_payload, *ret_len set; 0 when it is not one; -1 when it is one we cannot read
 * (a fragment, a bad length): drop it. */
int dns_frame_payload(const uint8_t *f, size_t len, uint32_t dns_addr, const uint8_t **ret_payload,
                      size_t *ret_len);
/* The frame answering the DNS query frame f (from dns_frame_payload) with the DNS message d:
 * addresses and ports swapped, checksums computed. Returns its length, 0 when cap is short. */
size_t dns_frame_reply(const uint8_t *f, size_t len, const uint8_t *d, size_t dlen, uint8_t *out,
                       size_t cap);
