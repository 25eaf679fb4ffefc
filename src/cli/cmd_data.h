/* What the /data commands (cmd_data.c) share with the fork commands (cmd_fork.c). */
#pragma once

#include "core/sandbox.h"
#include "data/dataop.h"
#include "util/err.h"

/* Run a /data job where the sandbox's /data is reachable (dataown.h's data place). */
int cli_data_job(sandbox *sb, data_job *j, data_tally *t, bb_error **err);
/* "bluebox: skipped N entries that cannot be <what> safely (kinds)", when there were any. */
void cli_warn_skipped(const data_tally *t, const char *what);
/* Refuse while an up VM, a run or a shell has /data; returns the in-use fd to hold. */
int cli_refuse_busy(const sandbox *sb, bb_error **err);
/* The cheap part of that, before asking a question (takes and drops the lock). */
int cli_precheck_busy(sandbox *sb, bb_error **err);
/* The forks' guards on the /data commands (cmd_fork.c): `doing` is reset, restore, snapshot,
 * export or import. A fork refuses them all, saying what to do instead; a parent with forks
 * refuses reset and restore. 0 for a name that is not a sandbox (the command says so). */
int cli_fork_guard(const char *root, const char *name, const char *doing, bb_error **err);
