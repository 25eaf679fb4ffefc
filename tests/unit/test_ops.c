/* Unit tests for the operations' guards (ops/ops.h), with no VM: a fork refuses the /data
 * commands and a parent with forks refuses reset and restore; diff, apply and discard refuse
 * a sandbox that is not a fork; /data in use or up refuses; exec on a sandbox that is not up.
 * Each refusal carries the kind the API answers with (409 refused, is_up, not_up). */
#include "unit.h"

#include <stdlib.h>
#include <unistd.h>

#include "core/forks.h"
#include "core/home.h"
#include "core/inuse.h"
#include "core/sandbox.h"
#include "ops/guard.h"
#include "ops/ops.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *root;

static void put(const char *path, const char *text)
{
    bb_error *err = NULL;
    assert_int_equal(write_file_atomic(path, text, strlen(text), 0644, &err), 0);
}

static void make_sandbox(const char *name, const char *parent)
{
    bb_error *err = NULL;
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    _cleanup_free_ char *bf = home_path_of(root, HP_BLUEFILE, name);
    _cleanup_free_ char *data = home_path_of(root, HP_DATA, name);
    assert_int_equal(mkdir_p(dir, 0700, &err), 0);
    assert_int_equal(mkdir_p(data, 0700, &err), 0);
    put(bf, "base: alpine:3.20\n");
    if (parent) {
        _cleanup_free_ char *of = path_join(dir, HOME_FORK_OF_FILE);
        _cleanup_free_ char *text = xasprintf("%s\n", parent);
        put(of, text);
    }
}

static int setup(void **s)
{
    (void)s;
    char tmpl[] = "/tmp/bb-ops-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    root = xstrdup(tmpl);
    make_sandbox("parent", NULL);
    make_sandbox("child", "parent");
    make_sandbox("lone", NULL);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    (void)rm_rf(root, NULL);
    free(root);
    return 0;
}

static sandbox *open_sb(const char *name)
{
    sandbox *sb = NULL;
    bb_error *err = NULL;
    assert_int_equal(sandbox_open(root, name, &sb, &err), 0);
    return sb;
}

/* The precheck of `doing` on `name` refuses with `why` and a message holding `words`. */
static void refuses(const char *name, const char *doing, ops_why why, const char *words)
{
    _cleanup_sandbox_ sandbox *sb = open_sb(name);
    _cleanup_error_ bb_error *err = NULL;
    ops_why got = OPS_FAILED;
    assert_int_equal(ops_data_precheck(sb, doing, &got, &err), -1);
    assert_int_equal(got, why);
    assert_contains(err->msg, words);
}

static void a_fork_refuses_the_data_commands(void **s)
{
    (void)s;
    refuses("child", "reset", OPS_REFUSED,
            "child is a fork; drop its changes with: bluebox discard child");
    refuses("child", "restore", OPS_REFUSED, "apply or discard it, then restore its parent");
    refuses("child", "snapshot", OPS_REFUSED, "bluebox snapshot parent");
    refuses("child", "export", OPS_REFUSED, "bluebox data export parent");
    refuses("child", "import", OPS_REFUSED, "bluebox data import parent");
}

static void a_parent_with_forks_refuses_reset_and_restore(void **s)
{
    (void)s;
    refuses("parent", "reset", OPS_REFUSED, "parent has forks (child)");
    refuses("parent", "restore", OPS_REFUSED, "parent has forks (child)");
    _cleanup_sandbox_ sandbox *sb = open_sb("parent");
    _cleanup_error_ bb_error *err = NULL;
    ops_why why = OPS_FAILED;
    assert_int_equal(ops_data_precheck(sb, "snapshot", &why, &err), 0);
    assert_int_equal(ops_data_precheck(sb, "export", &why, &err), 0);
    /* and the operation itself, not only its precheck */
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    assert_int_equal(ops_reset(sb, &r, &err), -1);
    assert_int_equal(r.why, OPS_REFUSED);
}

static void not_a_fork_is_refused(void **s)
{
    (void)s;
    _cleanup_sandbox_ sandbox *sb = open_sb("lone");
    int (*ops[])(sandbox *, ops_fork_result *, bb_error **) = {ops_diff, ops_apply, ops_discard};
    for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
        _cleanup_error_ bb_error *err = NULL;
        _cleanup_(ops_fork_result_clear) ops_fork_result r = {0};
        assert_int_equal(ops[i](sb, &r, &err), -1);
        assert_int_equal(r.why, OPS_REFUSED);
        assert_contains(err->msg, "lone is not a fork; make one with: bluebox fork lone <fork>");
    }
}

static void a_fork_is_not_forked_again(void **s)
{
    (void)s;
    _cleanup_sandbox_ sandbox *sb = open_sb("child");
    _cleanup_error_ bb_error *err = NULL;
    _cleanup_(ops_fork_result_clear) ops_fork_result r = {0};
    ops_fork_opts o = {.fork = "grandchild"};
    assert_int_equal(ops_fork(sb, &o, &r, NULL, &err), -1);
    assert_int_equal(r.why, OPS_REFUSED);
    assert_contains(err->msg, "child is itself a fork");
}

static void data_in_use_is_refused(void **s)
{
    (void)s;
    _cleanup_sandbox_ sandbox *sb = open_sb("lone");
    _cleanup_error_ bb_error *err = NULL;
    inuse use = {0};
    assert_int_equal(inuse_hold(sb, "run", &use, &err), 0);
    ops_why why = OPS_FAILED;
    assert_int_equal(ops_data_precheck(sb, "reset", &why, &err), -1);
    assert_int_equal(why, OPS_REFUSED);
    bb_error_clear(&err);
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    assert_int_equal(ops_reset(sb, &r, &err), -1);
    assert_int_equal(r.why, OPS_REFUSED);
    inuse_release(&use);
    /* released: the precheck lets it through */
    bb_error_clear(&err);
    why = OPS_FAILED;
    assert_int_equal(ops_data_precheck(sb, "reset", &why, &err), 0);
}

static void an_up_sandbox_refuses_and_exec_needs_up(void **s)
{
    (void)s;
    _cleanup_sandbox_ sandbox *sb = open_sb("lone");
    _cleanup_error_ bb_error *err = NULL;
    /* not up: exec says so, before it touches the backend */
    char *argv[] = {"true", NULL};
    ops_command c = {.argv = argv, .log_as = "exec"};
    ops_run_result rr;
    assert_int_equal(ops_exec(sb, &c, &rr, &err), -1);
    assert_int_equal(rr.why, OPS_NOT_UP);
    assert_contains(err->msg, "lone is not up; start it: bluebox up lone");
    ops_run_result_clear(&rr);
    bb_error_clear(&err);
    /* up (a state file): /data refuses to change under it */
    _cleanup_free_ char *run = home_path_of(root, HP_RUN, "lone");
    _cleanup_free_ char *rundir = xstrdup(run);
    *strrchr(rundir, '/') = '\0';
    assert_int_equal(mkdir_p(rundir, 0700, &err), 0);
    put(run, "{}\n");
    ops_why why = OPS_FAILED;
    assert_int_equal(ops_data_precheck(sb, "restore", &why, &err), -1);
    assert_int_equal(why, OPS_IS_UP);
    (void)unlink(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_fork_refuses_the_data_commands),
        cmocka_unit_test(a_parent_with_forks_refuses_reset_and_restore),
        cmocka_unit_test(not_a_fork_is_refused),
        cmocka_unit_test(a_fork_is_not_forked_again),
        cmocka_unit_test(data_in_use_is_refused),
        cmocka_unit_test(an_up_sandbox_refuses_and_exec_needs_up),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
