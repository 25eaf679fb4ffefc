/* Unit tests for the host side of allow: and secrets: (launch/egress.h): the list's value,
 * placeholders, the connection log's rotation, reading secrets (and the refusals, which
 * never quote a value) and the sealed memfd. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi.h"
#include "core/bluefile.h"
#include "launch/egress.h"
#include "util/fs.h"
#include "util/xalloc.h"

static char dir[64];

static int setup(void **s)
{
    (void)s;
    strcpy(dir, "/tmp/bb-egress-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(dir, NULL);
}

static bluefile *parse(const char *yaml)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    return bf;
}

static void allow_value(void **s)
{
    (void)s;
    bluefile *bf = parse("network: bridge\nallow: [A.example.org, \"*.example.org:8443\", "
                         "10.1.0.0/16]\n");
    char *v = egress_allow_value(bf);
    assert_string_equal(v, "a.example.org,*.example.org:8443,10.1.0.0/16");
    free(v);
    bluefile_free(bf);
    bf = parse("network: bridge\nallow: []\n");
    v = egress_allow_value(bf);
    assert_string_equal(v, ""); /* present and empty: nothing is reachable */
    free(v);
    bluefile_free(bf);
}

static void placeholders(void **s)
{
    (void)s;
    char *a = egress_placeholder(), *b = egress_placeholder();
    size_t pl = strlen(ABI_SECRET_PREFIX);
    assert_int_equal(strlen(a), pl + EGRESS_PLACEHOLDER_HEX);
    assert_memory_equal(a, ABI_SECRET_PREFIX, pl);
    assert_int_equal(strspn(a + pl, "0123456789abcdef"), EGRESS_PLACEHOLDER_HEX);
    assert_string_not_equal(a, b);
    free(a);
    free(b);
}

static off_t size_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

static mode_t mode_of(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static void log_rotation(void **s)
{
    (void)s;
    char *log = xasprintf("%s/logs/net/box.log", dir), *old = xasprintf("%s.1", log);
    bb_error *err = NULL;
    /* created, 0600, in a directory made for it */
    assert_int_equal(egress_log_rotate(log, &err), 0);
    assert_int_equal(size_of(log), 0);
    assert_int_equal(mode_of(log), 0600);
    /* small: kept, and made private again */
    assert_int_equal(write_file_atomic(log, "{}\n", 3, 0644, &err), 0);
    assert_int_equal(egress_log_rotate(log, &err), 0);
    assert_int_equal(size_of(log), 3);
    assert_int_equal(mode_of(log), 0600);
    assert_int_equal(size_of(old), -1);
    /* over 4 MiB: moved to .1, the older ones to .2 and .3 (the oldest dropped), a fresh
     * one started */
    char *old2 = xasprintf("%s.2", log), *old3 = xasprintf("%s.3", log);
    assert_int_equal(truncate(log, EGRESS_LOG_ROTATE + 1), 0);
    assert_int_equal(write_file_atomic(old, "older\n", 6, 0600, &err), 0);
    assert_int_equal(egress_log_rotate(log, &err), 0);
    assert_int_equal(size_of(old), EGRESS_LOG_ROTATE + 1);
    assert_int_equal(size_of(old2), 6);
    assert_int_equal(size_of(old3), -1);
    assert_int_equal(size_of(log), 0);
    assert_int_equal(mode_of(log), 0600);
    assert_int_equal(write_file_atomic(old3, "oldest\n", 7, 0600, &err), 0);
    assert_int_equal(truncate(log, EGRESS_LOG_ROTATE + 2), 0);
    assert_int_equal(egress_log_rotate(log, &err), 0);
    assert_int_equal(size_of(old), EGRESS_LOG_ROTATE + 2);
    assert_int_equal(size_of(old2), EGRESS_LOG_ROTATE + 1);
    assert_int_equal(size_of(old3), 6); /* "oldest" dropped */
    free(old2);
    free(old3);
    /* exactly 4 MiB stays */
    assert_int_equal(truncate(log, EGRESS_LOG_ROTATE), 0);
    assert_int_equal(egress_log_rotate(log, &err), 0);
    assert_int_equal(size_of(log), EGRESS_LOG_ROTATE);
    /* a symlink in its place is refused, not followed */
    assert_int_equal(unlink(log), 0);
    assert_int_equal(symlink("/etc/passwd", log), 0);
    assert_int_equal(egress_log_rotate(log, &err), -1);
    assert_contains(err->msg, "is not a file");
    bb_error_free(err);
    free(log);
    free(old);
}

#define VALUE "s3cr3t-\"quoted\"\\back"

static void secret_from_env(void **s)
{
    (void)s;
    bf_secret sec = {.name = "API_TOKEN", .from_env = "BB_TEST_TOKEN"};
    setenv("BB_TEST_TOKEN", VALUE, 1);
    char *v = NULL;
    bb_error *err = NULL;
    assert_int_equal(egress_secret_read(&sec, &v, &err), 0);
    assert_string_equal(v, VALUE);
    egress_secret_free(v);
    assert_null(getenv("BB_TEST_TOKEN")); /* taken: podman will not inherit it */
    assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
    assert_contains(err->msg, "secret API_TOKEN: the environment variable BB_TEST_TOKEN is not "
                              "set");
    bb_error_free(err);
    err = NULL;
    setenv("BB_TEST_TOKEN", "line1\nline2-hidden", 1);
    assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
    assert_contains(err->msg, "line break");
    assert_null(strstr(err->msg, "hidden"));
    bb_error_free(err);
    err = NULL;
    setenv("BB_TEST_TOKEN", "", 1);
    assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
    assert_contains(err->msg, "its value is empty");
    bb_error_free(err);
}

static char *file_with(const char *name, const char *content, mode_t mode)
{
    char *p = xasprintf("%s/%s", dir, name);
    bb_error *err = NULL;
    assert_int_equal(write_file_atomic(p, content, strlen(content), mode, &err), 0);
    assert_int_equal(chmod(p, mode), 0);
    return p;
}

static void secret_from_file(void **s)
{
    (void)s;
    char *p = file_with("tok", "from-a-file-hidden\n", 0600);
    bf_secret sec = {.name = "TOK", .from_file = p};
    char *v = NULL;
    bb_error *err = NULL;
    assert_int_equal(egress_secret_read(&sec, &v, &err), 0);
    assert_string_equal(v, "from-a-file-hidden"); /* one trailing newline dropped */
    egress_secret_free(v);
    chmod(p, 0400);
    assert_int_equal(egress_secret_read(&sec, &v, &err), 0);
    egress_secret_free(v);
    for (mode_t m = 0; m < 2; m++) {
        chmod(p, m ? 0604 : 0640);
        assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
        assert_contains(err->msg, "can be read by others");
        assert_contains(err->msg, "chmod 600");
        assert_null(strstr(err->msg, "hidden"));
        bb_error_free(err);
        err = NULL;
    }
    free(p);
    p = file_with("two", "a-hidden\nb\n", 0600);
    sec.from_file = p;
    assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
    assert_contains(err->msg, "line break");
    assert_null(strstr(err->msg, "hidden"));
    bb_error_free(err);
    err = NULL;
    free(p);
    sec.from_file = "/nonexistent/bluebox-secret";
    assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
    assert_contains(err->msg, "secret TOK: cannot open its file /nonexistent/bluebox-secret");
    bb_error_free(err);
    err = NULL;
    sec.from_file = dir; /* a directory */
    assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
    assert_contains(err->msg, "is not a regular file");
    bb_error_free(err);
    err = NULL;
    if (geteuid() != 0) { /* a file of someone else's */
        sec.from_file = "/etc/shadow";
        assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
        bb_error_free(err);
        err = NULL;
        sec.from_file = "/etc/hostname";
        assert_int_equal(egress_secret_read(&sec, &v, &err), -1);
        assert_contains(err->msg, "is not yours");
        bb_error_free(err);
    }
}

static void memfd_contents(void **s)
{
    (void)s;
    bluefile *bf = parse("network: bridge\nallow: [api.example.com, \"*.example.org\"]\n"
                         "secrets:\n  - {name: A, from_env: X, hosts: [api.example.com]}\n"
                         "  - {name: B, from_env: Y, hosts: [a.example.org, \"*.example.org\"],\n"
                         "     headers: [X-Goog-Api-Key]}\n");
    char *values[] = {VALUE, "plain", NULL};
    char *ph[] = {egress_placeholder(), egress_placeholder(), NULL};
    int fd = -1;
    bb_error *err = NULL;
    assert_int_equal(egress_secrets_memfd(bf, values, ph, &fd, &err), 0);
    assert_true(fd > 3);
    assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    /* sealed: nobody changes it on its way to the VMM */
    assert_int_equal(write(fd, "x", 1), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    assert_true(n > 0);
    json_error_t je;
    json_t *a = json_loadb(buf, (size_t)n, 0, &je);
    assert_non_null(a);
    assert_int_equal(json_array_size(a), 2);
    json_t *o = json_array_get(a, 0);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "A");
    assert_string_equal(json_string_value(json_object_get(o, "placeholder")), ph[0]);
    assert_string_equal(json_string_value(json_object_get(o, "value")), VALUE);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "hosts"), 0)),
                        "api.example.com");
    assert_null(json_object_get(o, "headers")); /* optional: absent means the default */
    o = json_array_get(a, 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "headers"), 0)),
                        "x-goog-api-key");
    assert_string_equal(json_string_value(json_object_get(o, "placeholder")), ph[1]);
    assert_int_equal(json_array_size(json_object_get(o, "hosts")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "hosts"), 1)),
                        "*.example.org");
    json_decref(a);
    close(fd);
    free(ph[0]);
    free(ph[1]);
    bluefile_free(bf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allow_value),      cmocka_unit_test(placeholders),
        cmocka_unit_test(log_rotation),     cmocka_unit_test(secret_from_env),
        cmocka_unit_test(secret_from_file), cmocka_unit_test(memfd_contents),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
