/* Unit tests for the boot-time mount nesting check, with real directories and symlinks. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/bluefile.h"
#include "core/mounts.h"
#include "util/fs.h"

static char base[64];

static int setup(void **s)
{
    (void)s;
    strcpy(base, "/tmp/bb-mnt-XXXXXX");
    if (!mkdtemp(base))
        return -1;
    char p[256];
    const char *dirs[] = {"home", "home/data",   "home/data/box", "home/data/other",
                          "proj", "proj/config", "elsewhere",     "elsewhere/inner"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", base, dirs[i]);
        mkdir(p, 0755);
    }
    char t[256];
    /* A symlink that leads into another sandbox's /data. */
    snprintf(p, sizeof p, "%s/sneaky", base);
    snprintf(t, sizeof t, "%s/home/data/other", base);
    return symlink(t, p);
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(base, NULL);
}

/* Check a Bluefile whose mounts are given as YAML with @ standing for the temp base. */
static int check(const char *mounts_yaml, char **msg)
{
    char yaml[2048], *w = yaml;
    w += sprintf(w, "mounts:\n");
    for (const char *r = mounts_yaml; *r; r++) {
        if (*r == '@')
            w += sprintf(w, "%s", base);
        else
            *w++ = *r;
    }
    *w = '\0';
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("B", yaml, strlen(yaml), "/h", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    char root[256];
    snprintf(root, sizeof root, "%s/home", base);
    int r = mounts_check(root, "box", bf, &err);
    *msg = r < 0 ? strdup(err->msg) : NULL;
    bb_error_free(err);
    bluefile_free(bf);
    return r;
}

#define REFUSED(yaml, needle)                                                                      \
    do {                                                                                           \
        char *m_;                                                                                  \
        assert_int_equal(check(yaml, &m_), -1);                                                    \
        assert_contains(m_, needle);                                                               \
        free(m_);                                                                                  \
    } while (0)

#define ACCEPTED(yaml)                                                                             \
    do {                                                                                           \
        char *m_;                                                                                  \
        int r_ = check(yaml, &m_);                                                                 \
        if (r_ < 0)                                                                                \
            fail_msg("refused: %s", m_);                                                           \
    } while (0)

static void refusals(void **s)
{
    (void)s;
    REFUSED("  - {host: @/home/data/other, guest: /o}\n", "which the guest can write");
    REFUSED("  - {host: @/home/data, guest: /o}\n", "which the guest can write");
    /* the same, only reached through a symlink: caught once resolved */
    REFUSED("  - {host: @/sneaky, guest: /o}\n", "which the guest can write");
    REFUSED("  - {host: @/proj, guest: /p, mode: rw}\n  - {host: @/proj/config, guest: /c}\n",
            "inside");
    REFUSED("  - {host: @/home, guest: /h, mode: rw}\n", "contains this sandbox's /data");
    REFUSED("  - {host: @/missing, guest: /m}\n", "does not exist");
}

static void independent_mounts_accepted(void **s)
{
    (void)s;
    ACCEPTED("  - {host: @/proj, guest: /p}\n  - {host: @/proj/config, guest: /c}\n");
    ACCEPTED("  - {host: @/proj, guest: /p, mode: rw}\n  - {host: @/elsewhere, guest: /e}\n");
    ACCEPTED("  - {host: @/elsewhere/inner, guest: /i, mode: rw}\n  - {host: @/proj, guest: /p}\n");
    /* a ro mount containing /data is fine: the guest cannot write through it */
    ACCEPTED("  - {host: @/home, guest: /h}\n");
}

static void within(void **s)
{
    (void)s;
    assert_true(path_within("/a/b", "/a"));
    assert_true(path_within("/a", "/a"));
    assert_true(path_within("/a", "/a/"));
    assert_false(path_within("/ab", "/a"));
    assert_true(path_within("/x", "/"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(independent_mounts_accepted, setup, teardown),
        cmocka_unit_test(within),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
