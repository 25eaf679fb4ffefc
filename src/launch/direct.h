/* The direct OCI launch path: a run or shell started with runc itself instead of
 * `podman run`, which costs podman's start-up and teardown on every boot (~0.3–0.5 s here).
 *
 * The confinement is podman's by construction: once per (podman argv, image id, runtime
 * fingerprint) bluebox asks podman to create and initialise the very container launch_argv
 * describes (`podman create` + `podman container init`), keeps the config.json podman
 * generated and removes the container. A run rewrites only what is its own: the rootfs (an
 * overlay of the image's layers with a throwaway upper layer, mounted in the supervisor's
 * private mount namespace), the command, TERM, the cgroup path, and the two small files
 * podman bind-mounts from its container directory. Everything else — capabilities, NNP, the
 * seccomp profile, namespaces, pids/memory limits, rlimits, masked paths, the other mounts
 * and the environment — is the bytes podman wrote.
 *
 * Per run: `bluebox __direct <id>` (the supervisor) mounts the rootfs, runs `runc run`, and
 * on every way out (exit, timeout, a signal, the death of the bluebox that started it)
 * kills the container and removes its runc state, cgroup, mount and scratch. The VMM holds a
 * lifeline (lifeline.h) to the bluebox that owns it; without a terminal runc runs in a
 * process group of its own, so that it outlives a kill -9 of the run's group long enough to
 * reap that VMM and delete the container. A supervisor killed outright (with its process
 * group) is cleaned up after by its janitor, a process of its own session, and
 * whatever is left then by direct_reap, which every command that asks what runs (ps, the
 * data commands, build, rename, destroy, the next launch) calls first. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "backends/backend.h"
#include "launch.h"
#include "util/err.h"
#include "util/strv.h"

/* Where runc keeps the state of direct containers: `runc --root DIRECT_RUNC_ROOT list`. */
#define DIRECT_RUNC_ROOT "/run/bluebox-direct/runc"
/* One directory per live direct run (config.json, rootfs, the supervisor's pid). */
#define DIRECT_RUNS_DIR "/run/bluebox-direct/runs"

/* Whether this launch goes the direct way (the default; BLUEBOX_LAUNCH=podman turns it
 * off): a uml or qemu run or shell, root, standard isolation, a network direct_net.h can give.
 * Anything else takes podman. */
bool direct_wanted(const backend *b, const launch *l);
/* Turn the podman argv launch_podman_argv built for `l` into the supervisor's argv (prepares
 * the template when needed and the run's bundle). `podman` is consumed. */
int direct_argv(const backend *b, const launch *l, strv *podman, strv *ret, bb_error **err);
/* Stop a direct container by name (the supervisor kills it and cleans up); false when no
 * direct run of that name exists. */
bool direct_stop(const char *container);
/* The container id of a live direct run of this home's sandbox `name`, or NULL. Runs whose
 * owner is gone (supervisor dead, or runc state without a run) are stopped first. */
char *direct_running(const sandbox *sb);
/* Fail with EBUSY naming the direct container that runs `name`'s VM (direct_running). */
int direct_refuse(const sandbox *sb, bb_error **err);
/* Each live direct run of this home (after direct_reap): its container id (runc's and
 * bluebox's name for it), sandbox and the container's init pid (0 while runc is starting
 * it). `bluebox ps`. */
typedef void (*direct_each_fn)(const char *container, const char *box, pid_t pid, void *ud);
void direct_each(const char *root, direct_each_fn fn, void *ud);
/* Remove every prepared template of this home's sandbox `name` (destroy, rename). */
void direct_forget(const sandbox *sb);
/* Kill and remove what direct runs whose supervisor is gone left behind. */
void direct_reap(void);
/* The supervisor role: bluebox __direct <id> <parent pid> stdin|no-stdin. */
int direct_main(int argc, char **argv);
