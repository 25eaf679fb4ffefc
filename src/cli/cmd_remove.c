/* Commands that remove or move sandboxes: rename, destroy, nuke. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/forks.h"
#include "core/home.h"
#include "core/inuse.h"
#include "core/prompt.h"
#include "core/sandbox.h"
#include "launch/direct.h"
#include "launch/image.h"
#include "runtime/pool.h"
#include "runtime/up.h"
#include "util/fs.h"
#include "util/xalloc.h"

int cmd_rename(cli_args *a, bb_error **err)
{
    const char *old = a->argv[0], *new = a->argv[1];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, old, &sb, err) < 0 || name_check(new, "sandbox name", err) < 0)
        return -1;
    /* Both locks, in name order, so two renames never wait on each other. */
    bool first_old = strcmp(old, new) < 0;
    _cleanup_close_ int l1 = home_lock(a->root, first_old ? old : new, err);
    if (l1 < 0)
        return -1;
    _cleanup_close_ int l2 = streq(old, new) ? -1 : home_lock(a->root, first_old ? new : old, err);
    if (!streq(old, new) && l2 < 0)
        return -1;
    if (forks_refuse_fork(sb,
                          "a fork keeps its name; apply or discard it, then destroy "
                          "it and fork again under the new name",
                          err) < 0 ||
        forks_refuse_parent(sb, "rename", err) < 0)
        return -1;
    /* The pool's VMs carry the old name (container, label, files): gone; the new name's pool
     * fills at its first run. */
    if (pool_remove(sb, err) < 0 || direct_refuse(sb, err) < 0 ||
        sandbox_rename(a->root, old, new, err) < 0)
        return -1;
    _cleanup_error_ bb_error *ie = NULL;
    if (image_rename(sb, new, &ie) < 0)
        bb_error_warn_release(&ie);
    printf("%s -> %s\n", old, new);
    return 0;
}

static int destroy_one(sandbox *sb, bool data, bb_error **err)
{
    const char *root = sb->root, *name = sb->name;
    if (forks_refuse_parent(sb, "destroy", err) < 0 || sandbox_lock(sb, err) < 0)
        return -1;
    /* A fork's /data is its layer over the parent's: nothing to keep without the fork. */
    data = data || sb->parent;
    /* Not from under a run or shell; what a killed one left is pruned with the image. */
    _cleanup_close_ int use = inuse_refuse(sb, err);
    if (use < 0 || direct_refuse(sb, err) < 0) /* a VM runc runs, owned or not */
        return -1;
    if (up_down(sb, false, NULL, err) < 0) /* an up sandbox comes down first */
        return -1;
    if (pool_remove(sb, err) < 0) /* and its warm pool's VMs */
        return -1;
    _cleanup_error_ bb_error *ie = NULL;
    if (image_remove(sb, &ie) < 0)
        bb_error_warn_release(&ie);
    if (sandbox_remove(sb, data, err) < 0)
        return -1;
    sandbox_remove_locks(root, name); /* both still held: nobody is past them */
    return 0;
}

/* What `destroy` without --data left: data/<name> (and its disk and snapshots) with no
 * sandbox. `destroy --data` removes it, asking as for a sandbox; plain `destroy` says how. */
static int destroy_leftover(cli_args *a, const char *name, bool data, bb_error **err)
{
    if (name_check(name, "sandbox name", NULL) < 0 || !sandbox_has_leftover(a->root, name))
        return -1; /* sandbox_open's error stands */
    _cleanup_free_ char *path = home_path_of(a->root, HP_DATA, name);
    bb_error_clear(err);
    if (!data)
        return bb_fail(err, ENOENT,
                       "no sandbox \"%s\"; only its data is left (%s): bluebox destroy --data %s "
                       "removes it",
                       name, path, name);
    _cleanup_close_ int lock = home_lock(a->root, name, err);
    if (lock < 0)
        return -1;
    int nonempty = sandbox_data_nonempty(a->root, name, err);
    if (nonempty < 0)
        return -1;
    _cleanup_free_ char *q = xasprintf("Delete the data %s left behind (%s)?", name, path);
    if (nonempty && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    if (sandbox_remove_leftover(a->root, name, err) < 0)
        return -1;
    sandbox_remove_locks(a->root, name);
    printf("destroyed the data of %s\n", name);
    return 0;
}

int cmd_destroy(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    bool data = cli_flag(a, "data");
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return destroy_leftover(a, name, data, err);
    if (data) {
        int nonempty = sandbox_data_nonempty(a->root, name, err);
        if (nonempty < 0)
            return -1;
        _cleanup_free_ char *q = xasprintf("Delete %s and its data?", name);
        if (nonempty && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
            return -1;
    }
    bool on_disk = path_exists(sb->disk);
    if (destroy_one(sb, data, err) < 0)
        return -1;
    if (data || sb->parent)
        printf("destroyed %s\n", name);
    else
        printf("destroyed %s (data kept: %s)\n", name, on_disk ? sb->disk : sb->data);
    return 0;
}

int cmd_nuke(cli_args *a, bb_error **err)
{
    bool keep = cli_flag(a, "no-data");
    _cleanup_strv_ strv names = {0};
    if (home_list(a->root, &names, err) < 0)
        return -1;
    if (!names.n) {
        printf("no sandboxes\n");
        return 0;
    }
    _cleanup_sb_ strbuf list = {0};
    for (size_t i = 0; i < names.n; i++)
        sb_printf(&list, "%s%s", i ? ", " : "", names.v[i]);
    _cleanup_free_ char *q =
        xasprintf("Remove %zu sandbox%s (%s), %s?", names.n, names.n == 1 ? "" : "es", list.s,
                  keep ? "keeping their data" : "and their data");
    if (prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    /* Forks first: a parent with forks cannot go. */
    _cleanup_strv_ strv order = {0};
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < names.n; i++) {
            _cleanup_free_ char *parent = home_fork_parent(a->root, names.v[i]);
            if ((pass == 0) == (parent != NULL))
                strv_add(&order, names.v[i]);
        }
    strv_clear(&names);
    names = order;
    order = (strv){0};
    size_t removed = 0;
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_error_ bb_error *e = NULL;
        _cleanup_sandbox_ sandbox *sb = NULL;
        if (sandbox_open(a->root, names.v[i], &sb, &e) < 0 || destroy_one(sb, !keep, &e) < 0) {
            /* One sandbox that cannot go (it is up, say) does not stop the rest. */
            _cleanup_free_ char *prefix = xasprintf("%s: ", names.v[i]);
            cli_print_error(prefix, e->msg);
            continue;
        }
        removed++;
    }
    printf("removed %zu sandbox%s\n", removed, removed == 1 ? "" : "es");
    if (removed != names.n)
        return bb_fail(err, EBUSY, "%zu of %zu sandboxes were not removed", names.n - removed,
                       names.n);
    return 0;
}
