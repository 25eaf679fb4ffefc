/* The guest's view of a host file's owner, mode and rdev: mapped, never real.
 *
 * Host files keep the server's own uid/gid and a harmless mode (owner rw, no setuid, setgid
 * or sticky bit); what the guest set lives in the `user.bluebox.own` xattr as a small
 * versioned binary record. A file without the record (made on the host, or on a filesystem
 * without user xattrs) shows as root-owned with its host mode, less setuid/setgid. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FSD_OWN_XATTR "user.bluebox.own"

typedef struct fsd_own {
    uint32_t uid, gid;
    uint32_t mode; /* full guest mode: file type, setuid/setgid/sticky, permissions */
    uint64_t rdev; /* guest device number (character and block devices) */
} fsd_own;

/* The record's bytes: version 1, then uid, gid, mode, rdev, little-endian. */
#define FSD_OWN_RECORD_LEN 24

void fsd_own_encode(const fsd_own *o, uint8_t out[FSD_OWN_RECORD_LEN]);
/* 0, or -EINVAL for a record that is not a well-formed version 1 of a type that can live in
 * a host file of type `host_type` (S_IFREG holds any non-directory type, S_IFDIR a directory). */
int fsd_own_decode(const uint8_t *in, size_t len, mode_t host_type, fsd_own *ret);

/* The view of a host file that has no record. */
fsd_own fsd_own_default(mode_t host_mode);
/* Whether `o` is exactly what a file of `host_mode` shows without a record (so none is
 * needed). */
bool fsd_own_is_default(const fsd_own *o, mode_t host_mode);
/* The host mode for a guest mode: permissions & 0777 plus owner rw (rwx for a directory),
 * never setuid, setgid or sticky; device nodes, FIFOs and sockets are plain 0600 files. */
mode_t fsd_own_host_mode(uint32_t guest_mode);

/* Read the record of the open inode `fd` (an O_PATH fd of a regular file or directory,
 * reached through /proc/self/fd). 0 with *ret filled, -ENODATA when there is none (or it is
 * malformed), or another negative errno (-ENOTSUP: the filesystem has no user xattrs). */
int fsd_own_read(int fd, mode_t host_type, fsd_own *ret);
/* Write the record; 0 or a negative errno. */
int fsd_own_write(int fd, const fsd_own *o);

/* "/proc/self/fd/N" into buf (at least 32 bytes). */
void fsd_proc_path(char *buf, size_t size, int fd);
