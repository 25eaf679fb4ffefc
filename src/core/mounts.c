/* Mount nesting check, run before every boot. Paths are compared twice: as written (what
 * podman is handed) and resolved (what podman will actually mount after following
 * symlinks), so neither a planted symlink nor a spelled-out alias slips through. */
#include "mounts.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "home.h"
#include "util/fs.h"
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

int mounts_check(const char *root, const char *name, const bluefile *bf, bb_error **err)
{
    if (!bf->n_mounts)
        return 0;
    _cleanup_free_ char *all_data_path = path_join(root, "data");
    _cleanup_free_ char *own_data_path = home_path_of(root, HP_DATA, name);
    spelling all_data, own_data;
    spell(&all_data, all_data_path);
    spell(&own_data, own_data_path);
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
                        m->host, own_data_path);
        for (size_t j = 0; r == 0 && j < bf->n_mounts; j++)
            if (j != i && bf->mounts[j].rw && within(&src[i], &src[j]))
                r = nested(m, bf->mounts[j].host, err);
    }
    for (size_t i = 0; i < bf->n_mounts; i++)
        free(src[i].resolved);
    free(src);
    free(all_data.resolved);
    free(own_data.resolved);
    return r;
}
