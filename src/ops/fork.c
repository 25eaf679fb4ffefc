/* The fork operations (ops.h): fork makes one, diff lists its changes, apply merges them
 * into the parent's /data, discard drops them. The layers are read and written on the host
 * (data/fork.h); nothing here boots a VM. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/forks.h"
#include "core/home.h"
#include "data/copy.h"
#include "data/crashpoint.h"
#include "data/fork.h"
#include "guard.h"
#include "backends/backend.h"
#include "runtime/boot.h"
#include "launch/image.h"
#include "util/fs.h"
#include "util/xalloc.h"

void ops_fork_result_clear(ops_fork_result *r)
{
    free(r->changes);
    r->changes = NULL;
}

static int refuse(ops_fork_result *ret, int r)
{
    ret->why = OPS_REFUSED;
    return r;
}

/* The parent of the fork f, or a refusal when f is not a fork. */
static int open_parent(sandbox *f, sandbox **ret_parent, ops_fork_result *ret, bb_error **err)
{
    if (!f->parent)
        return refuse(ret, bb_fail(err, EINVAL,
                                   "%s is not a fork; make one with: bluebox fork %s <fork>",
                                   f->name, f->name));
    if (sandbox_open(f->root, f->parent, ret_parent, err) < 0)
        return bb_prefix(err, "%s is a fork of %s", f->name, f->parent);
    return 0;
}

/* Whether the parent can be forked at all. */
static int forkable(sandbox *p, bb_error **err)
{
    if (p->parent)
        return bb_fail(err, EINVAL,
                       "%s is itself a fork; apply or discard it before forking from it", p->name);
    if (sandbox_bluefile(p, err) < 0 || sandbox_resolve_backend(p, err) < 0)
        return -1;
    if (p->bf->data_limit)
        return bb_fail(err, ENOTSUP,
                       "%s has data_limit, and a fork needs /data as a directory; remove "
                       "data_limit from its Bluefile to fork it: bluebox edit %s",
                       p->name, p->name);
    if (!p->backend->fork_data)
        return bb_fail(err, ENOTSUP,
                       "forks need backend: uml for now, and %s uses %s; set backend: uml in its "
                       "Bluefile: bluebox edit %s",
                       p->name, p->backend->name, p->name);
    return 0;
}

/* sandboxes/.<fork>.fork-<pid>: the parent's definition (Bluefile, Containerfile, the
 * recorded image), less what is the parent's own, plus fork-of. */
static int stage_definition(const sandbox *p, const char *stage, bb_error **err)
{
    if (mkdir(stage, 0755) < 0)
        return bb_fail_errno(err, errno, "cannot create %s", stage);
    _cleanup_close_ int src = open(p->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int dst = open(stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (src < 0 || dst < 0)
        return bb_fail_errno(err, errno, "cannot copy %s's definition", p->name);
    copy_opts o = {0};
    data_tally t = {0};
    if (tree_copy(src, dst, &o, &t, err) < 0)
        return bb_prefix(err, "cannot copy %s's definition", p->name);
    /* The image's tag is the fork's own; the first boot puts it on the recorded image. */
    (void)unlinkat(dst, "image-ref", 0);
    _cleanup_free_ char *parent = xasprintf("%s\n", p->name);
    _cleanup_free_ char *of = path_join(stage, HOME_FORK_OF_FILE);
    return write_file_atomic(of, parent, strlen(parent), 0644, err);
}

static int make_fork(sandbox *p, const char *fork, bb_error **err)
{
    _cleanup_free_ char *dir = home_path_of(p->root, HP_SANDBOX, fork);
    _cleanup_free_ char *data = home_path_of(p->root, HP_DATA, fork);
    if (path_exists(dir))
        return bb_fail(err, EEXIST, "%s already exists; pick another name for the fork", fork);
    if (path_exists(data))
        return bb_fail(err, EEXIST,
                       "%s already exists (left by an earlier %s?); remove it first: bluebox "
                       "destroy --data %s",
                       data, fork, fork);
    _cleanup_free_ char *sandboxes = xstrdup(dir);
    *strrchr(sandboxes, '/') = '\0';
    _cleanup_free_ char *stage = xasprintf("%s/.%s.fork-%d", sandboxes, fork, (int)getpid());
    (void)rm_rf(stage, NULL);
    data_job j = {.op = "fork-reset", .arg = {data, p->data}};
    data_tally t;
    if (stage_definition(p, stage, err) < 0 || mkdir_p(p->data, HOME_DIR_MODE, err) < 0 ||
        ops_data_job(p, &j, &t, err) < 0) {
        (void)rm_rf(stage, NULL);
        (void)rm_rf(data, NULL);
        return -1;
    }
    if (rename(stage, dir) < 0) {
        int e = errno;
        (void)rm_rf(stage, NULL);
        (void)rm_rf(data, NULL);
        return bb_fail_errno(err, e, "cannot create %s", dir);
    }
    return 0;
}

int ops_fork(sandbox *p, const ops_fork_opts *o, ops_fork_result *ret, bb_error **ret_warning,
             bb_error **err)
{
    *ret = (ops_fork_result){0};
    const char *fork = o->fork;
    if (forkable(p, err) < 0) {
        ret->why = OPS_REFUSED;
        return -1;
    }
    if (name_check(fork, "fork name", err) < 0) {
        ret->why = OPS_BAD;
        return -1;
    }
    if (streq(p->name, fork)) {
        ret->why = OPS_BAD;
        return bb_fail(err, EEXIST, "%s already exists; pick another name for the fork", fork);
    }
    /* The parent's lock keeps a restore or reset out while its /data is read; the fork's
     * name's keeps two forks of one name apart. */
    if (sandbox_lock(p, err) < 0)
        return -1;
    _cleanup_close_ int lock = home_lock(p->root, fork, err);
    if (lock < 0)
        return -1;
    if (make_fork(p, fork, err) < 0) {
        if ((*err)->status == EEXIST)
            ret->why = OPS_BAD; /* the name is taken: the caller's to change */
        return -1;
    }
    /* The fork's own tag on the parent's built image now (one podman call), so a rebuild of
     * the parent, which prunes its old image, leaves the fork's. */
    bb_error *ie = NULL;
    _cleanup_sandbox_ sandbox *f = NULL;
    if (sandbox_open(p->root, fork, &f, &ie) < 0 || image_adopt(f, &ie) < 0) {
        if (ret_warning)
            *ret_warning = ie;
        else
            bb_error_free(ie);
    }
    return 0;
}

/* ---- an interrupted apply ---- */

static char *applying_path(const sandbox *f)
{
    return path_join(f->dir, FORK_APPLYING_FILE);
}

static int reset_layers(sandbox *f, bb_error **err);

/* Finish an apply that was killed (the fork's lock held): when the parent's /data was
 * swapped already, the layer's changes are in it, and the layer (which may share files with
 * it) is emptied; otherwise the layer is as it was. */
static int recover(sandbox *f, bb_error **err)
{
    _cleanup_free_ char *marker = applying_path(f);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (read_file(marker, 64, &text, &len, NULL) < 0)
        return 0;
    struct stat st;
    unsigned long long before = strtoull(text, NULL, 10);
    if (stat(f->parent_data, &st) < 0 || (unsigned long long)st.st_ino != before) {
        if (reset_layers(f, err) < 0)
            return bb_prefix(err, "cannot finish the interrupted apply of %s", f->name);
    }
    if (unlink(marker) < 0 && errno != ENOENT)
        return bb_fail_errno(err, errno, "cannot remove %s", marker);
    return 0;
}

static int mark_applying(const sandbox *f, bb_error **err)
{
    struct stat st;
    if (stat(f->parent_data, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", f->parent_data);
    _cleanup_free_ char *marker = applying_path(f);
    _cleanup_free_ char *text = xasprintf("%llu\n", (unsigned long long)st.st_ino);
    return write_file_atomic(marker, text, strlen(text), 0644, err);
}

/* ---- diff ---- */

static int fork_changes(sandbox *f, char **ret_text, uint64_t *ret_n, data_tally *t, bb_error **err)
{
    _cleanup_free_ char *upper = path_join(f->data, FORK_UPPER);
    data_job j = {.op = "fork-diff", .arg = {upper, f->parent_data}, .text = ret_text};
    *ret_text = NULL;
    if (ops_data_job(f, &j, t, err) < 0)
        return -1;
    if (!*ret_text)
        *ret_text = xstrdup("");
    *ret_n = t->entries;
    return 0;
}

int ops_diff(sandbox *f, ops_fork_result *ret, bb_error **err)
{
    *ret = (ops_fork_result){0};
    _cleanup_sandbox_ sandbox *p = NULL;
    if (open_parent(f, &p, ret, err) < 0 || sandbox_lock(f, err) < 0 || recover(f, err) < 0)
        return -1;
    return fork_changes(f, &ret->changes, &ret->n, &ret->tally, err);
}

/* ---- apply and discard ---- */

/* Both locks, in name order (as rename takes two). */
static int lock_both(sandbox *f, sandbox *p, bb_error **err)
{
    bool fork_first = strcmp(f->name, p->name) < 0;
    if (sandbox_lock(fork_first ? f : p, err) < 0 || sandbox_lock(fork_first ? p : f, err) < 0)
        return -1;
    return 0;
}

static int reset_layers(sandbox *f, bb_error **err)
{
    data_job j = {.op = "fork-reset", .arg = {f->data, f->parent_data}};
    data_tally t;
    return ops_data_job(f, &j, &t, err);
}

int ops_fork_precheck(sandbox *f, bool apply, ops_fork_result *ret, bb_error **err)
{
    *ret = (ops_fork_result){0};
    _cleanup_sandbox_ sandbox *p = NULL;
    if (open_parent(f, &p, ret, err) < 0 || ops_precheck_busy(f, &ret->why, err) < 0)
        return -1;
    return apply ? ops_precheck_busy(p, &ret->why, err) : 0;
}

int ops_apply(sandbox *f, ops_fork_result *ret, bb_error **err)
{
    _cleanup_sandbox_ sandbox *p = NULL;
    if (ops_fork_precheck(f, true, ret, err) < 0 || open_parent(f, &p, ret, err) < 0 ||
        lock_both(f, p, err) < 0 || recover(f, err) < 0)
        return -1;
    if (fork_changes(f, &ret->changes, &ret->n, &ret->tally, err) < 0)
        return -1;
    if (ret->n == 0)
        return 0;
    _cleanup_close_ int use_f = ops_refuse_busy(f, &ret->why, err);
    if (use_f < 0)
        return -1;
    _cleanup_close_ int use_p = ops_refuse_busy(p, &ret->why, err);
    if (use_p < 0)
        return -1;
    _cleanup_free_ char *upper = path_join(f->data, FORK_UPPER);
    data_job j = {.op = "fork-apply", .arg = {p->data, upper}};
    if (mark_applying(f, err) < 0)
        return -1;
    data_tally at;
    if (ops_data_job(p, &j, &at, err) < 0) {
        (void)recover(f, NULL);
        return bb_prefix(err, "nothing was applied to %s", p->name);
    }
    ret->tally = at;
    CRASH_POINT("apply-before-reset");
    /* The parent has the changes now (and may share files with the layer): the layer is
     * emptied before the fork may boot again (recover(), boot.c). */
    if (reset_layers(f, err) < 0)
        return bb_prefix(err,
                         "applied the changes to %s, but could not empty %s; run bluebox "
                         "apply %s to finish",
                         p->name, f->name, f->name);
    _cleanup_free_ char *marker = applying_path(f);
    (void)unlink(marker);
    return 0;
}

int ops_discard(sandbox *f, ops_fork_result *ret, bb_error **err)
{
    if (ops_fork_precheck(f, false, ret, err) < 0 || sandbox_lock(f, err) < 0 ||
        recover(f, err) < 0)
        return -1;
    if (fork_changes(f, &ret->changes, &ret->n, &ret->tally, err) < 0)
        return -1;
    _cleanup_close_ int use = ops_refuse_busy(f, &ret->why, err);
    if (use < 0 || reset_layers(f, err) < 0)
        return -1;
    return 0;
}
