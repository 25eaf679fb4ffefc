/* The uml guest's root filesystem: the image read-only under a writable layer in guest
 * RAM, /data and the Bluefile's mounts as hostfs mounts of their own, bluebox's /etc/hosts,
 * /etc/hostname and /etc/resolv.conf. See root.c. */
#pragma once

#include <stdbool.h>

#include "abi/spec.h"
#include "util/err.h"

/* Build the root from the boot root (hostfs, with /dev, /proc and /sys mounted on it) and
 * switch into it. `nameserver` is the guest's DNS server, NULL without a network. */
int guest_root_setup(const launch_spec *spec, const char *nameserver, bb_error **err);

/* The qemu guest: the boot root is the initramfs, whose /modules holds the
 * kernel modules and whose /init is the static bluebox. Load the modules (abi/abi.h's
 * ABI_QEMU_MODULES) and mount the container's root, served read-only over virtio-fs; from
 * then on guest_root_setup builds the root over that instead of over hostfs. */
int guest_root_qemu(bb_error **err);
/* Whether guest_root_qemu ran. */
bool guest_root_is_qemu(void);
