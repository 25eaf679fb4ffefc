/* The guards on /data (ops.h), and the /data job runner, for the /data and fork operations. */
#pragma once

#include "data/dataop.h"
#include "ops.h"

/* Run a /data job where the sandbox's /data is reachable (dataown.h's data place). */
int ops_data_job(sandbox *sb, data_job *j, data_tally *t, bb_error **err);
/* /data is about to change: refuse while an up VM, a run or a shell has it, or the VM of a
 * run whose bluebox was killed still does; the warm pool is drained. Returns the in-use fd
 * to hold till done. The caller holds the sandbox's lock. */
int ops_refuse_busy(const sandbox *sb, ops_why *ret_why, bb_error **err);
/* The cheap part of that (takes and drops the lock). */
int ops_precheck_busy(sandbox *sb, ops_why *ret_why, bb_error **err);
/* The forks' guards on the /data commands: `doing` is reset, restore, snapshot, export or
 * import. A fork refuses them all, saying what to do instead; a parent with forks refuses
 * reset and restore. */
int ops_fork_guard(const sandbox *sb, const char *doing, ops_why *ret_why, bb_error **err);
