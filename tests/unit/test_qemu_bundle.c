/* The qemu VMM bundle's replacement: each is about 120 MB, so a newly made one
 * removes the old ones, but never one a sandbox runs from (a shared flock on its
 * bluebox-vmm, held by bluebox while it launches and by bluebox-vmm in the container), and
 * builders' stale temporary directories; doctor's count and size. Stand-ins (a dynamically
 * linked program as QEMU and bluebox-vmm, files as firmware, kernel and modules) build real
 * bundles in a throwaway home. */
#include "unit.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/qemu_bundle.h"
#include "qemu_standins.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char dir[64];
static char home[128];

static int setup(void **s)
{
    (void)s;
    strcpy(dir, "/tmp/bb-qemub-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    qemu_standins(dir);
    snprintf(home, sizeof home, "%s/home", dir);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(dir, NULL);
}

/* A new kernel (its mtime is part of the bundle's name): the next bundle is another. */
static void new_kernel(long t)
{
    char p[128];
    snprintf(p, sizeof p, "%s/vmlinuz", dir);
    struct timespec ts[2] = {{.tv_sec = t}, {.tv_sec = t}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

/* The bundle a process that then exits makes (its hold ends with it). */
static char *ensure_in_child(void)
{
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *d = NULL;
        if (qemu_bundle_ensure(home, "/bin/true", "/bin/true", &d, NULL) < 0)
            _exit(1);
        _exit(write(pfd[1], d, strlen(d)) == (ssize_t)strlen(d) ? 0 : 1);
    }
    close(pfd[1]);
    char buf[512] = {0};
    ssize_t n = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n > 0);
    return xstrdup(buf);
}

/* A running sandbox's bluebox-vmm: a process holding the bundle's bluebox-vmm (shared). */
static pid_t hold_in_child(const char *bundle)
{
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *f = path_join(bundle, "bluebox-vmm");
        int fd = open(f, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || flock(fd, LOCK_SH) < 0)
            _exit(1);
        (void)!write(pfd[1], "k", 1);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char c = 0;
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    return pid;
}

static void new_bundle_replaces_unused_ones(void **s)
{
    (void)s;
    new_kernel(1000000000);
    char *old_held = ensure_in_child();
    pid_t vmm = hold_in_child(old_held);
    new_kernel(1100000000);
    char *old_free = ensure_in_child(); /* made: old_held is in use, so it stays */
    assert_string_not_equal(old_held, old_free);
    assert_true(is_dir(old_held));
    int n = 0;
    long long bytes = 0;
    qemu_bundle_usage(home, &n, &bytes);
    assert_int_equal(n, 2);
    assert_true(bytes > 0);

    /* A builder's temporary directory: an hour old goes, a fresh one stays. */
    char *stale = xasprintf("%s/vmm/.qemu-0000000000000000.tmp-abcdef", home);
    char *fresh = xasprintf("%s/vmm/.qemu-0000000000000000.tmp-ghijkl", home);
    assert_int_equal(mkdir(stale, 0700), 0);
    assert_int_equal(mkdir(fresh, 0700), 0);
    struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    assert_int_equal(utimensat(AT_FDCWD, stale, old, 0), 0);

    /* The sandbox still runs: a new bundle removes the unused old one, keeps the held one. */
    new_kernel(1200000000);
    char *cur = NULL;
    assert_int_equal(qemu_bundle_ensure(home, "/bin/true", "/bin/true", &cur, NULL), 0);
    assert_true(is_dir(cur));
    assert_false(path_exists(old_free));
    assert_true(is_dir(old_held));
    assert_false(path_exists(stale));
    assert_true(is_dir(fresh));

    /* It stopped: the next new bundle removes it too, and never the one this process holds. */
    kill(vmm, SIGKILL);
    waitpid(vmm, NULL, 0);
    new_kernel(1300000000);
    char *next = ensure_in_child();
    assert_false(path_exists(old_held));
    assert_true(is_dir(next));
    assert_true(is_dir(cur));
    qemu_bundle_usage(home, &n, &bytes);
    assert_int_equal(n, 2);

    /* The same inputs again: the same bundle, nothing removed. */
    char *again = NULL;
    assert_int_equal(qemu_bundle_ensure(home, "/bin/true", "/bin/true", &again, NULL), 0);
    assert_string_equal(again, next);
    free(again);
    free(next);
    free(cur);
    free(stale);
    free(fresh);
    free(old_free);
    free(old_held);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_bundle_replaces_unused_ones),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
