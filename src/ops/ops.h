/* The operations both front doors call: the CLI (src/cli/) and the API (src/api/, and through
 * it the SDKs and MCP) parse a request into an options struct, open the sandbox handle and
 * call one of these; what comes back is a result and, on failure, one bb_error. Nothing here
 * prints or reads argv: the CLI says it in words, the API answers JSON.
 *
 * A failure also says what kind it is (ops_why), so that the API can answer a stable error
 * code (404/409/…) without reading the message, and the CLI its usual exit code. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/sandbox.h"
#include "runtime/isolation.h"
#include "util/err.h"

struct boot;

typedef enum {
    OPS_FAILED = 0, /* anything not below: an internal error to the API */
    OPS_NOT_UP,     /* exec, files: the sandbox has no up VM */
    OPS_NOT_BUILT,  /* a boot found no built image */
    OPS_IS_UP,      /* refused: an up VM holds the sandbox */
    OPS_REFUSED,    /* a guard refused (in use, a fork, a parent with forks, not a fork) */
    OPS_NOT_FOUND,  /* a named thing (a snapshot) does not exist */
    OPS_BAD,        /* the request cannot be done as asked (network: none for up, …) */
    OPS_LOST,       /* the up VM stopped answering */
} ops_why;

/* What a front door hears while an operation runs, before its command's output starts (the
 * CLI says "re-verified isolation"; the API lets the command's output through). Both may be
 * NULL. */
typedef struct ops_events {
    /* The cached isolation check exec and a warm run repeat; `was` says whether it re-ran. */
    void (*checked)(void *opaque, isolation_state was, const isolation_result *iso);
    /* The command is about to start: in a cold VM (boot) or a warm or up one (NULL). */
    void (*starting)(void *opaque, const struct boot *boot);
    void *opaque;
} ops_events;

/* A command for run or exec. */
typedef struct ops_command {
    char **argv;         /* NULL-terminated, non-empty */
    char **env;          /* K=V for the command, NULL-terminated; NULL: none */
    const char *cwd;     /* NULL: the image's */
    int timeout_seconds; /* 0: the Bluefile's */
    bool forward_stdin;  /* fd 0 goes to the command; otherwise it sees EOF */
    bool tty;            /* a pty in the guest, of rows x cols (0: unknown) */
    unsigned short rows, cols;
    const char *log_as; /* the run log's word: "run", "exec (api)", … */
    ops_events ev;
} ops_command;

typedef struct ops_run_result {
    ops_why why;
    int code;            /* the command's exit code */
    bool timed_out;      /* killed after timeout_seconds */
    int timeout_seconds; /* the one that applied */
    bool warm;           /* a warm-pool VM ran it */
    char *agent_err;     /* what the agent reported going wrong, or NULL (untrusted text) */
} ops_run_result;

void ops_run_result_clear(ops_run_result *r);

/* run: a warm-pool VM when one is free (Bluefile `warm:`), else a fresh VM, booted for this
 * command and gone after it. fd 0, 1 and 2 are the command's. */
int ops_run(sandbox *sb, const ops_command *c, ops_run_result *ret, bb_error **err);
/* exec: the command in the sandbox's up VM. */
int ops_exec(sandbox *sb, const ops_command *c, ops_run_result *ret, bb_error **err);

typedef struct ops_up_result {
    ops_why why;
    bool already;   /* it was up and answering: nothing booted */
    double seconds; /* until the agent answered */
    char *posture;  /* the posture line of the boot */
    char *vm_log;   /* on a failed boot: the end of the VM's log (untrusted text), or NULL */
} ops_up_result;

void ops_up_result_clear(ops_up_result *r);

/* up: boot the sandbox's long-lived VM (a stale state is cleaned first). */
int ops_up(sandbox *sb, const ops_events *ev, ops_up_result *ret, bb_error **err);
/* down: remove the up VM; *ret_was_up says whether there was one. */
int ops_down(const sandbox *sb, bool *ret_was_up, bb_error **err);

/* ---- /data: reset, snapshot, restore, export, import ----------------------------------
 * Each takes the sandbox's lock, so two bluebox processes never interleave on one /data. The
 * guards refuse (OPS_IS_UP, OPS_REFUSED) while an up VM, a run or a shell has /data, on a
 * fork (apply or discard it first) and, for reset and restore, on a parent with forks. */

#include "data/snapwrite.h"
#include "data/tally.h"

typedef struct ops_data_result {
    ops_why why;
    data_tally tally; /* what was skipped or lost on the way (tally.h) */
    char *path;       /* snapshot: the archive written */
} ops_data_result;

void ops_data_result_clear(ops_data_result *r);

/* The guards of `doing` (reset, restore, snapshot, export, import) that need no lock held
 * long: for a front door that asks before it acts, so that it never asks in vain. The
 * operation itself checks them again. */
int ops_data_precheck(sandbox *sb, const char *doing, ops_why *ret_why, bb_error **err);

int ops_reset(sandbox *sb, ops_data_result *ret, bb_error **err);

typedef struct ops_snapshot_opts {
    const char *label; /* checked (snapshot_label) */
    snap_compress compress;
    snap_progress progress; /* may be NULL; called with the bytes archived so far */
    void *ud;
} ops_snapshot_opts;

int ops_snapshot(sandbox *sb, const ops_snapshot_opts *o, ops_data_result *ret, bb_error **err);

typedef struct ops_restore_opts {
    const char *archive; /* snapshot_resolve's path */
} ops_restore_opts;

int ops_restore(sandbox *sb, const ops_restore_opts *o, ops_data_result *ret, bb_error **err);

typedef struct ops_transfer_opts {
    const char *dir; /* export: a new or empty directory; import: an existing one */
} ops_transfer_opts;

int ops_export(sandbox *sb, const ops_transfer_opts *o, ops_data_result *ret, bb_error **err);
int ops_import(sandbox *sb, const ops_transfer_opts *o, ops_data_result *ret, bb_error **err);

/* ---- forks: fork, diff, apply, discard ---------------------------------------------------
 * A fork is a sandbox whose /data is a copy-on-write layer over its parent's (data/fork.h).
 * diff, apply and discard take the fork; they refuse (OPS_REFUSED) a sandbox that is not a
 * fork, and apply and discard refuse while the fork or (apply) its parent is in use. */

typedef struct ops_fork_opts {
    const char *fork; /* the new sandbox's name */
} ops_fork_opts;

typedef struct ops_fork_result {
    ops_why why;
    char *changes;    /* diff: "A path", "M path", "D path" lines (fork_diff's) */
    uint64_t n;       /* how many changes were listed, applied or discarded */
    data_tally tally; /* what could not be listed or applied */
} ops_fork_result;

void ops_fork_result_clear(ops_fork_result *r);

/* fork: make opts->fork a fork of sb (OPS_BAD when that name is taken). A warning that does not
 * stop it goes to *ret_warning (may be NULL; the caller frees it). */
int ops_fork(sandbox *sb, const ops_fork_opts *o, ops_fork_result *ret, bb_error **ret_warning,
             bb_error **err);
int ops_diff(sandbox *fork, ops_fork_result *ret, bb_error **err);
/* The refusals apply and discard would give, before a question. */
int ops_fork_precheck(sandbox *fork, bool apply, ops_fork_result *ret, bb_error **err);
int ops_apply(sandbox *fork, ops_fork_result *ret, bb_error **err);
int ops_discard(sandbox *fork, ops_fork_result *ret, bb_error **err);
