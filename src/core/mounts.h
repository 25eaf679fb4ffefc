/* The boot-time check on mount sources: nothing the guest can write may contain a mount
 * source, or a guest could plant a symlink and redirect the next boot's mount. */
#pragma once

#include "bluefile.h"
#include "util/err.h"

/* Check every mount of bf for the sandbox `name` under `root`: no source inside any
 * sandbox's /data (root/data), none inside an rw mount of this sandbox, no rw mount that
 * contains this sandbox's /data; each compared as written and with symlinks resolved.
 * A source that does not exist is refused too. */
int mounts_check(const char *root, const char *name, const bluefile *bf, bb_error **err);
