/* Unit tests for names and the home layout. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include "core/home.h"
#include "core/inuse.h"
#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"

static void names(void **s)
{
    (void)s;
    static const char *const good[] = {"a", "A1", "dev-box", "x.y_z", "9lives"};
    static const char *const bad[] = {"",   ".hidden", "-x", "_x",  "a/b",
                                      "..", "a b",     "é",  "a\n", "x:y"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(name_valid(good[i]));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(name_valid(bad[i]));
    char long_name[66];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    assert_false(name_valid(long_name));
    long_name[64] = '\0';
    assert_true(name_valid(long_name));
    bb_error *err = NULL;
    assert_int_equal(name_check("a/b", "sandbox name", &err), -1);
    assert_contains(err->msg, "invalid sandbox name \"a/b\"");
    bb_error_free(err);
}

static void root_and_paths(void **s)
{
    (void)s;
    char *root = NULL;
    bb_error *err = NULL;
    setenv("BLUEBOX_HOME", "/srv/bb", 1);
    assert_int_equal(home_root(&root, &err), 0);
    assert_string_equal(root, "/srv/bb");
    free(root);
    setenv("BLUEBOX_HOME", "relative", 1);
    assert_int_equal(home_root(&root, &err), -1);
    bb_error_free(err);
    err = NULL;
    unsetenv("BLUEBOX_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(home_root(&root, &err), 0);
    assert_string_equal(root, "/home/u/.bluebox");
    char *p = home_path_of(root, HP_LOG, "x");
    assert_string_equal(p, "/home/u/.bluebox/logs/x.log");
    free(p);
    p = home_path_of(root, HP_RUN, "x");
    assert_string_equal(p, "/home/u/.bluebox/run/x.json");
    free(p);
    free(root);
}

static mode_t mode_of(const char *base, const char *sub)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", base, sub);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    return st.st_mode & 07777;
}

/* A home an older bluebox made 0755 becomes owner-only on use; what is not one of its
 * directories, and a sticky directory, are left alone. */
static void tighten(void **s)
{
    (void)s;
    char base[] = "/tmp/bb-home-XXXXXX";
    assert_non_null(mkdtemp(base));
    char p[256];
    static const char *const made[] = {"",     "/data",      "/data/box", "/snapshots", "/logs",
                                       "/run", "/sandboxes", "/other",    "/vmm"};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        snprintf(p, sizeof p, "%s%s", base, made[i]);
        mkdir(p, 0755);
        assert_int_equal(chmod(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/locks", base);
    assert_int_equal(mkdir(p, 01777), 0);
    assert_int_equal(chmod(p, 01777), 0);
    home_tighten(base);
    assert_int_equal(mode_of(base, "."), 0700);
    static const char *const tight[] = {"data", "snapshots", "logs", "run", "sandboxes"};
    for (size_t i = 0; i < sizeof tight / sizeof tight[0]; i++)
        assert_int_equal(mode_of(base, tight[i]), 0700);
    assert_int_equal(mode_of(base, "data/box"), 0755); /* the guest's /data: podman's view */
    assert_int_equal(mode_of(base, "other"), 0755);
    assert_int_equal(mode_of(base, "vmm"), 0755);
    assert_int_equal(mode_of(base, "locks"), 01777); /* sticky: not a directory of ours */
    /* A symlink in place of a directory is not followed. */
    snprintf(p, sizeof p, "%s/logs", base);
    assert_int_equal(rmdir(p), 0);
    char target[256];
    snprintf(target, sizeof target, "%s/other", base);
    assert_int_equal(symlink(target, p), 0);
    home_tighten(base);
    assert_int_equal(mode_of(base, "other"), 0755);
    /* Missing directories are not created. */
    snprintf(p, sizeof p, "%s/nothing", base);
    home_tighten(p);
    assert_int_equal(access(p, F_OK), -1);
    assert_int_equal(rm_rf(base, NULL), 0);
}

/* Two homes never share an id; one home reached by another spelling or a symlink has one. */
static void home_ids(void **s)
{
    (void)s;
    char a[] = "/tmp/bb-home-XXXXXX", b[] = "/tmp/bb-home-XXXXXX";
    assert_non_null(mkdtemp(a));
    assert_non_null(mkdtemp(b));
    char *link = xasprintf("%s.link", a);
    assert_int_equal(symlink(a, link), 0);
    char *slash = xasprintf("%s/", a), *dots = xasprintf("%s/../%s", a, strrchr(a, '/') + 1);
    char *ia = home_id(a), *ib = home_id(b), *il = home_id(link), *i1 = home_id(slash),
         *i2 = home_id(dots), *r = home_id("/r");
    assert_int_equal(strlen(ia), 12);
    assert_string_not_equal(ia, ib);
    assert_string_equal(il, ia);
    assert_string_equal(i1, ia);
    assert_string_equal(i2, ia);
    assert_string_equal(r, "ede9ad17e64e"); /* tests/unit/test_launch.c relies on it */
    unlink(link);
    rmdir(a);
    rmdir(b);
    free(link), free(slash), free(dots), free(ia), free(ib), free(il), free(i1), free(i2), free(r);
}

static bool exists(const char *dir, long pid)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%ld", dir, pid);
    return access(p, F_OK) == 0;
}

/* A holder killed with SIGKILL leaves its note; the next hold removes the notes of dead
 * holders and keeps the live ones', so killed runs do not pile up notes. */
static void inuse_sweeps_dead_notes(void **s)
{
    (void)s;
    char root[] = "/tmp/bb-inuse-XXXXXX";
    assert_non_null(mkdtemp(root));
    char *dir = xasprintf("%s/locks/box.users", root);
    assert_int_equal(mkdir_p(dir, 0700, NULL), 0);
    _cleanup_sandbox_ sandbox *box = sandbox_of(root, "box");
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    long live = (long)getppid();
    for (size_t i = 0; i < 2; i++) {
        char *note = xasprintf("%s/%ld", dir, i ? live : (long)dead);
        assert_int_equal(write_file_atomic(note, "run\n", 4, 0600, NULL), 0);
        free(note);
    }
    inuse u;
    assert_int_equal(inuse_hold(box, "run", &u, NULL), 0);
    assert_false(exists(dir, dead));
    assert_true(exists(dir, live));
    assert_true(exists(dir, getpid()));
    inuse_release(&u);
    assert_false(exists(dir, getpid()));
    assert_int_equal(rm_rf(root, NULL), 0);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names),
        cmocka_unit_test(root_and_paths),
        cmocka_unit_test(tighten),
        cmocka_unit_test(home_ids),
        cmocka_unit_test(inuse_sweeps_dead_notes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
