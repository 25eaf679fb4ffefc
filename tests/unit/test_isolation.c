/* The isolation check's parts that need no VM: parsing what the probe prints, the runtime
 * fingerprint, and the verify.json cache (a corrupt cache is a miss, never a pass). */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/bluefile.h"
#include "util/fingerprint.h"
#include "runtime/isolation.h"
#include "launch/runtime_fp.h"
#include "util/fs.h"
#include "util/xalloc.h"

static void probe_output_parse(void **s)
{
    (void)s;
    kernel_id k;
    bb_error *err = NULL;
    assert_int_equal(kernel_id_parse("6.1.0-um\n0a1b-2c\n", &k, &err), 0);
    assert_string_equal(k.release, "6.1.0-um");
    assert_string_equal(k.boot_id, "0a1b-2c");
    static const char *const bad[] = {
        "",
        "6.1\n",
        "6.1\nid",
        "6.1\nid\nextra\n",
        "\nid\n",
        "6.1\n\n",
        "6 1\nid\n",
        "6.1\nid\x1b[2J\n",
        "0123456789012345678901234567890123456789012345678901234567890123456789\nid\n",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        assert_int_equal(kernel_id_parse(bad[i], &k, &err), -1);
        bb_error_free(err);
        err = NULL;
    }
}

static void self_probe(void **s)
{
    (void)s;
    kernel_id k;
    assert_int_equal(kernel_id_self(&k, NULL), 0);
    assert_true(strlen(k.release) > 0);
    assert_int_equal(strlen(k.boot_id), 36);
}

typedef struct {
    char dir[64];
    char *root, *krun;
    bluefile *bf;
    sandbox *sb;
    launch l;
} env;

static int setup(void **s)
{
    env *e = xcalloc(1, sizeof *e);
    strcpy(e->dir, "/tmp/bb-iso-XXXXXX");
    if (!mkdtemp(e->dir))
        return -1;
    e->root = path_join(e->dir, "home");
    e->krun = path_join(e->dir, "krun");
    if (symlink("/bin/true", e->krun) < 0)
        return -1;
    setenv("PATH", e->dir, 1);
    setenv("BLUEBOX_GUEST_BINARY", "/bin/true", 1);
    if (bluefile_parse("B", "", 0, "/h", &e->bf, NULL) < 0)
        return -1;
    e->sb = sandbox_of(e->root, "box");
    e->l = (launch){.root = e->root, .sb = e->sb, .bf = e->bf, .self = "/bin/true"};
    *s = e;
    return 0;
}

static int teardown(void **s)
{
    env *e = *s;
    rm_rf(e->dir, NULL);
    bluefile_free(e->bf);
    sandbox_close(e->sb);
    free(e->root);
    free(e->krun);
    free(e);
    return 0;
}

static void remember(env *e)
{
    isolation_result r = {0};
    strcpy(r.guest.release, "6.1.0-um");
    strcpy(r.baseline.release, "6.18.0");
    assert_int_equal(isolation_remember(backend_named("krun"), &e->l, &r, NULL), 0);
}

static void cache_states(void **s)
{
    env *e = *s;
    assert_int_equal(isolation_cached(backend_named("krun"), &e->l, NULL), ISOCHECK_NONE);
    remember(e);
    assert_int_equal(isolation_cached(backend_named("krun"), &e->l, NULL), ISOCHECK_CACHED);
    /* another backend's entry is its own */
    assert_int_equal(isolation_cached(backend_named("uml"), &e->l, NULL), ISOCHECK_NONE);
    /* re-pointing the krun symlink is a runtime change */
    unlink(e->krun);
    assert_int_equal(symlink("/bin/false", e->krun), 0);
    isolation_result was = {0};
    assert_int_equal(isolation_cached(backend_named("krun"), &e->l, &was), ISOCHECK_CHANGED);
    /* and it says which file: the krun symlink, nothing else */
    assert_string_equal(was.changed, e->krun);
    remember(e);
    assert_int_equal(isolation_cached(backend_named("krun"), &e->l, &was), ISOCHECK_CACHED);
}

static void parts_changed(void **s)
{
    (void)s;
    const char *was = "0000000000000001 /usr/bin/podman\n0000000000000002 the user\n"
                      "0000000000000003 /gone\n";
    const char *now = "0000000000000001 /usr/bin/podman\n0000000000000009 the user\n"
                      "0000000000000004 /new\n";
    _cleanup_free_ char *d = fp_parts_changed(was, now);
    assert_string_equal(d, "the user, /new, /gone");
    assert_null(fp_parts_changed(was, was));
}

static void corrupt_cache_is_a_miss(void **s)
{
    env *e = *s;
    remember(e);
    _cleanup_free_ char *path = path_join(e->root, "verify.json");
    _cleanup_free_ char *fp = runtime_fingerprint(backend_named("krun"), &e->l);
    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "null",
        "{\"version\": 1}",
        "{\"version\": 2, \"backends\": {}}",
        "{\"version\": 1, \"backends\": []}",
        "{\"version\": 1, \"backends\": {\"krun\": {\"fingerprint\": 7}}}",
        "{\"version\": 1, \"backends\": {\"krun\": \"%s\"}}",
        /* a current fingerprint alone, or a "pass" whose guest is the baseline */
        "{\"version\": 1, \"backends\": {\"krun\": {\"fingerprint\": \"%s\"}}}",
        "{\"version\": 1, \"backends\": {\"krun\": {\"fingerprint\": \"%s\", \"guest\": \"6.1\", "
        "\"baseline\": \"6.1\"}}}",
        /* duplicate keys: the second must not win silently */
        "{\"version\": 1, \"backends\": {\"krun\": {\"fingerprint\": \"x\"}, \"krun\": "
        "{\"fingerprint\": \"%s\"}}}",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        /* "%s" in a sample stands for the current fingerprint */
        _cleanup_sb_ strbuf b = {0};
        const char *hole = strstr(bad[i], "%s");
        if (hole) {
            sb_putn(&b, bad[i], (size_t)(hole - bad[i]));
            sb_puts(&b, fp);
            sb_puts(&b, hole + 2);
        } else
            sb_puts(&b, bad[i]);
        _cleanup_free_ char *text = sb_steal(&b);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0644, NULL), 0);
        if (isolation_cached(backend_named("krun"), &e->l, NULL) == ISOCHECK_CACHED)
            fail_msg("corrupt cache %zu passed: %s", i, text);
    }
    /* a good entry with a different fingerprint is a change, not a pass */
    _cleanup_free_ char *other =
        xasprintf("{\"version\": 1, \"backends\": {\"krun\": {\"fingerprint\": \"0%s\", "
                  "\"guest\": \"6.1\", \"baseline\": \"6.18\"}}}",
                  fp);
    assert_int_equal(write_file_atomic(path, other, strlen(other), 0644, NULL), 0);
    assert_int_equal(isolation_cached(backend_named("krun"), &e->l, NULL), ISOCHECK_CHANGED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(probe_output_parse),
        cmocka_unit_test(self_probe),
        cmocka_unit_test(parts_changed),
        cmocka_unit_test_setup_teardown(cache_states, setup, teardown),
        cmocka_unit_test_setup_teardown(corrupt_cache_is_a_miss, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
