/* Whether a VM of a sandbox still runs, by either launcher, outside the warm pool. */
#pragma once

#include "core/sandbox.h"
#include "util/err.h"

/* Fail when a container of this sandbox (this home's) is running: the VM of a run or shell
 * whose bluebox was killed still has /data. */
int image_refuse_running(const sandbox *sb, bb_error **err);
