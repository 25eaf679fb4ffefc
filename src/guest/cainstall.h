/* The sandbox CA in the uml guest's trust store. When bluebox-vmm brokers secrets
 * (src/net/tlsbroker.h) it terminates TLS to the hosts that carry them with certificates of
 * a per-sandbox CA; the launch spec carries that CA's certificate, and the guest init, before
 * any workload runs, appends it to every CA bundle of the image it finds (Debian/Ubuntu/
 * Alpine, Fedora/RHEL, openSUSE paths) and points the usual variables at the bundle for the
 * programs that keep a store of their own (Node, Python's requests, curl). */
#pragma once

#include <stdbool.h>

#include "util/err.h"
#include "util/strv.h"

/* Variables set for the workload (unless its environment already sets them). */
#define CA_ENV_VARS                                                                                \
    {                                                                                              \
        "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"             \
    }

/* Under `root` ("" in the guest; a directory in tests): append pem to each bundle that
 * resolves to a regular file of the root, each file once; never one reached through a
 * symlink into `shared` (the guest's mounts of host directories) or bluebox's and the
 * kernel's paths. With none, create the Debian path. A read-only root gets a bundle of its
 * own (the image's and ours) on its /run or /tmp tmpfs instead. Adds NAME=bundle to env. */
int ca_install(const char *root, const char *pem, bool readonly, const strv *shared, strv *env,
               bb_error **err);
