/* The doctor's checks, in the order a user fixes things: podman, the backends (each one's own
 * checks, from the registry), the sandbox boundary's prerequisites (subordinate ids, cgroup
 * limits), then bluebox itself. */
#include "doctor.h"

#include <elf.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core/bluefile.h"
#include "core/home.h"
#include "core/sandbox.h"
#include "dataown.h"
#include "launch/hostlimits.h"
#include "launch/image.h"
#include "isolation.h"
#include "launch/launch.h"
#include "pool.h"
#include "posture.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/selfpath.h"
#include "util/xalloc.h"

/* The first line of a program's output, or NULL when it fails. */
static char *first_line(char *const argv[])
{
    char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0) {
        free(out);
        return NULL;
    }
    out[strcspn(out, "\n")] = '\0';
    return out;
}

static void check_podman(doctor_report *r)
{
    _cleanup_free_ char *path = program_find("podman");
    if (!path) {
        doctor_add(r, "podman", CHECK_FAIL, xstrdup("not installed"),
                   xstrdup("apt-get install podman"));
        return;
    }
    char *argv[] = {"podman", "--version", NULL};
    _cleanup_free_ char *v = first_line(argv);
    if (!v) {
        doctor_add(r, "podman", CHECK_FAIL, xasprintf("%s does not run", path),
                   xstrdup("run podman --version and fix what it says"));
        return;
    }
    doctor_add(r, "podman", CHECK_OK, xasprintf("%s (%s)", v, path), NULL);
}

/* ---- a real plain container ---- */

/* A local image to start a container from: a sandbox's of this home, else podman's oldest;
 * NULL when there is none. */
static char *local_image(const char *root)
{
    _cleanup_strv_ strv names = {0};
    _cleanup_free_ char *id = home_id(root);
    if (home_list(root, &names, NULL) == 0)
        for (size_t i = 0; i < names.n; i++)
            if (image_present(id, names.v[i]))
                return image_ref_of(id, names.v[i]);
    char *argv[] = {"podman", "images", "--format", "{{.Repository}}:{{.Tag}}", NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0)
        return NULL;
    const char *oldest = NULL; /* a base image, more likely kept than the newest build */
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
        if (!strstr(line, "<none>"))
            oldest = line;
    return oldest ? xstrdup(oldest) : NULL;
}

/* podman run --rm of a plain container (podman's own OCI runtime, as the isolation
 * baseline's) with these extra flags; its command is the static bluebox's kernel probe, so
 * any image does. 0 when it started; else podman's last line of error in *ret_error. */
static int plain_run(const char *image, const char *self, const strv *flags, char **ret_error)
{
    _cleanup_strv_ strv a = {0};
    strv_add(&a, "podman");
    strv_add(&a, "run");
    strv_add(&a, "--rm");
    strv_add(&a, "--pull=never");
    strv_add(&a, "--network=none");
    for (size_t i = 0; i < flags->n; i++)
        strv_add(&a, flags->v[i]);
    strv_add(&a, "--entrypoint=" ABI_GUEST_BINARY);
    strv_add(&a, "-v");
    strv_push(&a, xasprintf("%s:" ABI_GUEST_BINARY ":ro", self));
    strv_add(&a, image);
    strv_add(&a, "__probe");
    _cleanup_free_ char *out = NULL, *errout = NULL;
    _cleanup_error_ bb_error *e = NULL;
    int r = spawn_capture(a.v, &out, &errout, &e);
    if (r == 0)
        return 0;
    if (r < 0) {
        *ret_error = xstrdup(e->msg);
        return -1;
    }
    size_t n = strlen(errout);
    while (n && errout[n - 1] == '\n')
        errout[--n] = '\0';
    const char *last = strrchr(errout, '\n');
    *ret_error = n ? xstrdup(last ? last + 1 : errout) : xasprintf("exit %d", r);
    return -1;
}

static char *joined(const strv *s)
{
    _cleanup_sb_ strbuf b = {0};
    for (size_t i = 0; i < s->n; i++)
        sb_printf(&b, "%s%s", i ? " " : "", s->v[i]);
    return sb_steal(&b);
}

/* What to do about a plain container that does not start. */
static char *plain_fix(const char *image, const char *error)
{
    if (!strstr(error, "rlimit"))
        return xasprintf("run podman run --rm %s true, and fix what podman says", image);
    const host_limits *h = hostlimits_host();
    _cleanup_free_ char *line = hostlimits_conf_line();
    if (h->conf_ulimits)
        return xasprintf("the default_ulimits in %s ask for more than this host allows: set "
                         "%s there, or remove it and bluebox passes those itself",
                         h->conf_ulimits, line);
    return xasprintf("%s in the [containers] table of /etc/containers/containers.conf, or "
                     "raise the hard limits (ulimit -Hn, ulimit -Hu)",
                     line);
}

/* Every sandbox needs podman to start a container: the isolation baseline is a plain one,
 * and the VMM runs in one. Started here as bluebox starts them (with the limits of
 * hostlimits.h) and, when those are not podman's defaults, as plain podman does. */
static void check_plain_container(doctor_report *r, const char *root)
{
    static const char name[] = "plain container";
    if (!program_on_path("podman"))
        return; /* the podman check says so */
    _cleanup_free_ char *image = local_image(root), *self = guest_binary(NULL);
    if (!image || !self) {
        doctor_add(r, name, CHECK_WARN, xstrdup("not tried: podman has no local image yet"),
                   xstrdup("bluebox build <name> (or podman pull an image), then bluebox "
                           "doctor again"));
        return;
    }
    _cleanup_strv_ strv limits = {0}, none = {0};
    hostlimits_argv(&limits);
    _cleanup_free_ char *error = NULL, *error_plain = NULL, *flags = joined(&limits);
    if (plain_run(image, self, &limits, &error) < 0) {
        doctor_add(r, name, CHECK_FAIL,
                   xasprintf("podman cannot start one from %s%s%s: %s", image,
                             limits.n ? " with " : "", flags, error),
                   plain_fix(image, error));
        return;
    }
    if (!limits.n || plain_run(image, self, &none, &error_plain) == 0) {
        const char *conf = hostlimits_host()->conf_ulimits;
        doctor_add(
            r, name, CHECK_OK,
            conf ? xasprintf("starts (%s; limits from the default_ulimits in %s)", image, conf)
                 : xasprintf("starts (%s)", image),
            NULL);
        return;
    }
    _cleanup_free_ char *line = hostlimits_conf_line();
    doctor_add(r, name, CHECK_OK,
               xasprintf("starts (%s) with bluebox's %s, the host's hard limits; podman's "
                         "defaults do not fit here (%s), so plain podman needs %s in "
                         "/etc/containers/containers.conf",
                         image, flags, error_plain, line),
               NULL);
}

/* The summary when BLUEBOX_BACKEND picks the backend: it overrides every Bluefile, so what
 * the default can do does not matter then. */
static void chosen_by_env(doctor_report *r, const char *env, const backend *chosen, bool runs,
                          const backend *usable)
{
    if (!chosen) {
        doctor_add(r, "backend", CHECK_FAIL, xasprintf("BLUEBOX_BACKEND=%s names no backend", env),
                   usable ? xasprintf("unset BLUEBOX_BACKEND, or set it to %s", usable->name)
                          : xstrdup("unset BLUEBOX_BACKEND"));
    } else if (runs) {
        doctor_add(r, "backend", CHECK_OK,
                   xasprintf("%s (%s), from BLUEBOX_BACKEND, which overrides the Bluefile's "
                             "backend",
                             chosen->name, chosen->boundary),
                   NULL);
    } else {
        doctor_add(r, "backend", CHECK_WARN,
                   xasprintf("%s, from BLUEBOX_BACKEND, cannot run here", chosen->name),
                   usable ? xasprintf("BLUEBOX_BACKEND=%s (%s)", usable->name, usable->boundary)
                          : xasprintf("%s", chosen->install));
    }
}

/* Lines [from, to) are a backend's own; BLUEBOX_BACKEND chose another that runs, so what
 * this one lacks is no problem here: ok, with a note instead of a fix. */
static void not_needed(doctor_report *r, size_t from, size_t to, const char *chosen)
{
    for (size_t i = from; i < to; i++) {
        if (r->v[i].level != CHECK_WARN)
            continue;
        char *detail = xasprintf("%s (not needed: BLUEBOX_BACKEND=%s)", r->v[i].detail, chosen);
        free(r->v[i].detail);
        free(r->v[i].fix);
        r->v[i] = (check_result){r->v[i].name, CHECK_OK, detail, NULL};
    }
}

/* Each backend's own checks, in registry order; then which backend sandboxes get here and
 * where that choice comes from: BLUEBOX_BACKEND when set, else the Bluefile's default (the
 * first), which needs another backend: when it cannot run. */
static void check_backends(doctor_report *r)
{
    const backend *const *reg = backend_registry;
    const backend *usable = NULL;
    const char *env = backend_env();
    const backend *chosen = env ? backend_named(env) : NULL;
    bool chosen_runs = false;
    size_t first[17] = {0}; /* where each backend's lines start, and where the last ends */
    size_t n = 0;
    if (!reg[0])
        return; /* the registry is never empty; this says so to the analyzer */
    for (const backend *const *b = reg; *b && n + 1 < ELEMENTSOF(first); b++, n++) {
        first[n] = r->n;
        bool runs = (*b)->doctor(r);
        if (runs && !usable)
            usable = *b;
        if (*b == chosen)
            chosen_runs = runs;
    }
    first[n] = r->n;
    for (size_t i = 0; chosen && chosen_runs && i < n; i++)
        if (reg[i] != chosen)
            not_needed(r, first[i], first[i + 1], chosen->name);
    if (env) {
        chosen_by_env(r, env, chosen, chosen_runs, usable);
    } else if (usable && usable == reg[0]) {
        doctor_add(r, "backend", CHECK_OK,
                   xasprintf("%s (%s), the default", usable->name, usable->boundary), NULL);
    } else if (usable) {
        doctor_add(r, "backend", CHECK_WARN,
                   xasprintf("%s, the default, cannot run here; sandboxes need backend: %s (%s)",
                             reg[0]->name, usable->name, usable->boundary),
                   xasprintf("set backend: %s in the Bluefile, or BLUEBOX_BACKEND=%s", usable->name,
                             usable->name));
    } else {
        _cleanup_sb_ strbuf fix = {0};
        for (const backend *const *b = reg; *b; b++)
            sb_printf(&fix, "%s%s", b == reg ? "" : "; ", (*b)->install);
        doctor_add(r, "backend", CHECK_FAIL, xstrdup("no backend can boot a guest kernel here"),
                   sb_steal(&fix));
    }
}

static void check_subids(doctor_report *r)
{
    if (getuid() == 0) {
        doctor_add(r, "subordinate UIDs", CHECK_OK,
                   xstrdup("root: strict sandboxes run as host UID 1 (--uidmap 0:1:65536)"), NULL);
        return;
    }
    uid_t u;
    gid_t g;
    _cleanup_error_ bb_error *e = NULL;
    if (data_owner(ISO_STRICT, &u, &g, &e) < 0) {
        doctor_add(
            r, "subordinate UIDs", CHECK_WARN, xstrdup("none: isolation: strict cannot work"),
            xstrdup("usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER"));
        return;
    }
    doctor_add(r, "subordinate UIDs", CHECK_OK,
               xasprintf("strict sandboxes run as UID %u", (unsigned)u), NULL);
}

static void check_cgroups(doctor_report *r)
{
    struct statfs s;
    bool v2 = statfs("/sys/fs/cgroup", &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC;
    const char *ver = v2 ? "cgroups v2" : "cgroups v1 (or hybrid)";
    if (getuid() == 0)
        doctor_add(r, "cgroup limits", CHECK_OK,
                   xasprintf("%s; pids and memory limits enforced", ver), NULL);
    else if (v2 && limits_enforced())
        doctor_add(r, "cgroup limits", CHECK_OK, xasprintf("%s; pids and memory delegated", ver),
                   NULL);
    else
        doctor_add(
            r, "cgroup limits", CHECK_WARN,
            xasprintf("%s: rootless podman cannot enforce the pids and memory limits here", ver),
            xstrdup(v2 ? "delegate pids and memory to user@.service (systemd Delegate=)"
                       : "boot with systemd.unified_cgroup_hierarchy=1 (cgroups v2)"));
}

static void check_static(doctor_report *r)
{
    const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
    size_t n = getauxval(AT_PHNUM);
    bool interp = false;
    for (size_t i = 0; ph && i < n; i++)
        interp |= ph[i].p_type == PT_INTERP;
    if (interp)
        doctor_add(r, "static binary", CHECK_WARN,
                   xstrdup("this bluebox is dynamically linked; guests need a static one"),
                   xstrdup("build with make (static by default), or set BLUEBOX_GUEST_BINARY"));
    else
        doctor_add(r, "static binary", CHECK_OK, xstrdup("yes"), NULL);
}

static void check_home(doctor_report *r, const char *root)
{
    _cleanup_error_ bb_error *e = NULL;
    if (mkdir_p(root, HOME_DIR_MODE, &e) < 0 || access(root, W_OK) < 0) {
        doctor_add(r, "bluebox home", CHECK_FAIL, xasprintf("%s is not writable", root),
                   xstrdup("fix its permissions, or set BLUEBOX_HOME"));
        return;
    }
    doctor_add(r, "bluebox home", CHECK_OK, xasprintf("%s", root), NULL);
}

static void check_cache(doctor_report *r, const char *root)
{
    static const char *const what[] = {"not verified yet", "verified", "runtime changed"};
    _cleanup_sb_ strbuf b = {0};
    _cleanup_free_ char *self = guest_binary(NULL);
    for (const backend *const *bk = backend_registry; *bk; bk++) {
        launch l = {.root = root, .self = self};
        sb_printf(&b, "%s%s: %s", b.len ? ", " : "", (*bk)->name,
                  what[isolation_cached(*bk, &l, NULL)]);
    }
    doctor_add(r, "isolation", CHECK_OK, sb_steal(&b), NULL);
}

/* Each waiting pool VM holds its guest's RAM (the Bluefile's warm: N, runtime/pool.h). */
static void check_pools(doctor_report *r, const char *root)
{
    _cleanup_strv_ strv names = {0};
    if (home_list(root, &names, NULL) < 0)
        return;
    _cleanup_sb_ strbuf b = {0};
    int vms = 0;
    long long mib = 0;
    for (size_t i = 0; i < names.n; i++) {
        int waiting, total;
        _cleanup_sandbox_ sandbox *sb = NULL;
        if (sandbox_open(root, names.v[i], &sb, NULL) < 0)
            continue;
        pool_count(sb, &waiting, &total);
        if (!total)
            continue;
        int ram = sandbox_bluefile(sb, NULL) == 0 ? sb->bf->ram_mib : 0;
        vms += total;
        mib += (long long)total * ram;
        sb_printf(&b, "%s%s %d", b.len ? ", " : "", names.v[i], total);
    }
    if (!vms)
        return;
    doctor_add(r, "warm pools", CHECK_OK,
               xasprintf("%d VM%s holding up to %lld MiB of RAM (%s); warm: 0 in a Bluefile "
                         "frees its pool",
                         vms, vms == 1 ? "" : "s", mib, b.s),
               NULL);
}

void doctor_run(const char *root, check_result **ret, size_t *ret_n)
{
    doctor_report r = {0};
    check_podman(&r);
    check_plain_container(&r, root);
    check_backends(&r);
    check_subids(&r);
    check_cgroups(&r);
    check_static(&r);
    check_home(&r, root);
    check_cache(&r, root);
    check_pools(&r, root);
    *ret = r.v;
    *ret_n = r.n;
}

void doctor_free(check_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(r[i].detail);
        free(r[i].fix);
    }
    free(r);
}
