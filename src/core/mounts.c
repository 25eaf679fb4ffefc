/* Mount checks against the host, run before every build and boot: no mount source the
 * guest could redirect (nesting), and none that hands over the host (/, system trees,
 * homes, BLUEBOX_HOME). Paths are compared twice: as written (what podman is handed) and
 * resolved (what podman will actually mount after following symlinks), so neither a
 * planted symlink nor a spelled-out alias slips through. */
#include "mounts.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "home.h"
#include "util/fs.h"
#include "util/macro.h"
#include "util/xalloc.h"

/* Both spellings of a path: as written, and resolved (NULL when it does not exist). */
typedef struct {
    const char *written;
    char *resolved;
} spelling;

static void spell(spelling *s, const char *path)
{
    s->written = path;
    s->resolved = realpath(path, NULL);
}

static bool within(const spelling *p, const spelling *d)
{
    const char *ps[] = {p->written, p->resolved}, *ds[] = {d->written, d->resolved};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++)
            if (ps[i] && ds[j] && path_within(ps[i], ds[j]))
                return true;
    return false;
}

static int nested(const bf_mount *m, const char *outer, bb_error **err)
{
    return bb_fail(err, EPERM,
                   "mount %s -> %s: the host path is inside %s, which the guest can write, so a "
                   "guest could redirect this mount with a symlink; mount a directory outside "
                   "it instead",
                   m->host, m->guest, outer);
}

/* Host paths no mount may name. A mount of one of them, of anything inside it (THE_TREE)
 * or of a directory holding it hands the guest the host: its configuration and password
 * hashes, its kernel's interfaces, podman's socket and storage (a container started
 * through them runs as you, or as root), your keys and shell startup files, bluebox's own
 * state. HOLDER entries (homes) may have project directories mounted from inside them,
 * but neither they nor anything above them. RW_TREE entries may be mounted read-only. */
typedef enum { THE_TREE, HOLDER, RW_TREE } guard_kind;

typedef struct {
    const char *path; /* NULL: taken from the environment, see guard_path() */
    const char *env, *env_suffix;
    guard_kind kind;
    const char *what;
} guard;

/* In order: the first match names the refusal, so a home comes before what lies in it. */
static const guard guards[] = {
    {"/etc", NULL, NULL, THE_TREE, "the host's configuration and password hashes"},
    {"/proc", NULL, NULL, THE_TREE, "the host kernel's view of every process"},
    {"/sys", NULL, NULL, THE_TREE, "the host kernel's devices and settings"},
    {"/dev", NULL, NULL, THE_TREE, "the host's devices"},
    {"/run", NULL, NULL, THE_TREE, "the host's runtime state and sockets, podman's among them"},
    {"/var/run", NULL, NULL, THE_TREE, "the host's runtime state and sockets, podman's among them"},
    {"/boot", NULL, NULL, THE_TREE, "the host's kernels and boot loader"},
    {NULL, "HOME", "", HOLDER,
     "your home directory (your keys, credentials and shell startup files)"},
    {"/home", NULL, NULL, HOLDER, "every user's home directory"},
    {"/root", NULL, NULL, HOLDER, "root's home directory"},
    {"/var/lib/containers", NULL, NULL, THE_TREE, "podman's storage (every image and container)"},
    {NULL, "HOME", "/.local/share/containers", THE_TREE,
     "your podman storage (every image and container)"},
    {NULL, "XDG_DATA_HOME", "/containers", THE_TREE,
     "your podman storage (every image and container)"},
    {NULL, "HOME", "/.config/containers", THE_TREE,
     "your podman configuration (it decides how every container, sandboxes included, runs)"},
    {NULL, "HOME", "/.config/systemd", THE_TREE, "your systemd user units"},
    {NULL, "HOME", "/.ssh", THE_TREE, "your SSH keys and authorized_keys"},
    {NULL, "HOME", "/.gnupg", THE_TREE, "your GnuPG keys"},
    {"/usr", NULL, NULL, RW_TREE, "the host's programs and libraries"},
    {"/bin", NULL, NULL, RW_TREE, "the host's programs"},
    {"/sbin", NULL, NULL, RW_TREE, "the host's programs"},
    {"/lib", NULL, NULL, RW_TREE, "the host's libraries"},
    {"/lib32", NULL, NULL, RW_TREE, "the host's libraries"},
    {"/lib64", NULL, NULL, RW_TREE, "the host's libraries"},
    {"/libx32", NULL, NULL, RW_TREE, "the host's libraries"},
};

/* The guard's path, or NULL when its variable is unset or not absolute. */
static char *guard_path(const guard *g)
{
    if (g->path)
        return xstrdup(g->path);
    const char *v = getenv(g->env);
    if (!v || v[0] != '/')
        return NULL;
    return xasprintf("%s%s", v, g->env_suffix);
}

static int refuse(const bf_mount *m, const char *guarded, const char *rel, const char *what,
                  const char *instead, bb_error **err)
{
    return bb_fail(err, EPERM,
                   "mount %s -> %s is refused: %s %s, %s; a guest could take over "
                   "the host through it. %s",
                   m->host, m->guest, rel, guarded, what, instead);
}

#define INSTEAD_PROJECT "Mount a project directory instead (e.g. ~/src/myproject)."

/* Refuse m when its source is, is inside or holds path, as g's kind says. */
static int check_guard(const bf_mount *m, const spelling *src, const char *path, guard_kind kind,
                       const char *what, bb_error **err)
{
    spelling gs;
    spell(&gs, path);
    bool inside = within(src, &gs), holds = within(&gs, src);
    free(gs.resolved);
    const char *rel = inside && holds ? "it is" : inside ? "it is inside" : "it holds";
    if (kind == THE_TREE && (inside || holds))
        return refuse(m, path, rel, what, INSTEAD_PROJECT, err);
    if (kind == HOLDER && holds)
        return refuse(m, path, rel, what,
                      "Mount a project directory inside it instead (e.g. ~/src/myproject).", err);
    if (kind == RW_TREE && m->rw && (inside || holds))
        return refuse(m, path, rel, what,
                      "Mount it with mode: ro, or mount a project directory instead.", err);
    return 0;
}

static int check_guards(const bf_mount *m, const spelling *src, const char *root, bb_error **err)
{
    if ((src->resolved && streq(src->resolved, "/")) || streq(m->host, "/"))
        return bb_fail(err, EPERM,
                       "mount %s -> %s is refused: it is the host's whole filesystem, /etc and "
                       "your home included. " INSTEAD_PROJECT,
                       m->host, m->guest);
    if (check_guard(m, src, root, THE_TREE,
                    "bluebox's own home (every sandbox's /data, snapshots and agent tokens)",
                    err) < 0)
        return -1;
    for (size_t i = 0; i < ELEMENTSOF(guards); i++) {
        _cleanup_free_ char *path = guard_path(&guards[i]);
        if (path && check_guard(m, src, path, guards[i].kind, guards[i].what, err) < 0)
            return -1;
    }
    return 0;
}

int mounts_check_host(const char *root, const bluefile *bf, bb_error **err)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < bf->n_mounts; i++) {
        spelling src;
        spell(&src, bf->mounts[i].host);
        r = check_guards(&bf->mounts[i], &src, root, err);
        free(src.resolved);
    }
    return r;
}

int mounts_check(const sandbox *sb, bb_error **err)
{
    const bluefile *bf = sb->bf;
    if (!bf->n_mounts)
        return 0;
    _cleanup_free_ char *all_data_path = path_join(sb->root, "data");
    spelling all_data, own_data;
    spell(&all_data, all_data_path);
    spell(&own_data, sb->data);
    spelling *src = xcalloc(bf->n_mounts, sizeof *src);
    int r = 0;
    for (size_t i = 0; i < bf->n_mounts; i++)
        spell(&src[i], bf->mounts[i].host);
    for (size_t i = 0; r == 0 && i < bf->n_mounts; i++) {
        const bf_mount *m = &bf->mounts[i];
        if (!src[i].resolved)
            r = bb_fail(err, ENOENT, "mount %s -> %s: the host path does not exist", m->host,
                        m->guest);
        else if (within(&src[i], &all_data))
            r = nested(m, all_data_path, err);
        else if (m->rw && within(&own_data, &src[i]))
            r = bb_fail(err, EPERM,
                        "mount %s is rw and contains this sandbox's /data (%s); the guest could "
                        "rearrange its own /data through it; mount a narrower directory",
                        m->host, sb->data);
        for (size_t j = 0; r == 0 && j < bf->n_mounts; j++)
            if (j != i && bf->mounts[j].rw && within(&src[i], &src[j]))
                r = nested(m, bf->mounts[j].host, err);
    }
    for (size_t i = 0; i < bf->n_mounts; i++)
        free(src[i].resolved);
    free(src);
    free(all_data.resolved);
    free(own_data.resolved);
    return r < 0 ? r : mounts_check_host(sb->root, bf, err);
}
