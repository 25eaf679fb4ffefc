/* The TLS broker of bluebox-vmm: TLS is terminated only on connections to a host
 * that carries a secret, so that the placeholders in its request heads can be replaced
 * (secrets.h). A per-sandbox CA is made at VMM start (an EC P-256 key that exists only in
 * this process's memory; its certificate reaches the guest's trust store through the launch
 * spec); each connection gets a leaf certificate for its host, signed on the spot. Toward the
 * real host the broker is an ordinary client: SNI, hostname verification and the chain
 * checked against the host's CA store (TLSBROKER_TRUST_FILES, bind-mounted read-only by the
 * uml backend), never the image's. OpenSSL from Debian does every cryptographic step.
 *
 * Everything here blocks: secrets_relay() runs in the per-connection child of the VMM's
 * egress proxy, one connection per process. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi/abi.h"
#include "util/err.h"
#include "net/secrets.h"

/* The host's CA store and the optional extra upstream CA (ABI_ENV_UPSTREAM_CA on the host),
 * as the uml backend mounts them in the container. */
#define TLSBROKER_TRUST_FILES                                                                      \
    {                                                                                              \
        ABI_UPSTREAM_CA_SYSTEM, ABI_UPSTREAM_CA_EXTRA                                              \
    }

typedef struct tlsbroker tlsbroker;

/* Make the CA (its name constrained to the secrets' hosts) and load the upstream trust from
 * the files that exist of `trust` (at least one must have certificates). Sets s->broker. */
int tlsbroker_start(secrets *s, const char *const *trust, size_t n_trust, bb_error **err);
/* The CA certificate, PEM: what the guest trusts. */
const char *tlsbroker_ca_pem(const tlsbroker *b);
void tlsbroker_free(tlsbroker *b);

typedef struct relay_stats {
    uint64_t up;          /* bytes the guest sent (plaintext) */
    uint64_t down;        /* bytes the guest received (plaintext) */
    uint64_t requests;    /* HTTP request heads seen */
    uint64_t substituted; /* placeholders replaced by a real value */
    uint64_t leaks;       /* placeholders sent toward a host their secret does not list */
    uint64_t held;        /* placeholders of the host's own secrets that went as they are */
    bool cleartext;       /* a secret's host over plain TCP: no value went (refused: cleartext) */
    const char *error;    /* static text: why the relay ended early, or NULL */
    bool refused;         /* it ended on a request the policy refuses (error says which) */
} relay_stats;

/* Relay one connection the guest made to `host` over upstream_fd (already connected to the
 * real host). `pre` holds the bytes already read from guest_fd (the TLS ClientHello, or the
 * start of a plain request). With tls, the guest gets a certificate for `host` from the
 * sandbox's CA, the upstream's chain and name are verified, and only then do secrets replace
 * their placeholders in the request heads. Without tls (plain TCP, whatever it carries
 * later: an upgrade to TLS mid-stream is opaque here) no value goes out, ever: placeholders
 * go as they are (counted in held) and st->cleartext says so; requests are still checked for
 * the host (secrets.h). Neither fd is closed. Returns 0 when the connection ended normally,
 * -1 with st->error set otherwise; st counts either way. */
int secrets_relay(int guest_fd, const void *pre, size_t pre_len, int upstream_fd, const char *host,
                  bool tls, const secrets *s, relay_stats *st);
