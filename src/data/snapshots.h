/* A sandbox's snapshots on disk:
 * snapshots/<name>/<label>.tar.gz (or .tar.zst, .tar), listed by time. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "core/sandbox.h"
#include "util/err.h"

typedef struct {
    char *label; /* file name without the suffix */
    char *path;
    uint64_t size;
    struct timespec mtime;
} snapshot_info;

typedef struct {
    snapshot_info *v;
    size_t n;
} snapshot_list;

/* The sandbox's snapshots, oldest first by mtime (ties by name). A missing directory is an
 * empty list. */
int snapshots_list(const sandbox *sb, snapshot_list *ret, bb_error **err);
void snapshots_free(snapshot_list *l);
static inline void snapshots_freep(snapshot_list *l)
{
    snapshots_free(l);
}
#define _cleanup_snapshots_ _cleanup_(snapshots_freep)

/* The archive a restore reference names: none → the newest; a word → a label or a file
 * name in the snapshot directory; anything with a '/' → that file. */
int snapshot_resolve(const sandbox *sb, const char *ref, char **ret_path, bb_error **err);
/* A label as typed: a .tar.gz/.tar.zst/.tar suffix dropped, then the name grammar; with
 * none, the UTC stamp YYYYMMDDTHHMMSSZ. */
int snapshot_label(const char *typed, char **ret, bb_error **err);
/* Remove *.partial files an interrupted snapshot left. */
int snapshots_cleanup(const sandbox *sb, bb_error **err);
