/* Build steps behind the uml or qemu guest kernel.
 *
 * `podman build --runtime <wrapper>` runs every RUN step through bluebox's OCI runtime: a
 * thin wrapper around runc (`bluebox __oci <conf> <runc args…>`) that, on `create`, rewrites
 * the step's config.json so its process is bluebox-vmm booting the uml kernel with the step's
 * root filesystem as the guest's root (written in place: ABI_ENV_BUILD; on qemu the same, with
 * the qemu bundle and QEMU in place of the uml kernel), and the step's own
 * command running in the guest under `bluebox __step <caps>`, which keeps only the build's
 * capabilities. podman keeps its layer cache and commit per step; the wrapper only moves where
 * the step's code executes. */
#pragma once

#include <stdbool.h>

#include "util/err.h"
#include "util/strv.h"

/* The line __step prints in the guest before the step's command: this, the guest's name
 * ("uml", "qemu"), " guest " and the kernel release. */
#define BUILDVM_STEP_LINE "bluebox: step in "

/* What bluebox build hands the wrapper, as a JSON file in the build context. */
typedef struct buildvm_conf {
    const char *runc;         /* the real OCI runtime */
    const char *guest;        /* "uml" or "qemu": whose VMM bundle this is */
    const char *vmm_bundle;   /* its VMM bundle (bind-mounted read-only at ABI_VMM_DIR) */
    const char *guest_binary; /* the static bluebox (ABI_GUEST_BINARY) */
    const char *step_caps;    /* hex capability mask the step keeps in the guest */
    int ram_mib;
    int pids; /* the step's pids limit; 0: none (podman could not enforce it here) */
    strv env; /* BLUEBOX_* settings for bluebox-vmm */
} buildvm_conf;

/* Write the conf to `path` and an executable wrapper script `script` that runs
 * `<self> __oci <path> "$@"`. */
int buildvm_write(const buildvm_conf *c, const char *self, const char *path, const char *script,
                  bb_error **err);

/* `bluebox __oci <conf> <runc args…>`: adjust the bundle on create, clean the step's root of
 * bluebox's mount points on delete, then exec the real runtime. Returns only on failure. */
int buildvm_oci(int argc, char **argv, bb_error **err);

/* What __oci does on create: rewrite <bundle>/config.json for the guest (and remember the
 * step's root for delete when runc will make /.bluebox in it). */
int buildvm_create(const char *conf_path, const char *bundle, const char *id, bb_error **err);

/* `bluebox __step <hex caps> [--guest=qemu] [--user=…] <command…>` in the guest: keep only those
 * capabilities (bounding, effective, permitted, inheritable) and exec the command. Returns only on
 * failure. */
int buildvm_step(int argc, char **argv, bb_error **err);

/* The capability mask (hex, for __step) of a comma-separated list of names without CAP_. */
char *buildvm_caps_mask(const char *names);
