/* Backends: where a sandbox's guest kernel comes from. Every launch goes through one argv
 * builder (launch.c) so every VMM gets the same confinement; a backend adds only what is
 * its own (the runtime, the VMM entrypoint and bundle, sizing annotations). */
#pragma once

#include <stdbool.h>

#include "core/bluefile.h"
#include "util/err.h"
#include "util/strv.h"

typedef enum { LAUNCH_RUN, LAUNCH_SHELL, LAUNCH_PROBE, LAUNCH_AGENT } launch_mode;

typedef struct {
    const char *root; /* BLUEBOX_HOME */
    const char *name; /* sandbox */
    const bluefile *bf;
    const char *container; /* unique container name */
    launch_mode mode;
    bool interactive;  /* -i */
    bool tty;          /* -t */
    const char *image; /* NULL: localhost/bluebox/<name>:latest */
    char *const *cmd;  /* command in the guest, NULL-terminated */
    const char *self;  /* absolute path of the static bluebox binary (probe, agent) */
} launch;

typedef struct backend {
    const char *name;
    /* Can this host boot this backend? The message says what to do when not. */
    int (*preflight)(const launch *l, bb_error **err);
    /* Flags of this backend, appended before the image. */
    int (*launch_flags)(const launch *l, strv *argv, bb_error **err);
    /* What runs as the container's process: the image is followed by this + the command. */
    int (*entry)(const launch *l, strv *argv, bb_error **err);
} backend;

extern const backend backend_krun;

/* The backend a Bluefile asks for, overridden by BLUEBOX_BACKEND. */
int backend_for(const bluefile *bf, const backend **ret, bb_error **err);
/* The whole `podman run` argv for a launch. */
int launch_argv(const backend *b, const launch *l, strv *ret, bb_error **err);
