/* The on-disk layout under $BLUEBOX_HOME (default ~/.bluebox) and sandbox names. */
#pragma once

/* Rotated connection logs kept: <log>.1 (newest) to <log>.3. */
#define NETLOG_GENERATIONS 3

#include <stdbool.h>

#include "util/err.h"
#include "util/strv.h"

#define NAME_MAX_LEN 64

/* Names: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ — a single path component by construction. */
bool name_valid(const char *name);
/* Check a name before any path is built from it. `what` is "sandbox name" or "label". */
int name_check(const char *name, const char *what, bb_error **err);

/* The root: $BLUEBOX_HOME or $HOME/.bluebox. */
int home_root(char **ret, bb_error **err);

typedef enum {
    HP_SANDBOX,       /* sandboxes/<name> */
    HP_BLUEFILE,      /* sandboxes/<name>/Bluefile */
    HP_CONTAINERFILE, /* sandboxes/<name>/Containerfile */
    HP_DATA,          /* data/<name> */
    HP_DISK,          /* disks/<name>.img: /data of a sandbox with data_limit */
    HP_SNAPSHOTS,     /* snapshots/<name> */
    HP_LOG,           /* logs/<name>.log */
    HP_BUILD_LOG,     /* logs/build/<name>.log: podman's whole output of the last build */
    HP_NET_LOG,       /* logs/net/<name>.log: the connection log of allow: (launch/egress.h);
                       * rotated to <log>.1 .. <log>.NETLOG_GENERATIONS */
    HP_RUN,           /* run/<name>.json */
} home_path;

/* BLUEBOX_HOME and the directories under it that hold sandboxes' files (data, snapshots,
 * logs, run state, locks, Bluefiles) are owner-only: under root podman a guest's /data is
 * host root's, and nothing in it is any other user's business. HOME_DIR_MODE is what they
 * are created with; home_tighten() takes group and other bits off ones an older bluebox
 * made 0755. It never creates anything, skips what is missing, not ours or sticky (a
 * BLUEBOX_HOME of /tmp is left alone), and never fails: the command goes on either way. */
#define HOME_DIR_MODE 0700
void home_tighten(const char *root);

/* The home's identity in podman: 12 hex digits from the canonical path of the root and its
 * device and inode, so that two homes (or a home removed and made again) never share an
 * image tag, a VM name or a label. It is in the names and in the bluebox.home label of
 * everything a home makes in podman, and a home removes only what carries its own. */
char *home_id(const char *root);
/* Build a path for a sandbox (the name must already be valid). */
char *home_path_of(const char *root, home_path which, const char *name);
/* The first line of the sandbox's small record file `file` (sandboxes/<name>/<file>, at most
 * `max` bytes), without its line end; NULL when it is missing or unreadable. */
char *home_read_record(const char *root, const char *name, const char *file, size_t max);
/* A fork's sandboxes/<name>/fork-of names its parent (core/forks.h): the parent, or NULL when
 * `name` is no fork (or the file is unreadable or holds no valid name). */
#define HOME_FORK_OF_FILE "fork-of"
char *home_fork_parent(const char *root, const char *name);
/* Fail unless the sandbox exists, with a hint to create it. */
int home_require(const char *root, const char *name, bb_error **err);
/* Names of all sandboxes (directories under sandboxes/ with a valid name), sorted. */
int home_list(const char *root, strv *ret, bb_error **err);
/* Take the sandbox's exclusive lock (blocking); returns the fd to close when done. */
int home_lock(const char *root, const char *name, bb_error **err);
