/* The file server's exports for one boot. See exports.h. */
#include "vmm/exports.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/xalloc.h"
#include "vmm/vmm.h"

void exports_clear(exports *e)
{
    free(e->v);
    strv_clear(&e->paths);
    strv_clear(&e->socks);
    strv_clear(&e->unjailed);
    *e = (exports){0};
}

/* qemu: a single-file mount reaches the guest as the one entry of a directory the file
 * server exports: a tiny tmpfs of its own on the exec tmpfs, the container's mount of the
 * file bound onto an empty file in it (the bind keeps that mount's flags, read-only
 * included), then the tmpfs made read-only, so the guest can write the file (when the
 * mount is rw) and nothing else there. The guest binds the entry onto the path (guest/root.c),
 * as uml's guest does from its hostfs parent. Returns the directory. */
static char *stage_file(exports *e, const char *path)
{
    const char *slash = strrchr(path, '/'); /* spec_mount_path_ok: absolute, a name */
    const char *name = slash ? slash + 1 : path;
    char *dir = xasprintf(ABI_MEM_DIR "/file%zu", e->n);
    _cleanup_free_ char *file = xasprintf("%s/%s", dir, name);
    if (mkdir(dir, 0700) < 0 || mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                                      "size=4k,nr_inodes=4,mode=0755") < 0)
        vmm_die("cannot stage the mount %s for the guest (%s): %s", path, dir, strerror(errno));
    int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 || close(fd) < 0 || mount(path, file, NULL, MS_BIND, NULL) < 0 ||
        mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL) < 0)
        vmm_die("cannot stage the mount %s for the guest: %s", path, strerror(errno));
    strv_add(&e->unjailed, path);
    strv_add(&e->unjailed, file);
    return dir;
}

static fsd_export *export_add(exports *e, const char *path)
{
    strv_add(&e->paths, path);
    strv_add(&e->unjailed, path);
    strv_push(&e->socks, xasprintf(ABI_MEM_DIR "/fs%zu.sock", e->n));
    e->v = xreallocarray(e->v, e->n + 1, sizeof *e->v);
    fsd_export *x = &e->v[e->n];
    *x = (fsd_export){.path = e->paths.v[e->n], .sock_path = e->socks.v[e->n]};
    e->n++;
    return x;
}

void exports_fill(exports *e, const launch_spec *s, bool root)
{
    /* `root` (qemu): the container's root first, read-only, its own mount alone (fsd/serve.h), with
     * the image's owners and modes as they are. */
    /* A build step (SPEC_ROOT_BUILD, uml or qemu): the same, written (the step's layer), which
     * the guest makes its root. */
    bool build = s->root_flags & SPEC_ROOT_BUILD;
    if (root || build) {
        fsd_export *x = export_add(e, "/");
        x->one_mount = x->real_owners = true;
        x->read_only = !build;
        snprintf(x->tag, sizeof x->tag, "%s", ABI_QEMU_ROOT_TAG);
    }
    size_t k = 0;
    for (size_t i = 0; i < s->n_mounts; i++) {
        if (!(s->mounts[i].flags & SPEC_MOUNT_FS))
            continue;
        _cleanup_free_ char *staged =
            s->mounts[i].flags & SPEC_MOUNT_FILE ? stage_file(e, s->mounts[i].path) : NULL;
        fsd_export *x = export_add(e, staged ? staged : s->mounts[i].path);
        x->read_only = s->mounts[i].flags & SPEC_MOUNT_RO;
        snprintf(x->tag, sizeof x->tag, SPEC_FS_TAG "%zu", k++);
    }
}
