/* The /data operations, run either in this process or, for a strict sandbox of a rootless
 * user, by this same binary re-run inside rootless podman's user namespace
 * (`podman unshare bluebox __data <op> …`), where the subordinate UID that owns /data is
 * reachable. Both ways run the same functions on the same arguments. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "snapwrite.h"
#include "tally.h"
#include "util/err.h"

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

/* Run the job here, or with `unshare` through `podman unshare <self> __data …`. */
int data_job_run(const data_job *j, bool unshare, const char *self, data_tally *t, bb_error **err);
