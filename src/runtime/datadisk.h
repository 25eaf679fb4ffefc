/* /data as a disk image (Bluefile data_limit), the host's half. The image is
 * disks/<name>.img under BLUEBOX_HOME: an ext4 file system of exactly data_limit bytes
 * (sparse: it takes the space its contents take), which the VMM attaches as a block device
 * and the guest mounts on /data. data/<name>/ stays as it was but is not used while the image
 * exists: one or the other is the sandbox's /data, never both. The host never parses the
 * image (the guest wrote its metadata); it only creates, hands over and deletes it, and
 * snapshot, restore and data export|import go through the guest (diskjob.h). */
#pragma once

#include "abi/abi.h"
#include "core/bluefile.h"
#include "core/sandbox.h"
#include "util/err.h"

/* The launch binds the image to ABI_DATA_DISK (the VMM reads the path from its env). */

/* Before a boot, under the sandbox's lock. Returns 1 when /data is the disk image (created
 * now when new, empty, and handed to the sandbox's root), 0 when /data is the directory
 * (no data_limit and no image), -1 with a message that says what to do when the Bluefile
 * and what is on disk disagree (data_limit added over a non-empty directory, removed or
 * changed while an image exists). */
int datadisk_prepare(const sandbox *sb, const char *self, bb_error **err);
/* Whether the sandbox's /data is a disk image. */
bool datadisk_exists(const sandbox *sb);
/* A size as data_limit is written: 64M, 10G, 1T (or bytes when it is none of these). */
char *datadisk_size_words(unsigned long long bytes);
/* For reset: delete the image (the next boot makes a fresh one at the Bluefile's size). */
int datadisk_remove(const sandbox *sb, bb_error **err);
/* Make sure the sandbox's /data (its disk image with data_limit, else its directory) exists
 * and is owned for its Bluefile's isolation (sb->bf, loaded); `self` is the bluebox that
 * re-owns it inside rootless podman's user namespace. */
int data_prepare(const sandbox *sb, const char *self, bb_error **err);
