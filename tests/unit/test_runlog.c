/* Unit tests for reading the tail of a run log. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/runlog.h"

static char *tail_of(const char *content, size_t n)
{
    char path[] = "/tmp/bb-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    char *out = NULL;
    size_t len = 0;
    bb_error *err = NULL;
    assert_int_equal(runlog_tail(path, n, &out, &len, &err), 0);
    assert_int_equal(len, strlen(out));
    unlink(path);
    return out;
}

static void tails(void **s)
{
    (void)s;
    char *t = tail_of("a\nb\nc\n", 2);
    assert_string_equal(t, "b\nc\n");
    free(t);
    t = tail_of("a\nb\nc", 2);
    assert_string_equal(t, "b\nc");
    free(t);
    t = tail_of("a\nb\n", 10);
    assert_string_equal(t, "a\nb\n");
    free(t);
    t = tail_of("a\nb\n", 0);
    assert_string_equal(t, "");
    free(t);
}

static void large_log(void **s)
{
    (void)s;
    /* Lines straddling the 8 KiB read chunks. */
    size_t n = 5000;
    char *big = malloc(n * 12 + 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += (size_t)sprintf(big + off, "line %05zu\n", i);
    char *t = tail_of(big, 3);
    assert_string_equal(t, "line 04997\nline 04998\nline 04999\n");
    free(t);
    t = tail_of(big, 5000);
    assert_string_equal(t, big);
    free(t);
    free(big);
}

static void missing_log(void **s)
{
    (void)s;
    char *out = NULL;
    size_t len = 1;
    bb_error *err = NULL;
    assert_int_equal(runlog_tail("/nonexistent/x.log", 5, &out, &len, &err), 0);
    assert_int_equal(len, 0);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tails),
        cmocka_unit_test(large_log),
        cmocka_unit_test(missing_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
