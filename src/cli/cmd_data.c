/* Commands on /data: reset, snapshot, restore, data export|import. Each takes the sandbox's
 * lock, so two bluebox processes never interleave on one /data. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_data.h"
#include "core/home.h"
#include "core/inuse.h"
#include "core/prompt.h"
#include "core/sandbox.h"
#include "data/crashpoint.h"
#include "data/dataop.h"
#include "data/snapshots.h"
#include "runtime/datadisk.h"
#include "runtime/dataown.h"
#include "runtime/diskjob.h"
#include "runtime/image.h"
#include "runtime/pool.h"
#include "util/fs.h"
#include "util/time.h"
#include "util/xalloc.h"

static void data_place_donep(data_place *p)
{
    data_place_done(p);
}
#define _cleanup_place_ _cleanup_(data_place_donep)

static int run_job(sandbox *sb, data_job *j, data_tally *t, bb_error **err)
{
    _cleanup_place_ data_place p = {0};
    if (data_place_of(sb, &p, err) < 0)
        return -1;
    /* What lands in /data belongs to the sandbox; an export belongs to you. */
    j->chown = p.chown && !streq(j->op, "export");
    j->uid = p.uid;
    j->gid = p.gid;
    return data_job_run(j, p.unshare, p.self, t, err);
}

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

/* /data is about to be replaced: refuse while an up VM, a run or a shell has it, or the VM
 * of a run whose bluebox was killed still does. Returns the in-use fd to hold till done. */
static int refuse_busy(const sandbox *sb, bb_error **err)
{
    if (sandbox_refuse_up(sb->root, sb->name, err) < 0)
        return -1;
    _cleanup_close_ int use = inuse_refuse(sb->root, sb->name, err);
    if (use < 0)
        return -1;
    /* The warm pool's VMs hold the old /data: gone before it changes. The tender started
     * here waits for our lock, so its VMs boot with the new /data. */
    int pooled = pool_drain(sb->root, sb->name, err);
    if (pooled < 0 || image_refuse_running(sb->root, sb->name, err) < 0)
        return -1;
    if (pooled)
        pool_kick(sb->root, sb->name);
    return steal_fd(&use);
}

/* The cheap part of it before asking: no question about a sandbox that is up or in use. */
static int precheck_busy(sandbox *sb, bb_error **err)
{
    if (sandbox_lock(sb, err) < 0)
        return -1;
    int r = sandbox_refuse_up(sb->root, sb->name, err);
    if (r == 0) {
        _cleanup_close_ int use = inuse_refuse(sb->root, sb->name, err);
        r = use < 0 ? -1 : 0;
    }
    sandbox_unlock(sb);
    return r;
}

int cmd_reset(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (cli_fork_guard(a->root, name, "reset", err) < 0)
        return -1;
    if (sandbox_open(a->root, name, &sb, err) < 0 || precheck_busy(sb, err) < 0)
        return -1;
    _cleanup_free_ char *q = xasprintf("Delete everything in %s's /data?", name);
    if (data_nonempty(sb) && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    if (sandbox_lock(sb, err) < 0)
        return -1;
    _cleanup_close_ int use = refuse_busy(sb, err);
    if (use < 0)
        return -1;
    /* A disk image (data_limit) is deleted, not emptied: the next boot makes a fresh one. */
    if (datadisk_remove(sb, err) < 0)
        return -1;
    data_job j = {.op = "reset", .arg = {sb->data}};
    data_tally t;
    if (run_job(sb, &j, &t, err) < 0)
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

/* The label's existing archives other than `keep`, removed once the new one is in place. */
static void remove_other_suffixes(const sandbox *sb, const char *label, const char *keep)
{
    _cleanup_snapshots_ snapshot_list l = {0};
    if (snapshots_list(sb, &l, NULL) < 0)
        return;
    for (size_t i = 0; i < l.n; i++)
        if (streq(l.v[i].label, label) && !streq(l.v[i].path, keep))
            (void)unlink(l.v[i].path);
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
    const char *dir = sb->snapshots, *data = sb->data;
    if (!is_dir(data))
        return bb_fail(err, ENOENT, "%s has no /data at %s", sb->name, data);
    if (mkdir_p(dir, HOME_DIR_MODE, err) < 0 || snapshots_cleanup(sb, err) < 0)
        return -1;
    _cleanup_free_ char *file = xasprintf("%s/%s%s", dir, label, compress_suffix(c));
    _cleanup_free_ char *partial = xasprintf("%s.partial", file);
    progress_state ps = {.start_ms = now_mono_ms()};
    data_job j = {.op = "snapshot",
                  .arg = {data, partial, compress_name(c)},
                  .progress = isatty(STDERR_FILENO) ? show_progress : NULL,
                  .ud = &ps};
    data_tally t;
    int r = run_job(sb, &j, &t, err);
    if (ps.shown)
        fprintf(stderr, "\r\033[K");
    if (r < 0) {
        (void)unlink(partial);
        return -1;
    }
    CRASH_POINT("snapshot-before-rename");
    if (rename(partial, file) < 0) {
        int e = errno;
        (void)unlink(partial);
        return bb_fail_errno(err, e, "cannot move %s into place", file);
    }
    remove_other_suffixes(sb, label, file);
    warn_skipped(&t, "archived");
    warn_xattrs(&t, NULL, file);
    cli_showf(stdout, "%s\n", file);
    return 0;
}

/* ---- /data as a disk image (data_limit): through the guest ------------------------------
 * The host never reads that file system. The guest's bluebox packs its /data into a tar
 * stream (snapshot, export) or unpacks one into it (restore, import); each boots the sandbox
 * once, so it must not be up (its VM holds the disk). */

/* A temporary archive beside the sandbox's snapshots, removed by the caller. */
static int disk_temp(const sandbox *sb, char **ret_path, bb_error **err)
{
    const char *dir = sb->snapshots;
    if (mkdir_p(dir, 0700, err) < 0)
        return -1;
    *ret_path = xasprintf("%s/.disk-%d.partial", dir, (int)getpid()); /* never listed */
    int fd = open(*ret_path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", *ret_path);
    return fd;
}

static int disk_snapshot(sandbox *sb, const char *label, snap_compress c, bb_error **err)
{
    if (sandbox_refuse_up(sb->root, sb->name, err) < 0)
        return -1;
    const char *dir = sb->snapshots;
    if (mkdir_p(dir, 0755, err) < 0)
        return -1;
    _cleanup_free_ char *file = xasprintf("%s/%s%s", dir, label, compress_suffix(c));
    _cleanup_free_ char *partial = xasprintf("%s.partial", file);
    _cleanup_close_ int fd =
        open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", partial);
    char *args[] = {"pack", "/data", (char *)compress_name(c), NULL};
    if (diskjob_run(sb, args, -1, fd, err) < 0 || fsync(fd) < 0 || rename(partial, file) < 0) {
        if (!*err)
            bb_fail_errno(err, errno, "cannot move %s into place", file);
        (void)unlink(partial);
        return -1;
    }
    remove_other_suffixes(sb, label, file);
    printf("%s\n", file);
    return 0;
}

static int disk_unpack(sandbox *sb, int in_fd, const char *how, bb_error **err)
{
    _cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    char *args[] = {"unpack", "/data", "-", (char *)how, NULL};
    return diskjob_run(sb, args, in_fd, null, err);
}

static int disk_restore(sandbox *sb, const char *archive, bb_error **err)
{
    _cleanup_close_ int fd = open(archive, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", archive);
    if (disk_unpack(sb, fd, "replace", err) < 0)
        return -1;
    printf("restored %s from %s\n", sb->name, archive);
    return 0;
}

static int disk_export(sandbox *sb, const char *dir, const char *dest, bb_error **err)
{
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int fd = disk_temp(sb, &tmp, err);
    char *args[] = {"pack", "/data", "gzip", NULL};
    data_job j = {.op = "extract", .arg = {tmp, dir}};
    data_tally t;
    int r = fd < 0 ? -1 : diskjob_run(sb, args, -1, fd, err);
    if (r == 0)
        r = data_job_run(&j, false, NULL, &t, err);
    if (tmp)
        (void)unlink(tmp);
    if (r < 0)
        return -1;
    printf("exported %s's /data to %s\n", sb->name, dest);
    return 0;
}

static int disk_import(sandbox *sb, const char *dir, const char *src, bb_error **err)
{
    _cleanup_free_ char *tmp = NULL;
    _cleanup_close_ int fd = disk_temp(sb, &tmp, err);
    data_job j = {.op = "snapshot", .arg = {dir, tmp, "gzip"}};
    data_tally t;
    int r = fd < 0 ? -1 : data_job_run(&j, false, NULL, &t, err);
    if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
        r = bb_fail_errno(err, errno, "cannot read %s", tmp);
    if (r == 0)
        r = disk_unpack(sb, fd, "merge", err);
    if (tmp)
        (void)unlink(tmp);
    if (r < 0)
        return -1;
    warn_skipped(&t, "imported");
    printf("imported %s into %s's /data\n", src, sb->name);
    return 0;
}

int cmd_snapshot(cli_args *a, bb_error **err)
{
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (cli_fork_guard(a->root, a->argv[0], "snapshot", err) < 0)
        return -1;
    if (sandbox_open(a->root, a->argv[0], &sb, err) < 0)
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
    if (datadisk_exists(sb))
        return disk_snapshot(sb, label, c, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    return take_snapshot(sb, label, c, err);
}

int cmd_restore(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (cli_fork_guard(a->root, name, "restore", err) < 0)
        return -1;
    if (sandbox_open(a->root, name, &sb, err) < 0 || precheck_busy(sb, err) < 0)
        return -1;
    _cleanup_free_ char *archive = NULL;
    if (snapshot_resolve(sb, a->argc > 1 ? a->argv[1] : NULL, &archive, err) < 0)
        return -1;
    _cleanup_free_ char *q = xasprintf("Replace %s's /data with %s?", name, archive);
    if (data_nonempty(sb) && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    if (datadisk_exists(sb))
        return disk_restore(sb, archive, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    _cleanup_close_ int use = refuse_busy(sb, err);
    if (use < 0)
        return -1;
    /* podman unshare runs from another directory: hand it an absolute path. */
    _cleanup_free_ char *cwd = archive[0] == '/' ? NULL : getcwd(NULL, 0);
    _cleanup_free_ char *abs = cwd ? path_join(cwd, archive) : xstrdup(archive);
    data_job j = {.op = "restore", .arg = {sb->data, abs}};
    data_tally t;
    if (run_job(sb, &j, &t, err) < 0)
        return -1;
    warn_xattrs(&t, archive, sb->data);
    cli_showf(stdout, "restored %s from %s\n", name, archive);
    return 0;
}

static char *absolute(const char *path)
{
    if (path[0] == '/')
        return xstrdup(path);
    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    return cwd ? path_join(cwd, path) : xstrdup(path);
}

static int data_export(sandbox *sb, const char *dest, bb_error **err)
{
    _cleanup_free_ char *dir = absolute(dest);
    int empty = dir_is_empty(dir, err);
    if (empty < 0)
        return -1;
    if (!empty)
        return bb_fail(err, EEXIST, "%s is not empty; export into a new or empty directory", dest);
    if (mkdir_p(dir, 0755, err) < 0)
        return -1;
    if (datadisk_exists(sb))
        return sandbox_refuse_up(sb->root, sb->name, err) < 0 ? -1
                                                              : disk_export(sb, dir, dest, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    data_job j = {.op = "export", .arg = {sb->data, dir}};
    data_tally t;
    if (run_job(sb, &j, &t, err) < 0)
        return -1;
    warn_skipped(&t, "exported");
    warn_xattrs(&t, NULL, dest);
    cli_showf(stdout, "exported %s's /data to %s\n", sb->name, dest);
    return 0;
}

static int data_import(sandbox *sb, const char *src, bb_error **err)
{
    _cleanup_free_ char *dir = absolute(src);
    if (!is_dir(dir))
        return bb_fail(err, ENOTDIR, "%s is not a directory", src);
    if (datadisk_exists(sb))
        return sandbox_refuse_up(sb->root, sb->name, err) < 0 ? -1 : disk_import(sb, dir, src, err);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    if (!is_dir(sb->data))
        return bb_fail(err, ENOENT, "%s has no /data at %s", sb->name, sb->data);
    data_job j = {.op = "import", .arg = {dir, sb->data}};
    data_tally t;
    if (run_job(sb, &j, &t, err) < 0)
        return -1;
    warn_skipped(&t, "imported");
    warn_xattrs(&t, NULL, sb->data);
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
    if (cli_fork_guard(a->root, name, verb, err) < 0)
        return -1;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    return streq(verb, "export") ? data_export(sb, dir, err) : data_import(sb, dir, err);
}

/* For the fork commands (cmd_data.h). */
int cli_data_job(sandbox *sb, data_job *j, data_tally *t, bb_error **err)
{
    return run_job(sb, j, t, err);
}

void cli_warn_skipped(const data_tally *t, const char *what)
{
    warn_skipped(t, what);
}

int cli_refuse_busy(const sandbox *sb, bb_error **err)
{
    return refuse_busy(sb, err);
}

int cli_precheck_busy(sandbox *sb, bb_error **err)
{
    return precheck_busy(sb, err);
}
