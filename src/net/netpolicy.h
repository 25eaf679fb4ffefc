/* The network engine's policy: pure decisions over the ethernet frames a guest sends, and the
 * frames that refuse them. Backend-independent: any VMM that hands the engine raw frames (UML's
 * vector device today, a qemu backend later) filters them here before its user-mode stack
 * (libslirp) opens a real socket for them. Frames are hostile bytes: every read is bounded.
 *
 * Rules decide what the guest may open: datagrams, and TCP segments that start a connection
 * (SYN without ACK). Other TCP segments pass, since a user-mode stack connects only on a SYN
 * (libslirp opens a socket for nothing else, and resets a segment of no connection it has):
 * that lets the guest answer connections the host made to it through a forward.
 *
 * The decision is a list of CIDR rules, first match wins, then a default. Rules may name a
 * protocol and a destination port; a frame whose port is unknown (an IP fragment) never
 * matches a rule that allows by port, and always matches one that refuses by port, so a
 * fragment can only pass where its whole destination address does. A later allowlist adds its
 * CIDR entries (and, through the resolver, names) as rules in front of the default's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum np_action {
    NP_PASS,   /* hand the frame to the network stack */
    NP_DROP,   /* discard silently */
    NP_REFUSE, /* discard and answer the guest: a TCP RST, an ICMP unreachable for UDP */
} np_action;

typedef struct np_rule {
    uint8_t family;   /* 4 or 6 */
    uint8_t prefix;   /* bits of addr that must match */
    uint8_t proto;    /* IPPROTO_*; 0 = any */
    uint16_t port;    /* destination port (TCP/UDP); 0 = any */
    uint8_t addr[16]; /* network byte order; IPv4 in the first 4 bytes */
    np_action action;
    const char *why; /* a static string for logs: "private range", "host address" */
} np_rule;

typedef struct netpolicy netpolicy;

/* An empty policy whose frames fall through to dflt. */
netpolicy *netpolicy_new(np_action dflt);
void netpolicy_free(netpolicy *p);
/* Append a rule for CIDR ("10.0.0.0/8", "fe80::/10", or a bare address = one host). proto 0
 * and port 0 mean any. why must outlive p. -1 (errno EINVAL) on a malformed CIDR. */
int netpolicy_add(netpolicy *p, const char *cidr, uint8_t proto, uint16_t port, np_action action,
                  const char *why);
/* The safe default of `network: bridge`: the user-mode stack's own DNS (10.0.2.3:53) and
 * DHCP pass; loopback, private, CGNAT, link-local (metadata), multicast, reserved, broadcast
 * and their IPv6 equivalents are refused. The host's and gateway's addresses are added by the
 * caller (netpolicy_add_list) before or after: refusals commute. */
void netpolicy_add_default(netpolicy *p);
/* Only the refusals of netpolicy_add_default (not the stack's services): what the allowlist's
 * resolver refuses a name to resolve into unless a CIDR entry names it (no DNS rebinding). */
void netpolicy_add_not_internet(netpolicy *p);
/* Refuse each address of a comma-separated list (the host's own addresses, the container's
 * gateway); why as for netpolicy_add. -1 (EINVAL) on a malformed entry, nothing added. */
int netpolicy_add_list(netpolicy *p, const char *list, const char *why);
size_t netpolicy_n_rules(const netpolicy *p);

/* What to do with one ethernet frame from the guest. TCP segments that cannot open a connection
 * pass (above). Malformed IP is dropped; ARP passes (the
 * stack answers it itself); other ethertypes are dropped. ret_rule (may be NULL) gets the
 * matching rule, NULL for the default or a malformed frame. */
np_action netpolicy_check(const netpolicy *p, const uint8_t *frame, size_t len,
                          const np_rule **ret_rule);

/* The verdict on a destination rather than a frame: family 4 or 6, addr in network order. */
np_action netpolicy_check_addr(const netpolicy *p, uint8_t family, const uint8_t *addr,
                               uint8_t proto, uint16_t port, const np_rule **ret_rule);

/* What the policy reads from a frame, for the engine's own decisions before it. */
typedef struct np_pkt {
    uint8_t family, proto;
    const uint8_t *src, *dst; /* into the frame */
    bool port_known;          /* false for any fragment: only the first carries the ports */
    bool opens;               /* not TCP, or a TCP segment that could open a connection */
    uint16_t port;            /* destination port */
    uint16_t l4;              /* the transport header's offset in the frame (port_known only) */
} np_pkt;
/* 0 and *ret filled for an IPv4 or IPv6 frame; -1 for a malformed one or another ethertype. */
int netpolicy_peek(const uint8_t *frame, size_t len, np_pkt *ret);

/* Enough for any refusal frame: ethernet + IPv6 + ICMPv6 + the quoted start of the packet
 * (NP_QUOTE6_MAX; IPv4's quote is its header and 8 bytes, at most 68). */
#define NP_QUOTE6_MAX 128
#define NP_REPLY_MAX  (14 + 40 + 8 + NP_QUOTE6_MAX)
/* The frame that tells the guest no, for a frame netpolicy_check refused, IPv4 or IPv6 alike: a
 * TCP RST (for any TCP segment but a RST) or, for UDP, a destination unreachable,
 * administratively prohibited (ICMP type 3 code 13 quoting the datagram's header; ICMPv6 type 1
 * code 1 quoting the packet's first NP_QUOTE6_MAX bytes). Written to out (cap >=
 * NP_REPLY_MAX); returns its length, 0 when the frame gets no answer (ICMP, other protocols,
 * fragments past the first, broadcast, multicast or unspecified addresses). */
size_t netpolicy_refusal(const uint8_t *frame, size_t len, uint8_t *out, size_t cap);

/* The Internet checksum (RFC 1071) of buf, folded, not complemented, continuing from sum. */
uint32_t np_csum_add(uint32_t sum, const uint8_t *buf, size_t len);
uint16_t np_csum_fold(uint32_t sum);
