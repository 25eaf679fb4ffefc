/* Golden tests for podman build's argv: the build steps run on the host's kernel in a podman
 * build container, so every build gets the same confinement and only the declared
 * differences (memory where podman can enforce it, the network) appear. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/bluefile.h"
#include "runtime/build.h"
#include "util/xalloc.h"

static char *argv_of(const char *yaml, bool network, bool limits)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    build_spec s = {.containerfile = "/c/Containerfile",
                    .context = "/c",
                    .tag = "localhost/bluebox/box:latest",
                    .iidfile = "/c/image-id",
                    .network = network,
                    .limits = limits};
    strv a = {0};
    build_argv(bf, &s, &a);
    strbuf sb = {0};
    for (size_t i = 0; i < a.n; i++)
        sb_printf(&sb, "%s%s", i ? " " : "", a.v[i]);
    strv_clear(&a);
    bluefile_free(bf);
    return sb_steal(&sb);
}

#define CONFINED                                                                                   \
    "podman build --pull=never --layers --cap-drop=all "                                           \
    "--cap-add=CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP "                            \
    "--ulimit=nproc=1024:1024 "
#define TAIL "-f /c/Containerfile -t localhost/bluebox/box:latest --iidfile=/c/image-id /c"

/* Offline: no network at all. (Which builds get one is image_build's choice, checked
 * against the recorded argv in tests/cli/test_build_confinement.py.) */
static void offline(void **s)
{
    (void)s;
    char *got = argv_of("base: alpine\nrun:\n  - echo hi\n", false, true);
    assert_string_equal(got, CONFINED "--memory=2304m --network=none " TAIL);
    free(got);
}

/* With a network: podman's default build network; the rest is the same. */
static void with_network(void **s)
{
    (void)s;
    char *got = argv_of("base: alpine\nram_mib: 512\npackages:\n  - jq\n", true, true);
    assert_string_equal(got, CONFINED "--memory=768m " TAIL);
    free(got);
}

/* Rootless podman on cgroups v1 fails the whole build on --memory; it is left out there, as
 * the posture line already says the limits are not enforced. */
static void no_memory_flag_where_podman_cannot_enforce_it(void **s)
{
    (void)s;
    char *got = argv_of("base: alpine\n", false, false);
    assert_string_equal(got, CONFINED "--network=none " TAIL);
    free(got);
}

static void never_privileged_or_host(void **s)
{
    (void)s;
    const char *yamls[] = {"", "network: bridge\n", "packages: [jq]\nbase: alpine\n",
                           "isolation: strict\nreadonly: true\n"};
    for (size_t i = 0; i < ELEMENTSOF(yamls); i++) {
        char *got = argv_of(yamls[i], i % 2, true);
        assert_null(strstr(got, "--privileged"));
        assert_null(strstr(got, "=host"));
        assert_null(strstr(got, "--userns"));
        assert_null(strstr(got, "--volume"));
        assert_null(strstr(got, " -v "));
        assert_null(strstr(got, "--device"));
        assert_null(strstr(got, "--secret"));
        assert_null(strstr(got, "--ssh"));
        free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offline),
        cmocka_unit_test(with_network),
        cmocka_unit_test(no_memory_flag_where_podman_cannot_enforce_it),
        cmocka_unit_test(never_privileged_or_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
