/* podman build in a staging context, swapped into place on success. */
#include "build.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/containerfile.h"
#include "core/home.h"
#include "image.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

static int move_into_place(const char *stage, const char *dir, bb_error **err)
{
    static const char *const names[] = {"Containerfile", "image-id", BLUEPRINT_DIR};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        _cleanup_free_ char *from = path_join(stage, names[i]), *to = path_join(dir, names[i]);
        if (!path_exists(from)) {
            if (rm_rf(to, err) < 0)
                return -1;
            continue;
        }
        /* A directory cannot replace a directory in one rename: clear the old one first. */
        if (is_dir(from) && rm_rf(to, err) < 0)
            return -1;
        if (rename(from, to) < 0)
            return bb_fail_errno(err, errno, "cannot move %s into place", to);
    }
    return 0;
}

int image_build(const char *root, const char *name, const bluefile *bf, bb_error **err)
{
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install podman)");
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    _cleanup_free_ char *tmpl = xasprintf("%s/.build-XXXXXX", dir);
    if (!mkdtemp(tmpl))
        return bb_fail_errno(err, errno, "cannot create a build directory in %s", dir);
    _cleanup_containerfile_ containerfile cf = {0};
    containerfile_render(bf, &cf);
    int r = containerfile_write(&cf, tmpl, err);
    if (r == 0) {
        _cleanup_free_ char *file = path_join(tmpl, "Containerfile");
        _cleanup_free_ char *iid = path_join(tmpl, "image-id");
        _cleanup_free_ char *ref = image_ref(root, name);
        _cleanup_free_ char *iidarg = xasprintf("--iidfile=%s", iid);
        char *argv[] = {"podman", "build", "--pull=never", "--layers", "-f", file,
                        "-t",     ref,     iidarg,         tmpl,       NULL};
        int code = spawn_wait(argv, err);
        if (code < 0)
            r = -1;
        else if (code != 0)
            r = bb_fail(err, EIO,
                        "podman build failed (exit %d); the previous image and Containerfile "
                        "are unchanged",
                        code);
    }
    if (r == 0)
        r = move_into_place(tmpl, dir, err);
    if (r == 0)
        image_record_ref(root, name);
    (void)rm_rf(tmpl, NULL);
    return r;
}
