/* The file server behind the guest's /data and rw mounts on uml.
 *
 * bluebox-vmm runs one server process per sandbox; each export (a host directory the
 * container has: /data, a Bluefile rw mount) is one virtio-fs device that UML reaches over
 * vhost-user (src/fsd/vhost.c, src/fsd/virtq.c), and this interface is the FUSE side: it
 * takes one FUSE request as the guest kernel sent it and writes the reply.
 *
 * Everything in a request is the guest's word and is checked here: the guest kernel can be
 * replaced by guest root (module loading), so a request may be any bytes.
 *
 * Ownership is mapped, never real: every host file is owned by the server's own uid and gid
 * and carries no setuid/setgid bit; the guest's uid, gid, full mode and rdev live in the
 * `user.bluebox.own` xattr, which the guest can neither see nor set. Device nodes, FIFOs and
 * sockets are plain host files with their type in that xattr. Host paths are never resolved
 * as strings: every inode is an O_PATH fd, every name one path component beneath one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* The largest WRITE/READ payload the server accepts and announces in INIT (max_write,
 * max_pages). A request or reply buffer is at most this plus FSD_HEADROOM. */
#define FSD_MAX_IO   (1u << 20)
#define FSD_HEADROOM 4096u
#define FSD_BUF_MAX  (FSD_MAX_IO + FSD_HEADROOM)

typedef struct fsd fsd;

typedef struct fsd_options {
    bool read_only; /* every request that would change the export fails with EROFS */
    /* Show the host's owners, modes and device numbers as they are, with no record read:
     * the qemu guest's root (an image's files, whose owners are the image's), read_only. Without
     * read_only (a uml build step's root: the layer podman commits, in container
     * storage) the guest's chown, chmod (setuid included), file capabilities and user.* xattrs
     * are the host file's own, written by a server that holds CHOWN, FOWNER, FSETID and SETFCAP
     * and whose seccomp filter then lets them through (fsd_server_start's `build`). */
    bool real_owners;
    uint64_t max_fds; /* inodes + open handles kept at once; beyond, EMFILE/ENFILE to the guest */
} fsd_options;

/* Serve the directory `root_fd` (any fd of it; the server keeps its own O_PATH dup). */
int fsd_new(fsd **ret, int root_fd, const fsd_options *opt, bb_error **err);
void fsd_free(fsd *fs);

/* One FUSE request: `in` holds fuse_in_header and everything after it, `len` bytes
 * (contiguous: the transport gathers the guest's buffers). The reply (fuse_out_header and
 * its payload) is written to `out`, at most `cap` bytes; returns its length, or 0 for a
 * request that takes no reply (FORGET, BATCH_FORGET, INTERRUPT). Never fails: every error
 * is a reply with a negative errno. */
size_t fsd_handle(fsd *fs, const void *in, size_t len, void *out, size_t cap);

/* How many fds the server holds for inodes and handles now (at most opt->max_fds). */
uint64_t fsd_fds_open(const fsd *fs);
