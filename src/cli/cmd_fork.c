/* Forks from the command line: fork, diff, apply, discard. The work is ops/fork.c; here are
 * the questions and what is said about the result. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd_data.h"
#include "core/prompt.h"
#include "ops/ops.h"
#include "util/xalloc.h"

int cmd_fork(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0], *fork = a->argv[1];
    _cleanup_sandbox_ sandbox *p = NULL;
    if (sandbox_open(a->root, name, &p, err) < 0)
        return -1;
    ops_fork_opts o = {.fork = fork};
    _cleanup_(ops_fork_result_clear) ops_fork_result r = {0};
    bb_error *warning = NULL;
    if (ops_fork(p, &o, &r, &warning, err) < 0)
        return -1;
    if (warning)
        bb_error_warn_release(&warning);
    printf("%s forked to %s\n", name, fork);
    return 0;
}

int cmd_diff(cli_args *a, bb_error **err)
{
    _cleanup_sandbox_ sandbox *f = NULL;
    _cleanup_(ops_fork_result_clear) ops_fork_result r = {0};
    if (sandbox_open(a->root, a->argv[0], &f, err) < 0 || ops_diff(f, &r, err) < 0)
        return -1;
    cli_show(stdout, r.changes, strlen(r.changes));
    cli_warn_skipped(&r.tally, "listed");
    return 0;
}

/* The changes apply or discard would take, said before the question. */
static int changes(sandbox *f, bool apply, ops_fork_result *ret, bb_error **err)
{
    if (ops_fork_precheck(f, apply, ret, err) < 0 || ops_diff(f, ret, err) < 0)
        return -1;
    sandbox_unlock(f);
    return 0;
}

int cmd_apply(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *f = NULL;
    _cleanup_(ops_fork_result_clear) ops_fork_result seen = {0};
    if (sandbox_open(a->root, name, &f, err) < 0 || changes(f, true, &seen, err) < 0)
        return -1;
    if (seen.n == 0) {
        printf("%s has no changes\n", name);
        return 0;
    }
    cli_show(stdout, seen.changes, strlen(seen.changes));
    fflush(stdout);
    _cleanup_free_ char *q = xasprintf("Apply %" PRIu64 " change%s to %s's /data?", seen.n,
                                       seen.n == 1 ? "" : "s", f->parent);
    if (prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    _cleanup_(ops_fork_result_clear) ops_fork_result r = {0};
    if (ops_apply(f, &r, err) < 0)
        return -1;
    cli_warn_skipped(&r.tally, "applied");
    printf("applied %" PRIu64 " change%s to %s\n", r.n, r.n == 1 ? "" : "s", f->parent);
    return 0;
}

int cmd_discard(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *f = NULL;
    _cleanup_(ops_fork_result_clear) ops_fork_result seen = {0};
    if (sandbox_open(a->root, name, &f, err) < 0 || changes(f, false, &seen, err) < 0)
        return -1;
    _cleanup_free_ char *q =
        xasprintf("Discard %" PRIu64 " change%s in %s?", seen.n, seen.n == 1 ? "" : "s", name);
    if (seen.n && prompt_confirm(cli_flag(a, "yes"), q, err) < 0)
        return -1;
    _cleanup_(ops_fork_result_clear) ops_fork_result r = {0};
    if (ops_discard(f, &r, err) < 0)
        return -1;
    printf("discarded %" PRIu64 " change%s\n", r.n, r.n == 1 ? "" : "s");
    return 0;
}
