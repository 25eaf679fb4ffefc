/* The one error type: fallible functions return a negative value (or NULL) and fill a
 * bb_error; callers may add context on the way up; the CLI prints it once. */
#pragma once

#include "macro.h"

typedef struct bb_error {
    int status; /* errno-like cause, 0 when there is none */
    int exit;   /* exit code the CLI should use: 1 (error) or 2 (usage) */
    char *msg;
} bb_error;

/* Set *err (when err is not NULL) and return -1. `status` is an errno value or 0. */
int bb_fail(bb_error **err, int status, const char *fmt, ...) _printf_(3, 4);
/* Like bb_fail with ": strerror(status)" appended. */
int bb_fail_errno(bb_error **err, int status, const char *fmt, ...) _printf_(3, 4);
/* A usage error: exit code 2. */
int bb_fail_usage(bb_error **err, const char *fmt, ...) _printf_(2, 3);
/* Prefix an existing error's message with context ("context: message"). Returns -1. */
int bb_prefix(bb_error **err, const char *fmt, ...) _printf_(2, 3);
#if defined(__clang_analyzer__) && !defined(BB_ERR_IMPL)
/* clang-analyzer reads one file at a time: tell it what err.c does, return -1. */
#define bb_fail(...)       (bb_fail(__VA_ARGS__), -1)
#define bb_fail_errno(...) (bb_fail_errno(__VA_ARGS__), -1)
#define bb_fail_usage(...) (bb_fail_usage(__VA_ARGS__), -1)
#define bb_prefix(...)     (bb_prefix(__VA_ARGS__), -1)
#endif

/* What to tell the user about a failure, and the exit code for it. A caller that returned
 * failure without filling the error (a bug) still gets a message and exit code 1, never a
 * crash. */
#define BB_ERROR_NO_MESSAGE "internal error: a failure with no message"
const char *bb_error_message(const bb_error *e);
int bb_error_exit(const bb_error *e);

/* Warn and go on, for a failure that does not stop the command: print the error to stderr
 * as "bluebox: warning: <message>" (escaped like every error, on one line), free it and set
 * *err to NULL. As crun's crun_error_write_warning_and_release. */
void bb_error_warn_release(bb_error **err);

void bb_error_free(bb_error *e);
/* Drop an error the caller has handled: free *err (err may be NULL) and set it to NULL. */
void bb_error_clear(bb_error **err);
static inline void bb_error_freep(bb_error **e)
{
    bb_error_free(*e);
}
#define _cleanup_error_ _cleanup_(bb_error_freep)
