/* The doctor's checks, in the order a user fixes things: podman, the backends, the
 * sandbox boundary's prerequisites (subordinate ids, cgroup limits), then bluebox itself. */
#include "doctor.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "backend.h"
#include "core/bluefile.h"
#include "core/home.h"
#include "dataown.h"
#include "isolation.h"
#include "posture.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

typedef struct {
    check_result *v;
    size_t n;
    bool kvm_ok, krun_ok, uml_ok;
} report;

static void add(report *r, const char *name, check_level level, char *detail, char *fix)
{
    r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
    r->v[r->n++] = (check_result){name, level, detail, fix};
}

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

static void check_podman(report *r)
{
    _cleanup_free_ char *path = program_find("podman");
    if (!path) {
        add(r, "podman", CHECK_FAIL, xstrdup("not installed"), xstrdup("apt-get install podman"));
        return;
    }
    char *argv[] = {"podman", "--version", NULL};
    _cleanup_free_ char *v = first_line(argv);
    if (!v) {
        add(r, "podman", CHECK_FAIL, xasprintf("%s does not run", path),
            xstrdup("run podman --version and fix what it says"));
        return;
    }
    add(r, "podman", CHECK_OK, xasprintf("%s (%s)", v, path), NULL);
}

static void check_kvm(report *r)
{
    _cleanup_close_ int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        r->kvm_ok = true;
        add(r, "/dev/kvm", CHECK_OK, xstrdup("present and openable"), NULL);
    } else if (errno == ENOENT)
        add(r, "/dev/kvm", CHECK_WARN, xstrdup("not present: krun cannot start microVMs here"),
            xstrdup("enable virtualisation (nested virtualisation on a VM), or use backend: "
                    "uml"));
    else
        add(r, "/dev/kvm", CHECK_WARN, xasprintf("present but not openable: %s", strerror(errno)),
            xstrdup("usermod -aG kvm $USER, then log in again"));
}

static void check_krun(report *r)
{
    _cleanup_free_ char *krun = program_find("krun");
    if (!krun) {
        add(r, "krun", CHECK_WARN, xstrdup("no krun on PATH"),
            xstrdup("install crun built with libkrun, then: sudo ln -sf \"$(command -v crun)\" "
                    "/usr/local/bin/krun"));
        return;
    }
    _cleanup_free_ char *target = realpath(krun, NULL);
    char *argv[] = {krun, "--version", NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0 || !strstr(out, "+LIBKRUN")) {
        add(r, "krun", CHECK_WARN,
            xasprintf("%s -> %s is not crun with +LIBKRUN: it would run plain containers", krun,
                      target ? target : "?"),
            xstrdup("point krun at a crun built with libkrun (crun --version lists +LIBKRUN)"));
        return;
    }
    r->krun_ok = true;
    add(r, "krun", CHECK_OK, xasprintf("%s -> %s, +LIBKRUN", krun, target ? target : "?"), NULL);
}

static void check_uml(report *r)
{
    const char *k = getenv("BLUEBOX_UML_KERNEL");
    if (!k || !*k)
        k = "/usr/bin/linux.uml";
    if (access(k, X_OK) < 0) {
        add(r, "user-mode-linux", CHECK_WARN, xasprintf("%s: %s", k, strerror(errno)),
            xstrdup("apt-get install user-mode-linux (the backend for hosts without KVM)"));
        return;
    }
    r->uml_ok = true;
    add(r, "user-mode-linux", CHECK_OK,
        xasprintf("%s (backend: uml; a ptrace boundary, weaker than KVM)", k), NULL);
}

static void check_backend(report *r)
{
    if (r->kvm_ok && r->krun_ok)
        add(r, "backend", CHECK_OK, xstrdup("krun (microVMs on KVM)"), NULL);
    else if (r->uml_ok)
        add(r, "backend", CHECK_WARN,
            xstrdup("krun cannot run here; sandboxes need backend: uml (own kernel, ptrace "
                    "boundary instead of hardware virtualisation)"),
            xstrdup("set backend: uml in the Bluefile, or BLUEBOX_BACKEND=uml"));
    else
        add(r, "backend", CHECK_FAIL, xstrdup("no backend can boot a guest kernel here"),
            xstrdup("on a KVM host install crun with libkrun; elsewhere apt-get install "
                    "user-mode-linux"));
}

static void check_subids(report *r)
{
    if (getuid() == 0) {
        add(r, "subordinate UIDs", CHECK_OK,
            xstrdup("root: strict sandboxes run as host UID 1 (--uidmap 0:1:65536)"), NULL);
        return;
    }
    uid_t u;
    gid_t g;
    _cleanup_error_ bb_error *e = NULL;
    if (data_owner(ISO_STRICT, &u, &g, &e) < 0) {
        add(r, "subordinate UIDs", CHECK_WARN, xstrdup("none: isolation: strict cannot work"),
            xstrdup("usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER"));
        return;
    }
    add(r, "subordinate UIDs", CHECK_OK, xasprintf("strict sandboxes run as UID %u", (unsigned)u),
        NULL);
}

static void check_cgroups(report *r)
{
    struct statfs s;
    bool v2 = statfs("/sys/fs/cgroup", &s) == 0 && s.f_type == CGROUP2_SUPER_MAGIC;
    const char *ver = v2 ? "cgroups v2" : "cgroups v1 (or hybrid)";
    if (getuid() == 0)
        add(r, "cgroup limits", CHECK_OK, xasprintf("%s; pids and memory limits enforced", ver),
            NULL);
    else if (v2 && limits_enforced())
        add(r, "cgroup limits", CHECK_OK, xasprintf("%s; pids and memory delegated", ver), NULL);
    else
        add(r, "cgroup limits", CHECK_WARN,
            xasprintf("%s: rootless podman cannot enforce the pids and memory limits here", ver),
            xstrdup(v2 ? "delegate pids and memory to user@.service (systemd Delegate=)"
                       : "boot with systemd.unified_cgroup_hierarchy=1 (cgroups v2)"));
}

static void check_static(report *r)
{
    const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
    size_t n = getauxval(AT_PHNUM);
    bool interp = false;
    for (size_t i = 0; ph && i < n; i++)
        interp |= ph[i].p_type == PT_INTERP;
    if (interp)
        add(r, "static binary", CHECK_WARN,
            xstrdup("this bluebox is dynamically linked; guests need a static one"),
            xstrdup("build with make (static by default), or set BLUEBOX_GUEST_BINARY"));
    else
        add(r, "static binary", CHECK_OK, xstrdup("yes"), NULL);
}

static void check_home(report *r, const char *root)
{
    _cleanup_error_ bb_error *e = NULL;
    if (mkdir_p(root, HOME_DIR_MODE, &e) < 0 || access(root, W_OK) < 0) {
        add(r, "bluebox home", CHECK_FAIL, xasprintf("%s is not writable", root),
            xstrdup("fix its permissions, or set BLUEBOX_HOME"));
        return;
    }
    add(r, "bluebox home", CHECK_OK, xasprintf("%s", root), NULL);
}

static void check_cache(report *r, const char *root)
{
    static const char *const names[] = {"krun", "uml"};
    static const char *const what[] = {"not verified yet", "verified", "runtime changed"};
    _cleanup_sb_ strbuf b = {0};
    _cleanup_free_ char *self = guest_binary(NULL);
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        const backend *bk = backend_named(names[i]);
        if (!bk)
            continue;
        launch l = {.root = root, .name = "-", .self = self};
        sb_printf(&b, "%s%s: %s", b.len ? ", " : "", names[i],
                  what[isolation_cached(bk, &l, NULL)]);
    }
    add(r, "isolation", CHECK_OK, sb_steal(&b), NULL);
}

void doctor_run(const char *root, check_result **ret, size_t *ret_n)
{
    report r = {0};
    check_podman(&r);
    check_kvm(&r);
    check_krun(&r);
    check_uml(&r);
    check_backend(&r);
    check_subids(&r);
    check_cgroups(&r);
    check_static(&r);
    check_home(&r, root);
    check_cache(&r, root);
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
