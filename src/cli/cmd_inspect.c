/* Commands that look at a sandbox: env, logs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/bluefile.h"
#include "core/envout.h"
#include "core/sandbox.h"
#include "core/runlog.h"
#include "runtime/backend.h"
#include "runtime/boot.h"
#include "runtime/image.h"
#include "runtime/posture.h"
#include "util/xalloc.h"

int cmd_env(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || sandbox_resolve_backend(sb, err) < 0)
        return -1;
    _cleanup_free_ char *image = image_ref(a->root, name);
    envout_backend be = {.name = bf_backend_name(sb->bf->backend)};
    const char *env = backend_env();
    if (env) {
        const backend *b = backend_named(env);
        be = (envout_backend){.name = b ? b->name : env, .from_env = true};
    }
    be.guest_cpus = backend_guest_cpus(sb->backend, sb->bf);
    _cleanup_free_ char *net = posture_network(sb->backend, sb->bf);
    be.network = net;
    _cleanup_free_ char *out = envout_render(name, image, sb->data, sb->bf, &be);
    if (cli_show(stdout, out, strlen(out)))
        fprintf(stderr,
                "bluebox: control characters are shown escaped; for the exact bytes, "
                "pipe the output: eval \"$(bluebox env %s)\"\n",
                name);
    return 0;
}

int cmd_logs(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    size_t lines = 200;
    const char *n = cli_value(a, "lines");
    if (n) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(n, &end, 10);
        if (!*n || *end || n[0] == '-' || errno == ERANGE || v > 100000000ULL)
            return bb_fail_usage(err, "-n takes a number of lines, got \"%s\"", n);
        lines = (size_t)v;
    }
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (runlog_tail(sb->log, lines, &text, &len, err) < 0)
        return -1;
    cli_show(stdout, text, len);
    return 0;
}
