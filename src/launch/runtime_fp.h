/* The fingerprint of the runtime a launch boots on: podman, its configuration, the guest's
 * bluebox and the backend's own files. The isolation check's cache and the direct launch's
 * prepared templates are both keyed on it. */
#pragma once

#include "launch.h"

/* Part of every fingerprint, and the version of the isolation check's cache file. */
#define RUNTIME_FP_VERSION 1

/* The fingerprint of everything that decides what this backend boots. */
char *runtime_fingerprint(const backend *b, const launch *l);
/* The same, and *ret_parts its parts (fingerprint.h), for saying what changed. */
char *runtime_fingerprint_parts(const backend *b, const launch *l, char **ret_parts);
