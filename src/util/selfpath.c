/* Where the bluebox that guests run lives on the host. */
#include "selfpath.h"

#include <errno.h>
#include <stdlib.h>

#include "util/xalloc.h"

char *guest_binary(bb_error **err)
{
    const char *env = getenv("BLUEBOX_GUEST_BINARY");
    if (env && *env)
        return xstrdup(env);
    char *self = realpath("/proc/self/exe", NULL);
    if (!self)
        bb_fail_errno(err, errno, "cannot find the bluebox executable");
    return self;
}
