/* The qemu backend's VMM bundle: `<home>/vmm/qemu-<hash>/`, built by the same code as uml's
 * (uml_bundle.c) and bind-mounted read-only at ABI_VMM_DIR the same way. It holds
 * qemu-system-x86_64 with its PT_INTERP rewritten to ABI_VMM_LOADER, the host's loader as
 * ld.so, the libraries QEMU and bluebox-vmm need, bluebox-vmm, QEMU's microvm firmware,
 * the guest kernel (ABI_QEMU_KERNEL) and the guest's initramfs (ABI_QEMU_INITRD: the static
 * bluebox as /init and the kernel's modules the guest loads, abi/abi.h). Its name is a hash of
 * every input's stat data, the static bluebox and the kernel's modules included, so a new
 * kernel or a new bluebox makes a new bundle (and initramfs) on the next launch. */
#pragma once

#include <stdint.h>

#include "util/err.h"

/* $BLUEBOX_QEMU or /usr/bin/qemu-system-x86_64. */
const char *qemu_binary_path(void);
/* $BLUEBOX_QEMU_BIOS or /usr/share/qemu/bios-microvm.bin. */
const char *qemu_bios_path(void);
/* The guest kernel and its modules directory: $BLUEBOX_QEMU_KERNEL and $BLUEBOX_QEMU_MODULES
 * (both), else the newest /boot/vmlinuz-*-cloud-amd64 (Debian's cloud kernel) and
 * /lib/modules/<its release>. */
int qemu_kernel_find(char **ret_kernel, char **ret_modules, bb_error **err);

/* Make (or find) the bundle for the current inputs and return its path. This process then
 * holds it in use until it exits (so does bluebox-vmm in each container that mounts it); a
 * newly made bundle replaces the old ones nothing holds (they are about 120 MB each). */
int qemu_bundle_ensure(const char *home_root, const char *vmm_path, const char *guest_bin,
                       char **ret_dir, bb_error **err);
/* The hash that names the bundle (for the isolation check's runtime fingerprint). */
int qemu_bundle_fingerprint(const char *vmm_path, const char *guest_bin, uint64_t *ret,
                            bb_error **err);
/* How many qemu bundles `<home_root>/vmm/` holds and their size on disk. */
void qemu_bundle_usage(const char *home_root, int *ret_n, long long *ret_bytes);
