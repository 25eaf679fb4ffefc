/* Whole-sandbox operations on the home layout: create, rename, remove. */
#pragma once

#include <stdbool.h>

#include "util/err.h"

/* Create sandboxes/<name>/ with the template Bluefile, or the example's, and data/<name>/
 * (kept when it already exists) with the example's extra files. Nothing is left behind on
 * failure. *ret_extras counts the example files written into /data. */
int sandbox_new(const char *root, const char *name, const char *example, int *ret_extras,
                bb_error **err);
/* The template Bluefile `new` writes. */
char *sandbox_template(const char *name);
/* Fail when the sandbox has a long-lived VM (run/<name>.json exists). */
int sandbox_refuse_up(const char *root, const char *name, bb_error **err);
/* Move sandboxes/, data/, logs/<n>.log and snapshots/ from old to new. Refuses when any
 * target exists; on a failure midway, moves back what had moved. */
int sandbox_rename(const char *root, const char *old, const char *new, bb_error **err);
/* Remove the definition and log; with `data`, also /data and the snapshots. */
int sandbox_remove(const char *root, const char *name, bool data, bb_error **err);
/* Whether the sandbox's /data has anything in it (1), is empty or missing (0). */
int sandbox_data_nonempty(const char *root, const char *name, bb_error **err);
