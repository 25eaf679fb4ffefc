/* The container limits decision over fake hosts: podman's defaults where they fit, the host's
 * hard limits where they do not, nothing for rootless podman or a containers.conf that sets
 * its own; and the --ulimit flags that every podman run and build then carries. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "launch/hostlimits.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* This CI machine kind: root without CAP_SYS_RESOURCE, hard nofile 20000. */
static const host_limits ci_vm = {.nofile_hard = 20000, .nproc_hard = 96367, .pid_max = 32768};

static char *joined(const strv *a)
{
    strbuf sb = {0};
    for (size_t i = 0; i < a->n; i++)
        sb_printf(&sb, "%s%s", i ? " " : "", a->v[i]);
    return a->n ? sb_steal(&sb) : xstrdup("");
}

static char *run_flags(const host_limits *h)
{
    hostlimits_use(h);
    strv a = {0};
    hostlimits_argv(&a);
    char *s = joined(&a);
    strv_clear(&a);
    return s;
}

static char *build_flags(const host_limits *h, unsigned long long nproc)
{
    hostlimits_use(h);
    strv a = {0};
    hostlimits_build_argv(&a, nproc);
    char *s = joined(&a);
    strv_clear(&a);
    return s;
}

/* Where podman's defaults do not fit, both limits are passed (--ulimit replaces podman's
 * whole list, so both even when one fits), at the most podman itself holds:
 *  - hard nofile below podman's 1048576 (this CI machine kind): nofile is the hard limit, and
 *    nproc pid_max, which podman sets on itself, though the hard nproc is higher;
 *  - hard nproc below pid_max: podman cannot set its own to pid_max and asks 1048576 for the
 *    container; the hard limit is what fits;
 *  - an unreadable pid_max: podman's nproc default is 1048576, which the hard limit caps;
 *  - CAP_SYS_RESOURCE but fs.nr_open below 1048576: podman falls back to the hard nofile. */
static void decisions_where_podman_defaults_fail(void **s)
{
    (void)s;
    static const struct {
        host_limits h;
        bool nofile_fits, nproc_fits;
        unsigned long long nofile, nproc;
    } cases[] = {
        {ci_vm, false, true, 20000, 32768},
        {{.nofile_hard = 1048576, .nproc_hard = 4000, .pid_max = 4194304},
         true,
         false,
         1048576,
         4000},
        {{.nofile_hard = 1048576, .nproc_hard = 96367}, true, false, 1048576, 96367},
        /* CAP_SYS_RESOURCE, but a kernel nofile ceiling below 1048576: podman falls back to
         * the hard nofile limit */
        {{.nofile_hard = 65536,
          .nproc_hard = 96367,
          .pid_max = 32768,
          .nr_open = 524288,
          .can_raise = true},
         false,
         true,
         65536,
         32768},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        ulimit_plan p;
        hostlimits_decide(&cases[i].h, &p);
        assert_true(p.pass);
        assert_int_equal(p.nofile_fits, cases[i].nofile_fits);
        assert_int_equal(p.nproc_fits, cases[i].nproc_fits);
        assert_int_equal(p.nofile, cases[i].nofile);
        assert_int_equal(p.nproc, cases[i].nproc);
    }
    char *got = run_flags(&ci_vm);
    assert_string_equal(got, "--ulimit=nofile=20000:20000 --ulimit=nproc=32768:32768");
    free(got);
}

/* Where podman's defaults fit, bluebox passes nothing: podman's own choice (and any
 * containers.conf) stands. */
static void defaults_that_fit_are_left_to_podman(void **s)
{
    (void)s;
    const host_limits fits[] = {
        /* high hard limits */
        {.nofile_hard = HOSTLIMIT_NONE, .nproc_hard = HOSTLIMIT_NONE, .pid_max = 4194304},
        {.nofile_hard = 1048576, .nproc_hard = 32768, .pid_max = 32768},
        /* low ones, but CAP_SYS_RESOURCE lets podman raise its own */
        {.nofile_hard = 524288, .nproc_hard = 1024, .pid_max = 4194304, .can_raise = true},
    };
    for (size_t i = 0; i < ELEMENTSOF(fits); i++) {
        ulimit_plan p;
        hostlimits_decide(&fits[i], &p);
        assert_true(p.nofile_fits && p.nproc_fits);
        assert_false(p.pass);
        assert_int_equal(p.nofile, 1048576);
        assert_int_equal(p.nproc, fits[i].pid_max);
        char *got = run_flags(&fits[i]);
        assert_string_equal(got, "");
        free(got);
    }
}

/* Rootless podman derives its defaults from the current limits, and a containers.conf that
 * sets default_ulimits is the user's: neither gets bluebox's flags. */
static void rootless_and_configured_hosts_get_none(void **s)
{
    (void)s;
    host_limits rootless = ci_vm, configured = ci_vm;
    rootless.rootless = true;
    configured.conf_ulimits = "/etc/containers/containers.conf";
    for (int i = 0; i < 2; i++) {
        const host_limits *h = i ? &configured : &rootless;
        ulimit_plan p;
        hostlimits_decide(h, &p);
        assert_false(p.pass);
        assert_false(p.nofile_fits);
        char *got = run_flags(h);
        assert_string_equal(got, "");
        free(got);
    }
}

/* podman build: its own nproc cap always (lowered to what fits), nofile when needed. */
static void build_flags_keep_the_build_cap(void **s)
{
    (void)s;
    char *got = build_flags(&ci_vm, 1024);
    assert_string_equal(got, "--ulimit=nproc=1024:1024 --ulimit=nofile=20000:20000");
    free(got);
    host_limits low = {.nofile_hard = HOSTLIMIT_NONE, .nproc_hard = 500, .pid_max = 32768};
    got = build_flags(&low, 1024);
    assert_string_equal(got, "--ulimit=nproc=500:500 --ulimit=nofile=1048576:1048576");
    free(got);
    host_limits fits = {
        .nofile_hard = HOSTLIMIT_NONE, .nproc_hard = HOSTLIMIT_NONE, .pid_max = 32768};
    got = build_flags(&fits, 1024);
    assert_string_equal(got, "--ulimit=nproc=1024:1024");
    free(got);
}

static void conf_line_for_a_fix(void **s)
{
    (void)s;
    hostlimits_use(&ci_vm);
    char *line = hostlimits_conf_line();
    assert_string_equal(line, "default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]");
    free(line);
}

/* Which containers.conf counts as setting default_ulimits: an assignment, not a comment or
 * another key; CONTAINERS_CONF alone when set. */
static void conf_scan(void **s)
{
    (void)s;
    char dir[] = "/tmp/bb-hostlimits-XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const struct {
        const char *text;
        bool sets;
    } cases[] = {
        {"[containers]\ndefault_ulimits = [\n  \"nofile=20000:20000\",\n]\n", true},
        {"[containers]\n  default_ulimits=[]\n", true},
        {"[containers]\n#default_ulimits = [\n#  \"nofile=1:1\",\n#]\n", false},
        {"[containers]\ndefault_ulimits_x = 1\n[engine]\nruntime = \"runc\"\n", false},
        {"", false},
    };
    char *path = xasprintf("%s/containers.conf", dir);
    setenv("CONTAINERS_CONF", path, 1);
    unsetenv("CONTAINERS_CONF_OVERRIDE");
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(cases[i].text, f);
        fclose(f);
        hostlimits_use(NULL); /* read this host again */
        const host_limits *h = hostlimits_host();
        if (cases[i].sets)
            assert_string_equal(h->conf_ulimits, path);
        else
            assert_null(h->conf_ulimits);
        if (cases[i].sets || h->rootless)
            assert_false(hostlimits_plan()->pass);
    }
    unsetenv("CONTAINERS_CONF");
    free(path);
    (void)rm_rf(dir, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decisions_where_podman_defaults_fail),
        cmocka_unit_test(defaults_that_fit_are_left_to_podman),
        cmocka_unit_test(rootless_and_configured_hosts_get_none),
        cmocka_unit_test(build_flags_keep_the_build_cap),
        cmocka_unit_test(conf_line_for_a_fix),
        cmocka_unit_test(conf_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
