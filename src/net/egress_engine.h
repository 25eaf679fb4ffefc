/* Egress by name: the engine of `network: bridge` with an allowlist (ABI_ENV_NET_ALLOW), in
 * front of libslirp (slirp.c hands it every guest frame first).
 *
 *  - DNS: the guest's queries to the stack's DNS address are answered here and never forwarded
 *    upstream: an allowed name gets the A record of a fake address of its own (10.0.2.100 and
 *    up, inside slirp's network), other types an empty answer; any other name NXDOMAIN.
 *  - The first time a name resolves, each port it may use is registered with slirp_add_unix():
 *    slirp hands a guest connection to fake:port to a Unix socket the engine listens on. The
 *    engine hands each connection to a process of its own, a pre-forked worker of the proxy
 *    pool (pool_main and proxy_conn in egress_engine.c), which reads the first
 *    bytes (TLS: SNI; HTTP: Host; other TCP: the name itself, for NAME:PORT entries), refuses
 *    a name other than the fake address's, resolves the name itself, refuses an address the
 *    safe default refuses unless a CIDR entry names it (no DNS rebinding into the LAN),
 *    connects and relays (plain HTTP on a name entry request by request, httpcheck.h). A
 *    refusal is a reset the guest sees at once.
 *  - Every other frame is refused (TCP reset, ICMP/ICMPv6 administratively prohibited) unless a
 *    CIDR entry allows it; IPv6 likewise.
 *  - Each decision is one JSON line on the connection log (ABI_ENV_NET_LOG), written with one
 *    write() on an O_APPEND fd opened before the jail, at most EGRESS_LOG_CAP bytes per boot
 *    (dns and frame lines in shares of their own, below):
 *      {"time":"2026-01-02T03:04:05.678Z","sandbox":"s","kind":"tcp|dns|frame","name":"n",
 *       "port":443,"decision":"allow|deny|error","rule":"entry or why","reason":"...",
 *       "seen":"sni/host name","addr":"upstream","bytes_up":1,"bytes_down":2,"duration_ms":3}
 *    (keys absent when they do not apply; never a payload byte). A connection to a secret's
 *    host adds "brokered":true,"requests":n,"substituted":n over TLS the broker verified, or
 *    "refused":"cleartext","requests":n,"held":n over plain TCP, where no value goes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/egress_types.h"

/* The engine for the allowlist allow (ABI_ENV_NET_ALLOW's value) over slirp, answering the
 * guest through send. Opens the log (ABI_ENV_NET_LOG, when set) now, before the jail. With
 * secrets (may be NULL or empty), connections to a host one lists go through the broker
 * (secrets_relay(), tlsbroker.h) and every other plain stream is scanned for placeholders
 * (attempted leaks, logged). NULL with *ret_why (allocated) set on a malformed list or a log
 * that cannot be opened. */
egress_engine *egress_new(Slirp *slirp, const char *allow, const secrets *sec, egress_send_fn *send,
                          void *opaque, char **ret_why);
/* The policy a resolved address must pass (refusals of the safe default after the CIDR
 * entries): the caller adds the host's own addresses to it. */
netpolicy *egress_rebind_policy(egress_engine *e);
/* One guest frame: true when the engine consumed it (answered, refused or dropped), false
 * when it goes on to slirp. */
bool egress_frame(egress_engine *e, const uint8_t *frame, size_t len);
void egress_poll_fill(egress_engine *e, pollvec *pv);
/* Accept and hand off the connections the listeners added by egress_poll_fill report. */
void egress_poll_done(egress_engine *e, const pollvec *pv);
void egress_free(egress_engine *e);
