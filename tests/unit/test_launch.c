/* Golden tests for the podman argv of every launch shape: the confinement is the same for
 * each, and only the declared differences appear. */
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bluefile.h"
#include "abi/abi.h"
#include "launch/egress.h"
#include "launch/hostlimits.h"
#include "launch/launch.h"
#include "runtime/posture.h"
#include "util/fs.h"
#include "util/xalloc.h"


/* The sandbox "box" of the home /r (which need not exist). */
static const sandbox *box_sb(void)
{
    static sandbox *sb;
    if (!sb)
        sb = sandbox_of("/r", "box");
    return sb;
}

static char bin[64];
/* A host where podman's default limits fit: the golden argvs carry no --ulimit. */
static const host_limits roomy = {
    .nofile_hard = HOSTLIMIT_NONE, .nproc_hard = HOSTLIMIT_NONE, .pid_max = 4194304};
/* home_id("/r"): /r does not exist here, so it is the hash of the path alone. */
#define HOME_R "ede9ad17e64e"

static int setup(void **s)
{
    (void)s;
    /* A krun on PATH, so the argv names its absolute path. */
    strcpy(bin, "/tmp/bb-bin-XXXXXX");
    if (!mkdtemp(bin))
        return -1;
    char p[128];
    snprintf(p, sizeof p, "%s/krun", bin);
    if (symlink("/bin/true", p) < 0)
        return -1;
    setenv("PATH", bin, 1);
    unsetenv("BLUEBOX_BACKEND");
    unsetenv("TERM"); /* the golden argvs are those of a host without one */
    hostlimits_use(&roomy);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(bin, NULL);
}

static char *argv_of_mode(const char *yaml, launch_mode mode)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    const backend *b = NULL;
    assert_int_equal(backend_for(bf, &b, &err), 0);
    char *cmd[] = {"echo", "hi there", NULL}, *agent[] = {"__agent", NULL};
    launch l = {.root = "/r",
                .sb = box_sb(),
                .bf = bf,
                .container = "bluebox-run-box-1",
                .mode = mode,
                .cmd = mode == LAUNCH_AGENT ? agent : cmd,
                .self = "/usr/bin/bluebox"};
    strv a = {0};
    assert_int_equal(launch_argv(b, &l, &a, &err), 0);
    strbuf sb = {0};
    for (size_t i = 0; i < a.n; i++)
        sb_printf(&sb, "%s%s", i ? " " : "", a.v[i]);
    strv_clear(&a);
    bluefile_free(bf);
    return sb_steal(&sb);
}

static char *argv_of(const char *yaml)
{
    return argv_of_mode(yaml, LAUNCH_RUN);
}

#define CONFINED                                                                                   \
    "podman run --rm --pull=never --name=bluebox-run-box-1 --label=bluebox.sandbox=box "           \
    "--label=bluebox.home=" HOME_R " "                                                             \
    "--security-opt=no-new-privileges "                                                            \
    "--cap-drop=all --cap-add=CHOWN,DAC_OVERRIDE,FOWNER,SETUID,SETGID,NET_BIND_SERVICE "           \
    "--pids-limit=512 "

static void standard_none(void **s)
{
    (void)s;
    char *got = argv_of("");
    char want[1024];
    snprintf(want, sizeof want,
             CONFINED "--memory=2304m --network=none -v /r/data/box:/data --log-driver=none "
                      "--runtime=%s/krun "
                      "--annotation=krun.cpus=2 --annotation=krun.ram_mib=2048 "
                      "localhost/bluebox/box:" HOME_R " echo hi there",
             bin);
    assert_string_equal(got, want);
    free(got);
}

static void strict_bridge_readonly_mounts_seccomp_passt(void **s)
{
    (void)s;
    char *got = argv_of("network: bridge\nisolation: strict\nreadonly: true\npasst: true\n"
                        "cpus: 4\nram_mib: 512\nseccomp: /etc/hostname\n"
                        "mounts:\n  - {host: /src, guest: /src}\n  - {host: ~/w, guest: /w}\n");
    char want[1024];
    snprintf(want, sizeof want,
             CONFINED "--memory=768m --network=bridge -v /r/data/box:/data -v /src:/src:ro "
                      "-v /home/u/w:/w:ro --read-only --security-opt=seccomp=/etc/hostname "
                      "--uidmap=0:1:65536 --gidmap=0:1:65536 --log-driver=none --runtime=%s/krun "
                      "--annotation=krun.cpus=4 --annotation=krun.ram_mib=512 "
                      "--annotation=krun.use_passt=1 localhost/bluebox/box:" HOME_R
                      " echo hi there",
             bin);
    assert_string_equal(got, want);
    free(got);
}

/* Where the hard nofile limit is below podman's default (and root cannot raise it), every
 * launch carries limits that fit (hostlimits.h): run, the agent of up and pool, the isolation
 * probe, all from this one argv builder. */
static void limits_that_fit_the_host(void **s)
{
    (void)s;
    const host_limits tight = {.nofile_hard = 20000, .nproc_hard = 96367, .pid_max = 32768};
    hostlimits_use(&tight);
    const launch_mode modes[] = {LAUNCH_RUN, LAUNCH_AGENT, LAUNCH_PROBE};
    for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
        char *got = argv_of_mode("", modes[i]);
        assert_contains(got, " --pids-limit=512 --ulimit=nofile=20000:20000 "
                             "--ulimit=nproc=32768:32768 --memory=");
        free(got);
    }
    hostlimits_use(&roomy);
    char *got = argv_of("");
    assert_null(strstr(got, "--ulimit"));
    free(got);
}

/* bluebox up on krun: detached, kept for its log, the agent published on the host's loopback
 * only, the chain head named without a value (podman reads it from its own environment). */
static void krun_agent(void **s)
{
    (void)s;
    char *got = argv_of_mode("network: bridge\n", LAUNCH_AGENT);
    char want[1024];
    snprintf(want, sizeof want,
             "podman run --pull=never --name=bluebox-run-box-1 --label=bluebox.sandbox=box "
             "--label=bluebox.home=" HOME_R " "
             "--security-opt=no-new-privileges "
             "--cap-drop=all --cap-add=CHOWN,DAC_OVERRIDE,FOWNER,SETUID,SETGID,NET_BIND_SERVICE "
             "--pids-limit=512 --memory=2304m --network=bridge -v /r/data/box:/data "
             "-v /usr/bin/bluebox:/.bluebox/bluebox:ro -d --publish=127.0.0.1::7700 "
             "--env=BLUEBOX_AGENT_HEAD --log-driver=k8s-file --log-opt=max-size=1mb "
             "--runtime=%s/krun --annotation=krun.cpus=2 "
             "--annotation=krun.ram_mib=2048 --entrypoint=/.bluebox/bluebox "
             "localhost/bluebox/box:" HOME_R " __agent",
             bin);
    assert_string_equal(got, want);
    free(got);
}

static void rw_mount_and_never_privileged(void **s)
{
    (void)s;
    char *got = argv_of("network: bridge\nmounts:\n  - {host: /src, guest: /src, mode: rw}\n");
    assert_contains(got, " -v /src:/src:rw ");
    assert_null(strstr(got, "--privileged"));
    assert_null(strstr(got, "--network=host"));
    free(got);
}

static void backend_env_override(void **s)
{
    (void)s;
    bluefile *bf = NULL;
    bb_error *err = NULL;
    assert_int_equal(bluefile_parse("B", "", 0, "/h", &bf, &err), 0);
    const backend *b = NULL;
    setenv("BLUEBOX_BACKEND", "firecracker", 1);
    assert_int_equal(backend_for(bf, &b, &err), -1);
    assert_contains(err->msg, "BLUEBOX_BACKEND must be krun, uml or qemu");
    bb_error_free(err);
    err = NULL;
    setenv("BLUEBOX_BACKEND", "podman", 1);
    assert_int_equal(backend_for(bf, &b, &err), 0);
    assert_string_equal(b->name, "krun");
    unsetenv("BLUEBOX_BACKEND");
    bluefile_free(bf);
}

/* Without an openable /dev/kvm the refusal names the uml backend; with one (some hosts have
 * a KVM device, e.g. kvm-pvm), a missing krun symlink is what is refused. */
/* data_limit: the disk image instead of the directory, named to the VMM, and a mount point;
 * a backend that cannot attach it refuses instead of silently giving /data no limit. */
static int no_flags(const launch *l, strv *argv, bb_error **err)
{
    (void)l, (void)argv, (void)err;
    return 0;
}

static char *data_limit_argv(const backend *b, bb_error **err)
{
    bluefile *bf = NULL;
    const char *yaml = "data_limit: 1G\n";
    assert_int_equal(bluefile_parse("B", yaml, strlen(yaml), "/h", &bf, err), 0);
    char *cmd[] = {"true", NULL};
    launch l = {.root = "/r", .sb = box_sb(), .bf = bf, .container = "c", .cmd = cmd};
    strv a = {0};
    char *ret = NULL;
    if (launch_argv(b, &l, &a, err) == 0) {
        strbuf sb = {0};
        for (size_t i = 0; i < a.n; i++)
            sb_printf(&sb, "%s%s", i ? " " : "", a.v[i]);
        ret = sb_steal(&sb);
    }
    strv_clear(&a);
    bluefile_free(bf);
    return ret;
}

static void data_limit_disk(void **s)
{
    (void)s;
    const backend disk = {
        .name = "disk", .data_disk = true, .launch_flags = no_flags, .entry = no_flags};
    bb_error *err = NULL;
    char *got = data_limit_argv(&disk, &err);
    assert_non_null(got);
    assert_contains(got, " -v /r/disks/box.img:/.bluebox/data.img:rw "
                         "--env=BLUEBOX_DATA_DISK=/.bluebox/data.img "
                         "--tmpfs=/data:rw,nosuid,nodev,noexec,size=16k,mode=0755 ");
    assert_null(strstr(got, "/r/data/box"));
    free(got);
    assert_null(data_limit_argv(backend_named("krun"), &err));
    assert_contains(err->msg, "data_limit needs backend: uml for now");
    bb_error_free(err);
}

static void krun_preflight_refusals(void **s)
{
    (void)s;
    bluefile *bf = NULL;
    bb_error *err = NULL;
    assert_int_equal(bluefile_parse("B", "", 0, "/h", &bf, &err), 0);
    launch l = {.root = "/r", .sb = box_sb(), .bf = bf};
    char dir[64] = "/tmp/bb-nokrun-XXXXXX", p[128];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/podman", dir);
    assert_int_equal(symlink("/bin/true", p), 0);
    setenv("PATH", dir, 1);
    assert_int_equal(backend_named("krun")->preflight(&l, &err), -1);
    struct stat st;
    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    bool device = kvm >= 0 && fstat(kvm, &st) == 0 && S_ISCHR(st.st_mode);
    if (kvm >= 0)
        close(kvm);
    if (!device) {
        assert_contains(err->msg, "backend: uml");
        assert_contains(err->msg, "/dev/kvm");
    } else {
        assert_contains(err->msg, "no krun on PATH");
    }
    bb_error_free(err);
    err = NULL;
    setenv("PATH", "/nonexistent", 1);
    assert_int_equal(backend_named("krun")->preflight(&l, &err), -1);
    assert_contains(err->msg, "podman is not installed");
    bb_error_free(err);
    setenv("PATH", bin, 1);
    rm_rf(dir, NULL);
    bluefile_free(bf);
}

/* The value of the first argv word that starts with `flag`, or NULL. */
static const char *flag_value(const strv *a, const char *flag)
{
    for (size_t i = 0; i < a->n; i++)
        if (strncmp(a->v[i], flag, strlen(flag)) == 0)
            return a->v[i] + strlen(flag);
    return NULL;
}

/* The posture line says what the argv does: as many capabilities as --cap-add adds, the
 * same pids limit and memory cap. Both come from launch.h, never written twice. */
static void posture_matches_argv(void **s)
{
    (void)s;
    static const char *const yamls[] = {"", "ram_mib: 512\n", "ram_mib: 65536\nnetwork: bridge\n"};
    for (size_t i = 0; i < ELEMENTSOF(yamls); i++) {
        bluefile *bf = NULL;
        bb_error *err = NULL;
        assert_int_equal(bluefile_parse("B", yamls[i], strlen(yamls[i]), "/h", &bf, &err), 0);
        const backend *b = NULL;
        assert_int_equal(backend_for(bf, &b, &err), 0);
        char *cmd[] = {"true", NULL};
        launch l = {.root = "/r", .sb = box_sb(), .bf = bf, .container = "c", .cmd = cmd};
        strv a = {0};
        assert_int_equal(launch_argv(b, &l, &a, &err), 0);
        const char *caps = flag_value(&a, "--cap-add=");
        assert_non_null(caps);
        size_t n = 1;
        for (const char *c = caps; *c; c++)
            n += *c == ',';
        char *posture = posture_line(b, bf, "6.1.0");
        char want[128];
        snprintf(want, sizeof want, " · caps %zu · ", n);
        assert_contains(posture, want);
        if (limits_enforced()) {
            snprintf(want, sizeof want, " · pids %s · memory %s · ",
                     flag_value(&a, "--pids-limit="), flag_value(&a, "--memory="));
            assert_contains(posture, want);
        }
        free(posture);
        strv_clear(&a);
        bluefile_free(bf);
    }
}

/* Every backend in the registry is complete, found by its names, and can give a guest the
 * Bluefile's defaults. */
static void registry_backends_are_complete(void **s)
{
    (void)s;
    size_t n = 0;
    for (const backend *const *p = backend_registry; *p; p++, n++) {
        const backend *b = *p;
        assert_non_null(b->name);
        assert_ptr_equal(backend_named(b->name), b);
        if (b->alias)
            assert_ptr_equal(backend_named(b->alias), b);
        assert_non_null(b->posture_head);
        assert_non_null(b->posture_tail);
        assert_non_null(b->boundary);
        assert_non_null(b->install);
        assert_in_range(b->max_ram_mib, 2048, BLUEFILE_MAX_RAM_MIB);
        assert_in_range(b->max_cpus, 2, BLUEFILE_MAX_CPUS);
        if (b->kernel_path)
            assert_int_equal(b->kernel_path()[0], '/');
        assert_non_null(b->preflight);
        assert_non_null(b->doctor);
        assert_non_null(b->launch_flags);
        assert_non_null(b->entry);
        for (const backend *const *q = backend_registry; q != p; q++)
            assert_false(streq((*q)->name, b->name));
    }
    assert_true(n >= 2);
    assert_null(backend_named("plain")); /* the isolation check's baseline is no backend */
}

/* A Bluefile that asks for more than its backend can give is refused by backend_for, so
 * nothing starts: bluebox-vmm (uml) takes at most 65536 MiB, the Bluefile up to 1048576. */
static void backend_limits(void **s)
{
    (void)s;
    static const struct {
        const char *yaml, *env, *msg;
    } cases[] = {
        {"backend: uml\nram_mib: 100000\n", NULL,
         "ram_mib 100000 is more than the uml backend can give a guest (at most 65536); lower "
         "ram_mib in the Bluefile"},
        {"ram_mib: 65537\n", "uml",
         "ram_mib 65537 is more than the uml backend can give a guest (at most 65536); lower "
         "ram_mib in the Bluefile (BLUEBOX_BACKEND=uml overrides its backend)"},
        {"backend: uml\nram_mib: 65536\ncpus: 16\n", NULL, NULL},
        {"ram_mib: 1048576\ncpus: 16\n", NULL, NULL},
        {"backend: uml\nram_mib: 100000\n", "krun", NULL},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        bluefile *bf = NULL;
        bb_error *err = NULL;
        const char *y = cases[i].yaml;
        assert_int_equal(bluefile_parse("B", y, strlen(y), "/h", &bf, &err), 0);
        if (cases[i].env)
            setenv("BLUEBOX_BACKEND", cases[i].env, 1);
        const backend *b = NULL;
        int r = backend_for(bf, &b, &err);
        unsetenv("BLUEBOX_BACKEND");
        if (cases[i].msg) {
            assert_int_equal(r, -1);
            assert_string_equal(err->msg, cases[i].msg);
            assert_null(b);
            bb_error_free(err);
        } else {
            assert_int_equal(r, 0);
            assert_non_null(b);
        }
        bluefile_free(bf);
    }
}

/* The host's TERM reaches run and shell, by name only (podman copies the value from its
 * environment), never the probe or the agent (exec sends its own); a Bluefile env: TERM wins,
 * and a value that is no terminal name stays home. */
static void host_term(void **s)
{
    (void)s;
    static const struct {
        const char *term, *yaml;
        launch_mode mode;
        bool passed;
    } cases[] = {
        {"screen-256color", "", LAUNCH_RUN, true},
        {"xterm-kitty", "", LAUNCH_SHELL, true},
        {"screen-256color", "", LAUNCH_PROBE, false},
        {"screen-256color", "", LAUNCH_AGENT, false},
        {"screen-256color", "env:\n  TERM: vt100\n", LAUNCH_RUN, false},
        {"screen-256color", "env:\n  TERMINFO: /x\n", LAUNCH_RUN, true},
        {"", "", LAUNCH_RUN, false},
        {"x\x1b]0;owned\x07", "", LAUNCH_RUN, false},
        {NULL, "", LAUNCH_RUN, false},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        if (cases[i].term)
            setenv("TERM", cases[i].term, 1);
        else
            unsetenv("TERM");
        char *got = argv_of_mode(cases[i].yaml, cases[i].mode);
        if (cases[i].passed != (strstr(got, " --env=TERM ") != NULL))
            fail_msg("case %zu: %s", i, got);
        assert_null(strstr(got, "screen-256color")); /* never the value in the argv */
        free(got);
    }
    unsetenv("TERM");
}

/* A backend that gives a guest fewer CPUs than the Bluefile's cpus says so in the posture
 * line, and only then; the count is the one `bluebox env` reports. */
static void posture_states_ignored_cpus(void **s)
{
    (void)s;
    static const struct {
        const char *yaml;
        int cpus;
        const char *says; /* NULL: no CPU words at all */
    } cases[] = {
        {"backend: uml\ncpus: 4\n", 1, " · 1 CPU (uml has no SMP; cpus: 4 ignored) · "},
        {"backend: uml\n", 1, " · 1 CPU (uml has no SMP; cpus: 2 ignored) · "},
        {"backend: uml\ncpus: 1\n", 1, NULL},
        {"cpus: 4\n", 4, NULL},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        bluefile *bf = NULL;
        bb_error *err = NULL;
        const char *y = cases[i].yaml;
        assert_int_equal(bluefile_parse("B", y, strlen(y), "/h", &bf, &err), 0);
        const backend *b = NULL;
        assert_int_equal(backend_for(bf, &b, &err), 0);
        assert_int_equal(backend_guest_cpus(b, bf), cases[i].cpus);
        char *posture = posture_line(b, bf, "6.1.0");
        if (cases[i].says)
            assert_contains(posture, cases[i].says);
        else if (strstr(posture, "CPU"))
            fail_msg("\"%s\" names CPUs", posture);
        free(posture);
        bluefile_free(bf);
    }
}

/* ---- allow: and secrets: (launch/egress.h) ------------------------------------------- */

/* A backend whose VMM enforces allow: (as uml's), without uml's bundle to prepare. */
static const backend egress_backend = {
    .name = "vmm", .egress = true, .launch_flags = no_flags, .entry = no_flags};

#define EGRESS_BF                                                                                  \
    "network: bridge\nallow: [api.example.com, \"*.Example.org:8443\", 192.0.2.0/24]\n"            \
    "secrets: [{name: API_TOKEN, from_env: T, hosts: [api.example.com]}]\n"
#define PH ABI_SECRET_PREFIX "0123456789abcdef0123456789abcdef"

static char *argv_on(const backend *b, const char *yaml, launch_mode mode, const egress *e)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    char *cmd[] = {"true", NULL};
    launch l = {.root = "/r",
                .sb = box_sb(),
                .bf = bf,
                .container = "c",
                .mode = mode,
                .cmd = cmd,
                .self = "/usr/bin/bluebox",
                .egress = e};
    strv a = {0};
    assert_int_equal(launch_argv(b, &l, &a, &err), 0);
    strbuf sb = {0};
    for (size_t i = 0; i < a.n; i++)
        sb_printf(&sb, " %s", a.v[i]);
    sb_puts(&sb, " ");
    strv_clear(&a);
    bluefile_free(bf);
    return sb_steal(&sb);
}

static char *egress_argv(const char *yaml, launch_mode mode, const egress *e)
{
    return argv_on(&egress_backend, yaml, mode, e);
}

/* The list, the sandbox's name and the log reach the VMM; the secrets as fd 3 and their
 * number; the guest's variables hold placeholders. No value is in the argv: the egress
 * holds none (only its memfd does). */
static void egress_argv_run_and_up(void **s)
{
    (void)s;
    egress e = {.log = "/r/logs/net/box.log", .secrets_fd = 10};
    strv_add(&e.env, "API_TOKEN=" PH);
    for (int i = 0; i < 3; i++) {
        launch_mode mode = i == 0 ? LAUNCH_RUN : i == 1 ? LAUNCH_SHELL : LAUNCH_AGENT;
        char *got = egress_argv(EGRESS_BF, mode, &e);
        assert_contains(got, " --env=BLUEBOX_NET_ALLOW=api.example.com,*.example.org:8443,"
                             "192.0.2.0/24 ");
        assert_contains(got, " --env=BLUEBOX_SANDBOX=box ");
        assert_contains(got, " -v /r/logs/net/box.log:/.bluebox/net.log:rw ");
        assert_contains(got, " --env=BLUEBOX_NET_LOG=/.bluebox/net.log ");
        assert_contains(got, " --preserve-fds=1 ");
        assert_contains(got, " --env=BLUEBOX_SECRETS_FD=3 ");
        assert_contains(got, " --env=API_TOKEN=" PH " ");
        assert_contains(got, " --network=bridge ");
        free(got);
    }
    /* the isolation probe boots no workload: no secrets, same policy */
    char *got = egress_argv(EGRESS_BF, LAUNCH_PROBE, &e);
    assert_contains(got, " --env=BLUEBOX_NET_ALLOW=");
    assert_null(strstr(got, "--preserve-fds"));
    assert_null(strstr(got, "SECRETS_FD"));
    assert_null(strstr(got, "API_TOKEN"));
    free(got);
    strv_clear(&e.env);
}

/* The lifeline (launch/lifeline.h): a run, shell or up of a backend whose VMM is bluebox-vmm
 * tells the VMM its fd, right after the secrets' memfd, and has podman pass both on; the
 * isolation probe and a backend with another VMM (krun) get none. */
static void lifeline_argv(void **s)
{
    (void)s;
    static const backend uml_like = {
        .name = "uml", .egress = true, .vmm = true, .launch_flags = no_flags, .entry = no_flags};
    static const backend krun_like = {
        .name = "krun", .egress = true, .launch_flags = no_flags, .entry = no_flags};
    setenv("BLUEBOX_LAUNCH", "podman", 1); /* the argv podman runs, not the direct path's */
    egress e = {.secrets_fd = 10};
    strv_add(&e.env, "API_TOKEN=" PH);
    for (int i = 0; i < 3; i++) {
        launch_mode mode = i == 0 ? LAUNCH_RUN : i == 1 ? LAUNCH_SHELL : LAUNCH_AGENT;
        char *got = argv_on(&uml_like, "network: none\n", mode, NULL);
        assert_contains(got, " --env=BLUEBOX_LIFELINE_FD=3 --preserve-fds=1 ");
        free(got);
        got = argv_on(&uml_like, EGRESS_BF, mode, &e);
        assert_contains(got, " --env=BLUEBOX_SECRETS_FD=3 ");
        assert_contains(got, " --env=BLUEBOX_LIFELINE_FD=4 --preserve-fds=2 ");
        free(got);
    }
    char *got = argv_on(&uml_like, "network: none\n", LAUNCH_PROBE, NULL);
    assert_null(strstr(got, "LIFELINE"));
    assert_null(strstr(got, "--preserve-fds"));
    free(got);
    got = argv_on(&krun_like, EGRESS_BF, LAUNCH_RUN, &e);
    assert_null(strstr(got, "LIFELINE"));
    assert_contains(got, " --preserve-fds=1 ");
    free(got);
    strv_clear(&e.env);
    unsetenv("BLUEBOX_LAUNCH");
}

/* No egress prepared (a data job, the API's probe): the list is still enforced; no log,
 * no secrets. An empty list is allowlist mode all the same (the variable is present). */
static void egress_argv_without_prepare(void **s)
{
    (void)s;
    char *got = egress_argv(EGRESS_BF, LAUNCH_RUN, NULL);
    assert_contains(got, " --env=BLUEBOX_NET_ALLOW=api.example.com,");
    assert_null(strstr(got, "net.log"));
    assert_null(strstr(got, "--preserve-fds"));
    free(got);
    got = egress_argv("network: bridge\nallow: []\n", LAUNCH_RUN, NULL);
    assert_contains(got, " --env=BLUEBOX_NET_ALLOW= ");
    free(got);
    got = egress_argv("network: bridge\n", LAUNCH_RUN, NULL);
    assert_null(strstr(got, "NET_ALLOW"));
    assert_null(strstr(got, "BLUEBOX_SANDBOX"));
    free(got);
}

/* krun has no enforcing network path yet: a Bluefile with allow: is refused before anything
 * starts, with what to do (SECURITY.md, "Egress"), and its argv is never built. */
static void krun_refuses_allow(void **s)
{
    (void)s;
    bluefile *bf = NULL;
    bb_error *err = NULL;
    const char *yaml = "network: bridge\nallow: [api.example.com]\n";
    assert_int_equal(bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err), 0);
    const backend *b = NULL;
    assert_int_equal(backend_for(bf, &b, &err), -1);
    assert_string_equal(err->msg,
                        "allow: and secrets: are enforced by bluebox's own VMM network path, "
                        "which the krun backend does not have yet (SECURITY.md, \"Egress\"); "
                        "set backend: uml or qemu");
    bb_error_free(err);
    err = NULL;
    setenv("BLUEBOX_BACKEND", "krun", 1);
    assert_int_equal(backend_for(bf, &b, &err), -1);
    assert_contains(err->msg, "(BLUEBOX_BACKEND=krun overrides the Bluefile's backend)");
    bb_error_free(err);
    err = NULL;
    setenv("BLUEBOX_BACKEND", "uml", 1);
    assert_int_equal(backend_for(bf, &b, &err), 0);
    assert_string_equal(b->name, "uml");
    unsetenv("BLUEBOX_BACKEND");
    /* and launch_argv itself refuses, should anything reach it */
    char *cmd[] = {"true", NULL};
    launch l = {.root = "/r", .sb = box_sb(), .bf = bf, .container = "c", .cmd = cmd};
    strv a = {0};
    assert_int_equal(launch_argv(backend_named("krun"), &l, &a, &err), -1);
    assert_contains(err->msg, "cannot enforce allow:");
    bb_error_free(err);
    strv_clear(&a);
    bluefile_free(bf);
}

/* A pool VM is an up VM: network: none needs a backend that keeps an agent VM offline
 * (uml, qemu); krun is refused with what to change, bridge is fine on both. */
static void warm_pool_backends(void **s)
{
    (void)s;
    bluefile *bf = NULL;
    bb_error *err = NULL;
    const char *yaml = "network: none\nwarm: 2\n";
    assert_int_equal(bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err), 0);
    const backend *b = NULL;
    assert_int_equal(backend_for(bf, &b, &err), -1);
    assert_string_equal(err->msg,
                        "warm: 2 keeps VMs booted for run, and with network: none its VMs must "
                        "stay offline with the agent's port published, which the krun backend "
                        "cannot do; set backend: uml or qemu, or warm: 0");
    bb_error_free(err);
    err = NULL;
    setenv("BLUEBOX_BACKEND", "uml", 1);
    assert_int_equal(backend_for(bf, &b, &err), 0);
    assert_string_equal(b->name, "uml");
    unsetenv("BLUEBOX_BACKEND");
    bluefile_free(bf);
    yaml = "network: bridge\nwarm: 1\n";
    assert_int_equal(bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err), 0);
    for (const backend *const *o = backend_registry; *o; o++) {
        setenv("BLUEBOX_BACKEND", (*o)->name, 1);
        assert_int_equal(backend_for(bf, &b, &err), (*o)->agent ? 0 : -1);
        bb_error_free(err);
        err = NULL;
    }
    unsetenv("BLUEBOX_BACKEND");
    bluefile_free(bf);
}

/* The posture line and bluebox env say the policy in the same words. */
static void egress_posture(void **s)
{
    (void)s;
    bluefile *bf = NULL;
    bb_error *err = NULL;
    assert_int_equal(
        bluefile_parse("/h/Bluefile", EGRESS_BF, strlen(EGRESS_BF), "/home/u", &bf, &err), 0);
    char *net = posture_network(backend_named("uml"), bf);
    assert_string_equal(net, "allow 3 hosts, 1 secret");
    free(net);
    char *line = posture_line(backend_named("uml"), bf, "6.1");
    assert_contains(line, " · network allow 3 hosts, 1 secret · ");
    free(line);
    bluefile_free(bf);
    const char *one = "network: bridge\nallow: [a.example.org]\n";
    assert_int_equal(bluefile_parse("/h/Bluefile", one, strlen(one), "/home/u", &bf, &err), 0);
    net = posture_network(backend_named("uml"), bf);
    assert_string_equal(net, "allow 1 host");
    free(net);
    bluefile_free(bf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(posture_states_ignored_cpus),
        cmocka_unit_test(host_term),
        cmocka_unit_test(standard_none),
        cmocka_unit_test(limits_that_fit_the_host),
        cmocka_unit_test(strict_bridge_readonly_mounts_seccomp_passt),
        cmocka_unit_test(rw_mount_and_never_privileged),
        cmocka_unit_test(krun_agent),
        cmocka_unit_test(backend_env_override),
        cmocka_unit_test(krun_preflight_refusals),
        cmocka_unit_test(data_limit_disk),
        cmocka_unit_test(posture_matches_argv),
        cmocka_unit_test(registry_backends_are_complete),
        cmocka_unit_test(backend_limits),
        cmocka_unit_test(egress_argv_run_and_up),
        cmocka_unit_test(egress_argv_without_prepare),
        cmocka_unit_test(lifeline_argv),
        cmocka_unit_test(krun_refuses_allow),
        cmocka_unit_test(warm_pool_backends),
        cmocka_unit_test(egress_posture),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
