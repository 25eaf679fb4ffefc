/* One /data operation and its arguments: what dataop.c's table runs, here or inside the
 * guest (diskops.c), in this process or re-run under `podman unshare`. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "snapwrite.h"

typedef struct {
    const char *op;     /* snapshot, restore, reset, export, import, fork-* */
    const char *arg[3]; /* see the table in dataop.c */
    bool chown;         /* what is written goes to uid:gid */
    uid_t uid;
    gid_t gid;
    snap_progress progress; /* in this process only */
    char **text;            /* fork-diff: its lines (the op sets *text, the caller frees) */
    void *ud;
} data_job;
