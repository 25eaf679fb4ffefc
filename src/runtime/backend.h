/* Backends: where a sandbox's guest kernel comes from. Every launch goes through one argv
 * builder (launch.c) so every VMM gets the same confinement; a backend adds only what is
 * its own (the runtime, the VMM entrypoint and bundle, sizing annotations). */
#pragma once

#include <stdbool.h>

#include "abi.h"
#include "core/bluefile.h"
#include "util/err.h"
#include "util/strv.h"

struct fingerprint;

typedef enum {
    LAUNCH_RUN = ABI_MODE_RUN,
    LAUNCH_SHELL = ABI_MODE_SHELL,
    LAUNCH_PROBE = ABI_MODE_PROBE,
    LAUNCH_AGENT = ABI_MODE_AGENT,
} launch_mode;

typedef struct {
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
} launch;

typedef struct backend {
    const char *name;
    bool guest_init; /* the guest's init is the static bluebox: mount it on every launch */
    /* network: none can stay offline while the agent's port is published (bluebox up). */
    bool agent_offline;
    /* Can attach /data as a disk image (Bluefile data_limit; src/runtime/datadisk.h). */
    bool data_disk;
    /* Can this host boot this backend? The message says what to do when not. */
    int (*preflight)(const launch *l, bb_error **err);
    /* Flags of this backend, appended before the image. */
    int (*launch_flags)(const launch *l, strv *argv, bb_error **err);
    /* What runs as the container's process: the image is followed by this + the command. */
    int (*entry)(const launch *l, strv *argv, bb_error **err);
    /* Mix in the stat data of this backend's runtime files (may be NULL). */
    void (*fingerprint)(const launch *l, struct fingerprint *fp);
} backend;

extern const backend backend_krun;
extern const backend backend_uml;

/* The part of every preflight that is not the backend's own: podman is installed. */
int preflight_podman(bb_error **err);
/* A backend by name (krun, uml), NULL when unknown. */
const backend *backend_named(const char *name);
/* The backend a Bluefile asks for, overridden by BLUEBOX_BACKEND. */
int backend_for(const bluefile *bf, const backend **ret, bb_error **err);
/* The host path of the static bluebox that guests run: $BLUEBOX_GUEST_BINARY (for builds
 * that are not static, e.g. under ASan) or this executable. */
char *guest_binary(bb_error **err);
/* The container of an up sandbox: bluebox-up-<name>-<home id> (see home_id). */
char *up_container_name(const char *root, const char *name);
/* A fresh container name: bluebox-[<kind>-]<name>-<pid>-<4 hex>. pid + random: unique among
 * live launches, and a stale container left by a crash cannot collide with a later one. */
char *container_name(const char *kind, const char *name);
/* The whole `podman run` argv for a launch. */
int launch_argv(const backend *b, const launch *l, strv *ret, bb_error **err);
