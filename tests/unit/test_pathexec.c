/* Unit tests for the agent's program lookup (guest/pathexec.h): the PATH of the command's
 * environment decides, never the caller's, with execvp's rules for the rest. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/pathexec.h"
#include "util/macro.h"
#include "util/xalloc.h"

static char dir[] = "/tmp/bb-pathexec-XXXXXX";

static void put(const char *name, const char *text, mode_t mode)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(p, "we");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
}

/* The exit code of a child that runs exec_in_path(file) with env; 200 + errno when nothing
 * ran. */
static int run(const char *file, char *const env[])
{
    char *argv[] = {(char *)file, "arg", NULL};
    _cleanup_free_ char **sh = exec_script_argv(argv);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        exec_in_path(file, argv, env, sh);
        _exit(errno == ENOENT ? 201 : errno == EACCES ? 202 : 203);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    put("tool", "#!/bin/sh\n[ \"$1\" = arg ] && exit 7\nexit 1\n", 0755);
    put("script", "[ \"$1\" = arg ] && exit 9\nexit 1\n", 0755); /* no #! line */
    put("noexec", "#!/bin/sh\nexit 0\n", 0644);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {"tool", "script", "noexec"};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

static void the_commands_path_decides(void **state)
{
    (void)state;
    _cleanup_free_ char *path = xasprintf("PATH=/nonexistent:%s", dir);
    char *env[] = {path, NULL};
    setenv("PATH", "/usr/bin:/bin", 1); /* ours: does not have it */
    assert_int_equal(run("tool", env), 7);
    setenv("PATH", dir, 1); /* ours has it, the command's does not */
    char *other[] = {"PATH=/nonexistent", NULL};
    assert_int_equal(run("tool", other), 201);
    /* no PATH at all: the default, where sh is */
    char *none[] = {"HOME=/", NULL};
    assert_int_equal(run("tool", none), 201);
    char *argv[] = {"sh", "-c", "exit 4", NULL};
    _cleanup_free_ char **sh = exec_script_argv(argv);
    pid_t pid = fork();
    if (pid == 0) {
        exec_in_path("sh", argv, none, sh);
        _exit(99);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 4);
}

static void execvps_rules(void **state)
{
    (void)state;
    _cleanup_free_ char *path = xasprintf("PATH=%s", dir);
    char *env[] = {path, NULL};
    assert_int_equal(run("script", env), 9);   /* no interpreter line: run by /bin/sh */
    assert_int_equal(run("noexec", env), 202); /* there, not executable: EACCES */
    _cleanup_free_ char *both = xasprintf("PATH=%s:/bin", dir);
    char *env2[] = {both, NULL};
    assert_int_equal(run("true", env2), 0); /* passed over to the next entry */
    _cleanup_free_ char *abs = xasprintf("%s/tool", dir);
    char *nopath[] = {"PATH=/nonexistent", NULL};
    assert_int_equal(run(abs, nopath), 7); /* a name with a slash is not searched */
    assert_int_equal(run("", env), 201);
    char *cwd_entry[] = {"PATH=:/nonexistent", NULL}; /* an empty entry: the working directory */
    _cleanup_free_ char *old = getcwd(NULL, 0);
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(run("tool", cwd_entry), 7);
    assert_int_equal(chdir(old), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_commands_path_decides),
        cmocka_unit_test(execvps_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
