/* Copying a tree between /data and a host directory (data export and import), safe in both
 * directions: the source is walked by fds without following a symlink, the destination is
 * written only through fds beneath its root, nothing is ever written through an existing
 * entry, and devices, fifos, sockets and type clashes are skipped and counted. Files and
 * directories keep their user.bluebox.* attributes (the guest's ownership, xattrs.h), the
 * root's included; symlinks have none. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "tally.h"
#include "util/err.h"

typedef struct {
    bool chown; /* give what is created to uid:gid (importing into strict /data) */
    uid_t uid;
    gid_t gid;
    /* Export: a file with several names in src is written once, its other names hard links
     * to that copy (the destination is bluebox's own new tree; never for import, whose
     * destination is a /data the guest may be changing). */
    bool links;
} copy_opts;

/* Copy the contents of src_fd into dst_fd, merging with what dst_fd holds: directories
 * merge, a file or symlink replaces one of its own type, anything else is left alone. */
int tree_copy(int src_fd, int dst_fd, const copy_opts *o, data_tally *t, bb_error **err);
/* The bytes of the regular file `in` (size bytes) into the new file `out`, holes kept; the
 * bytes count in t->bytes. */
int copy_bytes(int in, int out, off_t size, const char *name, data_tally *t, bb_error **err);
