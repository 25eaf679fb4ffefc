/* The UML kernel's own view of the container. The guest reaches host files through hostfs,
 * which opens whatever path the guest names — so UML must not be able to name the
 * container's /proc (its own memory, the VMM's environment), /sys or /dev. The container
 * starts with CAP_SYS_ADMIN and CAP_SETPCAP for this alone; both are gone, and the syscalls
 * that would need them are refused by a second seccomp filter, before UML runs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/strv.h"

/* The container's mounts as /proc/self/mountinfo lists them, in mount order, with the
 * MS_* flags a bind must carry over. */
typedef struct jail_mounts {
    strv points;
    unsigned long *flags;
    size_t n;
} jail_mounts;

int jail_mounts_read(jail_mounts *ret);
void jail_mounts_clear(jail_mounts *m);
static inline void jail_mounts_clearp(jail_mounts *m)
{
    jail_mounts_clear(m);
}

/* A mount the guest gets as a hostfs mount of its own (and that UML may write when the
 * container may): a directory or file other than the root, /proc, /sys, /dev, bluebox's
 * own /.bluebox and podman's own /etc files. In practice /data and the Bluefile's mounts.
 * Every other part of the container, the root first, is bound read-only for UML. */
bool jail_guest_mount(const char *mp);

/* In the child that becomes UML: a private mount namespace holding the container's root
 * and every mount on it except /proc, /sys, /dev and the mounts in `served` (those the file
 * server gives the guest: UML never touches them), each with its own flags, so read-only
 * stays read-only; read-only too unless jail_guest_mount() or the exec tmpfs), pivoted
 * into; then jail_lock(). Returns -1 with errno set and *what
 * naming the step that failed. With `kvm` (a qemu VMM on KVM) /dev/kvm is bound too. */
int jail_enter(const char **what, const strv *served, bool kvm);
/* In the VMM after the machine started: lockdown() (util/lockdown.h) with nothing more let
 * through, so that the VMM ends with exactly the launch's six capabilities. Idempotent. */
int jail_lock(const char **what);
