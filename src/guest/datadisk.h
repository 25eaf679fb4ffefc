/* /data from a disk image (Bluefile data_limit): the guest's half. */
#pragma once

/* Where bluebox-vmm gives the image to the kernel: ubd0 (the first UML block device), or on
 * qemu the one virtio-blk device (vmm/qemu_argv.h). */
#define DATADISK_DEV      "/dev/ubda"
#define DATADISK_DEV_QEMU "/dev/vda"

/* When the kernel has the data disk: wait for bluebox-vmm's go-ahead (a G frame on the
 * control line, sent once the host has capped every file the VMM may write at the image's
 * size), then mount the disk's ext4 on /data. Nothing of the workload runs before this
 * returns. Without a data disk, does nothing. Returns 0, or -1 with *ret_why set. */
int datadisk_setup(int serial, char **ret_why);
