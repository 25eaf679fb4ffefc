/* The error type: construction and context. */
#define BB_ERR_IMPL /* the definitions below, not err.h's analyzer macros */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tty.h"
#include "xalloc.h"

static int set(bb_error **err, int status, int exitcode, char *msg)
{
    if (!err) {
        free(msg);
        return -1;
    }
    bb_error_free(*err);
    bb_error *e = xmalloc(sizeof *e);
    e->status = status;
    e->exit = exitcode;
    e->msg = msg;
    *err = e;
    return -1;
}

int bb_fail(bb_error **err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    return set(err, status, 1, msg);
}

int bb_fail_errno(bb_error **err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    return set(err, status, 1, xasprintf("%s: %s", msg, strerror(status)));
}

int bb_fail_usage(bb_error **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    return set(err, 0, 2, msg);
}

int bb_prefix(bb_error **err, const char *fmt, ...)
{
    if (!err || !*err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *ctx = xvasprintf(fmt, ap);
    va_end(ap);
    char *msg = xasprintf("%s: %s", ctx, (*err)->msg);
    free((*err)->msg);
    (*err)->msg = msg;
    return -1;
}

const char *bb_error_message(const bb_error *e)
{
    return e && e->msg && *e->msg ? e->msg : BB_ERROR_NO_MESSAGE;
}

int bb_error_exit(const bb_error *e)
{
    return e && e->exit ? e->exit : 1;
}

void bb_error_warn_release(bb_error **err)
{
    if (!err)
        return;
    /* The same shape as the CLI's error line (cli_print_error): escaped, one line. */
    const char *msg = bb_error_message(*err);
    _cleanup_sb_ strbuf b = {0};
    tty_escape(&b, msg, strlen(msg), 0);
    fprintf(stderr, "bluebox: warning: %s\n", b.s ? b.s : "");
    bb_error_clear(err);
}

void bb_error_free(bb_error *e)
{
    if (!e)
        return;
    free(e->msg);
    free(e);
}

void bb_error_clear(bb_error **err)
{
    if (!err)
        return;
    bb_error_free(*err);
    *err = NULL;
}
