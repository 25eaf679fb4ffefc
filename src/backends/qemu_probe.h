/* Whether KVM can run a standard guest kernel here: a short probe boot of the qemu
 * backend's kernel under KVM, its verdict cached in BLUEBOX_HOME per boot, kernel and QEMU.
 * A host whose /dev/kvm opens may still not run a guest (a nested paravirtual KVM such as
 * kvm-pvm hangs a standard kernel right after its first instructions): doctor says so, and a
 * qemu launch on KVM refuses at once from the cached verdict instead of hanging at boot. */
#pragma once

#include <stdbool.h>

#include "util/err.h"

/* How long the probe guest gets to boot to its end (a kernel panic for want of a root). Under
 * a working KVM it takes well under a second. */
#define KVM_PROBE_TIMEOUT_MS 8000

typedef enum {
    KVM_UNKNOWN, /* not probed (or no verdict cached) */
    KVM_RUNS,    /* the kernel booted to its end under KVM */
    KVM_CANNOT,  /* it hung, or QEMU stopped before it got there */
} kvm_verdict;

typedef struct {
    kvm_verdict verdict;
    bool cached;  /* taken from the cache, not probed now */
    long ms;      /* how long the probe boot took (0 when cached) */
    char *detail; /* what was seen, in the user's words */
} kvm_probe;

void kvm_probe_clear(kvm_probe *p);

/* The verdict cached for this boot, kernel, firmware and QEMU; KVM_UNKNOWN when none. */
void qemu_kvm_cached(const char *home_root, kvm_probe *ret);

/* The cached verdict, else a probe boot (at most KVM_PROBE_TIMEOUT_MS) whose verdict is then
 * cached. -1 with *err when the probe could not be made at all (no QEMU, no kernel). */
int qemu_kvm_probe(const char *home_root, kvm_probe *ret, bb_error **err);
