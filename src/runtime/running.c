/* Whether a VM of a sandbox still runs: a direct run (runc's, unknown to podman) or a
 * podman container of this home's, the warm pool's excepted. */
#include "running.h"

#include <errno.h>
#include <string.h>

#include "core/home.h"
#include "launch/direct.h"
#include "pool.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

int image_refuse_running(const sandbox *sb, bb_error **err)
{
    const char *name = sb->name;
    if (direct_refuse(sb, err) < 0) /* runc's, unknown to podman */
        return -1;
    if (!program_on_path("podman"))
        return 0;
    _cleanup_free_ char *fs = xasprintf("label=bluebox.sandbox=%s", name);
    _cleanup_free_ char *fh = xasprintf("label=bluebox.home=%s", sb->home_id);
    char *ps[] = {"podman",   "ps", "-q",       "--filter",   fs,
                  "--filter", fh,   "--format", "{{.Names}}", NULL};
    _cleanup_free_ char *names = NULL;
    if (spawn_capture(ps, &names, NULL, NULL) != 0 || !*names)
        return 0;
    /* the warm pool's VMs run nothing of anyone's: the pool's drain removes them */
    char *c, *save = NULL;
    for (c = strtok_r(names, "\r\n", &save); c && pool_container(c);
         c = strtok_r(NULL, "\r\n", &save))
        ;
    if (!c)
        return 0;
    return bb_fail(err, EBUSY,
                   "a VM of %s is still running (container %s), left by a bluebox run or shell "
                   "that was killed; wait for it to end or stop it first: podman rm -f %s",
                   name, c, c);
}
