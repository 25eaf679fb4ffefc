/* The /data operations, run either in this process or, for a strict sandbox of a rootless
 * user, by this same binary re-run inside rootless podman's user namespace
 * (`podman unshare bluebox __data <op> …`), where the subordinate UID that owns /data is
 * reachable. Both ways run the same functions on the same arguments. */
#pragma once

#include <stdbool.h>

#include "datajob.h"
#include "tally.h"
#include "util/err.h"

/* Run the job here, or with `unshare` through `podman unshare <self> __data …`. */
int data_job_run(const data_job *j, bool unshare, const char *self, data_tally *t, bb_error **err);
