/* What a kernel says about itself: release and boot_id. `bluebox __probe` prints both;
 * the isolation check runs it inside the sandbox (bind-mounted, never the image's own
 * uname) and inside a plain container, and compares. */
#pragma once

#include "util/err.h"

typedef struct {
    char release[65];
    char boot_id[40];
} kernel_id;

/* This kernel's identity. */
int kernel_id_self(kernel_id *ret, bb_error **err);
/* Parse probe output (two lines). Refuses anything that is not exactly that. */
int kernel_id_parse(const char *out, kernel_id *ret, bb_error **err);
