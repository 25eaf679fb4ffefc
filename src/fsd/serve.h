/* The file server process: one per sandbox run, forked by bluebox-vmm before UML starts,
 * serving every export (a host directory the guest mounts with virtio-fs) on a vhost-user
 * socket of its own. See fsd.h for what it promises. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "fsd/vhost.h"
#include "util/err.h"

typedef struct fsd_export {
    const char *path;      /* the directory, as this process sees it */
    const char *sock_path; /* where UML connects (virtio_uml.device=<sock_path>:26) */
    char tag[VU_TAG_MAX];  /* the guest mounts `-t virtiofs <tag>` */
    bool read_only;
    /* Serve a detached copy of the path's own mount, without the mounts on it (open_tree's
     * OPEN_TREE_CLONE): the container's root for the qemu guest, whose /proc, /dev, /sys,
     * /.bluebox and /data stay out of its view. Needs CAP_SYS_ADMIN, which the server holds
     * until it locks itself (util/lockdown.h). */
    bool one_mount;
    bool real_owners; /* fsd_options.real_owners */
} fsd_export;

/* Listen on every export's socket (so UML can connect the moment it boots), open the
 * exports, and fork the server; its stderr goes to `log_fd` (-1: /dev/null). The child
 * dies with its parent. `build`: a build step's server, whose seccomp filter lets owner
 * changes and setuid/setgid modes through (it serves the container's root, the step's layer
 * in container storage, which podman commits into the image). Returns its pid, or -1 with
 * *err set (nothing left behind). */
pid_t fsd_server_start(const fsd_export *ex, size_t n, bool build, int log_fd, bb_error **err);
