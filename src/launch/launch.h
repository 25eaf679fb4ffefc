/* A launch: one boot of a sandbox's guest, and the one podman argv builder (launch.c) that
 * writes the VMM's confinement once for every backend. What the confinement is made of (the
 * capabilities, the pids limit, the memory cap) is named here, so that the posture line is
 * computed from the same values as the argv. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "backends/backend.h"
#include "core/bluefile.h"
#include "util/err.h"
#include "util/strv.h"

/* The capabilities every VMM keeps (--cap-add after --cap-drop=all), launch_n_caps of them. */
extern const char *const launch_caps[];
extern const size_t launch_n_caps;
/* --pids-limit of every launch. */
#define LAUNCH_PIDS_LIMIT 512
/* The container's memory cap (--memory) for a guest of bf->ram_mib: the guest's RAM and room
 * for the VMM around it. */
int launch_memory_mib(const bluefile *bf);

/* The container of an up sandbox: bluebox-up-<name>-<home id> (see home_id). */
char *up_container_name(const sandbox *sb);
/* A fresh container name: bluebox-[<kind>-]<name>-<pid>-<4 hex>. pid + random: unique among
 * live launches, and a stale container left by a crash cannot collide with a later one. */
char *container_name(const char *kind, const char *name);
/* The host's TERM, which the command's environment gets on run, shell and exec (so that
 * full-screen programs in the guest draw for the terminal the user has), or NULL: the host
 * has none, it is no terminal name, or the Bluefile's env: sets TERM, which then wins. */
const char *launch_term(const bluefile *bf);
/* Whether a launch of this mode hands the guest its secrets (the workload's boots: run,
 * shell, up; not the isolation probe). */
bool launch_gets_secrets(const launch *l);
/* Whether the launch's VMM gets a lifeline (lifeline.h): run, shell and up (and the pool's
 * VMs) on the backends whose VMM is bluebox-vmm. Whoever spawns it places the lifeline's read
 * end at launch_lifeline_fd: after the secrets' memfd (EGRESS_SECRETS_FD) when there is one. */
bool launch_has_lifeline(const backend *b, const launch *l);
/* The whole `podman run` argv for a launch. */
int launch_podman_argv(const backend *b, const launch *l, strv *ret, bb_error **err);
/* The argv that starts a launch: the supervisor of a direct run where it can be (direct.h),
 * else launch_podman_argv's (launcher.c). */
int launch_argv(const backend *b, const launch *l, strv *ret, bb_error **err);
