/* bluebox's OCI runtime for podman build on uml (buildvm.h): the step's process becomes
 * bluebox-vmm, the step's command runs in the uml guest. */
#include "buildvm.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "abi/abi.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/xalloc.h"

static const struct {
    const char *name;
    int nr;
} cap_names[] = {
    {"CHOWN", 0},        {"DAC_OVERRIDE", 1}, {"FOWNER", 3},
    {"FSETID", 4},       {"KILL", 5},         {"SETGID", 6},
    {"SETUID", 7},       {"SETPCAP", 8},      {"NET_BIND_SERVICE", 10},
    {"NET_RAW", 13},     {"SYS_CHROOT", 18},  {"MKNOD", 27},
    {"AUDIT_WRITE", 29}, {"SETFCAP", 31},
};

char *buildvm_caps_mask(const char *names)
{
    uint64_t mask = 0;
    _cleanup_free_ char *copy = xstrdup(names);
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
            if (streq(w, cap_names[i].name))
                mask |= UINT64_C(1) << cap_names[i].nr;
    return xasprintf("%" PRIx64, mask);
}

int buildvm_write(const buildvm_conf *c, const char *self, const char *path, const char *script,
                  bb_error **err)
{
    _cleanup_json_ json_t *env = json_array();
    for (size_t i = 0; i < c->env.n; i++)
        json_array_append_new(env, json_string(c->env.v[i]));
    _cleanup_json_ json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:O}", "runc", c->runc, "guest", c->guest ? c->guest : "uml",
        "vmm_bundle", c->vmm_bundle, "guest_binary", c->guest_binary, "step_caps", c->step_caps,
        "ram_mib", c->ram_mib, "pids", c->pids, "env", env);
    if (!o)
        return bb_fail(err, EINVAL, "cannot encode the build runtime's settings");
    _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
    if (write_file_atomic(path, text, strlen(text), 0600, err) < 0)
        return -1;
    /* Single quotes: neither path may hold one (bluebox makes both). */
    if (strchr(self, '\'') || strchr(path, '\''))
        return bb_fail(err, EINVAL, "the path of bluebox or of the build holds a quote");
    _cleanup_free_ char *sh = xasprintf("#!/bin/sh\nexec '%s' __oci '%s' \"$@\"\n", self, path);
    return write_file_atomic(script, sh, strlen(sh), 0700, err);
}

/* ---- the wrapper ---- */

/* runc's global options that take a value as the next argument. */
static bool global_takes_value(const char *a)
{
    static const char *const v[] = {"--root", "--log", "--log-format", "--criu", "--rootless"};
    for (size_t i = 0; i < ELEMENTSOF(v); i++)
        if (streq(a, v[i]))
            return true;
    return false;
}

static int command_index(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] != '-')
            return i;
        if (global_takes_value(argv[i]))
            i++;
    }
    return -1;
}

static const char *bundle_of(int argc, char **argv, int cmd)
{
    for (int i = cmd + 1; i < argc; i++) {
        if ((streq(argv[i], "--bundle") || streq(argv[i], "-b")) && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--bundle=", 9) == 0)
            return argv[i] + 9;
    }
    return ".";
}

static json_t *mount_new(const char *dst, const char *type, const char *src, const char *opts)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:[]}", "destination", dst, "type", type, "source", src, "options");
    json_t *a = json_object_get(o, "options");
    _cleanup_free_ char *copy = xstrdup(opts);
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
        json_array_append_new(a, json_string(w));
    return o;
}

/* Where the wrapper remembers a step's root between create and delete: beside the conf. */
static char *state_path(const char *conf, const char *id)
{
    _cleanup_free_ char *dir = xstrdup(conf);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    return xasprintf("%s/oci-%s", slash ? dir : ".", id);
}

/* The settings name qemu's bundle (else uml's, as before they named one). */
static bool is_qemu(json_t *conf)
{
    const char *g = json_string_value(json_object_get(conf, "guest"));
    return g && streq(g, "qemu");
}

static int rewrite_process(json_t *cfg, json_t *conf, bb_error **err)
{
    json_t *proc = json_object_get(cfg, "process");
    json_t *args = json_object_get(proc, "args");
    json_t *env = json_object_get(proc, "env");
    json_t *user = json_object_get(proc, "user");
    if (!json_is_array(args) || !json_is_array(env) || !json_is_object(user))
        return bb_fail(err, EINVAL, "the step's config.json has no process args, env or user");
    json_t *na = json_pack("[s,s,s,s]", ABI_VMM_DIR "/bluebox-vmm", ABI_GUEST_BINARY, "__step",
                           json_string_value(json_object_get(conf, "step_caps")));
    if (is_qemu(conf))
        json_array_append_new(na, json_string("--guest=qemu"));
    /* The step's own user (the image's USER), which __step takes on in the guest once the
     * bounding set is the build's. */
    json_int_t uid = json_integer_value(json_object_get(user, "uid"));
    json_int_t gid = json_integer_value(json_object_get(user, "gid"));
    json_t *groups = json_object_get(user, "additionalGids");
    if (uid != 0 || gid != 0 || json_array_size(groups)) {
        strbuf b = {0};
        sb_printf(&b, "--user=%lld:%lld:", (long long)uid, (long long)gid);
        for (size_t k = 0; k < json_array_size(groups); k++)
            sb_printf(&b, "%s%lld", k ? "," : "",
                      (long long)json_integer_value(json_array_get(groups, k)));
        _cleanup_free_ char *u = sb_steal(&b);
        json_array_append_new(na, json_string(u));
    }
    json_array_extend(na, args);
    json_object_set_new(proc, "args", na);
    /* BLUEBOX_* names are bluebox's own (a Bluefile cannot set them): one that reached the
     * step's environment came from the base image's ENV, and goes. */
    size_t i;
    for (i = json_array_size(env); i-- > 0;) {
        const char *kv = json_string_value(json_array_get(env, i));
        if (!kv || strncmp(kv, "BLUEBOX_", 8) == 0)
            json_array_remove(env, i);
    }
    json_t *add = json_object_get(conf, "env");
    for (i = 0; i < json_array_size(add); i++)
        json_array_append(env, json_array_get(add, i));
    json_array_append_new(env, json_string(ABI_ENV_BUILD "=1"));
    /* bluebox-vmm runs as the container's root (a backend's user_to_guest, launch/launch.c). */
    json_object_set_new(user, "uid", json_integer(0));
    json_object_set_new(user, "gid", json_integer(0));
    /* podman gives a non-root step no effective or permitted capabilities; bluebox-vmm, now
     * root, needs the container's (its bounding set) to make its jail. */
    json_t *caps = json_object_get(proc, "capabilities");
    json_t *bounding = json_object_get(caps, "bounding");
    if (json_is_array(bounding)) {
        json_object_set_new(caps, "effective", json_copy(bounding));
        json_object_set_new(caps, "permitted", json_copy(bounding));
    }
    json_object_del(user, "additionalGids");
    json_object_set_new(proc, "noNewPrivileges", json_true());
    /* As a uml run: AppArmor's container profile forbids the mounts the jail makes. */
    json_object_del(proc, "apparmorProfile");
    return 0;
}

static void add_mounts(json_t *cfg, json_t *conf)
{
    json_t *mounts = json_object_get(cfg, "mounts");
    if (!json_is_array(mounts)) {
        mounts = json_array();
        json_object_set_new(cfg, "mounts", mounts);
    }
    int ram = (int)json_integer_value(json_object_get(conf, "ram_mib"));
    /* uml's guest RAM is a file here, on huge pages where the host has them for tmpfs (as a
     * direct run's, launch/direct.c); QEMU's is a memfd, and the tmpfs holds only the spec,
     * the file server's sockets and the log (as a qemu run's, backends/qemu.c). */
    _cleanup_free_ char *mem =
        is_qemu(conf) ? xstrdup("rw,noexec,nosuid,nodev,size=16m,mode=0755")
                      : xasprintf("rw,exec,nosuid,nodev,size=%dm,mode=0755%s", ram + 64,
                                  tmpfs_has_huge_pages() ? "," TMPFS_HUGE_OPTION : "");
    json_array_append_new(mounts, mount_new(ABI_MEM_DIR, "tmpfs", "tmpfs", mem));
    json_array_append_new(mounts, mount_new(ABI_VMM_DIR, "bind",
                                            json_string_value(json_object_get(conf, "vmm_bundle")),
                                            "rbind,ro,nosuid,nodev"));
    json_array_append_new(mounts,
                          mount_new(ABI_GUEST_BINARY, "bind",
                                    json_string_value(json_object_get(conf, "guest_binary")),
                                    "bind,ro,nosuid,nodev"));
}

static void set_pids(json_t *cfg, json_t *conf)
{
    json_t *linux_ = json_object_get(cfg, "linux");
    if (!json_is_object(linux_) || json_integer_value(json_object_get(conf, "pids")) <= 0)
        return;
    json_t *res = json_object_get(linux_, "resources");
    if (!json_is_object(res)) {
        res = json_object();
        json_object_set_new(linux_, "resources", res);
    }
    json_object_set_new(
        res, "pids",
        json_pack("{s:I}", "limit", json_integer_value(json_object_get(conf, "pids"))));
}

static int on_create(const char *conf_path, json_t *conf, const char *bundle, const char *id,
                     bb_error **err)
{
    if (!json_is_array(json_object_get(conf, "env")))
        return bb_fail(err, EINVAL, "bad build runtime settings %s", conf_path);
    _cleanup_free_ char *path = path_join(bundle, "config.json");
    json_error_t jerr;
    _cleanup_json_ json_t *cfg = json_load_file(path, 0, &jerr);
    if (!cfg)
        return bb_fail(err, EINVAL, "cannot read the step's %s: %s", path, jerr.text);
    if (rewrite_process(cfg, conf, err) < 0)
        return -1;
    add_mounts(cfg, conf);
    set_pids(cfg, conf);
    /* The mount points runc makes for these in the step's root are taken out again at delete,
     * so the image does not keep an empty /.bluebox. */
    const char *root = json_string_value(json_object_get(json_object_get(cfg, "root"), "path"));
    if (root) {
        _cleanup_free_ char *rootp = *root == '/' ? xstrdup(root) : path_join(bundle, root);
        _cleanup_free_ char *own = path_join(rootp, &ABI_DIR[1]);
        struct stat st;
        if (lstat(own, &st) < 0 && errno == ENOENT) {
            _cleanup_free_ char *state = state_path(conf_path, id);
            if (write_file_atomic(state, rootp, strlen(rootp), 0600, err) < 0)
                return -1;
        }
    }
    if (json_dump_file(cfg, path, JSON_COMPACT) < 0)
        return bb_fail_errno(err, errno, "cannot write the step's %s", path);
    return 0;
}

int buildvm_create(const char *conf_path, const char *bundle, const char *id, bb_error **err)
{
    json_error_t jerr;
    _cleanup_json_ json_t *conf = json_load_file(conf_path, 0, &jerr);
    if (!conf)
        return bb_fail(err, EINVAL, "cannot read the build runtime's settings %s: %s", conf_path,
                       jerr.text);
    return on_create(conf_path, conf, bundle, id, err);
}

/* Remove what runc made for bluebox's mounts in the step's root: empty, or left alone. */
static void on_delete(const char *conf_path, const char *id)
{
    _cleanup_free_ char *state = state_path(conf_path, id);
    _cleanup_free_ char *root = NULL;
    if (read_file(state, 4096, &root, NULL, NULL) < 0)
        return;
    (void)unlink(state);
    _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return;
    _cleanup_close_ int own =
        openat(rfd, &ABI_DIR[1], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (own < 0)
        return;
    (void)unlinkat(own, "mem", AT_REMOVEDIR);
    (void)unlinkat(own, "vmm", AT_REMOVEDIR);
    struct stat st;
    if (fstatat(own, "bluebox", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        st.st_size == 0)
        (void)unlinkat(own, "bluebox", 0);
    (void)unlinkat(rfd, &ABI_DIR[1], AT_REMOVEDIR);
}

int buildvm_oci(int argc, char **argv, bb_error **err)
{
    if (argc < 2)
        return bb_fail(err, EINVAL, "usage: bluebox __oci <conf> <runtime args…>");
    const char *conf_path = argv[1];
    json_error_t jerr;
    _cleanup_json_ json_t *conf = json_load_file(conf_path, 0, &jerr);
    const char *runc = json_string_value(json_object_get(conf, "runc"));
    if (!runc)
        return bb_fail(err, EINVAL, "cannot read the build runtime's settings %s", conf_path);
    int rargc = argc - 2;
    char **rargv = argv + 2;
    int cmd = command_index(rargc, rargv);
    if (cmd >= 0 && rargc > cmd + 1) {
        const char *id = rargv[rargc - 1];
        if (streq(rargv[cmd], "create") || streq(rargv[cmd], "run")) {
            if (on_create(conf_path, conf, bundle_of(rargc, rargv, cmd), id, err) < 0)
                return -1;
        } else if (streq(rargv[cmd], "delete")) {
            on_delete(conf_path, id);
        }
    }
    char **nargv = xreallocarray(NULL, (size_t)rargc + 2, sizeof *nargv);
    nargv[0] = (char *)runc;
    for (int i = 0; i < rargc; i++)
        nargv[i + 1] = rargv[i];
    nargv[rargc + 1] = NULL;
    execv(runc, nargv);
    int e = errno;
    free(nargv);
    return bb_fail_errno(err, e, "cannot run %s", runc);
}

/* ---- in the guest ---- */

static int parse_id(const char *s, char **end, uint32_t *ret)
{
    errno = 0;
    unsigned long v = strtoul(s, end, 10);
    if (errno || *end == s || v >= UINT32_MAX)
        return -1;
    *ret = (uint32_t)v;
    return 0;
}

/* --user=UID:GID:[G1,G2…]: the step's user, taken on after the capabilities are set (its
 * permitted and effective sets go empty, as runc's for a non-root user; the bounding set
 * stays the build's, so a setuid program gains no more). */
static int take_user(const char *spec, bb_error **err)
{
    uint32_t uid, gid, g;
    gid_t groups[64];
    size_t n = 0;
    char *p;
    if (parse_id(spec, &p, &uid) < 0 || *p != ':' || parse_id(p + 1, &p, &gid) < 0 || *p != ':')
        return bb_fail(err, EINVAL, "bad step user %s", spec);
    for (p++; *p;) {
        if (n == ELEMENTSOF(groups) || parse_id(p, &p, &g) < 0 || (*p && *p++ != ','))
            return bb_fail(err, EINVAL, "bad step user %s", spec);
        groups[n++] = g;
    }
    if (setgroups(n, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
        return bb_fail_errno(err, errno, "cannot become the step's user %s", spec);
    return 0;
}

int buildvm_step(int argc, char **argv, bb_error **err)
{
    if (argc < 3)
        return bb_fail(err, EINVAL, "usage: bluebox __step <caps> <command…>");
    char *end;
    errno = 0;
    unsigned long long mask = strtoull(argv[1], &end, 16);
    if (errno || *end)
        return bb_fail(err, EINVAL, "bad capability mask %s", argv[1]);
    for (int c = 0; c <= CAP_LAST_CAP; c++)
        if (!(mask & (1ULL << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            return bb_fail_errno(err, errno, "cannot drop capability %d", c);
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2] = {0};
    for (int k = 0; k < 2; k++) {
        uint32_t part = (uint32_t)(mask >> (32 * k));
        d[k].effective = d[k].permitted = d[k].inheritable = part;
    }
    if (syscall(SYS_capset, &h, d) < 0)
        return bb_fail_errno(err, errno, "cannot set the step's capabilities");
    int cmd = 2;
    const char *guest = "uml";
    if (streq(argv[cmd], "--guest=qemu")) {
        guest = "qemu";
        cmd++;
    }
    struct utsname u;
    if (uname(&u) == 0)
        fprintf(stderr, BUILDVM_STEP_LINE "%s guest %s, capabilities %llx\n", guest, u.release,
                mask);
    if (cmd < argc && strncmp(argv[cmd], "--user=", 7) == 0) {
        if (take_user(argv[cmd] + 7, err) < 0)
            return -1;
        cmd++;
    }
    if (cmd >= argc)
        return bb_fail(err, EINVAL,
                       "usage: bluebox __step <caps> [--guest=qemu] [--user=…] <command…>");
    execvp(argv[cmd], argv + cmd);
    return bb_fail_errno(err, errno, "cannot run %s", argv[cmd]);
}
