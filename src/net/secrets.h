/* Secrets the guest never holds: what bluebox-vmm knows of them and what it does
 * with the bytes a guest sends to a host.
 *
 * The host hands the VMM one JSON array [{"name","placeholder","value","hosts":[...],
 * optionally "headers":[...]}] in an
 * inherited fd (ABI_ENV_SECRETS_FD); the guest's environment holds only the placeholders
 * (ABI_SECRET_PREFIX + 32 hex digits). secrets_load_env() reads and closes that fd before the
 * guest boots. On a connection to a host that carries a secret, the request heads the guest
 * sends (HTTP/1.x, plain or inside the TLS broker, tlsbroker.h) go through a subst machine:
 * a placeholder in the value of a credential header (SECRET_HEADERS and the secret's own)
 * becomes the real value when that secret lists the host and the machine was released
 * (subst_release_values(): only the broker does, inside TLS whose upstream chain and name it
 * verified; on cleartext the placeholder goes as it is);
 * anything else (request lines, bodies, placeholders of other secrets) passes untouched and
 * every placeholder that goes to a host not listed for it counts as an attempted leak.
 *
 * No value is ever part of an error message: errors name the secret (or its index). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/abi.h"
#include "util/err.h"
#include "util/strv.h"
#include "util/xalloc.h"

/* ABI_SECRET_PREFIX and 32 hex digits. */
#define SECRET_PLACEHOLDER_LEN (sizeof ABI_SECRET_PREFIX - 1 + 32)
/* Bounds on what the host may hand over: far above anything real. */
#define SECRETS_MAX       64
#define SECRET_VALUE_MAX  8192
#define SECRET_HOSTS_MAX  64
#define SECRETS_INPUT_MAX (1u << 20)
/* The largest request head (request line and headers) the machine holds to rewrite. A
 * larger one ends the connection: passing it on would mean passing it unsubstituted. */
#define SUBST_HEAD_MAX (64u << 10)

struct tlsbroker;

typedef struct secret {
    char *name;        /* the guest's environment variable */
    char *placeholder; /* what the guest holds */
    char *value;       /* what only the hosts below receive; wiped on clear */
    size_t value_len;
    strv hosts;   /* lower-case names, or "*.suffix" for any name below suffix */
    strv headers; /* lower-case header names it goes into beyond SECRET_HEADERS */
} secret;

/* The request headers every secret goes into (lower case, NULL-terminated); a secret's
 * `headers` add to them. A placeholder in any other header, the request line or a body stays
 * as it is (and, in a header, counts as an attempted leak: a header the host may echo). */
#define SECRET_HEADERS                                                                             \
    {                                                                                              \
        "authorization", "proxy-authorization", "x-api-key", NULL                                  \
    }
#define SECRET_HEADERS_MAX 16

typedef struct secrets {
    secret *v;
    size_t n;
    struct tlsbroker *broker; /* the per-sandbox CA (tlsbroker.h), when there are secrets */
} secrets;

/* Parse the host's JSON array. Refuses anything malformed (unknown or missing keys, a
 * placeholder not of the ABI's form or given twice, a value with a line break or NUL, a
 * host that is not a plain name). The input is not changed; the caller wipes it. */
int secrets_parse(const char *json, size_t len, secrets *ret, bb_error **err);
/* Read the array from the fd and close it (whatever happens). */
int secrets_load_fd(int fd, secrets *ret, bb_error **err);
/* The fd named by ABI_ENV_SECRETS_FD, if set: read, close, unset the variable. No variable
 * leaves *ret empty and returns 0. */
int secrets_load_env(secrets *ret, bb_error **err);
/* Wipe every value and free everything (the broker is tlsbroker_free()'s). */
void secrets_clear(secrets *s);
static inline void secrets_clearp(secrets *s)
{
    secrets_clear(s);
}
#define _cleanup_secrets_ _cleanup_(secrets_clearp)

/* Whether a secret lists this host (names compare case-insensitively, a trailing dot
 * ignored; "*.suffix" matches names below suffix, not suffix itself). */
bool secret_has_host(const secret *sec, const char *host);
/* Whether any secret lists the host: its connections need the broker (TLS interception). */
bool secrets_for_host(const secrets *s, const char *host);

/* Placeholder search over a stream cut into reads: counts whole placeholders (of any
 * secret) and, among them, those whose secret does not list `host` (NULL: every one is a
 * leak), including those cut across two feeds. */
typedef struct leak_scan {
    const secrets *s;
    const char *host;
    char carry[SECRET_PLACEHOLDER_LEN - 1];
    size_t carry_len;
    uint64_t seen, leaks;
} leak_scan;

void leak_scan_init(leak_scan *ls, const secrets *s, const char *host);
void leak_scan_feed(leak_scan *ls, const void *data, size_t n);

/* The request-side machine for one connection to `host`: feed it what the guest sent, in
 * any cuts; it appends to `out` what goes upstream. Heads are held (at most SUBST_HEAD_MAX)
 * until complete, rewritten, then released; bodies (Content-Length or chunked) pass through
 * as they come; pipelined requests follow one another. Each request must be for `host`: its
 * absolute-form or CONNECT target, if any, and its one Host header name it (a port and a
 * trailing dot aside, any case). A request for another host, or one it cannot frame (a
 * malformed or oversize head, conflicting lengths) stops it: -1 and a static reason in
 * `error`, and nothing more of the connection is released. An upgrade (CONNECT, Upgrade:,
 * an HTTP/2 preface, anything not HTTP/1.x) passes through untouched from there on. */
typedef enum {
    SUBST_HEAD,
    SUBST_BODY,       /* `left` bytes of a Content-Length body */
    SUBST_CHUNK_SIZE, /* a chunk-size line, held in `line` */
    SUBST_CHUNK_DATA, /* `left` bytes of chunk data, then CRLF */
    SUBST_CHUNK_END,  /* the CRLF after chunk data: `left` bytes of it */
    SUBST_TRAILER,    /* trailer lines until an empty one, held in `line` */
    SUBST_TUNNEL,     /* not (or no longer) HTTP/1.x: bytes pass as they are */
    SUBST_FAILED,
} subst_state;

typedef struct subst {
    const secrets *s;
    const char *host;
    /* Only HTTP/1.x, to the end (plain HTTP on a name entry, httpcheck.h): what is not an
     * HTTP/1.x request fails instead of passing, and CONNECT and Upgrade do not end the
     * parsing (the stream is read as requests whatever the server answered). */
    bool strict;
    subst_state state;
    strbuf head; /* the head being collected, or a chunk-size/trailer line */
    uint64_t left;
    /* Whether values go out at all. Unset (the default), a placeholder that would become its
     * value goes as it is and counts in `held`: cleartext, or TLS not yet verified. */
    bool release;
    uint64_t requests;    /* request heads seen */
    uint64_t substituted; /* placeholders replaced by their value */
    uint64_t held;        /* placeholders kept because the machine was not released */
    leak_scan scan;       /* every byte that goes upstream, for attempted leaks */
    const char *error;
} subst;

void subst_init(subst *m, const secrets *s, const char *host);
/* The same, strict (above): the per-request host check of a plain HTTP connection. */
void subst_init_strict(subst *m, const secrets *s, const char *host);
/* From now on values replace their placeholders. Only secrets_relay() calls it, after the
 * host's certificate chain and name verified (tlsbroker.h): nothing else may. */
void subst_release_values(subst *m);
int subst_feed(subst *m, const void *data, size_t n, strbuf *out);
void subst_clear(subst *m);
