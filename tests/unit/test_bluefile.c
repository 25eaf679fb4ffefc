/* Unit tests for the Bluefile parser: defaults, each rule, and error positions. */
#include "unit.h"

#include "core/bluefile.h"

static bluefile *ok(const char *yaml)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    int r = bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err);
    if (r < 0)
        fail_msg("unexpected error: %s", err->msg);
    return bf;
}

/* Parse, expect failure, and return the message (caller frees). */
static char *bad(const char *yaml)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    int r = bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err);
    if (r == 0)
        fail_msg("accepted: %s", yaml);
    char *m = strdup(err->msg);
    bb_error_free(err);
    return m;
}

#define EXPECT_BAD(yaml, needle)                                                                   \
    do {                                                                                           \
        char *m_ = bad(yaml);                                                                      \
        assert_contains(m_, needle);                                                               \
        free(m_);                                                                                  \
    } while (0)

static void defaults(void **s)
{
    (void)s;
    bluefile *bf = ok("# nothing\n");
    assert_string_equal(bf->base, "docker.io/library/alpine:latest");
    assert_int_equal(bf->cpus, 2);
    assert_int_equal(bf->ram_mib, 2048);
    assert_int_equal(bf->network, NET_NONE); /* deliberately not bridge */
    assert_int_equal(bf->backend, BACKEND_KRUN);
    assert_int_equal(bf->isolation, ISO_STANDARD);
    assert_int_equal(bf->pkgmgr, PKG_APK);
    bluefile_free(bf);
    bf = ok("");
    assert_int_equal(bf->cpus, 2);
    bluefile_free(bf);
}

static void error_position(void **s)
{
    (void)s;
    EXPECT_BAD("base: x\n\ncpus: 99\n",
               "/h/Bluefile:3:7: cpus must be 1-16 (krun's limit), got 99");
    EXPECT_BAD("cpu: 2\n", "/h/Bluefile:1:1: unknown key \"cpu\" (did you mean \"cpus\"?)");
}

static void ranges(void **s)
{
    (void)s;
    EXPECT_BAD("cpus: 0\n", "cpus must be 1-16");
    EXPECT_BAD("cpus: 17\n", "cpus must be 1-16");
    EXPECT_BAD("cpus: \"2\"\n", "cpus must be a whole number");
    EXPECT_BAD("cpus: 2.5\n", "cpus must be a whole number");
    EXPECT_BAD("ram_mib: 127\n", "ram_mib must be");
    EXPECT_BAD("timeout_seconds: -1\n", "timeout_seconds must be 0");
    EXPECT_BAD("warm: 9\nnetwork: bridge\n", "warm must be 0-8");
    EXPECT_BAD("warm: 1\nnetwork: bridge\ndata_limit: 1G\n",
               "warm needs /data as a directory, and data_limit makes it a disk image");
    bluefile *bf = ok("cpus: 16\nram_mib: 128\nwarm: 8\nnetwork: bridge\ntimeout_seconds: 0\n");
    assert_int_equal(bf->cpus, 16);
    assert_int_equal(bf->warm, 8);
    bluefile_free(bf);
    /* an offline pool is the backend's question (backend_for): uml keeps it offline */
    bf = ok("warm: 2\nnetwork: none\nwarmup:\n  - echo hi\n  - 'python3 -c 0'\n");
    assert_int_equal(bf->warm, 2);
    assert_int_equal(bf->network, NET_NONE);
    assert_int_equal(bf->warmup.n, 2);
    assert_string_equal(bf->warmup.v[1], "python3 -c 0");
    bluefile_free(bf);
}

static void data_limit(void **s)
{
    (void)s;
    bluefile *bf = ok("# nothing\n");
    assert_true(bf->data_limit == 0); /* /data stays a host directory */
    bluefile_free(bf);
    bf = ok("data_limit: 64M\n");
    assert_true(bf->data_limit == 64ULL << 20);
    bluefile_free(bf);
    bf = ok("data_limit: 10GiB\n");
    assert_true(bf->data_limit == 10ULL << 30);
    bluefile_free(bf);
    bf = ok("data_limit: 16T\n");
    assert_true(bf->data_limit == 16ULL << 40);
    bluefile_free(bf);
    EXPECT_BAD("data_limit: 10\n", "data_limit must be a size such as 512M, 10G or 1T");
    EXPECT_BAD("data_limit: 10k\n", "data_limit must be a size");
    EXPECT_BAD("data_limit: -1G\n", "data_limit must be a size");
    EXPECT_BAD("data_limit: 1.5G\n", "data_limit must be a size");
    EXPECT_BAD("data_limit: 99999999999999999999T\n", "data_limit must be a size");
    EXPECT_BAD("data_limit: 15M\n", "data_limit must be 16M-16T, got 15M");
    EXPECT_BAD("data_limit: 17T\n", "data_limit must be 16M-16T");
    EXPECT_BAD("data_limit: [1G]\n", "data_limit must be a string");
}

static void choices(void **s)
{
    (void)s;
    EXPECT_BAD("network: host\n", "network must be bridge or none");
    EXPECT_BAD("isolation: paranoid\n", "isolation must be standard or strict");
    EXPECT_BAD("backend: firecracker\n", "backend must be krun, uml or qemu");
    EXPECT_BAD("passt: maybe\n", "passt must be true or false");
    bluefile *bf = ok("backend: podman\npkgmgr: APT\nreadonly: true\n");
    assert_int_equal(bf->backend, BACKEND_KRUN);
    assert_int_equal(bf->pkgmgr, PKG_APT);
    assert_true(bf->readonly);
    bluefile_free(bf);
    bf = ok("backend: uml\n");
    assert_int_equal(bf->backend, BACKEND_UML);
    bluefile_free(bf);
}

static void pkgmgr_inference(void **s)
{
    (void)s;
    assert_int_equal(bf_pkgmgr_infer("docker.io/library/Alpine:3"), PKG_APK);
    assert_int_equal(bf_pkgmgr_infer("debian:bookworm"), PKG_APT);
    assert_int_equal(bf_pkgmgr_infer("ubuntu:24.04"), PKG_APT);
    assert_int_equal(bf_pkgmgr_infer("fedora:41"), PKG_DNF);
    assert_int_equal(bf_pkgmgr_infer("rockylinux:9"), PKG_DNF);
    assert_int_equal(bf_pkgmgr_infer("almalinux:9"), PKG_DNF);
    assert_int_equal(bf_pkgmgr_infer("centos:7"), PKG_DNF);
    assert_int_equal(bf_pkgmgr_infer("quay.io/x/busybox"), PKG_NONE);
    EXPECT_BAD("base: busybox\npackages: [x]\n", "cannot infer a package manager");
    EXPECT_BAD("base: busybox\nblueprint:\n  users: [{name: a}]\n", "cannot infer");
    bluefile *bf = ok("base: busybox\n");
    bluefile_free(bf);
}

static void packages_and_lines(void **s)
{
    (void)s;
    static const char *const evil[] = {"a b", "a\tb", "a;b", "a|b", "a&b", "$x", "`id`", "-o"};
    for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
        char yaml[64];
        snprintf(yaml, sizeof yaml, "packages: [\"%s\"]\n", evil[i]);
        EXPECT_BAD(yaml, "packages[0]");
    }
    EXPECT_BAD("run:\n  - |\n    a\n    FROM x\n", "run[0] spans several lines");
    EXPECT_BAD("run: ['  ']\n", "run[0] is empty");
    EXPECT_BAD("warmup: ['']\n", "warmup[0] is empty");
    bluefile *bf = ok("run:\n  - |\n    echo hi\n");
    assert_string_equal(bf->run.v[0], "echo hi");
    bluefile_free(bf);
}

static void env_rules(void **s)
{
    (void)s;
    EXPECT_BAD("env:\n  1A: x\n", "must be an identifier");
    EXPECT_BAD("env:\n  A-B: x\n", "must be an identifier");
    EXPECT_BAD("env:\n  A: \"x\\ny\"\n", "env.A cannot contain a newline");
    EXPECT_BAD("env: [x]\n", "env must be a mapping");
    bluefile *bf = ok("env:\n  ZED: z\n  ALPHA: a\n  EMPTY:\n");
    assert_int_equal(bf->n_env, 3);
    assert_string_equal(bf->env[0].key, "ALPHA");
    assert_string_equal(bf->env[1].key, "EMPTY");
    assert_string_equal(bf->env[1].value, "");
    assert_string_equal(bf->env[2].key, "ZED");
    bluefile_free(bf);
}

static void mounts(void **s)
{
    (void)s;
    bluefile *bf =
        ok("mounts:\n  - host: ~/proj//a/./b/\n    guest: /work\n  - {host: /x, guest: /y, "
           "mode: rw}\n");
    assert_string_equal(bf->mounts[0].host, "/home/u/proj/a/b");
    assert_false(bf->mounts[0].rw);
    assert_true(bf->mounts[1].rw);
    bluefile_free(bf);
    EXPECT_BAD("mounts:\n  - {host: rel, guest: /w}\n", "mounts[0].host must be an absolute path");
    EXPECT_BAD("mounts:\n  - {host: ~bob/x, guest: /w}\n", "~user is not supported");
    EXPECT_BAD("mounts:\n  - {host: /a:b, guest: /w}\n", "cannot contain ':'");
    EXPECT_BAD("mounts:\n  - {host: /a/../etc, guest: /w}\n", "\"..\"");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /data}\n", "cannot be /data");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /data/x}\n", "cannot be /data");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /proc}\n", "belongs to the guest's kernel");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /dev/shm/x}\n", "belongs to the guest's kernel");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /sys}\n", "belongs to the guest's kernel");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /}\n", "must be an absolute path of letters");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /.bluebox}\n", "reserved");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: w}\n", "mounts[0].guest must be an absolute");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /w/../x}\n", "mounts[0].guest");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /w}\n  - {host: /b, guest: /w}\n",
               "guest path \"/w\" is mounted more than once");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /w, mode: rx}\n", "mounts[0].mode must be ro or rw");
    EXPECT_BAD("mounts:\n  - {host: /a}\n", "needs both host and guest");
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /w, extra: 1}\n", "unknown key \"extra\"");
    /* strict refuses rw mounts whichever order the keys come in */
    EXPECT_BAD("mounts:\n  - {host: /a, guest: /w, mode: rw}\nisolation: strict\n",
               "isolation: strict allows read-only mounts only");
}

static void blueprint(void **s)
{
    (void)s;
    bluefile *bf = ok("blueprint:\n  users:\n    - name: admin\n      sudo: true\n  write_files:\n"
                      "    - path: /etc/motd\n      content: \"hi\"\n      mode: \"0644\"\n"
                      "  runcmd: [echo ok]\n");
    assert_string_equal(bf->users[0].shell, "/bin/sh");
    assert_true(bf->users[0].sudo);
    assert_string_equal(bf->files[0].mode, "0644");
    assert_string_equal(bf->runcmd.v[0], "echo ok");
    bluefile_free(bf);
    EXPECT_BAD("blueprint:\n  users: [{name: Admin}]\n", "blueprint.users[0].name");
    EXPECT_BAD("blueprint:\n  users: [{name: 9a}]\n", "blueprint.users[0].name");
    EXPECT_BAD("blueprint:\n  users: [{name: abcdefghijklmnopqrstuvwxyz0123456}]\n", "name");
    EXPECT_BAD("blueprint:\n  users: [{name: a, shell: bash}]\n", "blueprint.users[0].shell");
    EXPECT_BAD("blueprint:\n  users: [{name: a}, {name: a}]\n", "declared more than once");
    EXPECT_BAD("blueprint:\n  write_files: [{path: etc/x}]\n", "write_files[0].path");
    EXPECT_BAD("blueprint:\n  write_files: [{path: '/a b'}]\n", "write_files[0].path");
    EXPECT_BAD("blueprint:\n  write_files: [{path: /x, mode: '0999'}]\n", "octal mode");
    EXPECT_BAD("blueprint:\n  write_files: [{path: /x, mode: '12'}]\n", "octal mode");
    EXPECT_BAD("blueprint:\n  nope: 1\n", "blueprint: unknown key \"nope\"");
}

static void yaml_hazards(void **s)
{
    (void)s;
    EXPECT_BAD("cpus: 2\ncpus: 3\n", "cpus is given twice");
    EXPECT_BAD("a: &x 1\n", "anchors are not allowed");
    EXPECT_BAD("cpus: !!int 2\n", "tags are not allowed");
    EXPECT_BAD("cpus: 2\n---\ncpus: 3\n", "exactly one YAML document");
    EXPECT_BAD("cpus: [\n", "YAML syntax error");
    EXPECT_BAD("- a\n", "a Bluefile is a mapping");
    EXPECT_BAD("base: \"a b\"\n", "base must be an image reference");
    EXPECT_BAD("base: \"\"\n", "base must be an image reference");
    EXPECT_BAD("env:\n  A: \"x\\0y\"\n", "NUL");
}

static void seccomp_relative(void **s)
{
    (void)s;
    EXPECT_BAD("seccomp: missing.json\n", "seccomp: profile /h/missing.json does not exist");
}

/* allow: entries are normalized as ABI_ENV_NET_ALLOW carries them. */
static void allow_normalized(void **s)
{
    (void)s;
    bluefile *bf = ok("network: bridge\nallow:\n  - Deb.Example.ORG\n  - \"*.example.org\"\n"
                      "  - api.example.com:8443\n  - 192.0.2.0/24:5432\n  - 198.51.100.7\n"
                      "  - host.example.net.\n");
    assert_true(bf->has_allow);
    assert_int_equal(bf->allow.n, 6);
    assert_string_equal(bf->allow.v[0], "deb.example.org");
    assert_string_equal(bf->allow.v[1], "*.example.org");
    assert_string_equal(bf->allow.v[2], "api.example.com:8443");
    assert_string_equal(bf->allow.v[3], "192.0.2.0/24:5432");
    assert_string_equal(bf->allow.v[4], "198.51.100.7/32");
    assert_string_equal(bf->allow.v[5], "host.example.net");
    bluefile_free(bf);
    bf = ok("network: bridge\nallow: []\n"); /* bridge, but nothing reachable */
    assert_true(bf->has_allow);
    assert_int_equal(bf->allow.n, 0);
    bluefile_free(bf);
    bf = ok("network: bridge\n");
    assert_false(bf->has_allow);
    bluefile_free(bf);
}

static void allow_rules(void **s)
{
    (void)s;
    EXPECT_BAD("allow: [a.example.org]\n", "/h/Bluefile:1:8: allow needs network: bridge");
    EXPECT_BAD("network: none\nallow: [a.example.org]\n", "allow needs network: bridge");
#define BR "network: bridge\n"
    EXPECT_BAD(BR "allow: a.example.org\n", "allow must be a list");
    EXPECT_BAD(BR "allow: [\"\"]\n", "allow[0] is empty");
    EXPECT_BAD(BR "allow: [\"a b\"]\n", "allow[0] must be a host name");
    EXPECT_BAD(BR "allow: [\"a.example.org,b.example.org\"]\n", "allow[0] must be a host name");
    EXPECT_BAD(BR "allow: [a.*.example.org]\n", "wildcard is allowed only as a leading \"*.\"");
    EXPECT_BAD(BR "allow: [\"*example.org\"]\n", "wildcard is allowed only as a leading");
    EXPECT_BAD(BR "allow: [\"*.*.example.org\"]\n", "not a valid name below");
    EXPECT_BAD(BR "allow: [\"*\"]\n", "wildcard is allowed only as a leading");
    EXPECT_BAD(BR "allow: [\"*.org\"]\n", "whole top-level domain");
    EXPECT_BAD(BR "allow: [-a.example.org]\n", "not a valid host name");
    EXPECT_BAD(BR "allow: [a_b.example.org]\n", "not a valid host name");
    EXPECT_BAD(BR "allow: [a..example.org]\n", "not a valid host name");
    EXPECT_BAD(BR "allow: [a.example.org:0]\n", "the port must be 1-65535, got \"0\"");
    EXPECT_BAD(BR "allow: [a.example.org:65536]\n", "the port must be 1-65535");
    EXPECT_BAD(BR "allow: [a.example.org:080]\n", "the port must be 1-65535");
    EXPECT_BAD(BR "allow: [\"a.example.org:\"]\n", "the port must be 1-65535");
    EXPECT_BAD(BR "allow: [a.example.org:https]\n", "the port must be 1-65535");
    EXPECT_BAD(BR "allow: [\"2001:db8::/32\"]\n", "IPv6 entries are not supported yet");
    EXPECT_BAD(BR "allow: [192.0.2.1/24]\n", "has host bits set; did you mean 192.0.2.0/24?");
    EXPECT_BAD(BR "allow: [192.0.2.0/33]\n", "bad prefix length");
    EXPECT_BAD(BR "allow: [192.0.2.0/]\n", "bad prefix length");
    EXPECT_BAD(BR "allow: [0.0.0.0/0]\n", "wider than /8");
    EXPECT_BAD(BR "allow: [300.1.2.3]\n", "not an IPv4 address or CIDR");
    EXPECT_BAD(BR "allow: [1.2.3]\n", "not an IPv4 address or CIDR");
    EXPECT_BAD(BR "allow: [example.org/24]\n", "allow[0] must be a host name");
    EXPECT_BAD(BR "allow: [example.123]\n", "not a valid host name");
    EXPECT_BAD(BR "allow: [a.example.org, A.example.org]\n",
               "allow[1]: \"a.example.org\" is listed twice (also allow[0])");
}

static void allow_covers(void **s)
{
    (void)s;
    assert_true(bf_allow_covers("api.example.com", "api.example.com"));
    assert_true(bf_allow_covers("api.example.com:8443", "api.example.com"));
    assert_false(bf_allow_covers("api.example.com", "example.com"));
    assert_false(bf_allow_covers("example.com", "api.example.com"));
    assert_true(bf_allow_covers("*.example.com", "api.example.com"));
    assert_true(bf_allow_covers("*.example.com:443", "a.b.example.com"));
    assert_false(bf_allow_covers("*.example.com", "example.com"));
    assert_false(bf_allow_covers("*.example.com", "badexample.com"));
    assert_true(bf_allow_covers("*.example.com", "*.example.com"));
    assert_true(bf_allow_covers("*.example.com", "*.a.example.com"));
    assert_false(bf_allow_covers("*.a.example.com", "*.example.com"));
    assert_false(bf_allow_covers("api.example.com", "*.example.com"));
    assert_false(bf_allow_covers("192.0.2.0/24", "192.0.2.0/24"));
    assert_false(bf_allow_covers("192.0.2.0/24:443", "x.example.com"));
}

#define SECRETS_OK "network: bridge\nallow: [api.example.com, \"*.example.org\"]\n"

static void secrets_parsed(void **s)
{
    (void)s;
    bluefile *bf = ok(SECRETS_OK "secrets:\n"
                                 "  - name: API_TOKEN\n    from_env: MY_TOKEN\n"
                                 "    hosts: [API.example.com]\n"
                                 "  - {name: B, from_file: ~/tok, hosts: [a.example.org],\n"
                                 "     headers: [X-Goog-Api-Key, \"x-token\"]}\n"
                                 "  - {name: C, from_file: rel/tok, hosts: [\"*.example.org\"]}\n");
    assert_int_equal(bf->n_secrets, 3);
    assert_string_equal(bf->secrets[0].name, "API_TOKEN");
    assert_string_equal(bf->secrets[0].from_env, "MY_TOKEN");
    assert_null(bf->secrets[0].from_file);
    assert_string_equal(bf->secrets[0].hosts.v[0], "api.example.com");
    assert_int_equal(bf->secrets[0].headers.n, 0); /* the default */
    assert_string_equal(bf->secrets[1].from_file, "/home/u/tok");
    assert_int_equal(bf->secrets[1].headers.n, 2);
    assert_string_equal(bf->secrets[1].headers.v[0], "x-goog-api-key");
    assert_string_equal(bf->secrets[1].headers.v[1], "x-token");
    assert_string_equal(bf->secrets[2].from_file, "/h/rel/tok");
    bluefile_free(bf);
}

static void secrets_rules(void **s)
{
    (void)s;
    EXPECT_BAD("network: bridge\nsecrets: [{name: A, from_env: A, hosts: [a.example.org]}]\n",
               "secrets need an allow: list");
    EXPECT_BAD(SECRETS_OK "secrets: {name: A}\n", "secrets must be a list");
    EXPECT_BAD(SECRETS_OK "secrets: [{from_env: A, hosts: [api.example.com]}]\n",
               "secrets[0] needs a name");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: 1A, from_env: A, hosts: [api.example.com]}]\n",
               "secrets[0].name must be an environment variable name");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A-B, from_env: A, hosts: [api.example.com]}]\n",
               "secrets[0].name must be an environment variable name");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: BLUEBOX_X, from_env: A, hosts: [api.example.com]}]\n",
               "are bluebox's own");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, hosts: [api.example.com]}]\n",
               "needs exactly one of from_env");
    EXPECT_BAD(SECRETS_OK
               "secrets: [{name: A, from_env: A, from_file: /x, hosts: [api.example.com]}]\n",
               "needs exactly one of from_env");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: \"A B\", hosts: [api.example.com]}]\n",
               "secrets[0].from_env must be an environment variable name");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_file: \"\", hosts: [api.example.com]}]\n",
               "secrets[0].from_file must be the path of a file");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A}]\n", "secrets[0] needs hosts");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: []}]\n",
               "secrets[0].hosts is empty");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [api.example.com], "
                          "headers: []}]\n",
               "secrets[0].headers is empty; leave it out for the default");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [api.example.com], "
                          "headers: [\"X Key\"]}]\n",
               "secrets[0].headers[0] must be an HTTP header name");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [api.example.com], "
                          "headers: [\"X-Key:\"]}]\n",
               "secrets[0].headers[0] must be an HTTP header name");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [api.example.com], "
                          "headers: [ok, Host]}]\n",
               "secrets[0].headers[1]: \"host\" frames the request");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [api.example.com], "
                          "headers: X-Key}]\n",
               "secrets[0].headers must be a list");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [a.*.com]}]\n",
               "wildcard is allowed only as a leading");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, value: x, hosts: [a.example.org]}]\n",
               "secrets[0]: unknown key \"value\"");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [other.example.com]}]\n",
               "secrets[0].hosts[0]: \"other.example.com\" is not covered by allow:");
    EXPECT_BAD(SECRETS_OK "secrets: [{name: A, from_env: A, hosts: [example.org]}]\n",
               "is not covered by allow:");
    EXPECT_BAD(SECRETS_OK "secrets:\n  - {name: A, from_env: A, hosts: [api.example.com]}\n"
                          "  - {name: A, from_env: B, hosts: [api.example.com]}\n",
               "secret A is declared more than once");
    EXPECT_BAD(SECRETS_OK
               "env: {A: x}\nsecrets: [{name: A, from_env: A, hosts: [api.example.com]}]\n",
               "A is also set in env:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),         cmocka_unit_test(error_position),
        cmocka_unit_test(ranges),           cmocka_unit_test(choices),
        cmocka_unit_test(pkgmgr_inference), cmocka_unit_test(packages_and_lines),
        cmocka_unit_test(env_rules),        cmocka_unit_test(mounts),
        cmocka_unit_test(blueprint),        cmocka_unit_test(yaml_hazards),
        cmocka_unit_test(seccomp_relative), cmocka_unit_test(data_limit),
        cmocka_unit_test(allow_normalized), cmocka_unit_test(allow_rules),
        cmocka_unit_test(allow_covers),     cmocka_unit_test(secrets_parsed),
        cmocka_unit_test(secrets_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
