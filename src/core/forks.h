/* Which sandboxes are forks, and of whom. A fork is a sandbox whose
 * sandboxes/<name>/fork-of names its parent; its data/<name> holds the overlay's layers
 * (data/fork.h), the parent's /data being the lower one. */
#pragma once

#include <stdbool.h>

#include "sandbox.h"
#include "util/err.h"
#include "util/strv.h"

/* sandboxes/<fork>/applying: an apply is under way (or was killed); holds the inode number
 * the parent's /data had before it, to tell whether the new one was swapped in. */
#define FORK_APPLYING_FILE "applying"

/* Fail when `name` has forks: "<name> has forks (a, b); apply or discard them, then destroy
 * them, before you <doing> it". */
int forks_refuse_parent(const sandbox *sb, const char *doing, bb_error **err);
/* Fail when an apply of the fork `name` was interrupted: the fork must not boot before the
 * apply is finished (its layer may share files with the parent's new /data). */
int forks_refuse_interrupted(const sandbox *sb, bb_error **err);
/* Fail when `name` is a fork: "<name> is a fork of <parent>; <what_to_do>". */
int forks_refuse_fork(const sandbox *sb, const char *what_to_do, bb_error **err);
