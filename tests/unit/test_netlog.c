/* Unit tests for `logs --net`'s table: the fields, lenient names, and hostile lines. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/netlog.h"

static char *render(const char *text, size_t max, size_t *bad)
{
    return netlog_render(text, strlen(text), max, bad);
}

static void table(void **s)
{
    (void)s;
    size_t bad = 9;
    char *t = render("{\"time\":\"2026-11-30T23:59:01Z\",\"sandbox\":\"box\",\"name\":"
                     "\"api.example.com\",\"port\":443,\"decision\":\"allow\",\"rule\":"
                     "\"api.example.com\",\"bytes_up\":512,\"bytes_down\":2048,\"ms\":34}\n"
                     "{\"time\":1764547200,\"name\":\"evil.example.net\",\"port\":80,"
                     "\"decision\":\"deny\",\"reason\":\"not in allow\",\"bytes_up\":0,"
                     "\"bytes_down\":0,\"ms\":0}\n",
                     200, &bad);
    assert_int_equal(bad, 0);
    assert_contains(t, "TIME");
    assert_contains(t, "DESTINATION");
    assert_contains(t, "DECISION");
    assert_contains(t, "RULE");
    assert_contains(t, "BYTES UP/DOWN");
    assert_contains(t, "TIME                  DESTINATION          DECISION  RULE             "
                       "BYTES UP/DOWN  MS\n");
    assert_contains(t, "2026-11-30T23:59:01Z  api.example.com:443  allow     api.example.com  "
                       "512/2048       34\n");
    assert_contains(t, "2025-12-01T00:00:00Z  evil.example.net:80  deny      not in allow     "
                       "0/0            0\n");
    free(t);
}

/* A rule and a reason both: the reason follows the rule after a space, in parentheses. */
static void rule_and_reason(void **s)
{
    (void)s;
    size_t bad;
    char *t = render("{\"name\":\"api.example.com\",\"port\":443,\"decision\":\"allow\","
                     "\"rule\":\"api.example.com\",\"reason\":\"attempted leak\"}\n",
                     200, &bad);
    assert_contains(t, "  api.example.com (attempted leak)  ");
    free(t);
}

static void last_lines_only(void **s)
{
    (void)s;
    size_t bad;
    char *t = render("{\"name\":\"a.example\",\"port\":1}\n{\"name\":\"b.example\",\"port\":2}\n"
                     "{\"name\":\"c.example\",\"port\":3}\n",
                     2, &bad);
    assert_null(strstr(t, "a.example"));
    assert_contains(t, "b.example:2");
    assert_contains(t, "c.example:3");
    free(t);
}

/* The log is guest-influenced: malformed lines are counted and skipped, control bytes and
 * terminal escapes never reach the output, and long fields are cut. */
static void hostile(void **s)
{
    (void)s;
    size_t bad = 0;
    char long_name[600];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    char *in = NULL;
    assert_true(asprintf(&in,
                         "not json\n{\"name\":\"a\\u001b]0;pwned\\u0007b\",\"port\":\"4\\n43\","
                         "\"decision\":\"allow\\r\",\"rule\":[1,2]}\n[1,2]\n{\"name\":1\n"
                         "{\"name\":\"%s\",\"time\":-5,\"ms\":1e308}\n\n{}\n"
                         "{\"name\":\"x\",\"name\":\"y\"}\n\xff\xfe\n",
                         long_name) > 0);
    char *t = netlog_render(in, strlen(in), 200, &bad);
    assert_int_equal(bad, 5); /* not json, [1,2], {"name":1, a duplicate key, bad bytes */
    for (const char *p = t; *p; p++)
        assert_true(*p == '\n' || (unsigned char)*p >= 0x20);
    assert_null(strchr(t, '\x1b'));
    assert_contains(t, "a\\x1b]0;pwned\\x07b:4\\n43");
    assert_contains(t, "allow\\x0d");
    assert_null(strstr(t, "1000000000")); /* 1e308 ms is no number to show */
    assert_null(strstr(t, long_name));    /* cut */
    assert_contains(t, "…");
    free(t);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(rule_and_reason),
        cmocka_unit_test(last_lines_only),
        cmocka_unit_test(hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
