/* Which launcher starts a launch: runc directly (direct.h), the default where it can, or
 * `podman run`. Both start the container launch_podman_argv describes. */
#include <errno.h>
#include <stdlib.h>

#include "direct.h"
#include "launch.h"
#include "util/macro.h"

int launch_argv(const backend *b, const launch *l, strv *ret, bb_error **err)
{
    _cleanup_strv_ strv a = {0};
    if (launch_podman_argv(b, l, &a, err) < 0)
        return -1;
    /* BLUEBOX_LAUNCH=podman keeps `podman run`. A misspelt value is an error, not the
     * default. */
    const char *how = getenv("BLUEBOX_LAUNCH");
    if (how && *how && !streq(how, "direct") && !streq(how, "podman"))
        return bb_fail(err, EINVAL,
                       "BLUEBOX_LAUNCH=%s is neither direct (the default) nor podman; unset it "
                       "or set one of those",
                       how);
    if (direct_wanted(b, l))
        return direct_argv(b, l, &a, ret, err);
    *ret = a;
    a = (strv){0};
    return 0;
}
