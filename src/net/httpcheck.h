/* Plain HTTP on a name entry: every request on the connection, not only the first
 * the proxy sniffed, must be for the name the connection was allowed for. The guest's bytes go
 * through a strict subst machine (secrets.h) that reads each request head whole before it goes
 * up: a request whose one Host header or absolute-form or CONNECT target names another host,
 * or anything that is not an HTTP/1.x request, ends the connection before a byte of it leaves.
 * A NAME:PORT entry is not checked this way: it carries any TCP to that name by design. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "net/secrets.h"
#include "net/tlsbroker.h" /* relay_stats */

/* Relay guest g and upstream u: pre (the guest's first bytes, already read) then what g
 * sends, through the check for `host`; the host's bytes back as they are. With secrets
 * (may be NULL), placeholders are counted as leaks (none of them lists host: its connections
 * go to the broker). 0 when both sides ended; -1 with st->error (static) set otherwise. */
int http_relay_checked(int g, const uint8_t *pre, size_t pre_len, int u, const char *host,
                       const secrets *sec, relay_stats *st);
/* All of b to the socket fd (EINTR retried; no SIGPIPE): 0, or -1 when it failed or closed.
 * The egress proxy's plain relay writes with it too. */
int relay_send_all(int fd, const void *b, size_t n);
