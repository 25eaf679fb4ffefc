/* The warm pool (Bluefile `warm: N`): VMs booted ahead of time with the agent as their main
 * process, as bluebox up boots one (runtime/up.h), each serving exactly one run and then
 * thrown away, so nothing carries from one run to the next.
 *
 * There is no daemon. The pool is files in pool/<name>/ (0700: they hold agent tokens), one
 * per VM, whose suffix is its state; every change of state is a rename, so two processes
 * never both win the same VM:
 *   <id>.booting-<pid>  a tender is booting it
 *   <id>.waiting        ready: {container, addr, token, kernel, started, fp}
 *   <id>.claimed-<pid>  serving the run of that process
 *   <id>.stale          to be removed
 * A tender (`bluebox __tend <name>`, started detached by a run) takes .lock, sweeps what
 * crashes left (a claimer or tender killed, a reboot that took the VMs) and boots VMs up to
 * `warm`. Each entry carries the pool fingerprint (Bluefile bytes, built image, the bluebox
 * the guest runs, and the pool's generation, which every drain bumps): a run takes only an
 * entry whose fingerprint is the sandbox's now, so an edited or rebuilt sandbox is never
 * served by an old VM. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/sandbox.h"
#include "upstate.h"
#include "util/err.h"

typedef struct pool_entry {
    char *id;
    char *state; /* "booting", "waiting", "claimed", "stale" */
    pid_t pid;   /* booting and claimed: the process */
    long long age_seconds;
} pool_entry;

typedef struct pool_list_result {
    pool_entry *v;
    size_t n;
} pool_list_result;

/* A VM taken for one run. */
typedef struct pool_claim {
    char *dir;
    char *id;
    up_state vm;
} pool_claim;

/* pool/<name> */
char *pool_dir(const sandbox *sb);
/* The container of a pool VM: bluebox-pool-<name>-<home id>-<id>. */
char *pool_container_name(const sandbox *sb, const char *id);
/* The sandbox's pool fingerprint now (16 hex digits). */
char *pool_fingerprint(sandbox *sb, bb_error **err);

/* Take a waiting VM whose fingerprint is `fp`: 1 with *ret filled, 0 when none is free (the
 * caller boots cold). Entries of another fingerprint are marked stale on the way. */
int pool_claim_vm(const sandbox *sb, const char *fp, pool_claim *ret, bb_error **err);
/* After the run (or when the VM did not answer): mark it stale, so that the next tender
 * removes it, and free *c. */
void pool_release(pool_claim *c);

/* Start a tender for the sandbox, detached (setsid, stdio on /dev/null), and return at once.
 * Best effort: a tender that cannot start only leaves the pool as it is. */
void pool_kick(const sandbox *sb);
/* The tender's work (bluebox __tend): sweep, then boot VMs up to warm, each with the
 * Bluefile's warmup lines run in it (errors go to the sandbox's log). */
int pool_tend(sandbox *sb, bb_error **err);

/* The entries, oldest first. */
int pool_list(const sandbox *sb, pool_list_result *ret, bb_error **err);
void pool_list_free(pool_list_result *l);
/* How many VMs are waiting, and how many exist in any state. */
void pool_count(const sandbox *sb, int *ret_waiting, int *ret_total);

/* Remove every VM of the pool that no run holds (waiting, booting, stale, and claimed by a
 * process that is gone) and bump the generation, so that a VM a tender is booting now is
 * never served. The caller holds the sandbox's lock: build, reset, restore, apply, discard.
 * Never waits for a tender. 1 when there was a pool, 0 when there was none. */
int pool_drain(const sandbox *sb, bb_error **err);
/* pool_drain, then the directory itself: destroy, rename. 0 or -1. */
int pool_remove(const sandbox *sb, bb_error **err);
/* Whether a container name is a pool VM's (image_refuse_running leaves those to the drain). */
bool pool_container(const char *container);
