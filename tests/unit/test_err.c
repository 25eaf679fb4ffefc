/* Unit tests for the error type: context is prefixed, and a failure whose error was never
 * filled in (a bug on some path) still yields a message and exit code, not a crash. */
#include "unit.h"

#include <errno.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(message_and_exit),
        cmocka_unit_test(missing_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
