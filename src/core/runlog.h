/* The run history, logs/<name>.log. */
#pragma once

#include <stddef.h>

#include "util/err.h"

/* The last `lines` lines of the log (reading from the end, so a large log costs only what
 * is shown). A missing log gives an empty result. */
int runlog_tail(const char *path, size_t lines, char **ret, size_t *ret_len, bb_error **err);
/* Open the log for appending (0600, logs/ made when missing) and write the header
 * "\n=== <UTC RFC 3339> <what>: <argv, shell-quoted>". Returns the fd or -1. */
int runlog_begin(const char *path, const char *what, char *const *argv, bb_error **err);
/* Write "=== exit <code> (<s.ss>s)" and close the fd. */
void runlog_end(int fd, int code, double seconds);
