/* The /data disk (Bluefile data_limit) on the VMM's side: attach it, and cap it. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "abi/abi.h"
#include "util/strv.h"

typedef struct {
    const char *path;         /* NULL: no data disk */
    unsigned long long bytes; /* the image's size: the cap */
} disk_limit;

/* Read ABI_ENV_DATA_DISK (set by the launch, launch.c, to the image's path in the
 * container) and the image's size. Returns false with *why set when the image is not a
 * regular, non-empty file. Ignores SIGXFSZ from here on (inherited by the kernel), so a
 * capped write fails with EFBIG instead of killing the VM. */
bool disk_limit_init(disk_limit *d, const char **why);
/* The kernel's argument that attaches the image as ubd0 (/dev/ubda), data only: UML must
 * never read a COW header the guest wrote as a path to a backing file. */
void disk_limit_kernel_args(const disk_limit *d, strv *a);
/* Cap at the image's size (RLIMIT_FSIZE, soft and hard: raising it needs
 * CAP_SYS_RESOURCE, which no VMM has) the kernel process `uml` and then every other
 * process in the container but us: UML's I/O helpers and the host processes of guest
 * address spaces were forked before the cap, everything forked later inherits it. Done
 * when the guest reports ready: UML's memory file is written at its full size at start,
 * so the cap cannot be set before exec. Returns -1 with errno. */
int disk_limit_apply(const disk_limit *d, pid_t uml);
