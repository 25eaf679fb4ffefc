/* `bluebox __complete <words…>`: completion candidates for the shell scripts, which stay
 * thin. The words are those after "bluebox", the last one being completed. Candidates
 * are printed one per line, filtered by that prefix; the line ":files" asks the shell for
 * its own file-name completion, ":dirs" for its directory-name completion. Nothing is printed for
 * invented arguments. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "core/examples.h"
#include "core/home.h"
#include "util/fs.h"
#include "util/xalloc.h"

static const char *prefix;

static void offer(const char *s)
{
    if (strncmp(s, prefix, strlen(prefix)) == 0)
        printf("%s\n", s);
}

static void offer_sandboxes(void)
{
    _cleanup_free_ char *root = NULL;
    _cleanup_strv_ strv names = {0};
    if (home_root(&root, NULL) < 0 || home_list(root, &names, NULL) < 0)
        return;
    for (size_t i = 0; i < names.n; i++)
        offer(names.v[i]);
}

typedef struct {
    char *label;
    struct timespec mtime;
} snap;

static int snap_newest_first(const void *a, const void *b)
{
    const snap *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
    return strcmp(x->label, y->label);
}

static void offer_snapshots(const char *name)
{
    _cleanup_free_ char *root = NULL;
    if (!name_valid(name) || home_root(&root, NULL) < 0)
        return;
    _cleanup_free_ char *dir = home_path_of(root, HP_SNAPSHOTS, name);
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d)
        return;
    snap *v = NULL;
    size_t n = 0;
    struct dirent *de;
    static const char *const exts[] = {".tar.gz", ".tar.zst", ".tar"};
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        for (size_t e = 0; e < ELEMENTSOF(exts); e++) {
            size_t el = strlen(exts[e]);
            struct stat st;
            if (len <= el || !streq(de->d_name + len - el, exts[e]) ||
                fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                continue;
            v = xreallocarray(v, n + 1, sizeof *v);
            v[n++] = (snap){xstrndup(de->d_name, len - el), st.st_mtim};
            break;
        }
    }
    if (n)
        qsort(v, n, sizeof *v, snap_newest_first);
    for (size_t i = 0; i < n; i++) {
        /* Only what bluebox could have named: a file name is shown by the shell, raw. */
        if (name_valid(v[i].label))
            offer(v[i].label);
        free(v[i].label);
    }
    free(v);
}

static void offer_flags(const cli_command *c)
{
    for (int i = 0; i < CLI_MAX_OPTS && c->opts[i].long_name; i++) {
        _cleanup_free_ char *f = xasprintf("--%s", c->opts[i].long_name);
        offer(f);
    }
    offer("--help");
}

static void offer_commands(void)
{
    for (size_t i = 0; i < cli_n_commands; i++)
        if (cli_commands[i].group)
            offer(cli_commands[i].name);
}

static bool takes_value(const cli_command *c, const char *word)
{
    for (int i = 0; i < CLI_MAX_OPTS && c->opts[i].long_name; i++) {
        if (!c->opts[i].arg)
            continue;
        if (word[0] == '-' && word[1] == c->opts[i].short_name && !word[2])
            return true;
        if (word[0] == '-' && word[1] == '-' && streq(word + 2, c->opts[i].long_name))
            return true;
    }
    return false;
}

static void complete_args(const cli_command *c, int argc, char **argv)
{
    const char *cur = argv[argc - 1];
    const char *prev = argc >= 2 ? argv[argc - 2] : "";
    /* Positional arguments before the current word. */
    char *pos[8];
    int npos = 0;
    for (int i = 1; i < argc - 1; i++) {
        if (streq(argv[i], "--"))
            return; /* the command after -- is invented: nothing */
        if (argv[i][0] == '-') {
            if (takes_value(c, argv[i]))
                i++;
            continue;
        }
        if (npos < (int)ELEMENTSOF(pos))
            pos[npos++] = argv[i];
    }
    if (takes_value(c, prev)) {
        if (streq(prev, "--from")) {
            _cleanup_strv_ strv ex = {0};
            examples_names(&ex);
            for (size_t i = 0; i < ex.n; i++)
                offer(ex.v[i]);
        } else if (streq(prev, "--socket")) {
            printf(":files\n");
        }
        return;
    }
    if (cur[0] == '-') {
        offer_flags(c);
        return;
    }
    if (c->max_args >= 0 && npos >= c->max_args)
        return;
    cli_argkind kind = npos < (int)ELEMENTSOF(c->args) ? c->args[npos] : ARG_NONE;
    switch (kind) {
    case ARG_SANDBOX:
        offer_sandboxes();
        break;
    case ARG_SNAPSHOT:
        if (strchr(cur, '/'))
            printf(":files\n");
        else if (npos >= 1)
            offer_snapshots(pos[0]);
        break;
    case ARG_COMMAND:
        offer_commands();
        break;
    case ARG_SHELL:
        offer("bash");
        offer("zsh");
        offer("fish");
        break;
    case ARG_DATAOP:
        offer("export");
        offer("import");
        break;
    case ARG_DIR:
        printf(":dirs\n");
        break;
    case ARG_NONE:
        break;
    }
}

int cli_complete(int argc, char **argv)
{
    if (argc < 1)
        return 0;
    prefix = argv[argc - 1];
    if (argc == 1) {
        if (prefix[0] == '-') {
            offer("--help");
            offer("--version");
        } else {
            offer_commands();
        }
        return 0;
    }
    const cli_command *c = cli_find(argv[0]);
    if (c)
        complete_args(c, argc, argv);
    return 0;
}
