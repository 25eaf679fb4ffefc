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
    const char *dirs[] = {"home",
                          "home/data",
                          "home/data/box",
                          "home/data/other",
                          "home/sandboxes",
                          "proj",
                          "proj/config",
                          "elsewhere",
                          "elsewhere/inner",
                          "userhome",
                          "userhome/src",
                          "userhome/src/proj",
                          "userhome/.local",
                          "userhome/.local/share",
                          "userhome/.local/share/containers",
                          "userhome/.local/share/containers/storage",
                          "userhome/.ssh",
                          "userhome/.config",
                          "userhome/.config/containers"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", base, dirs[i]);
        mkdir(p, 0755);
    }
    char t[256];
    /* A symlink that leads into another sandbox's /data. */
    snprintf(p, sizeof p, "%s/sneaky", base);
    snprintf(t, sizeof t, "%s/home/data/other", base);
    if (symlink(t, p) < 0)
        return -1;
    /* Links to a host tree and to the user's home: refused once resolved. */
    snprintf(p, sizeof p, "%s/etclink", base);
    if (symlink("/etc", p) < 0)
        return -1;
    snprintf(p, sizeof p, "%s/homelink", base);
    snprintf(t, sizeof t, "%s/userhome", base);
    if (symlink(t, p) < 0)
        return -1;
    return setenv("HOME", t, 1);
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(base, NULL);
}

/* s with @ standing for the temp base. */
static char *expand_base(const char *s)
{
    char *out = malloc(strlen(s) * sizeof base + 1), *w = out;
    for (; *s; s++)
        w += *s == '@' ? sprintf(w, "%s", base) : sprintf(w, "%c", *s);
    return out;
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
    char data[300];
    snprintf(data, sizeof data, "%s/data/box", root);
    sandbox sb = {.root = root, .name = "box", .data = data, .bf = bf, .lock = -1};
    int r = mounts_check(&sb, &err);
    *msg = r < 0 ? strdup(err->msg) : NULL;
    bb_error_free(err);
    bluefile_free(bf);
    return r;
}

/* needle too may use @ for the temp base. */
#define REFUSED(yaml, needle)                                                                      \
    do {                                                                                           \
        char *m_;                                                                                  \
        if (check(yaml, &m_) != -1)                                                                \
            fail_msg("accepted: %s", yaml);                                                        \
        char *n_ = expand_base(needle);                                                            \
        assert_contains(m_, n_);                                                                   \
        free(n_);                                                                                  \
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
    ACCEPTED("  - {host: @/userhome/src/proj, guest: /p, mode: rw}\n");
    ACCEPTED("  - {host: /usr, guest: /u}\n"); /* read-only: the host's programs, not its keys */
}

/* Mounts that hand over the host: refused as written and through a symlink, each with
 * what it would have handed over and what to mount instead. */
static void host_trees_refused(void **s)
{
    (void)s;
    REFUSED("  - {host: /, guest: /host}\n", "the host's whole filesystem");
    REFUSED("  - {host: /etc, guest: /e}\n", "it is /etc, the host's configuration");
    REFUSED("  - {host: /etc/ssl, guest: /e}\n", "it is inside /etc");
    REFUSED("  - {host: /var/run, guest: /r}\n", "podman's among them");
    REFUSED("  - {host: /run, guest: /r}\n", "podman's among them");
    REFUSED("  - {host: /proc, guest: /p}\n", "it is /proc");
    REFUSED("  - {host: /sys/kernel, guest: /p}\n", "it is inside /sys");
    REFUSED("  - {host: /dev, guest: /d}\n", "it is /dev");
    REFUSED("  - {host: /boot, guest: /b}\n", "it is /boot");
    REFUSED("  - {host: /usr, guest: /u, mode: rw}\n", "mode: ro");
    REFUSED("  - {host: /var, guest: /v}\n", "it holds /var/run");
    REFUSED("  - {host: @/etclink, guest: /e}\n", "/etc");
    /* the user's home and what holds it; inside it is fine (above) */
    REFUSED("  - {host: @/userhome, guest: /h}\n", "it is @/userhome, your home directory");
    REFUSED("  - {host: @, guest: /h}\n", "it holds");
    REFUSED("  - {host: @/homelink, guest: /h}\n", "your home directory");
    REFUSED("  - {host: @/userhome/.local/share/containers/storage, guest: /c}\n",
            "podman storage");
    REFUSED("  - {host: /home, guest: /h}\n", "every user's home");
    REFUSED("  - {host: @/userhome/.ssh, guest: /s}\n", "your SSH keys");
    REFUSED("  - {host: @/userhome/.config, guest: /c}\n",
            "it holds @/userhome/.config/containers");
    /* BLUEBOX_HOME itself, inside it (any part) and above it; read-only too: it holds the
     * agent tokens and every sandbox's state */
    REFUSED("  - {host: @/home, guest: /h}\n", "bluebox's own home");
    REFUSED("  - {host: @/home/sandboxes, guest: /h}\n", "it is inside @/home");
    REFUSED("  - {host: @/home/data/box, guest: /h}\n", "which the guest can write");
    REFUSED("  - {host: @/home/sandboxes, guest: /h}\n", "Mount a project directory instead");
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
        cmocka_unit_test_setup_teardown(host_trees_refused, setup, teardown),
        cmocka_unit_test(within),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
