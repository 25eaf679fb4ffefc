/* A fork's copy-on-write /data, on the host side.
 *
 * In the guest, a fork's /data is an overlayfs the guest kernel makes: the parent's /data is
 * the lower layer (served read-only), data/<fork>/upper and data/<fork>/work the upper and
 * work layers (served read-write), all by the file server in its host format (src/fsd: the
 * guest's owner, mode and type in user.bluebox.own, its xattrs as user.bluebox.x.<name>). So
 * what overlayfs writes lands here as: a whiteout, a plain file whose record says character
 * device 0:0; an opaque directory, one with the guest xattr trusted.overlay.opaque = "y".
 *
 * The upper layer is the guest's work, read as hostile input as an archive is by a restore:
 * walked by fds, never through a symlink, no deeper than DATA_PATH_MAX; the changes it holds
 * are written into the parent's /data only beneath it, never through an entry already there,
 * and all at once (replace.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tally.h"
#include "util/err.h"

#define FORK_UPPER "upper"
#define FORK_WORK  "work"
/* The guest's overlayfs attributes (trusted.overlay.*) as the file server keeps them. */
#define FORK_OVL_XATTR "user.bluebox.x.trusted.overlay."

/* The changes in the upper layer `upper_fd` over `lower_fd` (the parent's /data), as lines
 * "A path", "M path" and "D path" sorted by path, each ending in "\n"; control bytes and
 * backslashes in a path are written as \ooo. *ret_n counts the lines. Entries too deep to
 * take count in t->skipped. */
int fork_diff(int upper_fd, int lower_fd, char **ret_text, uint64_t *ret_n, data_tally *t,
              bb_error **err);

/* Merge the upper layer at upper_path into the parent's /data at lower_path, all or nothing:
 * a staging copy of /data (its directories made anew, hard links to its other entries) takes
 * the changes and is swapped in with one rename. With chown, what the merge writes goes to
 * uid:gid. A changed file that only the layer holds is hard-linked into the staging copy,
 * not copied: the caller must empty the layer (fork_layers_reset) before the fork boots
 * again, also after a crash between the swap and that reset. */
int fork_apply(const char *lower_path, const char *upper_path, bool chown, uid_t uid, gid_t gid,
               data_tally *t, bb_error **err);

/* Make the fork's upper and work layers under layers_path (data/<fork>) empty, each swapped
 * in whole (a discard interrupted halfway leaves old or empty layers), the upper root with
 * the attributes of the parent's /data root at lower_path; with chown the new directories go
 * to uid:gid. Creates them for a new fork. */
int fork_layers_reset(const char *layers_path, const char *lower_path, bool chown, uid_t uid,
                      gid_t gid, bb_error **err);
