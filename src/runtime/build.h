/* Building a sandbox's image with podman. */
#pragma once

#include <stdbool.h>

#include "core/bluefile.h"
#include "core/containerfile.h"
#include "core/sandbox.h"
#include "util/err.h"
#include "util/strv.h"

typedef struct {
    const char *containerfile, *context, *iidfile;
    const char *tag; /* NULL: leave the image untagged */
    const char *log; /* where podman's whole output goes (for messages) */
    bool network;    /* the steps get podman's build network; else --network=none */
    bool limits;     /* podman can enforce cgroup limits here (limits_enforced) */
} build_spec;

/* podman build's argv. The build steps (package scripts, run:, runcmd) run in a podman
 * build container on the host's kernel, not in a VM, so they get what podman build can
 * take away: all but the capabilities a package manager needs, a process and memory limit,
 * a network only when asked. SECURITY.md, "Build time", says what is left. */
void build_argv(const bluefile *bf, const build_spec *s, strv *ret);

/* Write the Containerfile (rendered from sb->bf by the caller, once) into a fresh build
 * context beside the sandbox, run podman build
 * (progress streams to the terminal, escaped there, or with `quiet` only podman's step lines;
 * all of it goes to the build log, logs/build/<name>.log; an offline sandbox with packages
 * builds in two parts, only the package install with a network), and only when it succeeds move
 * the Containerfile, .blueprint/ and image-id into place. A failed build leaves the previous
 * image and Containerfile as they were. */
int image_build(const sandbox *sb, const containerfile *cf, bool quiet, bb_error **err);
