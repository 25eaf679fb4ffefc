/* Image housekeeping through podman, for commands that work on files but also own the
 * sandbox's image (destroy, rename). Missing podman or a missing image is not an error. */
#include "image.h"

#include <errno.h>
#include <string.h>

#include "util/spawn.h"
#include "util/strv.h"
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

/* Containers left by a run that was killed with SIGKILL (or a crashed podman) still carry
 * the sandbox's label; they would keep the image in use. */
static void containers_remove(const char *name)
{
    _cleanup_free_ char *filter = xasprintf("label=bluebox.sandbox=%s", name);
    char *ps[] = {"podman", "ps", "-aq", "--filter", filter, NULL};
    _cleanup_free_ char *ids = NULL;
    if (spawn_capture(ps, &ids, NULL, NULL) != 0 || !*ids)
        return;
    _cleanup_strv_ strv argv = {0};
    strv_add(&argv, "podman");
    strv_add(&argv, "rm");
    strv_add(&argv, "-f");
    strv_add(&argv, "-t");
    strv_add(&argv, "0");
    char *save = NULL;
    for (char *id = strtok_r(ids, "\n", &save); id; id = strtok_r(NULL, "\n", &save))
        strv_add(&argv, id);
    (void)spawn_quiet(argv.v, NULL);
}

int image_remove(const char *name, bb_error **err)
{
    if (program_on_path("podman"))
        containers_remove(name);
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
