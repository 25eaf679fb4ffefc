/* The run history, logs/<name>.log: per run a header with the command line, the run's
 * output clipped to its first and last RUNLOG_KEEP_BYTES, and the exit line. A log that has
 * passed RUNLOG_ROTATE_BYTES when a run starts becomes <log>.1 (and .1 becomes .2), so a
 * sandbox's logs never take more than about 3 x (RUNLOG_ROTATE_BYTES + one run), whatever
 * a guest prints.
 *
 * The host's records and the guest's bytes cannot be confused: a record is a line
 * that starts with RUNLOG_RECORD_PREFIX and is written only here (the header, whose argv is
 * quoted onto one line whatever it holds, the clip marker and the exit line); every line of
 * output starts with RUNLOG_OUTPUT_PREFIX, so what a guest prints ("=== exit 0" included)
 * is never at the start of a line. Logs written before this carry output unprefixed: they
 * read as they did (docs/commands.md, "The run log"). */
#pragma once

#include <stddef.h>

#include "util/err.h"

#define RUNLOG_KEEP_BYTES    (64 * 1024)   /* of each run's output, at its start and at its end */
#define RUNLOG_ROTATE_BYTES  (1024 * 1024) /* a log this large is rotated before the next run */
#define RUNLOG_GENERATIONS   2             /* rotated logs kept: <log>.1 and <log>.2 */
#define RUNLOG_ARGV_BYTES    (64 * 1024)   /* of the command line, in the header */
#define RUNLOG_RECORD_PREFIX "=== "        /* a line of the host's: header, clip marker, exit */
#define RUNLOG_OUTPUT_PREFIX "| "          /* every line of the run's output */

typedef struct runlog runlog;

/* The last `lines` lines of the log, continued from <log>.1 when the log has fewer
 * (reading from the end, so a large log costs only what is shown). A missing log gives an
 * empty result. */
int runlog_tail(const char *path, size_t lines, char **ret, size_t *ret_len, bb_error **err);
/* Rotate the log when it has grown past RUNLOG_ROTATE_BYTES, open it for appending (0600,
 * logs/ made when missing) and write the header
 * "\n=== <UTC RFC 3339> <what>: <argv, shell-quoted>" (an argument with a control character
 * as $'…', so the header is one line). NULL on an error. */
runlog *runlog_begin(const char *path, const char *what, char *const *argv, bb_error **err);
/* Output of the run: the first RUNLOG_KEEP_BYTES go to the log as they come, the last
 * RUNLOG_KEEP_BYTES are held until runlog_end. Never fails (a full disk must not stop the
 * workload). NULL does nothing. */
void runlog_write(runlog *l, const void *buf, size_t len);
/* Write "=== [… <n> bytes clipped …]" when output was dropped, the held end of the output
 * and "=== exit <code> (<s.ss>s)" on a line of its own, then close and free. NULL does
 * nothing. */
void runlog_end(runlog *l, int code, double seconds);
/* "<log>.<n>": rotated generation n (1..RUNLOG_GENERATIONS), for rename and remove. */
char *runlog_generation(const char *path, int n);
