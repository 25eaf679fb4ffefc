/* Commands that define sandboxes: new, edit, build, ls. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/bluefile.h"
#include "core/containerfile.h"
#include "core/home.h"
#include "core/mounts.h"
#include "core/prompt.h"
#include "core/sandbox.h"
#include "backends/backend.h"
#include "runtime/boot.h"
#include "runtime/build.h"
#include "launch/direct.h"
#include "launch/image.h"
#include "runtime/pool.h"
#include "runtime/up.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

int cmd_new(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    int extras = 0;
    /* /data a destroy kept: new adopts it, and says so */
    int kept =
        name_check(name, "sandbox name", NULL) == 0 ? sandbox_data_entries(a->root, name) : -1;
    if (sandbox_new(a->root, name, cli_value(a, "from"), &extras, err) < 0)
        return -1;
    _cleanup_free_ char *bf = home_path_of(a->root, HP_BLUEFILE, name);
    printf("%s\n", bf);
    if (kept >= 0)
        fprintf(stderr,
                "keeping the existing /data of %s (%d entr%s); bluebox destroy --data %s "
                "removes it\n",
                name, kept, kept == 1 ? "y" : "ies", name);
    if (extras > 0) {
        _cleanup_free_ char *data = home_path_of(a->root, HP_DATA, name);
        fprintf(stderr, "copied %d example file%s into %s\n", extras, extras == 1 ? "" : "s", data);
    }
    return 0;
}

/* Ask which file to edit: 0 Bluefile, 1 Containerfile. */
static int ask_which(bb_error **err)
{
    fprintf(stderr, "  1 Bluefile\n  2 Containerfile\nchoose [1]: ");
    fflush(stderr);
    _cleanup_free_ char *ans = NULL;
    if (prompt_read_line(&ans) <= 0) {
        fputc('\n', stderr);
        return bb_fail_usage(err, "no answer; pass -b (Bluefile) or -c (Containerfile)");
    }
    if (!*ans || streq(ans, "1") || streq(ans, "b") || streq(ans, "bluefile"))
        return 0;
    if (streq(ans, "2") || streq(ans, "c") || streq(ans, "containerfile"))
        return 1;
    return bb_fail_usage(err, "no such choice \"%s\"; pass -b or -c", ans);
}

static int run_editor(const char *path, bb_error **err)
{
    const char *ed = getenv("VISUAL");
    if (!ed || !*ed)
        ed = getenv("EDITOR");
    if (!ed || !*ed)
        ed = "vi";
    /* The value is split on whitespace, so EDITOR="code --wait" works. */
    _cleanup_free_ char *copy = xstrdup(ed);
    _cleanup_strv_ strv argv = {0};
    for (char *save = NULL, *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
        strv_add(&argv, t);
    if (!argv.n)
        return bb_fail(err, EINVAL, "the editor setting is empty; set EDITOR");
    strv_add(&argv, path);
    int r = spawn_wait(argv.v, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EIO, "%s exited with %d; %s is as the editor left it", argv.v[0], r,
                       path);
    return 0;
}

int cmd_edit(cli_args *a, bb_error **err)
{
    const char *name = a->argv[0];
    bool b = cli_flag(a, "bluefile"), c = cli_flag(a, "containerfile");
    if (b && c)
        return bb_fail_usage(err, "pass -b or -c, not both");
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, name, &sb, err) < 0)
        return -1;
    int which = b ? 0 : c ? 1 : ask_which(err);
    if (which < 0)
        return -1;
    if (which == 1) {
        if (!path_exists(sb->containerfile))
            return bb_fail(err, ENOENT, "no Containerfile yet; it is written by: bluebox build %s",
                           name);
        fprintf(stderr, "note: generated file — the next build overwrites it\n");
        return run_editor(sb->containerfile, err);
    }
    if (run_editor(sb->bluefile_path, err) < 0)
        return -1;
    if (sandbox_bluefile(sb, err) < 0)
        return bb_prefix(err, "saved, but it no longer parses");
    printf("ok — run: bluebox build %s\n", name);
    return 0;
}

int cmd_build(cli_args *a, bb_error **err)
{
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(a->root, a->argv[0], &sb, err) < 0 || sandbox_bluefile(sb, err) < 0)
        return -1;
    _cleanup_containerfile_ containerfile cf = {0};
    containerfile_render(sb->bf, &cf);
    if (cli_flag(a, "dry-run")) {
        cli_show(stdout, cf.text, strlen(cf.text));
        return 0;
    }
    /* The backend and the limits it can give, before podman builds anything. */
    if (sandbox_resolve_backend(sb, err) < 0 || mounts_check_host(a->root, sb->bf, err) < 0)
        return -1;
    /* Held from the build through the isolation check: boot_prepare finds it held. */
    build_where where = build_where_for(sb, cli_flag(a, "host-kernel"));
    _cleanup_free_ char *posture = build_posture(sb, where);
    fprintf(stderr, "%s\n", posture);
    if (sandbox_lock(sb, err) < 0)
        return -1;
    direct_reap(); /* no VM runc runs for an owner that is gone outlives the image it ran */
    if (image_build(sb, &cf, cli_flag(a, "quiet"), where, err) < 0)
        return -1;
    _cleanup_free_ char *ref = image_ref(sb);
    printf("built %s\n", ref);
    /* The old image's pool VMs would never be served (their fingerprint is the old image's);
     * they go now rather than hold their memory till the next run. */
    _cleanup_error_ bb_error *perr = NULL;
    int pooled = pool_drain(sb, &perr);
    if (pooled < 0)
        bb_error_warn_release(&perr);
    if (pooled > 0 || (pooled == 0 && sb->bf->warm > 0))
        pool_kick(sb);
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_VERIFY, NULL, &b, err) < 0)
        return bb_prefix(err, "built, but isolation is not verified");
    print_isolated(&b);
    return 0;
}

#define LS_FORMAT "%-*s%-12s%-8s%-5s%-7s%-7s%-6s%-8s%-6s%s\n"

static void print_row(int w, const sandbox *sb, const char *state, const char *backend_name)
{
    const bluefile *bf = sb->bf;
    const char *parent = sb->parent;
    _cleanup_free_ char *base =
        parent ? xasprintf("%s  (fork of %s)", bf->base, parent) : xstrdup(bf->base);
    char ram[32], timeout[32], cpus[16], warm[32];
    snprintf(cpus, sizeof cpus, "%d", bf->cpus);
    snprintf(ram, sizeof ram, "%dM", bf->ram_mib);
    if (bf->timeout_seconds)
        snprintf(timeout, sizeof timeout, "%ds", bf->timeout_seconds);
    else
        strcpy(timeout, "-");
    /* files only, like the rest of ls: the VMs waiting out of the Bluefile's warm */
    int waiting = 0, total = 0;
    pool_count(sb, &waiting, &total);
    if (bf->warm || total)
        snprintf(warm, sizeof warm, "%d/%d", waiting, bf->warm);
    else
        strcpy(warm, "-");
    cli_showf(stdout, LS_FORMAT, w, sb->name, state, backend_name, cpus, ram,
              bf->has_allow ? "allow" : bf_network_name(bf->network), bf->readonly ? "yes" : "no",
              timeout, warm, base);
}

/* "up" only when the VM the state names is running and is this home's: a VM killed behind
 * bluebox's back (or replaced by another home's) leaves a state that is not the truth.
 * Otherwise what a run would boot: nothing (not built), the last build (built), or a build
 * older than the Bluefile (stale). Files only: ls asks podman nothing for a sandbox that is
 * not up. */
static const char *state_word(const sandbox *sb)
{
    if (path_exists(sb->run)) {
        _cleanup_upstate_ up_state s = {0};
        if (upstate_load(sb, &s, NULL) > 0 && up_alive(sb, &s))
            return "up";
        fprintf(stderr,
                "bluebox: %s is marked up but its VM is not running; clean up: bluebox down %s\n",
                sb->name, sb->name);
        return "up (dead)";
    }
    if (!path_exists(sb->image_id))
        return "not built";
    return boot_stale(sb) ? "stale" : "built";
}

/* The backend a run would use: BLUEBOX_BACKEND's when set, else the Bluefile's. */
static const char *backend_word(const bluefile *bf)
{
    const char *env = backend_env();
    if (!env)
        return bf_backend_name(bf->backend);
    const backend *b = backend_named(env);
    return b ? b->name : env;
}

int cmd_ls(cli_args *a, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    if (home_list(a->root, &names, err) < 0)
        return -1;
    if (!names.n) {
        /* stdout stays empty for scripts; the hint is for a person */
        fprintf(stderr, "no sandboxes yet; create one: bluebox new <name>\n");
        return 0;
    }
    int w = 14;
    for (size_t i = 0; i < names.n; i++)
        if ((int)strlen(names.v[i]) + 2 > w)
            w = (int)strlen(names.v[i]) + 2;
    printf(LS_FORMAT, w, "NAME", "STATE", "BACKEND", "CPUS", "RAM", "NET", "RO", "TIMEOUT", "WARM",
           "BASE");
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_sandbox_ sandbox *sb = NULL;
        _cleanup_error_ bb_error *e = NULL;
        if (sandbox_open(a->root, names.v[i], &sb, &e) < 0)
            continue; /* removed meanwhile */
        if (sandbox_bluefile(sb, &e) < 0) {
            cli_showf(stdout, "%-*sinvalid Bluefile\n", w, names.v[i]);
            continue;
        }
        print_row(w, sb, state_word(sb), backend_word(sb->bf));
    }
    return 0;
}
