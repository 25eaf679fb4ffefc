/* The TLS broker's upstream trust in the container. See upstream_ca.h. */
#include "upstream_ca.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi.h"
#include "util/xalloc.h"

static const char *const system_bundles[] = {
    "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Arch, Alpine */
    "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
    "/etc/ssl/ca-bundle.pem",             /* openSUSE */
    "/etc/ssl/cert.pem",
};

static bool readable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* The host's CA bundle: the first of the distributions' paths that is a readable file;
 * NULL when none is. */
static const char *upstream_ca_system(void)
{
    for (size_t i = 0; i < ELEMENTSOF(system_bundles); i++)
        if (readable_file(system_bundles[i]))
            return system_bundles[i];
    return NULL;
}

static void bind_ro(strv *argv, const char *src, const char *dst)
{
    strv_add(argv, "-v");
    strv_push(argv, xasprintf("%s:%s:ro", src, dst));
}

int upstream_ca_flags(strv *argv, bb_error **err)
{
    const char *sys = upstream_ca_system();
    if (sys)
        bind_ro(argv, sys, ABI_UPSTREAM_CA_SYSTEM);
    const char *extra = getenv(ABI_ENV_UPSTREAM_CA);
    if (!extra || !*extra)
        return 0;
    if (extra[0] != '/' || strpbrk(extra, ":,\n"))
        return bb_fail(err, EINVAL,
                       ABI_ENV_UPSTREAM_CA " must be an absolute path without ':' or ',' (it "
                                           "names a PEM file of CA certificates)");
    if (!readable_file(extra))
        return bb_fail(err, ENOENT,
                       ABI_ENV_UPSTREAM_CA "=%s is not a readable file; it names a PEM file of "
                                           "CA certificates for servers bluebox sends secrets to",
                       extra);
    bind_ro(argv, extra, ABI_UPSTREAM_CA_EXTRA);
    return 0;
}
