/* The uml backend's VMM bundle: `<home>/vmm/uml-<hash>/` holding
 * linux.uml with its PT_INTERP rewritten to ABI_VMM_LOADER, the host's loader as ld.so,
 * the shared libraries linux.uml and bluebox-vmm need (under their DT_NEEDED names),
 * bluebox-vmm, xstate.so (preloaded into linux.uml, see src/vmm/xstate.c) and the kernel's
 * overlay.ko (for the guest's RAM layer). Bind-mounted read-only at ABI_VMM_DIR. Inside
 * the container:
 *   - bluebox-vmm finds its libraries through its own rpath; it must be linked with
 *     -Wl,--dynamic-linker=/.bluebox/vmm/ld.so -Wl,-rpath,/.bluebox/vmm (and
 *     -Wl,--disable-new-dtags, so the rpath also covers its libraries' own dependencies);
 *   - linux.uml has no rpath: exec it with LD_LIBRARY_PATH=/.bluebox/vmm, or the loader
 *     falls back to the image's ld.so.cache and may pick the image's libc. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "abi/abi.h"
#include "util/err.h"

/* sizeof(struct _xstate), where Debian 12's UML 6.1 saves a guest thread's FPU state. */
#define UML_XSTATE_BYTES 832u

/* Make (or find) the bundle for the current inputs under `<home_root>/vmm/` and return its
 * path. Cheap when it exists already: stats and ELF headers only. */
int uml_bundle_ensure(const char *home_root, const char *vmm_path, char **ret_dir, bb_error **err);

/* The hash that names the bundle: stat data and paths of every input plus a format version.
 * Also what the isolation check's runtime fingerprint takes for the bundle. */
int uml_bundle_fingerprint(const char *vmm_path, uint64_t *ret, bb_error **err);

/* Remove bundles under `<home_root>/vmm/` other than `keep_dir` (NULL: keep none), and
 * builders' temporary directories older than an hour. uml_bundle_ensure never removes old
 * bundles itself: a sandbox starting right now may be about to mount one. */
int uml_bundle_prune(const char *home_root, const char *keep_dir, bb_error **err);

/* Where bluebox-vmm is: $BLUEBOX_VMM, else <dir of self>/bluebox-vmm, else
 * <dir of self>/../libexec/bluebox/bluebox-vmm. NULL when none of them exists. */
char *uml_vmm_locate(const char *self);

/* $BLUEBOX_UML_KERNEL or /usr/bin/linux.uml. */
const char *uml_kernel_path(void);
