/* Commands on /data: reset, snapshot, restore, data export|import. The work is ops/data.c;
 * here are the questions, the progress line and what is said about the result. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_data.h"
#include "core/home.h"
#include "core/prompt.h"
#include "core/sandbox.h"
#include "data/snapshots.h"
#include "ops/ops.h"
#include "util/fs.h"
#include "util/time.h"
#include "util/xalloc.h"

/* Whether /data has anything in it; one the guest made unreadable counts as not empty. */
static bool data_nonempty(const sandbox *sb)
{
    int r = sandbox_data_nonempty(sb->root, sb->name, NULL);
    return r != 0;
}

static void warn_skipped(const data_tally *t, const char *what)
{
    uint64_t n = tally_skipped(t);
    if (!n)
        return;
    _cleanup_free_ char *kinds = tally_describe(t);
    _cleanup_free_ char *m = xasprintf("skipped %" PRIu64 " %s that cannot be %s safely (%s)", n,
                                       n == 1 ? "entry" : "entries", what, kinds);
    cli_print_error(NULL, m);
}

/* Said once per operation: extended attributes an archive held that a restore never writes
 * (from), or over the limits; and entries whose guest ownership the destination (to, a file
 * system without user xattrs) could not keep. */
static void warn_xattrs(const data_tally *t, const char *from, const char *to)
{
    if (t->xattrs_ignored) {
        _cleanup_free_ char *m =
            from ? xasprintf("ignored %" PRIu64 " extended attribute%s in %s: only bluebox's own "
                             "(user.bluebox.*, at most 64 per entry) are restored, never "
                             "security.*, trusted.*, system.* or other names",
                             t->xattrs_ignored, t->xattrs_ignored == 1 ? "" : "s", from)
                 : xasprintf("left out %" PRIu64 " extended attribute%s of the guest that "
                             "bluebox cannot carry (more than 64 per entry, 64 KiB each or "
                             "512 KiB in all, or an archive's with \"=\" in the name)",
                             t->xattrs_ignored, t->xattrs_ignored == 1 ? "" : "s");
        cli_print_error(NULL, m);
    }
    if (t->xattrs_lost) {
        _cleanup_free_ char *m = xasprintf(
            "the guest's owners and modes of %" PRIu64 " entr%s were not kept: the file system "
            "holding %s does not store user extended attributes (user.bluebox.*), or has no room "
            "for them; in the guest they now belong to root",
            t->xattrs_lost, t->xattrs_lost == 1 ? "y" : "ies", to);
        cli_print_error(NULL, m);
    }
}

/* The guards that need no long lock, before a question. */
static int precheck(sandbox *sb, const char *doing, bb_error **err)
{
    return ops_data_precheck(sb, doing, NULL, err);
}

int cmd_reset(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || precheck(sb, "reset", err) < 0)
        return -1;
    _cleanup_free_ char *q = xasprintf("Delete everything in %s's /data?", name);
    if (data_nonempty(sb) && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    if (ops_reset(sb, &r, err) < 0)
        return -1;
    printf("reset %s\n", name);
    return 0;
}

static int list_snapshots(const sandbox *sb, bb_error **err)
{
    _cleanup_snapshots_ snapshot_list l = {0};
    if (snapshots_list(sb, &l, err) < 0)
        return -1;
    for (size_t i = 0; i < l.n; i++) {
        char when[32];
        struct tm tm;
        gmtime_r(&l.v[i].mtime.tv_sec, &tm);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%SZ", &tm);
        const char *file = strrchr(l.v[i].path, '/') + 1;
        cli_showf(stdout, "%-40s %12" PRIu64 "  %s\n", file, l.v[i].size, when);
    }
    return 0;
}

typedef struct {
    int64_t start_ms, last_ms;
    bool shown;
} progress_state;

static void show_progress(uint64_t bytes, void *ud)
{
    progress_state *p = ud;
    int64_t now = now_mono_ms();
    /* Only for a /data large enough to take a while, and at most a few times a second. */
    if (now - p->start_ms < 1000 || now - p->last_ms < 250)
        return;
    p->last_ms = now;
    p->shown = true;
    fprintf(stderr, "\rsnapshot: %" PRIu64 " MiB archived", bytes >> 20);
}

static bool label_exists(const sandbox *sb, const char *label)
{
    _cleanup_snapshots_ snapshot_list l = {0};
    if (snapshots_list(sb, &l, NULL) < 0)
        return false;
    for (size_t i = 0; i < l.n; i++)
        if (streq(l.v[i].label, label))
            return true;
    return false;
}

static int take_snapshot(sandbox *sb, const char *label, snap_compress c, bb_error **err)
{
    progress_state ps = {.start_ms = now_mono_ms()};
    ops_snapshot_opts o = {.label = label,
                           .compress = c,
                           .progress = isatty(STDERR_FILENO) ? show_progress : NULL,
                           .ud = &ps};
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    int rc = ops_snapshot(sb, &o, &r, err);
    if (ps.shown)
        fprintf(stderr, "\r\033[K");
    if (rc < 0)
        return -1;
    warn_skipped(&r.tally, "archived");
    warn_xattrs(&r.tally, NULL, r.path);
    cli_showf(stdout, "%s\n", r.path);
    return 0;
}

int cmd_snapshot(cli_args *a, bb_error **err)
{
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, a->argv[0], &sb, err) < 0 || precheck(sb, "snapshot", err) < 0)
        return -1;
    if (cli_flag(a, "list")) {
        if (a->argc > 1)
            return bb_fail_usage(err, "-l takes no label; see: bluebox snapshot -h");
        return list_snapshots(sb, err);
    }
    _cleanup_free_ char *label = NULL;
    if (snapshot_label(a->argc > 1 ? a->argv[1] : NULL, &label, err) < 0)
        return -1;
    snap_compress c = cli_flag(a, "zstd") ? COMPRESS_ZSTD : COMPRESS_GZIP;
    _cleanup_free_ char *q = xasprintf("Replace the existing snapshot %s?", label);
    if (label_exists(sb, label) && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    return take_snapshot(sb, label, c, err);
}

int cmd_restore(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || precheck(sb, "restore", err) < 0)
        return -1;
    _cleanup_free_ char *archive = NULL;
    if (snapshot_resolve(sb, a->argc > 1 ? a->argv[1] : NULL, &archive, err) < 0)
        return -1;
    _cleanup_free_ char *q = xasprintf("Replace %s's /data with %s?", name, archive);
    if (data_nonempty(sb) && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    ops_restore_opts o = {.archive = archive};
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    if (ops_restore(sb, &o, &r, err) < 0)
        return -1;
    warn_xattrs(&r.tally, archive, sb->data);
    cli_showf(stdout, "restored %s from %s\n", name, archive);
    return 0;
}

static int data_export(sandbox *sb, const char *dest, bb_error **err)
{
    ops_transfer_opts o = {.dir = dest};
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    if (ops_export(sb, &o, &r, err) < 0)
        return -1;
    warn_skipped(&r.tally, "exported");
    warn_xattrs(&r.tally, NULL, dest);
    cli_showf(stdout, "exported %s's /data to %s\n", sb->name, dest);
    return 0;
}

static int data_import(sandbox *sb, const char *src, bb_error **err)
{
    ops_transfer_opts o = {.dir = src};
    _cleanup_(ops_data_result_clear) ops_data_result r = {0};
    if (ops_import(sb, &o, &r, err) < 0)
        return -1;
    warn_skipped(&r.tally, "imported");
    warn_xattrs(&r.tally, NULL, sb->data);
    cli_showf(stdout, "imported %s into %s's /data\n", src, sb->name);
    return 0;
}

int cmd_data(cli_args *a, bb_error **err)
{
    const char *verb = a->argv[0], *name = a->argv[1], *dir = a->argv[2];
    if (!streq(verb, "export") && !streq(verb, "import"))
        return bb_fail_usage(err, "data takes export or import, not \"%s\"; see: bluebox data -h",
                             verb);
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || precheck(sb, verb, err) < 0)
        return -1;
    return streq(verb, "export") ? data_export(sb, dir, err) : data_import(sb, dir, err);
}

/* For the fork commands (cmd_data.h). */
void cli_warn_skipped(const data_tally *t, const char *what)
{
    warn_skipped(t, what);
}
