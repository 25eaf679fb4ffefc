/* Unit tests for the error type: context is prefixed, and a failure whose error was never
 * filled in (a bug on some path) still yields a message and exit code, not a crash. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/err.h"

static void message_and_exit(void **s)
{
    (void)s;
    bb_error *e = NULL;
    assert_int_equal(bb_fail_usage(&e, "bad %s", "flag"), -1);
    bb_prefix(&e, "cmd");
    assert_string_equal(bb_error_message(e), "cmd: bad flag");
    assert_int_equal(bb_error_exit(e), 2);
    bb_error_free(e);
    e = NULL;
    bb_fail_errno(&e, ENOENT, "cannot open %s", "x");
    assert_string_equal(bb_error_message(e), "cannot open x: No such file or directory");
    assert_int_equal(bb_error_exit(e), 1);
    bb_error_free(e);
}

static void missing_error(void **s)
{
    (void)s;
    assert_string_equal(bb_error_message(NULL), "internal error: a failure with no message");
    assert_int_equal(bb_error_exit(NULL), 1);
    bb_error empty = {0};
    assert_string_equal(bb_error_message(&empty), "internal error: a failure with no message");
    assert_int_equal(bb_error_exit(&empty), 1);
    /* prefixing nothing stays nothing */
    bb_error *e = NULL;
    assert_int_equal(bb_prefix(&e, "ctx"), -1);
    assert_null(e);
}

/* What bb_error_warn_release(&e) writes to stderr. */
static char *warned(bb_error **e)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(f), STDERR_FILENO);
    bb_error_warn_release(e);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    static char buf[256];
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void warn_and_release(void **s)
{
    (void)s;
    bb_error *e = NULL;
    bb_fail_errno(&e, ENOENT, "cannot remove image %s", "x");
    assert_string_equal(warned(&e),
                        "bluebox: warning: cannot remove image x: No such file or directory\n");
    assert_null(e);
    /* escaped and on one line, as the CLI prints errors */
    bb_fail(&e, 0, "bad\nname\x1b[2J");
    assert_string_equal(warned(&e), "bluebox: warning: bad\\nname\\x1b[2J\n");
    assert_null(e);
    /* a failure whose error was never filled still says something */
    assert_string_equal(warned(&e),
                        "bluebox: warning: internal error: a failure with no message\n");
    bb_error_warn_release(NULL);
}

static void clear(void **s)
{
    (void)s;
    bb_error *e = NULL;
    bb_fail(&e, EIO, "first");
    bb_error_clear(&e);
    assert_null(e);
    bb_error_clear(&e); /* twice is fine */
    bb_error_clear(NULL);
    /* a later failure is reported on its own, not prefixed by the handled one */
    assert_int_equal(bb_fail(&e, EINVAL, "second"), -1);
    assert_string_equal(bb_error_message(e), "second");
    bb_error_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(message_and_exit),
        cmocka_unit_test(missing_error),
        cmocka_unit_test(warn_and_release),
        cmocka_unit_test(clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
