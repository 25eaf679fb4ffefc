/* Image housekeeping through podman, for commands that work on files but also own the
 * sandbox's image (destroy, rename). Missing podman or a missing image is not an error. */
#include "image.h"

#include <errno.h>

#include "util/spawn.h"
#include "util/xalloc.h"

char *image_ref(const char *name)
{
    return xasprintf("localhost/bluebox/%s:latest", name);
}

static int image_exists(const char *ref)
{
    if (!program_on_path("podman"))
        return 0;
    char *argv[] = {"podman", "image", "exists", (char *)ref, NULL};
    return spawn_quiet(argv, NULL) == 0;
}

int image_remove(const char *name, bb_error **err)
{
    _cleanup_free_ char *ref = image_ref(name);
    if (!image_exists(ref))
        return 0;
    char *argv[] = {"podman", "rmi", "-f", ref, NULL};
    int r = spawn_quiet(argv, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EIO, "podman rmi %s failed (exit %d)", ref, r);
    return 0;
}

int image_rename(const char *old, const char *new, bb_error **err)
{
    _cleanup_free_ char *from = image_ref(old), *to = image_ref(new);
    if (!image_exists(from))
        return 0;
    char *tag[] = {"podman", "tag", from, to, NULL};
    /* untag with no tag named would drop every tag of the image, the new one too */
    char *untag[] = {"podman", "untag", from, from, NULL};
    int r = spawn_quiet(tag, err);
    if (r == 0)
        r = spawn_quiet(untag, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EIO, "podman could not retag %s as %s (exit %d)", from, to, r);
    return 0;
}
