/* The agent's credentials: a Lamport (S/KEY) hash chain, so that the guest holds nothing it
 * could turn into the token, and nothing it sees on its own network lets it in again.
 *
 * The host keeps the token (run/<name>.json). For epoch e the chain is
 *     seed_e = SHA256(token || "bluebox-agent" || be32(e)),   v_i = SHA256^i(seed_e),
 * and the guest gets only its top, head_e = v_CHAIN_LEN. A connection is handed an index j
 * (counting down from CHAIN_LEN-1) in the agent's challenge and proves itself with v_j,
 * which the agent checks by hashing it up to a value it already trusts. A v_j it has
 * accepted is spent: j is never handed out again, and the values above it follow from it,
 * the ones below do not. When fewer than CHAIN_ROTATE_BELOW fresh indices are left, the
 * challenge asks an authenticated client for head_{e+1}. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi.h"
#include "util/sha256.h"

/* `bluebox up` hands the guest head_0, as hex, in ABI_ENV_AGENT_HEAD (podman --env, no
 * value). */

#define CHAIN_LEN          1024u
#define CHAIN_ROTATE_BELOW (CHAIN_LEN / 2)
/* At most this many indices are out at once (the agent has at most AGENT_MAX_UNAUTH
 * connections waiting for their hello, and takes no more while this many are out). Indices
 * handed out and not proven (their connection went away or sent a wrong value) are handed
 * out again while they are below every proven one: their value never reached anyone but the
 * guest, and no proof it has seen leads to it (one above a proven index does: it is
 * dropped). */
#define CHAIN_OUT 256
/* A client computes a chain value for any epoch the agent names; it caps the number. */
#define CHAIN_EPOCH_MAX 0x7fffffffu

/* ---- the host's side: everything is derived from the token ---------------------------- */

/* v_index of epoch's chain; index CHAIN_LEN is the head. */
void chain_value(const char *token, uint32_t epoch, uint32_t index, uint8_t out[SHA256_LEN]);
/* SHA256 applied `steps` times to v, in place. */
void chain_walk(uint8_t v[SHA256_LEN], uint32_t steps);

/* Lowercase hex; out has room for 2n+1 bytes. */
void hex_encode(const uint8_t *b, size_t n, char *out);
/* Exactly 2n hex digits into n bytes; -1 otherwise (out is then zeroed). */
int hex_decode(const char *s, uint8_t *out, size_t n);

/* ---- the agent's side: what it trusts, and which indices it handed out ----------------- */

typedef struct chain_epoch {
    bool valid;
    uint32_t epoch;
    uint8_t head[SHA256_LEN];
    /* The lowest index proven so far and its value: a later proof is hashed up to it. */
    uint32_t anchor_index;
    uint8_t anchor[SHA256_LEN];
} chain_epoch;

typedef struct chain_ticket {
    uint32_t epoch, index;
} chain_ticket;

typedef struct chain_state {
    chain_epoch cur, prev;       /* prev: the epoch before a rotation, for proofs already asked */
    uint32_t next;               /* the next fresh index of cur; 0: none left */
    chain_ticket out[CHAIN_OUT]; /* handed out, neither proven nor given back */
    size_t nout;
    uint32_t spare[CHAIN_OUT]; /* given back: handed out again first */
    size_t nspare;
} chain_state;

void chain_state_init(chain_state *s, const uint8_t head[SHA256_LEN]);
/* An index for a new connection, of the current epoch. False when none is left (or
 * CHAIN_OUT are out). */
bool chain_reserve(chain_state *s, uint32_t *ret_epoch, uint32_t *ret_index);
/* A connection that did not prove its index gives it back. */
void chain_release(chain_state *s, uint32_t epoch, uint32_t index);
/* Whether proof is v_index of the epoch's chain (compared in constant time), for an index
 * that is out. Either way the index is no longer out; on success it is spent for good, on
 * failure it is given back as by chain_release. */
bool chain_verify(chain_state *s, uint32_t epoch, uint32_t index, const uint8_t proof[SHA256_LEN]);
bool chain_wants_rotation(const chain_state *s);
/* An authenticated client of epoch from_epoch sent the next head: start epoch from_epoch+1.
 * Ignored (false) unless from_epoch is the current epoch and a rotation is due. */
bool chain_rotate(chain_state *s, uint32_t from_epoch, const uint8_t next_head[SHA256_LEN]);
