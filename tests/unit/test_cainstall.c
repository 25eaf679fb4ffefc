/* Unit tests for the sandbox CA in the guest (src/guest/cainstall.c) and its launch-spec
 * record (src/abi/spec.c): appended once to each of an image's bundles (symlinked ones
 * too), never through a symlink into a shared mount, a bundle made when the image has none,
 * a bundle of its own on a read-only root, variables set unless the workload set them; the
 * spec carries one PEM certificate at most. */
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/cainstall.h"
#include "abi/spec.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define PEM "-----BEGIN CERTIFICATE-----\nMIIBsandbox\n-----END CERTIFICATE-----\n"

static char *mkroot(void)
{
    char tmpl[] = "/tmp/test_cainstall.XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return xstrdup(tmpl);
}

static void put(const char *root, const char *rel, const char *text)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void dir(const char *root, const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    assert_int_equal(mkdir(p, 0755), 0);
}

static char *get(const char *root, const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    char *data = NULL;
    size_t len = 0;
    if (read_file(p, 1 << 20, &data, &len, NULL) < 0)
        return NULL;
    return data;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static const char *env_get(const strv *env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < env->n; i++)
        if (strncmp(env->v[i], name, n) == 0 && env->v[i][n] == '=')
            return env->v[i] + n + 1;
    return NULL;
}

static void cleanup(char *root)
{
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(root);
}

static void test_debian_like(void **state)
{
    (void)state;
    char *root = mkroot();
    dir(root, "/etc");
    dir(root, "/etc/ssl");
    dir(root, "/etc/ssl/certs");
    dir(root, "/data");
    put(root, "/etc/ssl/certs/ca-certificates.crt",
        "-----BEGIN CERTIFICATE-----\nimage\n"
        "-----END CERTIFICATE-----"); /* no \n */
    /* Alpine's cert.pem is a symlink to the same file: one append. */
    _cleanup_free_ char *link = xasprintf("%s/etc/ssl/cert.pem", root);
    assert_int_equal(symlink("certs/ca-certificates.crt", link), 0);
    /* A hostile image's bundle that points into /data: not written. */
    put(root, "/data/victim", "host file\n");
    _cleanup_free_ char *evil = xasprintf("%s/etc/ssl/ca-bundle.pem", root);
    assert_int_equal(symlink("../../data/victim", evil), 0);
    _cleanup_strv_ strv shared = {0};
    strv_add(&shared, "/data");
    _cleanup_strv_ strv env = {0};
    strv_add(&env, "CURL_CA_BUNDLE=/mine.pem");
    bb_error *err = NULL;
    assert_int_equal(ca_install(root, PEM, false, &shared, &env, &err), 0);
    _cleanup_free_ char *b = get(root, "/etc/ssl/certs/ca-certificates.crt");
    assert_int_equal(count(b, "MIIBsandbox"), 1);
    assert_non_null(strstr(b, "-----END CERTIFICATE-----\n" PEM));
    _cleanup_free_ char *v = get(root, "/data/victim");
    assert_string_equal(v, "host file\n");
    assert_string_equal(env_get(&env, "SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt");
    assert_string_equal(env_get(&env, "NODE_EXTRA_CA_CERTS"), "/etc/ssl/certs/ca-certificates.crt");
    assert_string_equal(env_get(&env, "REQUESTS_CA_BUNDLE"), "/etc/ssl/certs/ca-certificates.crt");
    assert_string_equal(env_get(&env, "CURL_CA_BUNDLE"), "/mine.pem"); /* the workload's */
    cleanup(root);
}

static void test_fedora_like_and_none(void **state)
{
    (void)state;
    char *root = mkroot();
    dir(root, "/etc");
    dir(root, "/etc/pki");
    dir(root, "/etc/pki/tls");
    dir(root, "/etc/pki/tls/certs");
    put(root, "/etc/pki/tls/certs/ca-bundle.crt", "image\n");
    _cleanup_strv_ strv env = {0};
    bb_error *err = NULL;
    assert_int_equal(ca_install(root, PEM, false, NULL, &env, &err), 0);
    _cleanup_free_ char *b = get(root, "/etc/pki/tls/certs/ca-bundle.crt");
    assert_string_equal(b, "image\n" PEM);
    assert_string_equal(env_get(&env, "SSL_CERT_FILE"), "/etc/pki/tls/certs/ca-bundle.crt");
    cleanup(root);

    /* No bundle at all: Debian's path, holding only the sandbox CA. */
    root = mkroot();
    _cleanup_strv_ strv env2 = {0};
    assert_int_equal(ca_install(root, PEM, false, NULL, &env2, &err), 0);
    _cleanup_free_ char *d = get(root, "/etc/ssl/certs/ca-certificates.crt");
    assert_string_equal(d, PEM);
    cleanup(root);
}

static void test_readonly(void **state)
{
    (void)state;
    char *root = mkroot();
    dir(root, "/etc");
    dir(root, "/etc/ssl");
    dir(root, "/etc/ssl/certs");
    dir(root, "/tmp");
    put(root, "/etc/ssl/certs/ca-certificates.crt", "image\n");
    _cleanup_strv_ strv env = {0};
    bb_error *err = NULL;
    assert_int_equal(ca_install(root, PEM, true, NULL, &env, &err), 0);
    _cleanup_free_ char *img = get(root, "/etc/ssl/certs/ca-certificates.crt");
    assert_string_equal(img, "image\n"); /* untouched */
    _cleanup_free_ char *own = get(root, "/tmp/bluebox-ca-bundle.pem");
    assert_string_equal(own, "image\n" PEM);
    assert_string_equal(env_get(&env, "SSL_CERT_FILE"), "/tmp/bluebox-ca-bundle.pem");
    cleanup(root);
}

static void test_spec_record(void **state)
{
    (void)state;
    launch_spec s = {.mode = SPEC_RUN,
                     .cwd = xstrdup("/"),
                     .hostname = xstrdup("h"),
                     .user = xstrdup(""),
                     .ca_pem = xstrdup(PEM)};
    strv_add(&s.argv, "true");
    size_t len;
    _cleanup_free_ char *data = spec_encode(&s, &len);
    launch_spec back = {0};
    bb_error *err = NULL;
    assert_int_equal(spec_decode(data, len, &back, &err), 0);
    assert_string_equal(back.ca_pem, PEM);
    spec_clear(&back);
    /* Twice, or not a certificate: refused. */
    _cleanup_sb_ strbuf twice = {0};
    sb_putn(&twice, data, len);
    uint8_t hdr[5] = {'C', 0, 0, 0, (uint8_t)strlen(PEM)};
    sb_putn(&twice, (const char *)hdr, 5);
    sb_puts(&twice, PEM);
    assert_int_equal(spec_decode(twice.s, twice.len, &back, &err), -1);
    bb_error_clear(&err);
    free(s.ca_pem);
    s.ca_pem = xstrdup("-----BEGIN PRIVATE KEY-----\nx\n");
    _cleanup_free_ char *bad = spec_encode(&s, &len);
    assert_int_equal(spec_decode(bad, len, &back, &err), -1);
    bb_error_clear(&err);
    /* None: NULL. */
    free(s.ca_pem);
    s.ca_pem = NULL;
    _cleanup_free_ char *none = spec_encode(&s, &len);
    assert_int_equal(spec_decode(none, len, &back, &err), 0);
    assert_null(back.ca_pem);
    spec_clear(&back);
    spec_clear(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_debian_like),
        cmocka_unit_test(test_fedora_like_and_none),
        cmocka_unit_test(test_readonly),
        cmocka_unit_test(test_spec_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
