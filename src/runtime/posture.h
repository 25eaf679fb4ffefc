/* The one-line posture `build`, `verify` and `shell` print: what the boundary of this sandbox
 * is, in the user's words, including what this host cannot enforce. */
#pragma once

#include "backends/backend.h"

/* e.g. "isolation: uml guest kernel 6.1.176 (ptrace boundary, weaker than KVM) · network none
 * · /data rw · mounts: none · caps 6 · pids 512 · memory 512m · standard". `guest_release` may
 * be NULL when no check ran. */
char *posture_line(const backend *b, const bluefile *bf, const char *guest_release);
/* The network in the user's words: "none", "bridge (<b->bridge_reach>)", or with `allow:`
 * "allow N hosts" and ", K secrets" when it names any. */
char *posture_network(const backend *b, const bluefile *bf);
/* Whether podman can enforce pids and memory limits for this user on this host. */
bool limits_enforced(void);
