/* Sandbox lifecycle on disk. Every multi-step change is ordered so that an interruption
 * leaves either the old state or the new one, never half of each. */
#include "sandbox.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "examples.h"
#include "home.h"
#include "runlog.h"
#include "util/fs.h"
#include "util/xalloc.h"

int sandbox_open(const char *root, const char *name, sandbox **ret, bb_error **err)
{
    if (home_require(root, name, err) < 0)
        return -1;
    *ret = sandbox_of(root, name);
    return 0;
}

sandbox *sandbox_of(const char *root, const char *name)
{
    sandbox *s = xmalloc(sizeof *s);
    *s = (sandbox){
        .root = xstrdup(root),
        .name = xstrdup(name),
        .home_id = home_id(root),
        .dir = home_path_of(root, HP_SANDBOX, name),
        .bluefile_path = home_path_of(root, HP_BLUEFILE, name),
        .containerfile = home_path_of(root, HP_CONTAINERFILE, name),
        .data = home_path_of(root, HP_DATA, name),
        .disk = home_path_of(root, HP_DISK, name),
        .snapshots = home_path_of(root, HP_SNAPSHOTS, name),
        .log = home_path_of(root, HP_LOG, name),
        .build_log = home_path_of(root, HP_BUILD_LOG, name),
        .run = home_path_of(root, HP_RUN, name),
        .lock = -1,
    };
    s->image_id = path_join(s->dir, "image-id");
    s->parent = home_fork_parent(root, name);
    s->parent_data = s->parent ? home_path_of(root, HP_DATA, s->parent) : NULL;
    return s;
}

void sandbox_close(sandbox *s)
{
    if (!s)
        return;
    sandbox_unlock(s);
    bluefile_free(s->bf);
    char *paths[] = {s->root,          s->name,      s->home_id, s->dir,  s->bluefile_path,
                     s->containerfile, s->image_id,  s->data,    s->disk, s->snapshots,
                     s->log,           s->build_log, s->run};
    for (size_t i = 0; i < ELEMENTSOF(paths); i++)
        free(paths[i]);
    free(s->parent);
    free(s->parent_data);
    free(s);
}

int sandbox_bluefile(sandbox *s, bb_error **err)
{
    if (s->bf)
        return 0;
    return bluefile_load(s->bluefile_path, &s->bf, err);
}

int sandbox_lock(sandbox *s, bb_error **err)
{
    if (s->lock >= 0)
        return 0;
    s->lock = home_lock(s->root, s->name, err);
    return s->lock < 0 ? -1 : 1;
}

void sandbox_unlock(sandbox *s)
{
    if (s->lock >= 0)
        close(s->lock);
    s->lock = -1;
}

/* The template Bluefile `new` writes. */
static char *sandbox_template(const char *name)
{
    return xasprintf(
        "# Bluefile for the sandbox \"%s\". Every key is optional; `man bluebox` lists them.\n"
        "# After editing: bluebox build %s\n"
        "\n"
        "base: "
        "docker.io/library/alpine:latest"
        "\n"
        "cpus: 2                 # 1-16\n"
        "ram_mib: 2048           # at least 128\n"
        "\n"
        "# none reaches no network at all (also what an omitted network means);\n"
        "# bridge gives the sandbox the internet (on uml, not your host or LAN);\n"
        "# with bridge, an allow: list narrows it to named hosts (uml; man bluebox).\n"
        "network: none\n"
        "# allow: [deb.example.org, \"*.example.org\", api.example.com:8443]\n"
        "passt: false\n"
        "readonly: false         # true: read-only root; /tmp and /data stay writable\n"
        "isolation: standard     # strict: the VM runs as a UID that owns nothing of yours\n"
        "timeout_seconds: 0      # per-run wall-clock limit; 0 = none\n"
        "warm: 0\n"
        "# backend: krun         # krun (KVM microVM, the default) or uml (no KVM needed)\n"
        "# data_limit: 10G       # /data as a disk image the guest cannot grow past (uml)\n"
        "\n"
        "packages:\n"
        "  - bash\n"
        "  - curl\n"
        "  - git\n"
        "\n"
        "# run:\n"
        "#   - echo extra build step\n"
        "# env:\n"
        "#   LANG: C.UTF-8\n"
        "# mounts:\n"
        "#   - host: ~/projects/demo\n"
        "#     guest: /work\n"
        "#     mode: ro          # ro (default) or rw\n",
        name, name);
}

static int unknown_example(const char *example, bb_error **err)
{
    _cleanup_strv_ strv names = {0};
    examples_names(&names);
    _cleanup_sb_ strbuf b = {0};
    for (size_t i = 0; i < names.n; i++)
        sb_printf(&b, "%s%s", i ? ", " : "", names.v[i]);
    return bb_fail(err, ENOENT, "no example \"%s\"; choose one of: %s", example,
                   b.s ? b.s : "(none)");
}

int sandbox_new(const char *root, const char *name, const char *example, int *ret_extras,
                bb_error **err)
{
    if (name_check(name, "sandbox name", err) < 0)
        return -1;
    const embedded_file *ex = NULL;
    if (example && !(ex = examples_bluefile(example)))
        return unknown_example(example, err);
    _cleanup_free_ char *parent = path_join(root, "sandboxes");
    _cleanup_free_ char *datap = path_join(root, "data");
    if (mkdir_p(parent, HOME_DIR_MODE, err) < 0 || mkdir_p(datap, HOME_DIR_MODE, err) < 0)
        return -1;
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    if (mkdir(dir, 0755) < 0) {
        if (errno == EEXIST)
            return bb_fail(err, EEXIST, "sandbox \"%s\" already exists at %s", name, dir);
        return bb_fail_errno(err, errno, "cannot create %s", dir);
    }
    _cleanup_free_ char *bf_path = home_path_of(root, HP_BLUEFILE, name);
    _cleanup_free_ char *data = home_path_of(root, HP_DATA, name);
    _cleanup_free_ char *text = ex ? xstrndup(ex->data, ex->len) : sandbox_template(name);
    bool made_data = false;
    int extras = 0;
    if (write_file_atomic(bf_path, text, strlen(text), 0644, err) < 0)
        goto fail;
    if (mkdir(data, 0755) == 0)
        made_data = true;
    else if (errno != EEXIST || !is_dir(data)) {
        bb_fail_errno(err, errno == EEXIST ? ENOTDIR : errno, "cannot create %s", data);
        goto fail;
    }
    if (ex && (extras = examples_install_extras(example, data, err)) < 0)
        goto fail;
    if (ret_extras)
        *ret_extras = extras;
    return 0;
fail:
    (void)rm_rf(dir, NULL);
    if (made_data)
        (void)rm_rf(data, NULL);
    return -1;
}

static int refuse_up(const char *run, const char *name, bb_error **err)
{
    if (path_exists(run))
        return bb_fail(err, EBUSY, "%s is up; bring it down first: bluebox down %s", name, name);
    return 0;
}

int sandbox_refuse_up(const sandbox *sb, bb_error **err)
{
    return refuse_up(sb->run, sb->name, err);
}

static const home_path moved[] = {HP_SANDBOX, HP_DATA,      HP_LOG,    HP_SNAPSHOTS,
                                  HP_DISK,    HP_BUILD_LOG, HP_NET_LOG};

/* The rotated logs follow the log (best effort: they are history). */
static void move_old_logs(const char *from, const char *to)
{
    for (int n = 1; n <= RUNLOG_GENERATIONS; n++) {
        _cleanup_free_ char *f = runlog_generation(from, n), *t = runlog_generation(to, n);
        (void)renameat2(AT_FDCWD, f, AT_FDCWD, t, RENAME_NOREPLACE);
    }
}

int sandbox_rename(const char *root, const char *old, const char *new, bb_error **err)
{
    if (home_require(root, old, err) < 0 || name_check(new, "sandbox name", err) < 0)
        return -1;
    if (streq(old, new))
        return bb_fail(err, EINVAL, "%s is already called %s", old, new);
    _cleanup_free_ char *run = home_path_of(root, HP_RUN, old);
    if (refuse_up(run, old, err) < 0)
        return -1;
    char *from[ELEMENTSOF(moved)] = {0}, *to[ELEMENTSOF(moved)] = {0};
    int r = 0;
    size_t done = 0;
    for (size_t i = 0; i < ELEMENTSOF(moved); i++) {
        from[i] = home_path_of(root, moved[i], old);
        to[i] = home_path_of(root, moved[i], new);
        if (r == 0 && path_exists(to[i]))
            r = bb_fail(err, EEXIST,
                        "%s already exists (left by an earlier \"%s\"?); remove it before "
                        "renaming",
                        to[i], new);
    }
    if (r == 0) {
        _cleanup_free_ char *logs = path_join(root, "logs");
        _cleanup_free_ char *builds = path_join(logs, "build"), *nets = path_join(logs, "net");
        if ((path_exists(from[2]) && mkdir_p(logs, HOME_DIR_MODE, err) < 0) ||
            (path_exists(from[5]) && mkdir_p(builds, HOME_DIR_MODE, err) < 0) ||
            (path_exists(from[6]) && mkdir_p(nets, HOME_DIR_MODE, err) < 0))
            r = -1;
    }
    for (; r == 0 && done < ELEMENTSOF(moved); done++) {
        if (!path_exists(from[done]))
            continue;
        if (renameat2(AT_FDCWD, from[done], AT_FDCWD, to[done], RENAME_NOREPLACE) < 0)
            r = bb_fail_errno(err, errno, "cannot move %s to %s", from[done], to[done]);
    }
    if (r < 0) {
        /* Put back what moved, newest first; the failed step itself did not move. */
        while (done-- > 0)
            if (path_exists(to[done]) && !path_exists(from[done]))
                (void)renameat2(AT_FDCWD, to[done], AT_FDCWD, from[done], RENAME_NOREPLACE);
    }
    if (r == 0) {
        move_old_logs(from[2], to[2]);
        for (int n = 1; n <= NETLOG_GENERATIONS; n++) { /* the rotated net logs */
            _cleanup_free_ char *f = xasprintf("%s.%d", from[6], n);
            _cleanup_free_ char *t = xasprintf("%s.%d", to[6], n);
            (void)renameat2(AT_FDCWD, f, AT_FDCWD, t, RENAME_NOREPLACE);
        }
    }
    for (size_t i = 0; i < ELEMENTSOF(moved); i++) {
        free(from[i]);
        free(to[i]);
    }
    return r;
}

/* Remove a tree by first renaming it out of the way, so an interruption never leaves a
 * half-deleted sandbox under its own name. */
static int remove_tree(const char *path, bb_error **err)
{
    if (!path_exists(path))
        return 0;
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    _cleanup_free_ char *tmp = xasprintf("%s/.%s.removing-%d", dir, slash + 1, (int)getpid());
    if (rename(path, tmp) < 0)
        return bb_fail_errno(err, errno, "cannot remove %s", path);
    return rm_rf(tmp, err);
}

/* /data, its disk image and the snapshots. */
static int remove_data(const char *root, const char *name, bb_error **err)
{
    _cleanup_free_ char *d = home_path_of(root, HP_DATA, name);
    _cleanup_free_ char *snaps = home_path_of(root, HP_SNAPSHOTS, name);
    _cleanup_free_ char *disk = home_path_of(root, HP_DISK, name);
    if (remove_tree(d, err) < 0 || remove_tree(snaps, err) < 0 || remove_tree(disk, err) < 0)
        return -1;
    return 0;
}

int sandbox_remove(const sandbox *sb, bool data, bb_error **err)
{
    const char *root = sb->root, *name = sb->name;
    if (home_require(root, name, err) < 0 || sandbox_refuse_up(sb, err) < 0)
        return -1;
    const char *log = sb->log;
    _cleanup_free_ char *net_log = home_path_of(root, HP_NET_LOG, name);
    if (remove_tree(sb->dir, err) < 0 || remove_tree(log, err) < 0 ||
        remove_tree(sb->build_log, err) < 0 ||
        remove_tree(net_log, err) < 0)
        return -1;
    for (int n = 1; n <= NETLOG_GENERATIONS; n++) {
        _cleanup_free_ char *net_old = xasprintf("%s.%d", net_log, n);
        if (remove_tree(net_old, err) < 0)
            return -1;
    }
    for (int n = 1; n <= RUNLOG_GENERATIONS; n++) {
        _cleanup_free_ char *old = runlog_generation(log, n);
        if (remove_tree(old, err) < 0)
            return -1;
    }
    return data ? remove_data(root, name, err) : 0;
}

bool sandbox_has_leftover(const char *root, const char *name)
{
    _cleanup_free_ char *def = home_path_of(root, HP_SANDBOX, name);
    if (path_exists(def))
        return false;
    static const home_path parts[] = {HP_DATA, HP_SNAPSHOTS, HP_DISK};
    for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
        _cleanup_free_ char *p = home_path_of(root, parts[i], name);
        if (path_exists(p))
            return true;
    }
    return false;
}

int sandbox_remove_leftover(const char *root, const char *name, bb_error **err)
{
    if (!sandbox_has_leftover(root, name))
        return bb_fail(err, EEXIST, "sandbox \"%s\" exists again; destroy it: bluebox destroy %s",
                       name, name);
    return remove_data(root, name, err);
}

int sandbox_data_entries(const char *root, const char *name)
{
    _cleanup_free_ char *d = home_path_of(root, HP_DATA, name);
    _cleanup_closedir_ DIR *dir = opendir(d);
    if (!dir)
        return -1;
    int n = 0;
    for (struct dirent *de; (de = readdir(dir));)
        if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
            n++;
    return n;
}

void sandbox_remove_locks(const char *root, const char *name)
{
    static const char *const suffix[] = {".use", ".lock"};
    _cleanup_free_ char *users = xasprintf("%s/locks/%s.users", root, name);
    (void)rm_rf(users, NULL);
    for (size_t i = 0; i < ELEMENTSOF(suffix); i++) {
        _cleanup_free_ char *p = xasprintf("%s/locks/%s%s", root, name, suffix[i]);
        (void)unlink(p);
    }
}

int sandbox_data_nonempty(const char *root, const char *name, bb_error **err)
{
    _cleanup_free_ char *d = home_path_of(root, HP_DATA, name);
    _cleanup_free_ char *disk = home_path_of(root, HP_DISK, name);
    if (path_exists(disk)) /* a disk image (data_limit) is never looked into on the host */
        return 1;
    int r = dir_is_empty(d, err);
    return r < 0 ? -1 : !r;
}
