/* Running another program and waiting for it.
 *
 * Errors: the spawn_* functions take `bb_error **err` and return -1 when the program could
 * not be started or waited for (its own exit code is a result, not an error). Two helpers
 * report no error by design: read_or_close (a pipe being drained is done at EOF or on an
 * error alike) and program_find (NULL means "not on PATH"). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "err.h"

/* Run argv (PATH lookup) with our stdio and wait. Returns its exit code, 128+signal when it
 * was killed, or -1 with *err set when it could not start. */
int spawn_wait(char *const argv[], bb_error **err);
/* Like spawn_wait with stdout and stderr sent to /dev/null. */
int spawn_quiet(char *const argv[], bb_error **err);
/* What spawn_wait_tee does with a program's stdout and stderr besides showing them. */
typedef struct {
    int log_fd; /* every byte of both, unescaped and unfiltered; -1: none */
    /* Show only the lines (with their newline) for which this is true; NULL: show all. */
    bool (*show_line)(const char *line, size_t len);
} spawn_tee;
/* Like spawn_wait, but what the program writes to stdout and stderr passes through
 * tty_escape (lines kept) on its way to ours when ours is a terminal, and unchanged when it
 * is not: for programs whose output quotes untrusted text (podman build echoes the
 * Bluefile's steps and prints what they print). All output is also copied to t->log_fd, and
 * only the lines t->show_line accepts are shown (escaped on a terminal, as they are on a
 * pipe). t may be NULL. */
int spawn_wait_tee(char *const argv[], const spawn_tee *t, bb_error **err);
/* Run argv and collect its stdout and stderr (each kept to at most 1 MiB; the rest is read
 * and dropped). stdin is /dev/null. Returns the exit code as spawn_wait does. */
int spawn_capture(char *const argv[], char **ret_out, char **ret_err, bb_error **err);
/* spawn_capture, with fds3[i] as the program's fd 3 + i. A source must not be a target it
 * comes before (keep sources above 2 + n_fds). */
int spawn_capture_fds(char *const argv[], const int *fds3, size_t n_fds, char **ret_out,
                      char **ret_err, bb_error **err);
/* One read() from a pipe being drained: >0 bytes read; 0 nothing now (EINTR, EAGAIN);
 * -1 at EOF or on an error, after closing *fd and setting it to -1. */
ssize_t read_or_close(int *fd, void *buf, size_t size);
/* The absolute path of a program found on PATH (not resolving symlinks), or NULL. */
char *program_find(const char *name);
/* Whether a program is found on PATH. */
bool program_on_path(const char *name);
