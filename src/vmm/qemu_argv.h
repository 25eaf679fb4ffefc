/* The qemu backend's VMM command line: bluebox-vmm starts qemu-system-x86_64
 * from the read-only bundle as the uml backend starts linux.uml, with the same control line,
 * launch spec and file server. What the command line must and must not hold is what
 * SECURITY.md promises about qemu, so it is built here, in one pure function that the unit
 * tests read (tests/unit/test_qemu.c):
 *   - machine `microvm`, no default devices, no user config, no display, no monitor of any
 *     kind (nothing the guest or another process could drive QEMU through), -no-reboot;
 *   - QEMU's own seccomp sandbox on (no spawning, no privilege changes, obsolete calls
 *     refused, no resource control);
 *   - accel=kvm only when KVM was asked for (bluebox passes /dev/kvm into the container
 *     only then), else accel=tcg: software emulation, said as much on the posture line;
 *   - the guest's RAM a shared memfd, which the file server maps (vhost-user);
 *   - one serial line (the control line, the container's socketpair) and one
 *     vhost-user-fs device per export: the root (tag ABI_QEMU_ROOT_TAG) and each served
 *     mount (bbfs<k>);
 *   - with a network (bridge, or none with the agent's forward), one virtio-net device on a
 *     stream netdev whose socket QEMU inherits: bluebox-vmm's libslirp is the other end
 *     (net/slirp.h), never QEMU's own user networking;
 *   - the launch spec as a fw_cfg file (ABI_QEMU_SPEC_FWCFG), read once by the guest init;
 *   - data_limit: the /data disk image as one virtio-blk device, format=raw given (QEMU
 *     never probes what the guest wrote as an image format, e.g. a qcow2 header naming a
 *     backing file), discards punched out of the host file; bluebox-vmm caps QEMU at the
 *     image's size (vmm/disklimit.h) as it caps UML;
 *   - the kernel's console on a virtio console (hvc0, output only) appended to the VMM's
 *     log, as uml's con0: the serial line is the control line and carries frames alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/strv.h"

/* TCG's translation cache, in MiB (inside the container's memory cap: launch.c's overhead). */
#define QEMU_TCG_TB_MIB 128

typedef struct qemu_dev {
    const char *sock; /* the file server's vhost-user socket */
    const char *tag;  /* the guest mounts `-t virtiofs <tag>` */
} qemu_dev;

typedef struct qemu_conf {
    const char *dir; /* the bundle: qemu, its firmware, the kernel and the initramfs */
    bool pvh;        /* the bundle has the kernel uncompressed with its PVH note: boot that */
    bool kvm;
    unsigned ram_mib, cpus;
    unsigned tsc_khz;      /* TCG: the host's TSC rate, for the guest's clock; 0 unknown */
    int serial_fd;         /* the control line: an AF_UNIX stream socket QEMU inherits */
    int net_fd;            /* the network's stream socket QEMU inherits; 0: no network */
    unsigned net_mtu;      /* the guest's MTU on it */
    const char *spec_path; /* the launch spec file */
    const qemu_dev *devs;
    size_t n_devs;
    const char *extra_cmdline; /* debugging aid: appended to the kernel's command line */
    const char *data_disk;     /* data_limit: the /data disk image (virtio-blk), NULL none */
    const char *console_log;   /* the guest's console (hvc0) appended here, NULL none */
} qemu_conf;

/* The whole argv, program first. */
void qemu_argv(const qemu_conf *c, strv *argv);
