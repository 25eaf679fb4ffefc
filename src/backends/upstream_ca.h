/* What bluebox-vmm's TLS broker verifies real servers against (src/net/tlsbroker.h): the
 * host's CA bundle, and the PEM file $BLUEBOX_UPSTREAM_CA names when set (a private CA, a
 * test server's), bind-mounted read-only into the container at ABI_UPSTREAM_CA_SYSTEM and
 * ABI_UPSTREAM_CA_EXTRA. Never the image's: an image could trust anyone. */
#pragma once

#include "util/err.h"
#include "util/strv.h"

/* Add the -v flags for podman. Fails when $BLUEBOX_UPSTREAM_CA is set but not a readable
 * file (or a path podman's -v cannot carry). */
int upstream_ca_flags(strv *argv, bb_error **err);
