/* The file server's exports (fsd/serve.h) for one boot: the launch spec's SPEC_MOUNT_FS
 * mounts, in order, after the container's root when the machine serves it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "fsd/serve.h"
#include "abi/spec.h"
#include "util/strv.h"

/* `unjailed`: the mounts the machine's own view leaves out (jail_enter), the served ones and
 * their staging. */
typedef struct exports {
    fsd_export *v;
    size_t n;
    strv paths, socks, unjailed;
} exports;

/* `root`: the container's root is the first export, read-only (the qemu machine); a build
 * step's root is, written, on either machine. */
void exports_fill(exports *e, const launch_spec *s, bool root);
void exports_clear(exports *e);
