/* The isolation check: boot the image through its backend and as a plain
 * container, run the probe in both, and refuse when the kernels are the same. The result is
 * cached in verify.json against the runtime fingerprint. */
#pragma once

#include <stdbool.h>

#include "launch/launch.h"
#include "backends/probe.h"

typedef struct {
    kernel_id guest, baseline;
    /* ISOCHECK_CHANGED: which of the runtime's files changed since the check was cached
     * ("/usr/bin/podman, /usr/bin/linux.uml"), "" when the cache does not say. */
    char changed[256];
} isolation_result;

/* What the isolation check's cache held for a launch (not the Bluefile's isolation mode,
 * bf_isolation): no entry, an entry for this runtime, an entry for a runtime since changed. */
typedef enum { ISOCHECK_NONE, ISOCHECK_CACHED, ISOCHECK_CHANGED } isolation_state;

/* The full check (after the backend's preflight); refuses with "not isolated: …" when the kernels
 * match. Does not touch the cache. */
int isolation_check(const backend *b, const launch *l, isolation_result *ret, bb_error **err);
/* Record a passed check for this backend's current fingerprint. */
int isolation_remember(const backend *b, const launch *l, const isolation_result *r,
                       bb_error **err);
/* What the cache says about this backend now; with an entry, *ret (may be NULL) gets the
 * releases it recorded. */
isolation_state isolation_cached(const backend *b, const launch *l, isolation_result *ret);
/* Before a boot: pass on a cache hit (*ret from the cache); otherwise run the full check and
 * remember it. *ret_was says what the cache held (ISOCHECK_CACHED: nothing ran). Refuses when
 * the check fails. */
int isolation_ensure(const backend *b, const launch *l, isolation_state *ret_was,
                     isolation_result *ret, bb_error **err);
