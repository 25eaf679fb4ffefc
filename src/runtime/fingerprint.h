/* The runtime fingerprint: stat data of everything that decides whether a launch boots a
 * real guest kernel (podman, its configuration, the backend's runtime and VMM files, the
 * probe binary). No subprocess, so the cached isolation check costs microseconds. When it
 * changes, the full check runs again before anything boots. */
#pragma once

#include <stdint.h>

typedef struct fingerprint {
    uint64_t h;
} fingerprint;

void fp_init(fingerprint *f);
void fp_str(fingerprint *f, const char *s);
/* Mix in a path and what is there: lstat data, the link target when it is a symlink and
 * stat data of what it resolves to; "missing" when there is nothing. */
void fp_file(fingerprint *f, const char *path);
/* 16 lowercase hex digits. */
char *fp_hex(const fingerprint *f);
