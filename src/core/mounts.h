/* The boot-time check on mount sources: nothing the guest can write may contain a mount
 * source, or a guest could plant a symlink and redirect the next boot's mount. */
#pragma once

#include "bluefile.h"
#include "sandbox.h"
#include "util/err.h"

/* Check every mount of the sandbox's Bluefile (sb->bf, loaded): no source inside any
 * sandbox's /data (root/data), none inside an rw mount of this sandbox, no rw mount that
 * contains this sandbox's /data (sb->data); each compared as written and with symlinks
 * resolved. A source that does not exist is refused too. */
int mounts_check(const sandbox *sb, bb_error **err);
/* The part of mounts_check() that needs no sandbox (build runs it before building): no
 * mount of /, of BLUEBOX_HOME (root), of the host's system trees (/etc, /proc, /sys, /dev,
 * /run, /var/run, /boot, podman's storage), of a directory holding any of them, of a home
 * directory or a directory holding one, nor an rw mount of the host's programs (/usr, /bin,
 * /sbin, /lib*). Checked as written and with symlinks resolved. */
int mounts_check_host(const char *root, const bluefile *bf, bb_error **err);
