/* The on-disk layout under $BLUEBOX_HOME (default ~/.bluebox) and sandbox names. */
#pragma once

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
    HP_RUN,           /* run/<name>.json */
} home_path;

/* Build a path for a sandbox (the name must already be valid). */
char *home_path_of(const char *root, home_path which, const char *name);
/* Fail unless the sandbox exists, with a hint to create it. */
int home_require(const char *root, const char *name, bb_error **err);
/* Names of all sandboxes (directories under sandboxes/ with a valid name), sorted. */
int home_list(const char *root, strv *ret, bb_error **err);
/* Take the sandbox's exclusive lock (blocking); returns the fd to close when done. */
int home_lock(const char *root, const char *name, bb_error **err);
