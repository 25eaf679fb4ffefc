/* The warm pool from the command line: `bluebox pool <name>` and the tender's role
 * (`bluebox __tend <name>`). The pool itself is runtime/pool.h; run's warm path is ops/run.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/home.h"
#include "core/sandbox.h"
#include "hidden.h"
#include "runtime/boot.h"
#include "runtime/pool.h"
#include "util/xalloc.h"

static const char *state_word(const pool_entry *e)
{
    return streq(e->state, "claimed") ? "running" : e->state;
}

int cmd_pool(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0 || sandbox_bluefile(sb, err) < 0)
        return -1;
    pool_list_result l;
    if (pool_list(sb, &l, err) < 0)
        return -1;
    int waiting = 0;
    for (size_t i = 0; i < l.n; i++)
        waiting += streq(l.v[i].state, "waiting");
    printf("%s: warm %d/%d", name, waiting, sb->bf->warm);
    if (l.n)
        printf(", %zu VM%s holding up to %d MiB of RAM each", l.n, l.n == 1 ? "" : "s",
               sb->bf->ram_mib);
    printf("\n");
    if (l.n)
        printf("%-14s %-9s %8s %s\n", "ID", "STATE", "AGE", "PID");
    for (size_t i = 0; i < l.n; i++) {
        const pool_entry *e = &l.v[i];
        printf("%-14s %-9s %7llds", e->id, state_word(e), e->age_seconds);
        if (e->pid)
            printf(" %d", (int)e->pid);
        printf("\n");
    }
    /* Not what warm asks (or a stale VM left): a tender puts it right. */
    if (waiting != sb->bf->warm || l.n != (size_t)waiting)
        pool_kick(sb);
    pool_list_free(&l);
    return 0;
}

int tend_main(int argc, char **argv)
{
    if (argc != 2 || !name_valid(argv[1])) {
        fprintf(stderr, "usage: bluebox __tend <name>\n");
        return 2;
    }
    _cleanup_error_ bb_error *err = NULL;
    _cleanup_free_ char *root = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (home_root(&root, &err) < 0 || sandbox_open(root, argv[1], &sb, &err) < 0 ||
        pool_tend(sb, &err) < 0) {
        fprintf(stderr, "bluebox __tend: %s\n", err->msg);
        return 1;
    }
    return 0;
}
