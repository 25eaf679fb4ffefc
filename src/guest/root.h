/* The uml guest's root filesystem: the image read-only under a writable layer in guest
 * RAM, /data and the Bluefile's mounts as hostfs mounts of their own, bluebox's /etc/hosts,
 * /etc/hostname and /etc/resolv.conf. See root.c. */
#pragma once

#include "guest/spec.h"
#include "util/err.h"

/* Build the root from the boot root (hostfs, with /dev, /proc and /sys mounted on it) and
 * switch into it. `nameserver` is the guest's DNS server, NULL without a network. */
int guest_root_setup(const launch_spec *spec, const char *nameserver, bb_error **err);
