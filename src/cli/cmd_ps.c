/* bluebox ps: the containers that run this home's sandboxes, whichever way they were started.
 * A direct launch (runc without podman, src/launch/direct.h) is unknown to `podman ps`. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/home.h"
#include "launch/direct.h"
#include "runtime/pool.h"
#include "util/spawn.h"
#include "util/xalloc.h"

#define PS_FORMAT "%-40s %-16s %-7s %-8s %s\n"

typedef struct {
    const char *only; /* a sandbox name, or NULL: all */
    bool quiet;
} ps_filter;

static void show(const ps_filter *f, const char *container, const char *box, const char *how,
                 const char *status, const char *pid)
{
    if (f->only && !streq(f->only, box))
        return;
    if (f->quiet)
        cli_showf(stdout, "%s\n", container);
    else
        cli_showf(stdout, PS_FORMAT, container, box, how, status, pid);
}

static void show_direct(const char *container, const char *box, pid_t pid, void *ud)
{
    char p[24];
    snprintf(p, sizeof p, "%d", (int)pid);
    show(ud, container, box, "direct", pid ? "running" : "created", pid ? p : "-");
}

/* podman ps's state, "running" or "Up 3 seconds" by version, as one word */
static const char *state_word(const char *s)
{
    if (strncmp(s, "Up", 2) == 0 || strncmp(s, "running", 7) == 0)
        return "running";
    if (strncmp(s, "Exited", 6) == 0 || strncmp(s, "exited", 6) == 0)
        return "exited";
    if (strncmp(s, "Created", 7) == 0 || strncmp(s, "created", 7) == 0)
        return "created";
    if (strncmp(s, "Paused", 6) == 0 || strncmp(s, "paused", 6) == 0)
        return "paused";
    return "other";
}

/* podman's: every container of this home (stopped ones too, as `podman ps -a`). */
static void show_podman(const char *root, const ps_filter *f)
{
    if (!program_on_path("podman"))
        return;
    _cleanup_free_ char *id = home_id(root);
    _cleanup_free_ char *fh = xasprintf("label=bluebox.home=%s", id);
    char *argv[] = {"podman",
                    "ps",
                    "-a",
                    "--filter",
                    fh,
                    "--format",
                    "{{.Names}}\t{{index .Labels \"bluebox.sandbox\"}}\t{{.State}}\t{{.Pid}}",
                    NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0 || !out)
        return;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *v[4] = {line, NULL, NULL, NULL};
        for (int i = 1; i < 4 && v[i - 1]; i++) {
            v[i] = strchr(v[i - 1], '\t');
            if (v[i])
                *v[i]++ = '\0';
        }
        if (!v[3])
            continue;
        show(f, v[0], v[1], pool_container(v[0]) ? "pool" : "podman", state_word(v[2]),
             streq(v[3], "0") ? "-" : v[3]);
    }
}

int cmd_ps(cli_args *a, bb_error **err)
{
    (void)err;
    ps_filter f = {a->argc ? a->argv[0] : NULL, cli_flag(a, "quiet")};
    if (!f.quiet)
        printf(PS_FORMAT, "CONTAINER", "SANDBOX", "LAUNCH", "STATUS", "PID");
    direct_each(a->root, show_direct, &f);
    show_podman(a->root, &f);
    return 0;
}
