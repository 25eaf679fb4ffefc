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
    /* The wrapper script of bluebox's OCI runtime (buildvm.h): the steps run in a uml or qemu
     * guest.
     * NULL: on the host's kernel, in podman build's own container. */
    const char *runtime;
    bool kvm; /* the wrapper's VMM (qemu on KVM) needs /dev/kvm */
    /* A VM runtime of its own (krun's crun with libkrun): podman build --runtime it, the
     * step's process in its microVM. */
    const char *vm_runtime;
    const char *guest; /* the guest's name (the image's label) when a guest runs the steps */
} build_spec;

/* Where a build's steps execute, and the posture line that says so. */
typedef enum { BUILD_HOST_KERNEL, BUILD_GUEST } build_where;

/* Guest builds for backends that can (backend->build_guest), unless `host_kernel` (the
 * explicit fallback, build --host-kernel). */
build_where build_where_for(const sandbox *sb, bool host_kernel);
/* "build: steps run in …" for the CLI to print. */
char *build_posture(const sandbox *sb, build_where w);

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
int image_build(const sandbox *sb, const containerfile *cf, bool quiet, build_where where,
                bb_error **err);
