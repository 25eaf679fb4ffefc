/* The egress engine's types and log limits, for its public header (egress_engine.h) and its
 * private state (egress_state.h). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <slirp/libslirp.h>

#include "net/netpolicy.h"
#include "net/secrets.h"
#include "net/tlsbroker.h" /* relay_stats */
#include "util/pollvec.h"

/* The connection log's bytes per boot, in shares: dns lines at most EGRESS_LOG_DNS_CAP and
 * frame lines at most EGRESS_LOG_FRAME_CAP (past those they are counted, and a line says
 * how many every EGRESS_LOG_UNWRITTEN_EVERY and at teardown), tcp lines and those summaries
 * the rest (past it one "log full" line, then nothing). */
#define EGRESS_LOG_CAP             ((uint64_t)4 << 20)
#define EGRESS_LOG_DNS_CAP         ((uint64_t)1 << 20)
#define EGRESS_LOG_FRAME_CAP       ((uint64_t)512 << 10)
#define EGRESS_LOG_UNWRITTEN_EVERY 1000

typedef struct egress_engine egress_engine;
typedef void egress_send_fn(const void *frame, size_t len, void *opaque);
