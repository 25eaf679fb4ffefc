/* Where the bluebox that guests run lives on the host. */
#pragma once

#include "util/err.h"

/* The host path of the static bluebox that guests run: $BLUEBOX_GUEST_BINARY (for builds
 * that are not static, e.g. under ASan) or this executable. */
char *guest_binary(bb_error **err);
