/* A launch: one boot of a sandbox's guest, and the one podman argv builder (launch.c) that
 * writes the VMM's confinement once for every backend. What the confinement is made of (the
 * capabilities, the pids limit, the memory cap) is named here, so that the posture line is
 * computed from the same values as the argv. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "abi.h"
#include "backend.h"
#include "core/bluefile.h"
#include "util/err.h"
#include "util/strv.h"

struct egress;

typedef enum {
    LAUNCH_RUN = ABI_MODE_RUN,
    LAUNCH_SHELL = ABI_MODE_SHELL,
    LAUNCH_PROBE = ABI_MODE_PROBE,
    LAUNCH_AGENT = ABI_MODE_AGENT,
} launch_mode;

struct launch {
    const char *root; /* BLUEBOX_HOME */
    const char *name; /* sandbox */
    const bluefile *bf;
    const char *container; /* unique container name */
    launch_mode mode;
    bool interactive;  /* -i */
    bool tty;          /* -t */
    const char *image; /* NULL: the sandbox's own, image_ref() */
    char *const *cmd;  /* command in the guest, NULL-terminated */
    const char *self;  /* host path of the static bluebox for the guest (probe, agent, init) */
    bool guest_root;   /* the command runs as the guest's root whatever the image's USER */

    /* A fork: the parent's /data (the fork's own holds the overlay's layers); else NULL. */
    const char *fork_lower;
    /* allow:'s log and secrets for this boot (runtime/egress.h); NULL: none prepared. A
     * launch whose spawn places egress->secrets_fd at EGRESS_SECRETS_FD (session.h, up.c). */
    const struct egress *egress;
};

/* The capabilities every VMM keeps (--cap-add after --cap-drop=all), launch_n_caps of them. */
extern const char *const launch_caps[];
extern const size_t launch_n_caps;
/* --pids-limit of every launch. */
#define LAUNCH_PIDS_LIMIT 512
/* The container's memory cap (--memory) for a guest of bf->ram_mib: the guest's RAM and room
 * for the VMM around it. */
int launch_memory_mib(const bluefile *bf);

/* The host path of the static bluebox that guests run: $BLUEBOX_GUEST_BINARY (for builds
 * that are not static, e.g. under ASan) or this executable. */
char *guest_binary(bb_error **err);
/* The container of an up sandbox: bluebox-up-<name>-<home id> (see home_id). */
char *up_container_name(const char *root, const char *name);
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
/* The user of a bluebox-vmm launch (uml, qemu): the container's root, the image's USER
 * handed to the guest init (see launch.c). */
int launch_vmm_user_flags(const launch *l, strv *argv, bb_error **err);
/* The whole `podman run` argv for a launch. */
int launch_argv(const backend *b, const launch *l, strv *ret, bb_error **err);
