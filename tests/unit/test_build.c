/* Golden tests for podman build's argv: the build steps run on the host's kernel in a podman
 * build container, so every build gets the same confinement and only the declared
 * differences (memory where podman can enforce it, the network) appear. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/bluefile.h"
#include "runtime/build.h"
#include "runtime/buildvm.h"
#include "launch/hostlimits.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/xalloc.h"

/* A host where podman's default limits fit: only the build's own nproc cap. */
static const host_limits roomy = {
    .nofile_hard = HOSTLIMIT_NONE, .nproc_hard = HOSTLIMIT_NONE, .pid_max = 4194304};
static const host_limits *host = &roomy;

static char *argv_of_spec(const char *yaml, bool network, bool limits, const build_spec *extra)
{
    hostlimits_use(host);
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    build_spec s = {.containerfile = "/c/Containerfile",
                    .context = "/c",
                    .tag = "localhost/bluebox/box:latest",
                    .iidfile = "/c/image-id",
                    .network = network,
                    .limits = limits,
                    .runtime = extra->runtime,
                    .kvm = extra->kvm,
                    .vm_runtime = extra->vm_runtime};
    strv a = {0};
    build_argv(bf, &s, &a);
    strbuf sb = {0};
    for (size_t i = 0; i < a.n; i++)
        sb_printf(&sb, "%s%s", i ? " " : "", a.v[i]);
    strv_clear(&a);
    bluefile_free(bf);
    return sb_steal(&sb);
}

static char *argv_of_rt(const char *yaml, bool network, bool limits, const char *runtime)
{
    build_spec extra = {.runtime = runtime};
    return argv_of_spec(yaml, network, limits, &extra);
}

static char *argv_of(const char *yaml, bool network, bool limits)
{
    return argv_of_rt(yaml, network, limits, NULL);
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

/* A host whose hard nofile is below podman's default (root without CAP_SYS_RESOURCE): the
 * steps get a nofile that fits too, or podman build's RUN containers could not start. */
static void limits_that_fit_the_host(void **s)
{
    (void)s;
    const host_limits tight = {.nofile_hard = 20000, .nproc_hard = 96367, .pid_max = 32768};
    host = &tight;
    char *got = argv_of("base: alpine\nrun:\n  - echo hi\n", false, true);
    host = &roomy;
    assert_contains(got, " --ulimit=nproc=1024:1024 --ulimit=nofile=20000:20000 ");
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

/* A guest build: bluebox's runtime, and the container's capabilities are the
 * VMM's (the step's own are BUILD_CAPS, in the guest); nothing else changes. */
static void guest_build_argv(void **s)
{
    (void)s;
    char *got = argv_of_rt("base: alpine\n", false, true, "/c/oci-runtime");
    assert_string_equal(
        got, "podman build --pull=never --layers --cap-drop=all "
             "--runtime=/c/oci-runtime "
             "--cap-add=CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP,SYS_ADMIN,SETPCAP "
             "--security-opt=apparmor=unconfined --ulimit=nproc=1024:1024 "
             "--memory=2304m --network=none " TAIL);
    free(got);
}

/* A qemu build on KVM: the same, and the container gets /dev/kvm for QEMU (on TCG, as the
 * uml one). */
static void qemu_kvm_build_argv(void **s)
{
    (void)s;
    build_spec extra = {.runtime = "/c/oci-runtime", .kvm = true};
    char *got = argv_of_spec("base: alpine\n", true, true, &extra);
    assert_string_equal(
        got, "podman build --pull=never --layers --cap-drop=all "
             "--runtime=/c/oci-runtime "
             "--cap-add=CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP,SYS_ADMIN,SETPCAP "
             "--security-opt=apparmor=unconfined --device=/dev/kvm --ulimit=nproc=1024:1024 "
             "--memory=2304m " TAIL);
    free(got);
}

/* krun: podman build --runtime krun (crun with libkrun runs each step in its microVM), the
 * build's capabilities, nothing of bluebox's VMM. */
static void krun_build_argv(void **s)
{
    (void)s;
    build_spec extra = {.vm_runtime = "/usr/local/bin/krun"};
    char *got = argv_of_spec("base: alpine\n", false, true, &extra);
    assert_string_equal(got, "podman build --pull=never --layers --cap-drop=all "
                             "--runtime=/usr/local/bin/krun "
                             "--cap-add=CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP "
                             "--ulimit=nproc=1024:1024 --memory=2304m --network=none " TAIL);
    free(got);
}

static void caps_mask(void **s)
{
    (void)s;
    char *m = buildvm_caps_mask("CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP");
    assert_string_equal(m, "800000db");
    free(m);
}

static const char STEP_CONFIG[] =
    "{\"process\":{\"user\":{\"uid\":1000,\"gid\":100,\"additionalGids\":[100]},"
    "\"args\":[\"/bin/sh\",\"-c\",\"make\"],"
    "\"env\":[\"PATH=/bin\",\"BLUEBOX_BUILD=0\",\"BLUEBOX_NET_DENY=\"],"
    "\"apparmorProfile\":\"containers-default\"},"
    "\"root\":{\"path\":\"rootfs\"},\"mounts\":[],\"linux\":{}}";

/* A step's bundle (STEP_CONFIG, a rootfs) in a fresh directory, __oci's settings written from
 * `c` and its create run on it: the rewritten config.json. `ret_dir` is for the caller's
 * checks of the directory and its removal (rm_rf, free). */
static json_t *oci_create(buildvm_conf *c, char **ret_dir)
{
    char tmpl[] = "/tmp/bb-buildvm-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char *dir = xstrdup(tmpl);
    char *root = path_join(dir, "rootfs"), *cfgp = path_join(dir, "config.json");
    char *conf = path_join(dir, "oci.json"), *script = path_join(dir, "rt");
    assert_int_equal(mkdir(root, 0755), 0);
    bb_error *err = NULL;
    assert_int_equal(write_file_atomic(cfgp, STEP_CONFIG, strlen(STEP_CONFIG), 0600, &err), 0);
    assert_int_equal(buildvm_write(c, "/b/bluebox", conf, script, &err), 0);
    assert_int_equal(buildvm_create(conf, dir, "ctr1", &err), 0);
    json_error_t jerr;
    json_t *o = json_load_file(cfgp, 0, &jerr);
    assert_non_null(o);
    free(root);
    free(cfgp);
    free(conf);
    free(script);
    *ret_dir = dir;
    return o;
}

static char *step_args(json_t *o)
{
    return json_dumps(json_object_get(json_object_get(o, "process"), "args"), JSON_COMPACT);
}

/* What __oci makes of a step's config.json on create: bluebox-vmm as root, the step's
 * command under __step (which takes on the step's user in the guest), the settings appended after
 * the image's BLUEBOX_* (dropped), the VMM's mounts, NNP, a pids limit, and the new /.bluebox
 * remembered for delete. */
static void oci_create_rewrites_the_step(void **s)
{
    (void)s;
    buildvm_conf c = {.runc = "/usr/sbin/runc",
                      .vmm_bundle = "/b/vmm",
                      .guest_binary = "/b/bluebox",
                      .step_caps = "800000db",
                      .ram_mib = 512,
                      .pids = 512};
    strv_add(&c.env, "BLUEBOX_NETWORK=none");
    char *dir = NULL;
    json_t *o = oci_create(&c, &dir);
    strv_clear(&c.env);
    char *args = step_args(o);
    assert_string_equal(args, "[\"/.bluebox/vmm/bluebox-vmm\",\"/.bluebox/bluebox\",\"__step\","
                              "\"800000db\",\"--user=1000:100:100\",\"/bin/sh\",\"-c\","
                              "\"make\"]");
    char *env = json_dumps(json_object_get(json_object_get(o, "process"), "env"), JSON_COMPACT);
    assert_string_equal(env, "[\"PATH=/bin\",\"BLUEBOX_NETWORK=none\",\"BLUEBOX_BUILD=1\"]");
    json_t *p = json_object_get(o, "process");
    assert_true(json_is_true(json_object_get(p, "noNewPrivileges")));
    assert_null(json_object_get(p, "apparmorProfile"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "user"), "uid")), 0);
    assert_int_equal(json_array_size(json_object_get(o, "mounts")), 3);
    json_t *pids =
        json_object_get(json_object_get(json_object_get(o, "linux"), "resources"), "pids");
    assert_int_equal(json_integer_value(json_object_get(pids, "limit")), 512);
    char *state = path_join(dir, "oci-ctr1");
    assert_true(path_exists(state));
    free(args);
    free(env);
    json_decref(o);
    (void)rm_rf(dir, NULL);
    free(state);
    free(dir);
}

/* The qemu bundle's settings: __step names the guest for its line, and the exec tmpfs is a
 * qemu run's (QEMU's RAM is a memfd: small, noexec). */
static void oci_create_for_qemu(void **s)
{
    (void)s;
    buildvm_conf c = {.runc = "/usr/sbin/runc",
                      .guest = "qemu",
                      .vmm_bundle = "/b/vmm",
                      .guest_binary = "/b/bluebox",
                      .step_caps = "800000db",
                      .ram_mib = 512};
    char *dir = NULL;
    json_t *o = oci_create(&c, &dir);
    char *args = step_args(o);
    assert_string_equal(args, "[\"/.bluebox/vmm/bluebox-vmm\",\"/.bluebox/bluebox\",\"__step\","
                              "\"800000db\",\"--guest=qemu\",\"--user=1000:100:100\",\"/bin/sh\","
                              "\"-c\",\"make\"]");
    char *mem = json_dumps(json_array_get(json_object_get(o, "mounts"), 0), JSON_COMPACT);
    assert_non_null(strstr(mem, "\"noexec\""));
    assert_non_null(strstr(mem, "\"size=16m\""));
    free(args);
    free(mem);
    json_decref(o);
    (void)rm_rf(dir, NULL);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offline),
        cmocka_unit_test(with_network),
        cmocka_unit_test(no_memory_flag_where_podman_cannot_enforce_it),
        cmocka_unit_test(limits_that_fit_the_host),
        cmocka_unit_test(never_privileged_or_host),
        cmocka_unit_test(guest_build_argv),
        cmocka_unit_test(qemu_kvm_build_argv),
        cmocka_unit_test(krun_build_argv),
        cmocka_unit_test(caps_mask),
        cmocka_unit_test(oci_create_rewrites_the_step),
        cmocka_unit_test(oci_create_for_qemu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
