/* The direct OCI launch path: a config.json podman wrote once, a rootfs and `runc run` per
 * boot (see direct.h for what is rewritten and why the rest is podman's own). */
#include "direct.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/bluefile.h"
#include "core/home.h"
#include "direct_net.h"
#include "util/fingerprint.h"
#include "imageref.h"
#include "runtime_fp.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/spawn.h"
#include "util/xalloc.h"

extern char **environ;

/* The one argument of the template's command, replaced by the run's command. */
#define CMD_PLACEHOLDER "__bluebox_direct_cmd__"
/* podman's default /dev/shm (a tmpfs it mounts in its container directory). */
#define SHM_OPTIONS "size=65536k"
/* Overlay's mount data is one page. */
#define MOUNT_DATA_MAX 4000

bool direct_wanted(const backend *b, const launch *l)
{
    /* The default; BLUEBOX_LAUNCH=podman keeps `podman run` for comparison and fallback. */
    const char *e = getenv("BLUEBOX_LAUNCH");
    if (e && streq(e, "podman"))
        return false;
    if (!b->direct_ok)
        return false;
    if (l->mode != LAUNCH_RUN && l->mode != LAUNCH_SHELL)
        return false;
    const bluefile *bf = l->bf;
    /* Rootless needs `podman unshare` for the layers and runc --rootless; strict's uid map
     * needs podman's id-mapped copy of them (runc here cannot id-map a mount). Both stay on
     * podman. bridge, allow: and secrets: direct_net.h. */
    return geteuid() == 0 && direct_net_ok(bf) && bf->isolation != ISO_STRICT && !l->image &&
           (l->interactive || !l->tty);
}

static bool id_ok(const char *id)
{
    size_t n = strlen(id);
    return n > 0 && n < 128 && id[0] != '.' &&
           strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static char *run_dir(const char *id)
{
    return xasprintf(DIRECT_RUNS_DIR "/%s", id);
}

static char *run_file(const char *id, const char *name)
{
    return xasprintf(DIRECT_RUNS_DIR "/%s/%s", id, name);
}

/* ---- the template: podman's config.json for this launch ---- */

/* The template's podman argv: create instead of run, a throwaway name, the placeholder for
 * the command. `key_text` gets the same argv with the name left out (the cache key). */
static void template_argv(const launch *l, const strv *podman, const char *name, strv *ret,
                          strbuf *key_text)
{
    size_t n_cmd = 0;
    for (char *const *c = l->cmd; c && *c; c++)
        n_cmd++;
    for (size_t i = 0; i + n_cmd < podman->n; i++) {
        const char *a = podman->v[i];
        if (i == 1) {
            strv_add(ret, "create");
            sb_puts(key_text, "create\n");
            continue;
        }
        if (streq(a, "--rm"))
            continue;
        if (strncmp(a, "--name=", 7) == 0) {
            strv_push(ret, xasprintf("--name=%s", name));
            continue;
        }
        char *t = direct_net_template_arg(l, a);
        if (!t)
            continue;
        strv_push(ret, t);
        sb_printf(key_text, "%s\n", t);
    }
    strv_add(ret, CMD_PLACEHOLDER);
}

static char *template_key(const backend *b, const launch *l, const char *argv_text)
{
    fingerprint f;
    fp_init(&f);
    fp_str(&f, "argv", argv_text);
    _cleanup_free_ char *id = image_recorded_id(l->sb);
    fp_str(&f, "image id", id ? id : "-");
    _cleanup_free_ char *rt = runtime_fingerprint(b, l);
    fp_str(&f, "runtime", rt);
    fp_file_as(&f, "Bluefile", l->bf->seccomp ? l->bf->seccomp : "-");
    char *hex = fp_hex(&f);
    fp_done(&f);
    return hex;
}

static char *trim(char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        s[--n] = '\0';
    return s;
}

/* Run a podman command for its stdout; a failure carries podman's own words. */
static int podman_out(char *const argv[], char **ret, bb_error **err)
{
    _cleanup_free_ char *out = NULL, *errs = NULL;
    int r = spawn_capture(argv, &out, &errs, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EIO, "%s %s failed: %s", argv[0], argv[1],
                       errs && *errs ? trim(errs) : "no message");
    *ret = trim(steal_pointer(&out));
    return 0;
}

/* The overlay lower list of the image: its top layer, then the ones below. */
static int image_lower(const char *image, char **ret, bb_error **err)
{
    static const char format[] =
        "{{.GraphDriver.Name}}|{{.GraphDriver.Data.UpperDir}}|{{.GraphDriver.Data.LowerDir}}";
    char *argv[] = {"podman", "image", "inspect", "--format", (char *)format, (char *)image, NULL};
    _cleanup_free_ char *out = NULL;
    if (podman_out(argv, &out, err) < 0)
        return -1;
    char *upper = strchr(out, '|');
    char *lower = upper ? strchr(upper + 1, '|') : NULL;
    if (!lower || strncmp(out, "overlay|", 8) != 0)
        return bb_fail(err, ENOTSUP,
                       "the direct launch needs podman's overlay storage driver; use "
                       "BLUEBOX_LAUNCH=podman");
    *lower++ = '\0';
    upper++;
    if (streq(lower, "<no value>"))
        lower = (char *)"";
    *ret = *lower ? xasprintf("%s:%s", upper, lower) : xstrdup(upper);
    return 0;
}

static json_t *jarr_strs(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

/* podman's per-container files (/etc/hostname, /run/.containerenv) are copied beside the
 * template; its /dev/shm (a tmpfs it mounts itself) becomes the same tmpfs mounted by runc.
 * The tmpfs UML maps the guest's RAM from gets transparent huge pages where the host kernel
 * has them for tmpfs (podman's --tmpfs refuses the option): one fault and one free per 2 MiB
 * instead of per 4 KiB page, which on this machine's nested paging took 150 ms off each cold
 * run (start and teardown). The tmpfs's size still bounds it; an idle guest's resident
 * memory grows ~30% (bench/RESULTS.md). */
static int own_mounts(json_t *cfg, const char *cid, const char *tmp, const char *dir,
                      bb_error **err)
{
    const bool huge = tmpfs_has_huge_pages();
    json_t *mounts = json_object_get(cfg, "mounts");
    size_t i;
    json_t *m;
    json_array_foreach(mounts, i, m)
    {
        const char *src = json_string_value(json_object_get(m, "source"));
        const char *dst = json_string_value(json_object_get(m, "destination"));
        if (dst && streq(dst, ABI_MEM_DIR) && huge)
            json_array_append_new(json_object_get(m, "options"), json_string(TMPFS_HUGE_OPTION));
        if (!src || !dst || !strstr(src, cid))
            continue;
        if (streq(dst, "/dev/shm")) {
            static const char *const opts[] = {"nosuid", "noexec", "nodev", "mode=1777",
                                               SHM_OPTIONS};
            json_object_set_new(m, "type", json_string("tmpfs"));
            json_object_set_new(m, "source", json_string("shm"));
            json_object_set_new(m, "options", jarr_strs(opts, ELEMENTSOF(opts)));
            continue;
        }
        struct stat st;
        if (stat(src, &st) < 0 || !S_ISREG(st.st_mode))
            return bb_fail(err, ENOTSUP,
                           "podman's mount of %s is no file; use BLUEBOX_LAUNCH=podman", dst);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(src, 1 << 20, &data, &len, err) < 0)
            return -1;
        _cleanup_free_ char *copy = xasprintf("%s/file-%zu", tmp, i);
        _cleanup_free_ char *final = xasprintf("%s/file-%zu", dir, i);
        if (write_file_atomic(copy, data, len, 0644, err) < 0)
            return -1;
        json_object_set_new(m, "source", json_string(final));
    }
    return 0;
}

static int template_from(const char *cid, const char *image, const char *tmp, const char *dir,
                         bb_error **err)
{
    char *init[] = {"podman", "container", "init", (char *)cid, NULL};
    _cleanup_free_ char *ignored = NULL, *path = NULL, *lower = NULL;
    if (podman_out(init, &ignored, err) < 0)
        return -1;
    char *inspect[] = {"podman",    "container", "inspect", "--format", "{{.OCIConfigPath}}",
                       (char *)cid, NULL};
    if (podman_out(inspect, &path, err) < 0)
        return -1;
    json_error_t je;
    _cleanup_json_ json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg)
        return bb_fail(err, EIO, "cannot read podman's %s: %s", path, je.text);
    if (own_mounts(cfg, cid, tmp, dir, err) < 0)
        return -1;
    if (image_lower(image, &lower, err) < 0)
        return -1;
    _cleanup_free_ char *cfg_path = path_join(tmp, "config.json");
    _cleanup_free_ char *low_path = path_join(tmp, "lower");
    if (json_dump_file(cfg, cfg_path, JSON_COMPACT) < 0)
        return bb_fail_errno(err, errno, "cannot write %s", cfg_path);
    return write_file_atomic(low_path, lower, strlen(lower), 0644, err);
}

/* The sandbox's older templates (<name>-<16 hex>), which no launch asks for again. */
static void template_prune(const char *root, const char *name, const char *keep)
{
    /* keep NULL: every template of the sandbox (direct_forget) */
    _cleanup_free_ char *tpl = xasprintf("%s/direct/tpl", root);
    _cleanup_closedir_ DIR *d = opendir(tpl);
    size_t n = strlen(name);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *key = e->d_name + n + 1;
        if (strncmp(e->d_name, name, n) != 0 || e->d_name[n] != '-' || strlen(key) != 16 ||
            strspn(key, "0123456789abcdef") != 16 || (keep && streq(key, keep)))
            continue;
        (void)rm_rf_at(dirfd(d), e->d_name, NULL);
    }
}

void direct_forget(const sandbox *sb)
{
    template_prune(sb->root, sb->name, NULL);
}

/* <home>/direct/tpl/<name>-<key>/: config.json and lower, made by podman once. */
static int template_ensure(const backend *b, const launch *l, const strv *podman, char **ret,
                           bb_error **err)
{
    _cleanup_free_ char *cname =
        xasprintf("bluebox-tpl-%d-%04x", (int)getpid(), (unsigned)(arc4random() & 0xffff));
    _cleanup_strv_ strv create = {0};
    _cleanup_sb_ strbuf key_text = {0};
    template_argv(l, podman, cname, &create, &key_text);
    _cleanup_free_ char *key = template_key(b, l, key_text.s ? key_text.s : "");
    _cleanup_free_ char *dir = xasprintf("%s/direct/tpl/%s-%s", l->root, l->sb->name, key);
    _cleanup_free_ char *done = path_join(dir, "lower");
    if (path_exists(done)) {
        *ret = steal_pointer(&dir);
        return 0;
    }
    _cleanup_free_ char *tmp = xasprintf("%s.%d", dir, (int)getpid());
    (void)rm_rf(tmp, NULL);
    if (mkdir_p(tmp, 0700, err) < 0)
        return -1;
    _cleanup_free_ char *cid = NULL, *image = image_ref(l->sb);
    int r = podman_out(create.v, &cid, err);
    if (r == 0)
        r = template_from(cid, image, tmp, dir, err);
    char *rm[] = {"podman", "rm", "-f", "-t", "0", "--ignore", cname, NULL};
    (void)spawn_quiet(rm, NULL);
    if (r < 0) {
        (void)rm_rf(tmp, NULL);
        return bb_prefix(err, "cannot prepare the direct launch (BLUEBOX_LAUNCH=podman avoids it)");
    }
    if (rename(tmp, dir) < 0 && !path_exists(done)) {
        int e = errno;
        (void)rm_rf(tmp, NULL);
        return bb_fail_errno(err, e, "cannot keep %s", dir);
    }
    (void)rm_rf(tmp, NULL); /* another launch made it first */
    template_prune(l->root, l->sb->name, key);
    *ret = steal_pointer(&dir);
    return 0;
}

/* ---- one run's bundle ---- */

static void set_term(json_t *proc)
{
    const char *term = getenv("TERM");
    json_t *env = json_object_get(proc, "env");
    size_t i;
    json_t *v;
    json_array_foreach(env, i, v)
    {
        const char *s = json_string_value(v);
        if (s && strncmp(s, "TERM=", 5) == 0) {
            _cleanup_free_ char *t = xasprintf("TERM=%s", term);
            json_array_set_new(env, i, json_string(t));
            return;
        }
    }
}

static int splice_cmd(json_t *proc, char *const *cmd, bb_error **err)
{
    json_t *args = json_object_get(proc, "args");
    size_t n = json_array_size(args);
    const char *last = n ? json_string_value(json_array_get(args, n - 1)) : NULL;
    if (!last || !streq(last, CMD_PLACEHOLDER))
        return bb_fail(err, EINVAL, "podman's config.json lacks the command's place");
    json_array_remove(args, n - 1);
    for (char *const *c = cmd; c && *c; c++)
        json_array_append_new(args, json_string(*c));
    return 0;
}

/* The template's copies of podman's per-container files are copied again for the run: the
 * container may write them (podman's are its own, and go with it), so a run's writes must
 * not reach the next run. */
static int own_files(json_t *cfg, const char *tpl, const char *dir, const char *host,
                     bb_error **err)
{
    size_t tl = strlen(tpl), i;
    json_t *m;
    json_array_foreach(json_object_get(cfg, "mounts"), i, m)
    {
        const char *src = json_string_value(json_object_get(m, "source"));
        if (!src || strncmp(src, tpl, tl) != 0 || src[tl] != '/')
            continue;
        _cleanup_free_ char *data = NULL, *copy = xasprintf("%s/file-%zu", dir, i);
        size_t len = 0;
        const char *dst = json_string_value(json_object_get(m, "destination"));
        if (dst && streq(dst, "/etc/hostname")) { /* the run's own, as the UTS name below */
            data = xasprintf("%s\n", host);
            len = strlen(data);
        } else if (read_file(src, 1 << 20, &data, &len, err) < 0)
            return -1;
        if (write_file_atomic(copy, data, len, 0644, err) < 0)
            return -1;
        json_object_set_new(m, "source", json_string(copy));
    }
    return 0;
}

static int bundle_write(const launch *l, const char *tpl, const char *dir, const char *rootfs,
                        bb_error **err)
{
    _cleanup_free_ char *path = path_join(tpl, "config.json");
    json_error_t je;
    _cleanup_json_ json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg)
        return bb_fail(err, EIO, "cannot read %s: %s", path, je.text);
    json_t *proc = json_object_get(cfg, "process");
    /* Each run its own hostname, as podman gives each container (its id's first 12 hex
     * digits); the template's would name every run of it alike. */
    char host[13];
    snprintf(host, sizeof host, "%08x%04x", (unsigned)arc4random(),
             (unsigned)(arc4random() & 0xffff));
    if (splice_cmd(proc, l->cmd, err) < 0 || own_files(cfg, tpl, dir, host, err) < 0 ||
        direct_net_bundle(cfg, l, dir, err) < 0)
        return -1;
    if (json_object_get(cfg, "hostname"))
        json_object_set_new(cfg, "hostname", json_string(host));
    if (launch_term(l->bf))
        set_term(proc);
    json_object_set_new(json_object_get(cfg, "root"), "path", json_string(rootfs));
    _cleanup_free_ char *cg = xasprintf("/bluebox-direct/%s", l->container);
    json_object_set_new(json_object_get(cfg, "linux"), "cgroupsPath", json_string(cg));
    json_t *ann = json_object_get(cfg, "annotations");
    if (!ann) {
        ann = json_object();
        json_object_set_new(cfg, "annotations", ann);
    }
    json_object_set_new(ann, "bluebox.sandbox", json_string(l->sb->name));
    json_object_set_new(ann, "bluebox.home", json_string(l->sb->home_id));
    json_object_set_new(ann, "bluebox.launch", json_string("direct"));
    _cleanup_free_ char *out = path_join(dir, "config.json");
    if (json_dump_file(cfg, out, JSON_COMPACT) < 0)
        return bb_fail_errno(err, errno, "cannot write %s", out);
    return 0;
}

static int write_small(const char *dir, const char *name, const char *text, bb_error **err)
{
    _cleanup_free_ char *p = path_join(dir, name);
    return write_file_atomic(p, text, strlen(text), 0600, err);
}

static int run_prepare(const launch *l, const char *tpl, bb_error **err)
{
    _cleanup_free_ char *dir = run_dir(l->container), *rootfs = path_join(dir, "rootfs");
    _cleanup_free_ char *scratch = xasprintf("%s/direct/scratch/%s", l->root, l->container);
    _cleanup_free_ char *upper = path_join(scratch, "upper"), *work = path_join(scratch, "work");
    _cleanup_free_ char *lower_path = path_join(tpl, "lower"), *lower = NULL;
    if (read_file(lower_path, 1 << 16, &lower, NULL, err) < 0)
        return -1;
    _cleanup_free_ char *opts = xasprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
    if (strlen(opts) > MOUNT_DATA_MAX)
        return bb_fail(err, E2BIG,
                       "the image has too many layers for the direct launch; use "
                       "BLUEBOX_LAUNCH=podman");
    if (mkdir_p(rootfs, 0700, err) < 0 || mkdir_p(upper, 0755, err) < 0 ||
        mkdir_p(work, 0700, err) < 0)
        return -1;
    _cleanup_free_ char *owner = xasprintf("%s %s", l->sb->home_id, l->sb->name);
    if (write_small(dir, "scratch", scratch, err) < 0 || write_small(dir, "mount", opts, err) < 0 ||
        write_small(dir, "sandbox", owner, err) < 0)
        return -1;
    return bundle_write(l, tpl, dir, rootfs, err);
}

int direct_argv(const backend *b, const launch *l, strv *podman, strv *ret, bb_error **err)
{
    _cleanup_strv_ strv p = *podman;
    *podman = (strv){0};
    if (!id_ok(l->container))
        return bb_fail(err, EINVAL, "bad container name %s", l->container);
    direct_reap();
    _cleanup_free_ char *tpl = NULL;
    if (template_ensure(b, l, &p, &tpl, err) < 0)
        return -1;
    if (run_prepare(l, tpl, err) < 0) {
        _cleanup_free_ char *dir = run_dir(l->container);
        (void)rm_rf(dir, NULL);
        return bb_prefix(err, "cannot prepare the direct launch");
    }
    _cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
    if (!self)
        return bb_fail_errno(err, errno, "cannot find the bluebox executable");
    strv_add(ret, self);
    strv_add(ret, "__direct");
    strv_add(ret, l->container);
    strv_push(ret, xasprintf("%d", (int)getpid()));
    /* podman without -i gives the container no stdin; runc passes its own on */
    strv_add(ret, l->interactive ? "stdin" : "no-stdin");
    return 0;
}

/* ---- stopping and reaping ---- */

static pid_t supervisor_pid(const char *id)
{
    _cleanup_free_ char *p = run_file(id, "pid"), *text = NULL;
    if (read_file(p, 64, &text, NULL, NULL) < 0)
        return 0;
    long v = strtol(text, NULL, 10);
    return v > 1 ? (pid_t)v : 0;
}

static bool supervisor_alive(pid_t pid)
{
    if (pid <= 0 || kill(pid, 0) < 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    _cleanup_free_ char *cmd = NULL;
    size_t n = 0;
    if (read_file(path, 4096, &cmd, &n, NULL) < 0)
        return false;
    /* argv[1] of a supervisor */
    size_t first = strnlen(cmd, n);
    return first + 1 < n && streq(cmd + first + 1, "__direct");
}

bool direct_stop(const char *container)
{
    if (!id_ok(container))
        return false;
    _cleanup_free_ char *dir = run_dir(container);
    if (!is_dir(dir))
        return false;
    /* The supervisor writes its pid first thing; a stop that comes before waits for it. */
    for (int i = 0; i < 100; i++) {
        pid_t pid = supervisor_pid(container);
        if (pid > 0) {
            kill(pid, SIGTERM);
            return true;
        }
        usleep(10 * 1000);
    }
    return true;
}

static void runc_quiet(const char *verb, const char *id, const char *extra)
{
    char *argv[] = {"runc",        "--root", DIRECT_RUNC_ROOT, (char *)verb, (char *)id,
                    (char *)extra, NULL};
    if (!extra) {
        argv[4] = (char *)(streq(verb, "delete") ? "--force" : id);
        argv[5] = streq(verb, "delete") ? (char *)id : NULL;
    }
    (void)spawn_quiet(argv, NULL);
}

#define CGROUP_ROOT "/sys/fs/cgroup"

/* One of the run's cgroups: what is left in it killed, then removed (a few tries: a killed
 * process leaves it only once it has exited). Nothing when it does not exist. */
static void cgroup_rmdir(const char *path)
{
    for (int i = 0; i < 50 && rmdir(path) < 0 && errno == EBUSY; i++) {
        _cleanup_free_ char *procs = path_join(path, "cgroup.procs"), *text = NULL;
        if (read_file(procs, 1 << 16, &text, NULL, NULL) == 0)
            for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
                 l = strtok_r(NULL, "\n", &save))
                if (atoi(l) > 1)
                    (void)kill(atoi(l), SIGKILL);
        usleep(20 * 1000);
    }
}

/* The run's cgroups (config.json's cgroupsPath, in the unified hierarchy or in each v1
 * one), which runc deletes with the container; those of a runc killed while it created the
 * container, before it recorded its state, are left for us. */
static void cgroups_remove(const char *id)
{
    _cleanup_free_ char *v2 = xasprintf(CGROUP_ROOT "/bluebox-direct/%s", id);
    cgroup_rmdir(v2);
    _cleanup_closedir_ DIR *d = opendir(CGROUP_ROOT);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *v1 = xasprintf(CGROUP_ROOT "/%s/bluebox-direct/%s", e->d_name, id);
        cgroup_rmdir(v1);
    }
}

/* Remove the state of one run: its runc container and cgroups, its scratch and its
 * directory. The rootfs mount lived in the supervisor's mount namespace only. */
static void run_remove(const char *id)
{
    _cleanup_free_ char *state = xasprintf(DIRECT_RUNC_ROOT "/%s", id);
    if (is_dir(state)) { /* runc run removes its own on a normal exit */
        runc_quiet("kill", id, "KILL");
        runc_quiet("delete", id, NULL);
    }
    cgroups_remove(id);
    _cleanup_free_ char *sp = run_file(id, "scratch"), *scratch = NULL;
    if (read_file(sp, 1 << 16, &scratch, NULL, NULL) == 0)
        (void)rm_rf(scratch, NULL);
    _cleanup_free_ char *dir = run_dir(id);
    (void)rm_rf(dir, NULL);
}

/* A run directory with no live supervisor (after a grace for one just starting). */
static bool run_orphaned(const char *id)
{
    if (supervisor_alive(supervisor_pid(id)))
        return false;
    _cleanup_free_ char *dir = run_dir(id);
    struct stat st;
    if (stat(dir, &st) < 0)
        return false;
    _cleanup_free_ char *pidf = run_file(id, "pid");
    return path_exists(pidf) || time(NULL) - st.st_mtim.tv_sec > 60;
}

void direct_reap(void)
{
    _cleanup_closedir_ DIR *d = opendir(DIRECT_RUNS_DIR);
    for (struct dirent *e; d && (e = readdir(d));)
        if (id_ok(e->d_name) && run_orphaned(e->d_name))
            run_remove(e->d_name);
    /* runc state without a run directory: a supervisor killed between the two */
    _cleanup_closedir_ DIR *r = opendir(DIRECT_RUNC_ROOT);
    for (struct dirent *e; r && (e = readdir(r));) {
        if (!id_ok(e->d_name))
            continue;
        _cleanup_free_ char *dir = run_dir(e->d_name);
        if (!is_dir(dir)) {
            runc_quiet("kill", e->d_name, "KILL");
            runc_quiet("delete", e->d_name, NULL);
        }
    }
}

/* runc's state is the truth of what runs: whatever direct_reap leaves is a run
 * whose supervisor lives (or is starting), and nothing runc knows is left without one. */
char *direct_running(const sandbox *sb)
{
    direct_reap();
    _cleanup_free_ char *want = xasprintf("%s %s", sb->home_id, sb->name);
    _cleanup_closedir_ DIR *d = opendir(DIRECT_RUNS_DIR);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!id_ok(e->d_name))
            continue;
        _cleanup_free_ char *p = run_file(e->d_name, "sandbox"), *owner = NULL;
        if (read_file(p, 4096, &owner, NULL, NULL) == 0 && streq(owner, want))
            return xstrdup(e->d_name);
    }
    return NULL;
}

/* The container's init as runc has it (`runc state`), 0 when runc does not know it (yet). */
static pid_t container_pid(const char *id)
{
    char *argv[] = {"runc", "--root", DIRECT_RUNC_ROOT, "state", (char *)id, NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0 || !out)
        return 0;
    _cleanup_json_ json_t *st = json_loads(out, 0, NULL);
    json_int_t pid = json_integer_value(json_object_get(st, "pid"));
    return pid > 0 ? (pid_t)pid : 0;
}

int direct_refuse(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *c = direct_running(sb);
    if (!c)
        return 0;
    return bb_fail(err, EBUSY,
                   "a VM of %s is still running (direct container %s); wait for it to end or "
                   "stop it first: runc --root " DIRECT_RUNC_ROOT " kill %s KILL",
                   sb->name, c, c);
}

void direct_each(const char *root, direct_each_fn fn, void *ud)
{
    direct_reap(); /* what runc runs for an owner that is gone stops, rather than shows */
    _cleanup_free_ char *home = home_id(root);
    size_t hl = strlen(home);
    _cleanup_closedir_ DIR *d = opendir(DIRECT_RUNS_DIR);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!id_ok(e->d_name))
            continue;
        _cleanup_free_ char *p = run_file(e->d_name, "sandbox"), *owner = NULL;
        if (read_file(p, 4096, &owner, NULL, NULL) < 0 || strncmp(owner, home, hl) != 0 ||
            owner[hl] != ' ')
            continue;
        fn(e->d_name, owner + hl + 1, container_pid(e->d_name), ud);
    }
}

/* ---- the supervisor ---- */

static int mount_rootfs(const char *id)
{
    _cleanup_free_ char *mp = run_file(id, "mount"), *opts = NULL;
    _cleanup_free_ char *rootfs = run_file(id, "rootfs");
    if (read_file(mp, 1 << 16, &opts, NULL, NULL) < 0)
        return -1;
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    /* The upper layer is thrown away, so nothing needs syncing: without "volatile" the
     * unmount syncs the upper layer's whole filesystem (~0.15 s of a loaded host's run). */
    _cleanup_free_ char *fast = xasprintf("%s,volatile", opts);
    if (mount("overlay", rootfs, "overlay", 0, fast) == 0)
        return 0;
    return mount("overlay", rootfs, "overlay", 0, opts); /* kernels before 5.10 */
}

static int spawn_runc(const char *id, bool no_stdin, const sigset_t *old, pid_t *ret)
{
    _cleanup_free_ char *bundle = run_dir(id);
    char *argv[] = {"runc",     "--root", DIRECT_RUNC_ROOT, "run",
                    "--bundle", bundle,   "--preserve-fds", (char *)direct_net_preserve_fds(bundle),
                    (char *)id, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (no_stdin)
        posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, old);
    /* Without a terminal (a harness, serve), runc gets a process group of its own: the kill
     * -9 of the run's group then leaves it to reap the VMM its lifeline stopped and delete the
     * container at once, rather than pid 1 some time later. On a terminal it stays in ours,
     * the foreground group, which the terminal's signals and reads are for. */
    bool term = isatty(STDIN_FILENO) || isatty(STDOUT_FILENO) || isatty(STDERR_FILENO);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at,
                             (short)(POSIX_SPAWN_SETSIGMASK | (term ? 0 : POSIX_SPAWN_SETPGROUP)));
    int r = posix_spawnp(ret, "runc", &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return r;
}

#define KILL_RETRY_MS 200

/* The janitor's side: wait until the supervisor is gone (its end of `alive` closes), then
 * remove what it did not (its run directory is still there). */
static _noreturn_ void janitor_main(const char *id, int alive, const sigset_t *old)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (setsid() < 0 || null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
        dup2(null, STDERR_FILENO) < 0 || dup2(alive, 3) < 0)
        _exit(1);
    close_range(4, ~0U, 0); /* nothing of the run's: its stdio, the lifeline, the secrets */
    sigprocmask(SIG_SETMASK, old, NULL);
    struct pollfd p = {.fd = 3, .events = POLLIN};
    while (poll(&p, 1, -1) < 0 && errno == EINTR)
        ;
    _cleanup_free_ char *dir = run_dir(id);
    if (is_dir(dir))
        run_remove(id);
    _exit(0);
}

/* A process in a session of its own, so that the kill -9 of the run's process group (bluebox,
 * the supervisor and runc together: a harness's timeout, a closed terminal) does not take it,
 * that cleans up after a supervisor that could not: the container (whose VMM its lifeline
 * stopped already), runc's state and cgroup, the scratch. Forked before the supervisor's
 * mount namespace exists, so that it holds none of the run's mounts. Returns our end, held
 * until we exit; -1 when there is no janitor (direct_reap is the fallback). */
static int janitor_start(const char *id, const sigset_t *old)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[1]);
        janitor_main(id, p[0], old);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    return p[1];
}

int direct_main(int argc, char **argv)
{
    if (argc != 4 || !id_ok(argv[1])) {
        fprintf(stderr, "usage: bluebox __direct <id> <parent pid> stdin|no-stdin\n");
        return ABI_EXIT_SETUP;
    }
    const char *id = argv[1];
    pid_t parent = (pid_t)strtol(argv[2], NULL, 10);
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &old);
    /* The bluebox that started us dying (kill -9) is a stop like any other. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    bool stopping = getppid() != parent;
    _cleanup_free_ char *dir = run_dir(id);
    _cleanup_free_ char *pid_text = xasprintf("%d\n", (int)getpid());
    int code = ABI_EXIT_SETUP;
    pid_t child = -1;
    /* The janitor first: once the pid file says a supervisor ran, one is there to clean up
     * after it, however early it is killed. */
    _cleanup_close_ int janitor = janitor_start(id, &old);
    if (janitor < 0 || write_small(dir, "pid", pid_text, NULL) < 0 || mount_rootfs(id) < 0) {
        fprintf(stderr, "bluebox: cannot prepare the direct launch of %s: %s\n", id,
                strerror(errno));
        run_remove(id);
        return ABI_EXIT_SETUP;
    }
    direct_net net = DIRECT_NET_INIT;
    _cleanup_error_ bb_error *why = NULL;
    if (direct_net_up(dir, &old, &net, &why) < 0) {
        fprintf(stderr, "bluebox: %s\n", bb_error_message(why));
        direct_net_down(&net);
        run_remove(id);
        return ABI_EXIT_SETUP;
    }
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    int r = sfd < 0 ? errno : spawn_runc(id, streq(argv[3], "no-stdin"), &old, &child);
    if (r != 0) {
        fprintf(stderr, "bluebox: cannot run runc: %s\n", strerror(r));
        direct_net_down(&net);
        run_remove(id);
        return ABI_EXIT_SETUP;
    }
    for (;;) {
        if (stopping)
            runc_quiet("kill", id, "KILL");
        int status;
        pid_t w = waitpid(child, &status, WNOHANG);
        if (w == child) {
            code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
            break;
        }
        struct pollfd p = {.fd = sfd, .events = POLLIN};
        if (poll(&p, 1, stopping ? KILL_RETRY_MS : -1) < 0 && errno != EINTR)
            break;
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == sizeof si)
            if (si.ssi_signo == SIGTERM)
                stopping = true; /* INT and HUP reach runc from the terminal; it forwards them */
    }
    close(sfd);
    _cleanup_free_ char *rootfs = run_file(id, "rootfs");
    (void)umount2(rootfs, MNT_DETACH);
    direct_net_down(&net);
    run_remove(id);
    return code;
}
