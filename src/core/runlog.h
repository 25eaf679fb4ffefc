/* The run history, logs/<name>.log. */
#pragma once

#include <stddef.h>

#include "util/err.h"

/* The last `lines` lines of the log (reading from the end, so a large log costs only what
 * is shown). A missing log gives an empty result. */
int runlog_tail(const char *path, size_t lines, char **ret, size_t *ret_len, bb_error **err);
