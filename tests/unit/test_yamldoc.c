/* Unit tests for the YAML document tree. */
#include "unit.h"

#include <stdlib.h>

#include "core/yamldoc.h"

static ynode *parse(const char *y, char **msg)
{
    ynode *n = NULL;
    bb_error *err = NULL;
    if (yamldoc_parse("f", y, strlen(y), &n, &err) < 0) {
        *msg = strdup(err->msg);
        bb_error_free(err);
        return NULL;
    }
    *msg = NULL;
    return n;
}

static void tree(void **s)
{
    (void)s;
    char *msg;
    ynode *n = parse("a: 1\nb: [x, 'y']\nc: {d: e}\n", &msg);
    assert_non_null(n);
    assert_int_equal(n->kind, YNODE_MAP);
    assert_int_equal(n->n, 3);
    assert_string_equal(n->items[0]->value, "a");
    assert_int_equal(n->items[3]->kind, YNODE_SEQ);
    assert_true(n->items[3]->items[0]->plain);
    assert_false(n->items[3]->items[1]->plain);
    assert_int_equal(n->items[3]->line, 2);
    assert_int_equal(n->items[5]->items[1]->line, 3);
    ynode_free(n);
}

static void empty_and_null(void **s)
{
    (void)s;
    char *msg;
    assert_null(parse("", &msg));
    assert_null(msg);
    assert_null(parse("# c\n", &msg));
    assert_null(msg);
    assert_null(parse("---\n", &msg));
    assert_null(msg);
}

static void refusals(void **s)
{
    (void)s;
    static const struct {
        const char *yaml, *msg;
    } cases[] = {
        {"a: &x 1\nb: *x\n", "anchors"},
        {"a: *x\n", "f:1:4:"},
        {"a: !!str 1\n", "tags"},
        {"a: !custom 1\n", "tags"},
        {"a: 1\na: 2\n", "a is given twice (first at line 1)"},
        {"[a]: 1\n", "mapping keys must be plain strings"},
        {"a: 1\n---\nb: 1\n", "exactly one"},
        {"a: [1\n", "YAML syntax error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *msg;
        ynode *n = parse(cases[i].yaml, &msg);
        assert_null(n);
        assert_non_null(msg);
        assert_contains(msg, cases[i].msg);
        free(msg);
    }
}

static void depth_bounded(void **s)
{
    (void)s;
    char buf[256];
    memset(buf, '[', 100);
    memset(buf + 100, ']', 100);
    buf[200] = '\0';
    char *msg;
    assert_null(parse(buf, &msg));
    assert_contains(msg, "nested too deeply");
    free(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tree),
        cmocka_unit_test(empty_and_null),
        cmocka_unit_test(refusals),
        cmocka_unit_test(depth_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
