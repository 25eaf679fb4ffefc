/* The isolation check and its cache. */
#include "isolation.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/home.h"
#include "launch/runtime_fp.h"
#include "util/fingerprint.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/spawn.h"
#include "util/xalloc.h"

/* The baseline: the same image and confinement on podman's default OCI runtime. It exists
 * only for this comparison and never runs a workload. */
static int plain_flags(const launch *l, strv *argv, bb_error **err)
{
    strv_add(argv, "--entrypoint=" ABI_GUEST_BINARY);
    return 0;
}

static int plain_entry(const launch *l, strv *argv, bb_error **err)
{
    return 0;
}

static const backend backend_plain = {
    .name = "plain",
    .data_disk = true, /* a data_limit image is bound but never opened: it only reads uname */
    .egress = true,    /* likewise allow:'s variables; a probe never gets the secrets */
    .launch_flags = plain_flags,
    .entry = plain_entry,
};

static int probe(const backend *b, const launch *l, kernel_id *ret, bb_error **err)
{
    static char *cmd[] = {"__probe", NULL};
    _cleanup_free_ char *container = container_name("probe", l->sb->name);
    launch pl = *l;
    pl.mode = LAUNCH_PROBE;
    pl.container = container;
    pl.cmd = cmd;
    pl.interactive = pl.tty = false;
    pl.fork_lower = NULL; /* a probe reads the kernel, never /data: no overlay to make */
    _cleanup_strv_ strv argv = {0};
    if (launch_argv(b, &pl, &argv, err) < 0)
        return -1;
    _cleanup_free_ char *out = NULL, *errout = NULL;
    int r = spawn_capture(argv.v, &out, &errout, err);
    if (r < 0)
        return -1;
    if (r != 0) {
        size_t n = strlen(errout);
        while (n && errout[n - 1] == '\n')
            errout[--n] = '\0';
        const char *last = strrchr(errout, '\n');
        /* podman's words, and where the limits are the cause (a containers.conf's
         * default_ulimits that do not fit, hostlimits.h), who says which fit */
        return bb_fail(err, EIO, "exit %d%s%s%s", r, *errout ? ": " : "", last ? last + 1 : errout,
                       strstr(errout, "rlimit") ? " (bluebox doctor names the limits that fit)"
                                                : "");
    }
    return kernel_id_parse(out, ret, err);
}

int isolation_check(const backend *b, const launch *l, isolation_result *ret, bb_error **err)
{
    if (probe(&backend_plain, l, &ret->baseline, err) < 0)
        return bb_prefix(err, "could not read the baseline kernel from a plain container");
    if (probe(b, l, &ret->guest, err) < 0)
        return bb_prefix(err, "could not boot the sandbox on %s for the isolation check", b->name);
    /* ret is never NULL (isolation_cached's test for it misleads the analyzer). */
    bool same_release = streq(ret->guest.release, // NOLINT(clang-analyzer-core.NonNullParamChecker)
                              ret->baseline.release);
    if (same_release || streq(ret->guest.boot_id, ret->baseline.boot_id))
        return bb_fail(err, EPERM,
                       "not isolated: the sandbox on %s shares the %s of a plain container (%s). "
                       "This is a container, not a microVM%s%s",
                       b->name, same_release ? "kernel release" : "boot_id", ret->guest.release,
                       b->not_isolated_hint ? "; " : "",
                       b->not_isolated_hint ? b->not_isolated_hint : "");
    return 0;
}

static char *cache_path(const char *root)
{
    return path_join(root, "verify.json");
}

/* The cache file, or an empty object. Anything unreadable is a miss, never a pass. */
static json_t *cache_load(const char *root)
{
    _cleanup_free_ char *path = cache_path(root), *text = NULL;
    size_t len = 0;
    json_t *j = NULL;
    if (read_file(path, 1 << 20, &text, &len, NULL) == 0)
        j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(j) ||
        json_integer_value(json_object_get(j, "version")) != RUNTIME_FP_VERSION ||
        !json_is_object(json_object_get(j, "backends"))) {
        json_decref(j);
        j = json_pack("{s:i, s:{}}", "version", RUNTIME_FP_VERSION, "backends");
    }
    return j;
}

isolation_state isolation_cached(const backend *b, const launch *l, isolation_result *ret)
{
    _cleanup_json_ json_t *j = cache_load(l->root);
    json_t *e = json_object_get(json_object_get(j, "backends"), b->name);
    const char *fp = json_string_value(json_object_get(e, "fingerprint"));
    const char *guest = json_string_value(json_object_get(e, "guest"));
    const char *base = json_string_value(json_object_get(e, "baseline"));
    isolation_state s = ISOCHECK_NONE;
    /* only an entry a passing check could have written counts */
    if (fp && guest && base && *guest && *base && !streq(guest, base)) {
        _cleanup_free_ char *parts = NULL;
        _cleanup_free_ char *now = runtime_fingerprint_parts(b, l, &parts);
        s = streq(fp, now) ? ISOCHECK_CACHED : ISOCHECK_CHANGED;
        if (ret) {
            snprintf(ret->guest.release, sizeof ret->guest.release, "%s", guest);
            snprintf(ret->baseline.release, sizeof ret->baseline.release, "%s", base);
            ret->changed[0] = '\0';
            const char *was = json_string_value(json_object_get(e, "parts"));
            _cleanup_free_ char *diff =
                s == ISOCHECK_CHANGED && was ? fp_parts_changed(was, parts) : NULL;
            if (diff)
                snprintf(ret->changed, sizeof ret->changed, "%s", diff);
        }
    }
    return s;
}

int isolation_remember(const backend *b, const launch *l, const isolation_result *r, bb_error **err)
{
    _cleanup_json_ json_t *j = cache_load(l->root);
    _cleanup_free_ char *parts = NULL;
    _cleanup_free_ char *fp = runtime_fingerprint_parts(b, l, &parts);
    char stamp[32];
    time_t t = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_object_set_new(json_object_get(j, "backends"), b->name,
                        json_pack("{s:s, s:s, s:s, s:s, s:s}", "fingerprint", fp, "parts", parts,
                                  "guest", r->guest.release, "baseline", r->baseline.release,
                                  "verified_at", stamp));
    _cleanup_free_ char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    _cleanup_free_ char *path = cache_path(l->root);
    if (mkdir_p(l->root, HOME_DIR_MODE, err) < 0 ||
        write_file_atomic(path, text, strlen(text), 0644, err) < 0)
        return bb_prefix(err, "cannot record the isolation check");
    return 0;
}

int isolation_ensure(const backend *b, const launch *l, isolation_state *ret_was,
                     isolation_result *ret, bb_error **err)
{
    *ret_was = isolation_cached(b, l, ret);
    if (*ret_was == ISOCHECK_CACHED)
        return 0;
    if (isolation_check(b, l, ret, err) < 0)
        return -1;
    return isolation_remember(b, l, ret, err);
}
