/* The runtime fingerprint: stat data of everything that decides whether a launch boots a
 * real guest kernel (podman, its configuration, the backend's runtime and VMM files, the
 * probe binary). No subprocess, so the cached isolation check costs microseconds. When it
 * changes, the full check runs again before anything boots. */
#pragma once

#include <stdint.h>

#include "xalloc.h"

/* The whole hash, and each part's own (one line "<hash> <label>" per fp_str/fp_file), so that
 * a changed fingerprint can say which file changed. */
typedef struct fingerprint {
    uint64_t h, part;
    strbuf parts;
} fingerprint;

void fp_init(fingerprint *f);
void fp_done(fingerprint *f);
/* Mix in a string; `label` names it among the parts. */
void fp_str(fingerprint *f, const char *label, const char *s);
/* Mix in a path and what is there: lstat data, the link target when it is a symlink and
 * stat data of what it resolves to; "missing" when there is nothing. The part is labelled
 * by the path, or by `label` when the path may be a placeholder. */
void fp_file(fingerprint *f, const char *path);
void fp_file_as(fingerprint *f, const char *label, const char *path);
/* The labels of the parts whose hash differs between two part lists (either side may lack
 * one), joined by ", "; NULL when none does. */
char *fp_parts_changed(const char *was, const char *now);
/* 16 lowercase hex digits. */
char *fp_hex(const fingerprint *f);
