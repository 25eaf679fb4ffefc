/* The lock of bluebox-vmm's processes (the VMM, its machine, the file server): drop
 * CAP_SYS_ADMIN, CAP_NET_ADMIN (up only) and CAP_SETPCAP (effective, permitted, inheritable
 * and bounding) and install the seccomp filter that refuses mount, namespace, module and
 * kexec syscalls, and any mode or owner change that would give a host file privilege
 * (setuid/setgid bits, other owners, xattrs). */
#pragma once

#include <stdbool.h>

/* `xattrs`: user xattrs may be written (the file server keeps the guest's ownership there);
 * `owners`: other owners and setuid/setgid modes too (a build step's file server, which
 * writes the step's layer). Idempotent. -1 with errno set and *what naming the step. */
int lockdown(const char **what, bool xattrs, bool owners);
