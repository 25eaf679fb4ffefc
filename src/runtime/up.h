/* Long-lived sandboxes: boot one with the agent as its main process (bluebox up), and take
 * it down again. The host talks to it through the agent (src/runtime/agent_client.h). */
#pragma once

#include <stdbool.h>

#include "boot.h"
#include "launch/lifeline.h"
#include "upstate.h"

/* Boot b's sandbox detached with the agent and wait (up to 30 s) until it answers a ping
 * whose kernel passes the gate. On success the state is saved and *ret filled. On failure
 * the VM and the state are removed, and *ret_log (when not NULL) holds the end of the VM's
 * log (guest output: the caller must not print it raw). */
int up_start(boot *b, up_state *ret, double *ret_seconds, char **ret_log, bb_error **err);
/* The boot under up_start, for any agent VM (the warm pool's too): start b's sandbox
 * detached with the agent in `container`, call `started` (may be NULL) once podman has
 * published the agent's port, and wait until the agent answers a ping whose kernel passes
 * the gate. On failure the VM is left for the caller to remove, and *ret_log (when not NULL)
 * holds the end of its log. On success *ret_life is the VM's lifeline (lifeline.h): the caller
 * releases it once a file names the VM, or closes it, which stops the VM. */
int up_boot(boot *b, const char *container, up_state *ret, lifeline *ret_life,
            int (*started)(const up_state *s, void *ctx, bb_error **err), void *ctx, char **ret_log,
            bb_error **err);
/* Remove the VM and the state. *ret_was_up (may be NULL) says whether there was a state.
 * `force`: also remove a container of that name when there is no state (a crash between
 * boot and the state being written). */
int up_down(const sandbox *sb, bool force, bool *ret_was_up, bb_error **err);
/* Whether the VM the state names is running and is this home's. */
bool up_alive(const sandbox *sb, const up_state *s);
