/* Unit tests for the warm pool's files (runtime/pool.h): a claim is a rename that only one
 * process wins, only an entry of the sandbox's fingerprint is served, what is not an entry
 * is left alone, and a drain removes all but the runs in progress and bumps the generation.
 * No podman: PATH holds none, so the VMs the files name are not looked for. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/pool.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char root[] = "/tmp/bb-pool-XXXXXX";

/* The handle of `name` in the test's home (no sandbox needs to exist for the pool). */
static sandbox *box(const char *name)
{
    static sandbox *open[8];
    static size_t n;
    for (size_t i = 0; i < n; i++)
        if (streq(open[i]->name, name))
            return open[i];
    assert_true(n < ELEMENTSOF(open));
    return open[n++] = sandbox_of(root, name);
}

static char *dir_of(const char *name)
{
    return pool_dir(box(name));
}

static void put(const char *name, const char *file, const char *fp)
{
    char *dir = dir_of(name);
    bb_error *err = NULL;
    assert_int_equal(mkdir_p(dir, 0700, &err), 0);
    char *path = xasprintf("%s/%s", dir, file);
    char *text = xasprintf("{\"container\": \"c-%s\", \"addr\": \"127.0.0.1:1\", \"token\": "
                           "\"t\", \"kernel\": \"6.1\", \"started\": 1, \"fp\": \"%s\"}",
                           file, fp);
    assert_int_equal(write_file_atomic(path, text, strlen(text), 0600, &err), 0);
    free(text);
    free(path);
    free(dir);
}

static bool there(const char *name, const char *file)
{
    char *dir = dir_of(name);
    char *path = xasprintf("%s/%s", dir, file);
    bool r = access(path, F_OK) == 0;
    free(path);
    free(dir);
    return r;
}

static int setup(void **s)
{
    (void)s;
    assert_non_null(mkdtemp(root));
    setenv("PATH", "/nonexistent", 1);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    rm_rf(root, NULL);
    return 0;
}

static void claims(void **s)
{
    (void)s;
    put("a", "0123456789ab.waiting", "fp1");
    put("a", "aaaaaaaaaaaa.waiting", "fp1");
    put("a", "bbbbbbbbbbbb.waiting", "old");
    /* not entries: never taken */
    put("a", "x.waiting", "fp1");
    put("a", "0123456789AB.waiting", "fp1");
    put("a", "cccccccccccc.waiting.tmp-123", "fp1");
    put("a", "dddddddddddd.claimed-abc", "fp1");
    bb_error *err = NULL;
    pool_claim c1, c2, c3;
    assert_int_equal(pool_claim_vm(box("a"), "fp1", &c1, &err), 1);
    assert_int_equal(pool_claim_vm(box("a"), "fp1", &c2, &err), 1);
    assert_string_not_equal(c1.id, c2.id);
    assert_string_equal(c1.vm.addr, "127.0.0.1:1");
    assert_string_equal(c1.vm.token, "t");
    /* the third has another fingerprint: marked stale on the way, never served */
    assert_int_equal(pool_claim_vm(box("a"), "fp1", &c3, &err), 0);
    assert_true(there("a", "bbbbbbbbbbbb.stale"));
    assert_true(there("a", "x.waiting") && there("a", "0123456789AB.waiting"));
    char *claimed = xasprintf("%s.claimed-%d", c1.id, (int)getpid());
    assert_true(there("a", claimed));
    char *stale = xasprintf("%s.stale", c1.id);
    pool_release(&c1);
    assert_false(there("a", claimed));
    assert_true(there("a", stale));
    assert_null(c1.id);
    pool_release(&c2);
    free(claimed);
    free(stale);
    /* no pool at all: nothing to claim, no error */
    assert_int_equal(pool_claim_vm(box("none"), "fp1", &c3, &err), 0);
}

static void listing(void **s)
{
    (void)s;
    put("l", "111111111111.waiting", "f");
    put("l", "222222222222.booting-42", "f");
    put("l", "333333333333.claimed-7", "f");
    put("l", "444444444444.stale", "f");
    put("l", "555555555555.waiting-3", "f"); /* waiting takes no pid */
    put("l", "666666666666.stale-3", "f");
    put("l", "777777777777.claimed", "f"); /* claimed needs one */
    pool_list_result l;
    bb_error *err = NULL;
    assert_int_equal(pool_list(box("l"), &l, &err), 0);
    assert_int_equal(l.n, 4);
    int states = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (streq(l.v[i].state, "booting"))
            assert_int_equal(l.v[i].pid, 42), states |= 1;
        if (streq(l.v[i].state, "claimed"))
            assert_int_equal(l.v[i].pid, 7), states |= 2;
        if (streq(l.v[i].state, "waiting"))
            assert_int_equal(l.v[i].pid, 0), states |= 4;
        if (streq(l.v[i].state, "stale"))
            states |= 8;
    }
    assert_int_equal(states, 15);
    pool_list_free(&l);
    int waiting, total;
    pool_count(box("l"), &waiting, &total);
    assert_int_equal(waiting, 1);
    assert_int_equal(total, 4);
    pool_count(box("nothing"), &waiting, &total);
    assert_int_equal(waiting + total, 0);
}

/* A tender booting a VM: a process that is not ours to reap (so that it does not linger as
 * our zombie), gone after `ms`. */
static pid_t tender(int ms)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t mid = fork();
    if (mid == 0) {
        pid_t t = fork();
        if (t == 0) {
            close(p[0]);
            close(p[1]);
            usleep((useconds_t)ms * 1000);
            _exit(0);
        }
        (void)!write(p[1], &t, sizeof t);
        _exit(0);
    }
    pid_t t = 0;
    assert_int_equal(read(p[0], &t, sizeof t), (ssize_t)sizeof t);
    close(p[0]);
    close(p[1]);
    waitpid(mid, NULL, 0);
    return t;
}

static void drains(void **s)
{
    (void)s;
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    pid_t booting = tender(300);
    char *mine = xasprintf("111111111111.claimed-%d", (int)getpid());
    char *gone = xasprintf("222222222222.claimed-%d", (int)dead);
    char *boot = xasprintf("444444444444.booting-%d", (int)booting);
    put("d", mine, "f");
    put("d", gone, "f");
    put("d", "333333333333.waiting", "f");
    put("d", boot, "f");
    put("d", "555555555555.stale", "f");
    bb_error *err = NULL;
    assert_int_equal(pool_drain(box("d"), &err), 1);
    /* the drain waited for the boot in flight to end */
    assert_true(kill(booting, 0) < 0 && errno == ESRCH);
    /* a run in progress keeps its VM; everything else is gone */
    assert_true(there("d", mine));
    assert_false(there("d", gone));
    assert_false(there("d", "333333333333.waiting") || there("d", "333333333333.stale"));
    assert_false(there("d", boot) || there("d", "444444444444.stale"));
    assert_false(there("d", "555555555555.stale"));
    assert_true(there("d", "generation"));
    assert_int_equal(pool_drain(box("d"), &err), 1);
    char *dir = dir_of("d"), *gen = path_join(dir, "generation"), *text = NULL;
    size_t len;
    assert_int_equal(read_file(gen, 64, &text, &len, &err), 0);
    assert_string_equal(text, "2\n");
    free(text);
    /* remove takes the directory too; a missing pool is no error */
    assert_int_equal(pool_remove(box("d"), &err), 0);
    assert_false(is_dir(dir));
    assert_int_equal(pool_remove(box("d"), &err), 0);
    assert_int_equal(pool_drain(box("d"), &err), 0);
    free(gen);
    free(dir);
    free(mine);
    free(boot);
    free(gone);
}

static void names(void **s)
{
    (void)s;
    char *c = pool_container_name(box("box"), "0123456789ab");
    assert_true(strncmp(c, "bluebox-pool-box-", 17) == 0);
    assert_true(strlen(c) == strlen("bluebox-pool-box-") + 12 + 1 + 12);
    assert_true(pool_container(c));
    assert_false(pool_container("bluebox-up-box-0123456789ab"));
    assert_false(pool_container("bluebox-box-1234-abcd"));
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claims),
        cmocka_unit_test(listing),
        cmocka_unit_test(drains),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
