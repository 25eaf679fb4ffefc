/* The sandbox handle a command works on, and whole-sandbox operations on the home layout:
 * create, rename, remove. */
#pragma once

#include <stdbool.h>

#include "bluefile.h"
#include "util/err.h"

struct backend; /* backends/backend.h: core names it, the runtime fills it in */

/* One sandbox, opened once per command by the CLI and passed down (as crun passes its
 * container and context): its name, the paths of its files (home.h's layout, built here and
 * nowhere else for a sandbox that has a handle), its Bluefile (parsed once, on first use) and
 * its backend (resolved once, by the runtime: sandbox_resolve_backend() in runtime/boot.h).
 *
 * The lock belongs to the handle: sandbox_lock() is the one caller of home_lock() (besides
 * rename, which holds two sandboxes' locks in name order). A command that needs the lock for
 * its whole span (build, destroy, the /data commands) takes it in the CLI and keeps it until
 * sandbox_unlock() or sandbox_close(); boot_prepare takes it for its own steps only when the
 * caller does not hold it, and then releases it before it returns (a run or an up VM does
 * not keep it). sandbox_lock() on a handle that holds the lock is a no-op: nothing locks
 * twice. */
typedef struct sandbox {
    char *root, *name;
    char *home_id;                 /* home_id(root): a realpath and a stat, so taken once */
    char *dir;                     /* sandboxes/<name> */
    char *bluefile_path;           /* sandboxes/<name>/Bluefile */
    char *containerfile;           /* sandboxes/<name>/Containerfile */
    char *image_id;                /* sandboxes/<name>/image-id: written by a successful build */
    char *data;                    /* data/<name> */
    char *disk;                    /* disks/<name>.img */
    char *snapshots;               /* snapshots/<name> */
    char *log;                     /* logs/<name>.log */
    char *build_log;               /* logs/build/<name>.log */
    char *run;                     /* run/<name>.json */
    char *parent;                  /* a fork's parent (sandboxes/<name>/fork-of), else NULL */
    char *parent_data;             /* a fork's lower layer: data/<parent>, else NULL */
    bluefile *bf;                  /* NULL until sandbox_bluefile() */
    const struct backend *backend; /* NULL until sandbox_resolve_backend() */
    int lock;                      /* the home_lock fd; -1 when not held */
} sandbox;

/* Open the sandbox `name` under `root`: the name checked before any path is built from it,
 * and the sandbox must exist (home_require's messages). Takes no lock, reads no file. */
int sandbox_open(const char *root, const char *name, sandbox **ret, bb_error **err);
/* The handle of a valid `name` whether or not the sandbox exists: sandbox_open without its
 * check, for the unit tests' homes. Reads only sandboxes/<name>/fork-of. */
sandbox *sandbox_of(const char *root, const char *name);
/* Release the lock (if held), the Bluefile and the handle. Accepts NULL. */
void sandbox_close(sandbox *s);
static inline void sandbox_closep(sandbox **s)
{
    sandbox_close(*s);
}
#define _cleanup_sandbox_ _cleanup_(sandbox_closep)
/* The parsed Bluefile, loaded on the first call and kept (s->bf). */
int sandbox_bluefile(sandbox *s, bb_error **err);
/* Take the sandbox's lock unless the handle holds it: 1 when this call took it, 0 when it
 * was held already, -1 on failure. */
int sandbox_lock(sandbox *s, bb_error **err);
void sandbox_unlock(sandbox *s);

/* Create sandboxes/<name>/ with the template Bluefile, or the example's, and data/<name>/
 * (kept when it already exists) with the example's extra files. Nothing is left behind on
 * failure. *ret_extras counts the example files written into /data. */
int sandbox_new(const char *root, const char *name, const char *example, int *ret_extras,
                bb_error **err);
/* Fail when the sandbox has a long-lived VM (run/<name>.json exists). */
int sandbox_refuse_up(const sandbox *sb, bb_error **err);
/* Move sandboxes/, data/, logs/<n>.log and snapshots/ from old to new. Refuses when any
 * target exists; on a failure midway, moves back what had moved. */
int sandbox_rename(const char *root, const char *old, const char *new, bb_error **err);
/* Remove the definition and log; with `data`, also /data and the snapshots. */
int sandbox_remove(const sandbox *sb, bool data, bb_error **err);
/* Whether `destroy` (keeping data) left data/<name>, its disk image or its snapshots with
 * no sandbox of that name. */
bool sandbox_has_leftover(const char *root, const char *name);
/* Remove that leftover (under the name's lock); refuses when the sandbox exists again. */
int sandbox_remove_leftover(const char *root, const char *name, bb_error **err);
/* Entries directly in data/<name>, -1 when there is no such directory. */
int sandbox_data_entries(const char *root, const char *name);
/* Remove locks/<name>.lock, .use and .users/ of a destroyed sandbox; the caller holds the
 * lock and the exclusive in-use lock (home_lock copes with a lock file removed under it). */
void sandbox_remove_locks(const char *root, const char *name);
/* Whether the sandbox's /data has anything in it (1), is empty or missing (0). */
int sandbox_data_nonempty(const char *root, const char *name, bb_error **err);
