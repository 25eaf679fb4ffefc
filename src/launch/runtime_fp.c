/* The fingerprint of the runtime a launch boots on. */
#include "runtime_fp.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/fingerprint.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

static const char *conf_files[] = {
    "/etc/containers/containers.conf",
    "/usr/share/containers/containers.conf",
    "/etc/containers/containers.conf.d",
    "/etc/containers/storage.conf",
};

char *runtime_fingerprint_parts(const backend *b, const launch *l, char **ret_parts)
{
    fingerprint f;
    fp_init(&f);
    char head[64];
    snprintf(head, sizeof head, "v%d %s uid %u", RUNTIME_FP_VERSION, b->name, (unsigned)getuid());
    fp_str(&f, "the user", head);
    _cleanup_free_ char *podman = program_find("podman");
    fp_file(&f, podman ? podman : "podman");
    for (size_t i = 0; i < ELEMENTSOF(conf_files); i++)
        fp_file(&f, conf_files[i]);
    const char *env = getenv("CONTAINERS_CONF");
    fp_file_as(&f, "CONTAINERS_CONF", env && *env ? env : "-");
    const char *home = getenv("HOME");
    if (home) {
        _cleanup_free_ char *user = path_join(home, ".config/containers/containers.conf");
        fp_file(&f, user);
    }
    fp_file(&f, l->self ? l->self : "-"); /* the probe's binary: boot found it already */
    if (b->fingerprint)
        b->fingerprint(l, &f);
    if (ret_parts)
        *ret_parts = sb_steal(&f.parts);
    fp_done(&f);
    return fp_hex(&f);
}

char *runtime_fingerprint(const backend *b, const launch *l)
{
    return runtime_fingerprint_parts(b, l, NULL);
}
