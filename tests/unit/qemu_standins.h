/* Stand-ins for everything the qemu bundle takes (a program as QEMU, files as firmware,
 * kernel and modules) under a test's directory, and the variables that point bluebox at
 * them, so that a bundle (or a launch that needs one) can be made without QEMU installed.
 * For the unit tests of the qemu backend and its bundle. */
#pragma once

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"
#include "util/fs.h"
#include "util/macro.h"

static void standin_touch(const char *dir, const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    assert_int_equal(mkdir_p(p, 0755, NULL), 0);
    *slash = '/';
    assert_int_equal(write_file_atomic(p, "x", 1, 0644, NULL), 0);
}

static void qemu_standins(const char *dir)
{
    static const char *const files[] = {
        "fw/bios-microvm.bin",
        "fw/pvh.bin",
        "fw/linuxboot_dma.bin",
        "vmlinuz",
        "mods/kernel/drivers/virtio/virtio_ring.ko",
        "mods/kernel/drivers/virtio/virtio.ko",
        "mods/kernel/drivers/virtio/virtio_mmio.ko",
        "mods/kernel/fs/fuse/fuse.ko",
        "mods/kernel/fs/fuse/virtiofs.ko",
        "mods/kernel/fs/overlayfs/overlay.ko",
        "mods/kernel/drivers/firmware/qemu_fw_cfg.ko",
        "mods/kernel/drivers/block/virtio_blk.ko",
        "mods/kernel/drivers/char/virtio_console.ko",
        "mods/kernel/net/core/failover.ko",
        "mods/kernel/drivers/net/net_failover.ko",
        "mods/kernel/drivers/net/virtio_net.ko",
    };
    for (size_t i = 0; i < ELEMENTSOF(files); i++)
        standin_touch(dir, files[i]);
    char p[PATH_MAX];
    setenv("BLUEBOX_QEMU", "/bin/true", 1);
    snprintf(p, sizeof p, "%s/fw/bios-microvm.bin", dir);
    setenv("BLUEBOX_QEMU_BIOS", p, 1);
    snprintf(p, sizeof p, "%s/vmlinuz", dir);
    setenv("BLUEBOX_QEMU_KERNEL", p, 1);
    snprintf(p, sizeof p, "%s/mods", dir);
    setenv("BLUEBOX_QEMU_MODULES", p, 1);
}
