/* Unit tests for the sandbox handle (core/sandbox.h): what open refuses, the paths it lays
 * out, the Bluefile parsed once, and a lock that is taken once and released. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/home.h"
#include "core/sandbox.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char *make_home(void)
{
    char tmpl[] = "/tmp/bb-sandbox-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return xstrdup(tmpl);
}

static void make_sandbox(const char *root, const char *name, const char *text)
{
    bb_error *err = NULL;
    char *dir = home_path_of(root, HP_SANDBOX, name);
    char *bf = home_path_of(root, HP_BLUEFILE, name);
    assert_int_equal(mkdir_p(dir, 0700, &err), 0);
    assert_int_equal(write_file_atomic(bf, text, strlen(text), 0644, &err), 0);
    free(dir);
    free(bf);
}

/* A fresh home with one sandbox "box" holding this Bluefile, opened. */
static sandbox *open_box(char **ret_root, const char *text)
{
    *ret_root = make_home();
    make_sandbox(*ret_root, "box", text);
    sandbox *sb = NULL;
    bb_error *err = NULL;
    assert_int_equal(sandbox_open(*ret_root, "box", &sb, &err), 0);
    return sb;
}

static void drop_home(char *root)
{
    (void)rm_rf(root, NULL);
    free(root);
}

static void open_refuses(void **s)
{
    (void)s;
    char *root = make_home();
    sandbox *sb = NULL;
    bb_error *err = NULL;
    assert_int_equal(sandbox_open(root, "../x", &sb, &err), -1);
    assert_null(sb);
    assert_contains(err->msg, "invalid sandbox name \"../x\"");
    bb_error_free(err);
    err = NULL;
    assert_int_equal(sandbox_open(root, "gone", &sb, &err), -1);
    assert_null(sb);
    assert_string_equal(err->msg, "no sandbox \"gone\"; create it: bluebox new gone");
    bb_error_free(err);
    sandbox_close(NULL); /* accepts NULL */
    drop_home(root);
}

/* Every path is the one home.h's layout names: built once here, used by every layer. */
static void paths_as_home_says(void **s)
{
    (void)s;
    char *root = NULL;
    sandbox *sb = open_box(&root, "cpus: 1\n");
    static const struct {
        home_path which;
        size_t offset;
    } layout[] = {
        {HP_SANDBOX, offsetof(sandbox, dir)},
        {HP_BLUEFILE, offsetof(sandbox, bluefile_path)},
        {HP_CONTAINERFILE, offsetof(sandbox, containerfile)},
        {HP_DATA, offsetof(sandbox, data)},
        {HP_DISK, offsetof(sandbox, disk)},
        {HP_SNAPSHOTS, offsetof(sandbox, snapshots)},
        {HP_LOG, offsetof(sandbox, log)},
        {HP_BUILD_LOG, offsetof(sandbox, build_log)},
        {HP_RUN, offsetof(sandbox, run)},
    };
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++) {
        char *want = home_path_of(root, layout[i].which, "box");
        assert_string_equal(*(char **)((char *)sb + layout[i].offset), want);
        free(want);
    }
    char *iid = xasprintf("%s/sandboxes/box/image-id", root);
    assert_string_equal(sb->image_id, iid);
    assert_string_equal(sb->root, root);
    assert_string_equal(sb->name, "box");
    assert_null(sb->bf);
    assert_null(sb->backend);
    assert_int_equal(sb->lock, -1);
    free(iid);
    sandbox_close(sb);
    drop_home(root);
}

static void bluefile_once(void **s)
{
    (void)s;
    char *root = NULL;
    sandbox *sb = open_box(&root, "cpus: 3\n");
    bb_error *err = NULL;
    assert_int_equal(sandbox_bluefile(sb, &err), 0);
    bluefile *first = sb->bf;
    assert_int_equal(first->cpus, 3);
    /* A later change on disk is not seen: the command works on what it read first. */
    make_sandbox(root, "box", "cpus: [\n");
    assert_int_equal(sandbox_bluefile(sb, &err), 0);
    assert_ptr_equal(sb->bf, first);
    sandbox_close(sb);
    /* A fresh handle reads it again, and says what is wrong. */
    assert_int_equal(sandbox_open(root, "box", &sb, &err), 0);
    assert_int_equal(sandbox_bluefile(sb, &err), -1);
    assert_null(sb->bf);
    bb_error_free(err);
    sandbox_close(sb);
    drop_home(root);
}

/* Whether another open file description can take the lock now. */
static bool lock_free(const char *root, const char *name)
{
    char *path = xasprintf("%s/locks/%s.lock", root, name);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    free(path);
    assert_true(fd >= 0);
    bool got = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return got;
}

static void lock_once(void **s)
{
    (void)s;
    char *root = NULL;
    sandbox *sb = open_box(&root, "cpus: 1\n");
    bb_error *err = NULL;
    assert_int_equal(sandbox_lock(sb, &err), 1); /* taken */
    int fd = sb->lock;
    assert_true(fd >= 0);
    assert_false(lock_free(root, "box"));
    assert_int_equal(sandbox_lock(sb, &err), 0); /* held already: nothing taken twice */
    assert_int_equal(sb->lock, fd);
    sandbox_unlock(sb);
    assert_int_equal(sb->lock, -1);
    assert_true(lock_free(root, "box"));
    sandbox_unlock(sb); /* idempotent */
    assert_int_equal(sandbox_lock(sb, &err), 1);
    sandbox_close(sb); /* releases it */
    assert_true(lock_free(root, "box"));
    drop_home(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_refuses),
        cmocka_unit_test(paths_as_home_says),
        cmocka_unit_test(bluefile_once),
        cmocka_unit_test(lock_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
