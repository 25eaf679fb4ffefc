/* Commands that look at a sandbox: env, logs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/bluefile.h"
#include "core/envout.h"
#include "core/home.h"
#include "core/netlog.h"
#include "core/sandbox.h"
#include "core/runlog.h"
#include "backends/backend.h"
#include "runtime/boot.h"
#include "launch/image.h"
#include "runtime/posture.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

int cmd_env(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || sandbox_resolve_backend(sb, err) < 0)
        return -1;
    _cleanup_free_ char *image = image_ref(sb);
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

/* The most of the connection log `logs --net` reads: its end (the log is rotated at 4 MiB
 * when a boot starts, and a boot writes a bounded amount more). */
#define NET_LOG_READ_MAX (16u << 20)

/* The connection log's text; under strict isolation the file is the sandbox root's (a
 * subordinate UID), read through podman's user namespace. */
static int read_net_log(const char *path, char **ret, size_t *ret_len, bb_error **err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == EACCES) {
        char *argv[] = {"podman", "unshare", "tail", "-c", "16777216", "--", (char *)path, NULL};
        _cleanup_free_ char *errout = NULL;
        int r = spawn_capture(argv, ret, &errout, err);
        if (r < 0)
            return -1;
        if (r != 0)
            return bb_fail(err, EACCES, "cannot read %s: %s", path, errout);
        *ret_len = strlen(*ret);
        return 0;
    }
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s is not a file", path);
    off_t from = st.st_size > (off_t)NET_LOG_READ_MAX ? st.st_size - (off_t)NET_LOG_READ_MAX : 0;
    size_t want = (size_t)(st.st_size - from);
    char *buf = xmalloc(want + 1);
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(fd, buf + got, want - got, from + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    *ret = buf;
    *ret_len = got;
    return 0;
}

static int show_net_log(const sandbox *sb, size_t lines, bb_error **err)
{
    _cleanup_free_ char *path = home_path_of(sb->root, HP_NET_LOG, sb->name);
    if (!path_exists(path)) {
        if (sandbox_bluefile((sandbox *)sb, err) < 0)
            return -1;
        if (!sb->bf->has_allow)
            return bb_fail(err, ENOENT,
                           "%s has no allow: list, so it keeps no connection log (add allow: to "
                           "its Bluefile to decide and log where it may connect)",
                           sb->name);
        printf("no connections logged for %s yet\n", sb->name);
        return 0;
    }
    _cleanup_free_ char *text = NULL;
    size_t len = 0, bad = 0;
    if (read_net_log(path, &text, &len, err) < 0)
        return -1;
    _cleanup_free_ char *table = netlog_render(text, len, lines, &bad);
    fputs(table, stdout);
    if (bad)
        fprintf(stderr, "bluebox: %zu line%s of %s could not be read and %s skipped\n", bad,
                bad == 1 ? "" : "s", path, bad == 1 ? "was" : "were");
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
    if (cli_flag(a, "net"))
        return show_net_log(sb, lines, err);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (runlog_tail(sb->log, lines, &text, &len, err) < 0)
        return -1;
    cli_show(stdout, text, len);
    return 0;
}
