/* podman build in a staging context, swapped into place on success. */
#include "build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "abi/abi.h"
#include "backends/backend.h"
#include "buildvm.h"
#include "core/containerfile.h"
#include "core/home.h"
#include "launch/image.h"
#include "launch/launch.h"
#include "util/hostaddr.h"
#include "launch/hostlimits.h"
#include "posture.h"
#include "backends/qemu_bundle.h"
#include "backends/uml_bundle.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/selfpath.h"
#include "util/xalloc.h"

static int move_into_place(const char *stage, const char *dir, bb_error **err)
{
    static const char *const names[] = {"Containerfile", "image-id", "image-user", BLUEPRINT_DIR};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        _cleanup_free_ char *from = path_join(stage, names[i]), *to = path_join(dir, names[i]);
        if (!path_exists(from)) {
            if (rm_rf(to, err) < 0)
                return -1;
            continue;
        }
        /* A directory cannot replace a directory in one rename: clear the old one first. */
        if (is_dir(from) && rm_rf(to, err) < 0)
            return -1;
        if (rename(from, to) < 0)
            return bb_fail_errno(err, errno, "cannot move %s into place", to);
    }
    return 0;
}

/* What the build steps get, found by installing packages with apt and dpkg under podman
 * build: dpkg and apt's download sandbox need CHOWN, DAC_OVERRIDE, FOWNER, SETUID and SETGID
 * (each one dropped fails the install); without FSETID the setgid bits of crontab, plocate
 * and the like are silently dropped, and SETFCAP lets postinst scripts give ping a file
 * capability instead of setuid root. Everything else podman grants by default (NET_RAW,
 * MKNOD, SYS_CHROOT, KILL, NET_BIND_SERVICE, SETPCAP, AUDIT_WRITE) goes. */
#define BUILD_CAPS "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP"
/* The container's own, for a guest build: the VMM's. */
#define BUILD_VM_CAPS "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP,SYS_ADMIN,SETPCAP"
/* Processes per user in the build (podman build has no pids limit). */
#define BUILD_NPROC 1024

void build_argv(const bluefile *bf, const build_spec *s, strv *ret)
{
    strv a = {0};
    strv_add(&a, "podman");
    strv_add(&a, "build");
    strv_add(&a, "--pull=never");
    strv_add(&a, "--layers");
    strv_add(&a, "--cap-drop=all");
    if (s->runtime) {
        /* The container holds bluebox-vmm and the uml kernel (what a uml run's holds), and
         * the file server that writes the step's root with the guest's owners, setuid bits
         * (FSETID) and file capabilities (SETFCAP; UML's own filter refuses every *xattr
         * call); the step keeps BUILD_CAPS in the guest (buildvm.h). SYS_ADMIN and SETPCAP are
         * dropped before the kernel starts. */
        strv_push(&a, xasprintf("--runtime=%s", s->runtime));
        strv_add(&a, "--cap-add=" BUILD_VM_CAPS);
        strv_add(&a, "--security-opt=apparmor=unconfined");
        if (s->kvm)
            strv_add(&a, "--device=/dev/kvm");
    } else if (s->vm_runtime) {
        /* krun: crun with libkrun runs the step's process in its microVM, with the build's
         * capabilities there. */
        strv_push(&a, xasprintf("--runtime=%s", s->vm_runtime));
        strv_add(&a, "--cap-add=" BUILD_CAPS);
    } else {
        strv_add(&a, "--cap-add=" BUILD_CAPS);
    }
    hostlimits_build_argv(&a, BUILD_NPROC); /* and nofile within the host's (hostlimits.h) */
    /* podman build fails outright on a limit it cannot enforce. */
    if (s->limits)
        strv_push(&a, xasprintf("--memory=%dm", launch_memory_mib(bf)));
    if (!s->network)
        strv_add(&a, "--network=none");
    /* Not --no-hosts: most base images have no /etc/hosts of their own, and build steps
     * that use localhost would fail; a bind-mounted one leaves an empty file in the image. */
    strv_add(&a, "-f");
    strv_add(&a, s->containerfile);
    if (s->tag) {
        strv_add(&a, "-t");
        strv_add(&a, s->tag);
    }
    strv_push(&a, xasprintf("--iidfile=%s", s->iidfile));
    strv_add(&a, s->context);
    *ret = a;
}

/* -q: of podman's output only its step lines ("STEP 2/5: RUN ..."). */
static bool step_line(const char *line, size_t len)
{
    return (len >= 5 && memcmp(line, "STEP ", 5) == 0) ||
           (len >= sizeof BUILDVM_STEP_LINE - 1 &&
            memcmp(line, BUILDVM_STEP_LINE, sizeof BUILDVM_STEP_LINE - 1) == 0);
}

/* The VMM bundle a guest build's steps boot, and its settings: uml's, or qemu's (its
 * acceleration as a qemu run's: KVM, or TCG when BLUEBOX_QEMU_ACCEL=tcg asks for it). */
static int vmm_bundle(const sandbox *sb, const char *self, const char *vmm, buildvm_conf *c,
                      bool *ret_kvm, char **ret_bundle, bb_error **err)
{
    *ret_kvm = false;
    if (sb->backend->build_guest != BUILD_VM_QEMU) {
        if (uml_bundle_ensure(sb->root, vmm, ret_bundle, err) < 0)
            return bb_prefix(err, "cannot prepare the uml VMM bundle");
        return 0;
    }
    const char *accel = getenv(ABI_ENV_QEMU_ACCEL);
    if (!accel || !*accel)
        accel = "kvm";
    if (!streq(accel, "kvm") && !streq(accel, "tcg"))
        return bb_fail(err, EINVAL, ABI_ENV_QEMU_ACCEL " must be kvm or tcg, got \"%s\"", accel);
    if (access(qemu_binary_path(), X_OK) < 0)
        return bb_fail_errno(err, errno,
                             "a qemu build boots each step in QEMU, and %s cannot be run (Debian: "
                             "apt-get install qemu-system-x86); or build on the host's kernel: "
                             "bluebox build --host-kernel %s",
                             qemu_binary_path(), sb->name);
    if (qemu_bundle_ensure(sb->root, vmm, self, ret_bundle, err) < 0)
        return bb_prefix(err, "cannot prepare the qemu VMM bundle");
    *ret_kvm = streq(accel, "kvm");
    strv_add(&c->env, ABI_ENV_VMM_KIND "=qemu");
    strv_push(&c->env, xasprintf(ABI_ENV_QEMU_ACCEL "=%s", accel));
    strv_push(&c->env, xasprintf(ABI_ENV_CPUS "=%d", sb->bf->cpus));
    return 0;
}

/* The settings of bluebox's OCI runtime for one podman build: the VMM bundle, the guest's
 * network as this part of the build has it (a bridge refuses the host and the LAN, as a run's
 * does), the guest's memory. */
static int runtime_prepare(const sandbox *sb, build_spec *s, bb_error **err)
{
    _cleanup_free_ char *self = guest_binary(err);
    if (!self)
        return -1;
    _cleanup_free_ char *vmm = uml_vmm_locate(self), *bundle = NULL;
    if (!vmm)
        return bb_fail(err, ENOENT,
                       "a guest build needs bluebox-vmm beside bluebox (or $BLUEBOX_VMM); "
                       "reinstall bluebox, or build on the host's kernel: bluebox build "
                       "--host-kernel %s",
                       sb->name);
    static const char *const runcs[] = {"/usr/bin/runc", "/usr/sbin/runc", "/usr/local/bin/runc",
                                        "/usr/local/sbin/runc"};
    const char *runc = NULL;
    for (size_t i = 0; !runc && i < ELEMENTSOF(runcs); i++)
        if (access(runcs[i], X_OK) == 0)
            runc = runcs[i];
    if (!runc)
        return bb_fail(err, ENOENT,
                       "a guest build runs each step through runc, which is not installed "
                       "(Debian: apt-get install runc); or build on the host's kernel: bluebox "
                       "build --host-kernel %s",
                       sb->name);
    _cleanup_free_ char *caps = buildvm_caps_mask(BUILD_CAPS);
    buildvm_conf c = {.runc = runc,
                      .guest = sb->backend->name,
                      .guest_binary = self,
                      .step_caps = caps,
                      .ram_mib = sb->bf->ram_mib,
                      /* As --memory: rootless podman on cgroups v1 cannot set one. */
                      .pids = s->limits ? LAUNCH_PIDS_LIMIT : 0};
    if (vmm_bundle(sb, self, vmm, &c, &s->kvm, &bundle, err) < 0) {
        strv_clear(&c.env);
        return -1;
    }
    c.vmm_bundle = bundle;
    strv_push(&c.env, xasprintf(ABI_ENV_RAM_MIB "=%d", sb->bf->ram_mib));
    strv_add(&c.env, ABI_ENV_MODE "=run");
    strv_push(&c.env, xasprintf(ABI_ENV_NETWORK "=%s", s->network ? "bridge" : "none"));
    if (s->network) {
        _cleanup_free_ char *deny = host_addresses();
        strv_push(&c.env, xasprintf(ABI_ENV_NET_DENY "=%s", deny));
    }
    _cleanup_free_ char *conf = path_join(s->context, "oci.json");
    int r = buildvm_write(&c, self, conf, s->runtime, err);
    strv_clear(&c.env);
    return r;
}

/* krun's runtime: the `krun` on PATH (crun picks libkrun from the name it is started as). */
static int krun_runtime(const sandbox *sb, char **ret, bb_error **err)
{
    *ret = program_find("krun");
    if (*ret)
        return 0;
    return bb_fail(err, ENOENT,
                   "a krun build runs each step with podman build --runtime krun, and no krun "
                   "is on PATH: on a KVM host install crun built with libkrun and link it as "
                   "krun (sudo ln -sf \"$(command -v crun)\" /usr/local/bin/krun); or give the "
                   "sandbox a backend that runs on this host (`bluebox doctor` names it; "
                   "`backend: uml` in the Bluefile); or build on the host's kernel: bluebox "
                   "build --host-kernel %s",
                   sb->name);
}

static int podman_build(const sandbox *sb, const build_spec *whole, const spawn_tee *out,
                        bb_error **err)
{
    const bluefile *bf = sb->bf;
    build_spec spec = *whole, *s = &spec;
    if (s->runtime && runtime_prepare(sb, s, err) < 0)
        return -1;
    _cleanup_strv_ strv argv = {0};
    build_argv(bf, s, &argv);
    int code = spawn_wait_tee(argv.v, out, err);
    if (code < 0)
        return -1;
    if (code != 0)
        return bb_fail(err, EIO,
                       "podman build failed (exit %d); the previous image and Containerfile are "
                       "unchanged; podman's whole output is in %s",
                       code, s->log);
    return 0;
}

/* podman's layer cache keys a step on the instructions before it, not on the runtime: a guest
 * build's text carries this label right after FROM, so that it never reuses a layer built on
 * the host's kernel (nor a --host-kernel build one of a guest's). The image keeps the label,
 * which says where its steps ran. The Containerfile kept beside the sandbox is the rendered one. */
#define GUEST_LABEL "LABEL bluebox.build=\"%s guest\"\n"

static char *build_text(const char *text, size_t len, const char *guest)
{
    const char *from = strstr(text, "\nFROM ");
    const char *eol = from && (size_t)(from - text) < len ? strchr(from + 1, '\n') : NULL;
    if (!guest || !eol || (size_t)(eol - text) >= len)
        return xstrndup(text, len);
    size_t head = (size_t)(eol - text) + 1;
    return xasprintf("%.*s" GUEST_LABEL "%.*s", (int)head, text, guest, (int)(len - head),
                     text + head);
}

/* An offline sandbox whose packages must be downloaded builds in two parts, since podman
 * build has no network per step (it refuses RUN --network): FROM through the package install
 * with the network, then the rest (run:, the blueprint) offline, FROM the first part's
 * image. The Containerfile kept beside the sandbox is the whole one. */
static int build_in_two(const sandbox *sb, const containerfile *cf, const build_spec *whole,
                        const spawn_tee *out, bb_error **err)
{
    _cleanup_free_ char *fetch = path_join(whole->context, "Containerfile.fetch");
    _cleanup_free_ char *fetch_iid = path_join(whole->context, "fetch-id");
    _cleanup_free_ char *fetch_text = build_text(cf->text, cf->fetch_end, whole->guest);
    if (write_file_atomic(fetch, fetch_text, strlen(fetch_text), 0644, err) < 0)
        return -1;
    build_spec s = *whole;
    s.containerfile = fetch;
    s.tag = NULL;
    s.iidfile = fetch_iid;
    s.network = true;
    if (podman_build(sb, &s, out, err) < 0)
        return -1;
    _cleanup_free_ char *id = NULL;
    if (read_file(fetch_iid, 4096, &id, NULL, err) < 0)
        return -1;
    id[strcspn(id, "\r\n")] = '\0';
    if (!*id || strchr(id, ' '))
        return bb_fail(err, EIO, "podman build wrote no image id to %s", fetch_iid);
    _cleanup_free_ char *text = xasprintf("FROM %s\n%s", id, cf->text + cf->fetch_end);
    _cleanup_free_ char *rest = path_join(whole->context, "Containerfile.offline");
    if (write_file_atomic(rest, text, strlen(text), 0644, err) < 0)
        return -1;
    s = *whole;
    s.containerfile = rest;
    return podman_build(sb, &s, out, err);
}

/* podman build runs with --pull=never, so no build step ever fetches an image by itself: the
 * Bluefile's base is pulled here, once and in the open, when it is not local yet (podman's own
 * progress shows on a terminal). */
static int base_ensure(const char *base, const spawn_tee *out, bb_error **err)
{
    char *exists[] = {"podman", "image", "exists", (char *)base, NULL};
    int code = spawn_quiet(exists, err);
    if (code < 0)
        return -1;
    if (code == 0)
        return 0;
    fprintf(stderr, "bluebox: the base image %s is not here yet; pulling it\n", base);
    char *pull[] = {"podman", "pull", (char *)base, NULL};
    code = spawn_wait_tee(pull, out, err);
    if (code < 0)
        return -1;
    if (code != 0)
        return bb_fail(err, EIO,
                       "cannot get the base image %s: podman pull failed (exit %d; its message is "
                       "above: no network, no such image, or the registry wants a login). Get it "
                       "and build again: podman pull %s, or make it locally and name it so "
                       "(podman tag <image> %s)",
                       base, code, base, base);
    return 0;
}

/* podman's whole output of this build, replaced by the next one (owner-only, like the run
 * log: it shows what the build steps printed). */
static int build_log_open(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(sb->root, "logs/build");
    if (mkdir_p(dir, HOME_DIR_MODE, err) < 0)
        return -1;
    int fd = open(sb->build_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot write the build log %s", sb->build_log);
    return fd;
}

build_where build_where_for(const sandbox *sb, bool host_kernel)
{
    return !host_kernel && sb->backend && sb->backend->build_guest != BUILD_VM_NONE
               ? BUILD_GUEST
               : BUILD_HOST_KERNEL;
}

char *build_posture(const sandbox *sb, build_where w)
{
    const backend *b = sb->backend;
    if (w == BUILD_GUEST)
        return xasprintf("build: each RUN step runs in a %s guest (its own kernel, confined as "
                         "a run; network: %s)",
                         b->name,
                         sb->bf->network != NET_NONE ? b->bridge_reach
                         : b->build_guest == BUILD_VM_KRUN
                             ? "none, but for the package install: podman build's, host and "
                               "LAN NOT refused on krun yet"
                             : "none, but for the package install: internet only");
    return xasprintf(
        "build: steps run on the host's kernel in podman build's container "
        "(capabilities %s, no VM)%s",
        BUILD_CAPS, b && b->build_guest != BUILD_VM_NONE ? " -- asked for with --host-kernel" : "");
}

int image_build(const sandbox *sb, const containerfile *cf, bool quiet, build_where where,
                bb_error **err)
{
    const bluefile *bf = sb->bf;
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install podman)");
    _cleanup_close_ int log = build_log_open(sb, err);
    if (log < 0)
        return -1;
    spawn_tee out = {.log_fd = log, .show_line = quiet ? step_line : NULL};
    if (base_ensure(bf->base, &out, err) < 0)
        return -1;
    const char *dir = sb->dir;
    _cleanup_free_ char *previous = image_recorded_id(sb);
    _cleanup_free_ char *tmpl = xasprintf("%s/.build-XXXXXX", dir);
    if (!mkdtemp(tmpl))
        return bb_fail_errno(err, errno, "cannot create a build directory in %s", dir);
    int r = containerfile_write(cf, tmpl, err);
    if (r == 0) {
        _cleanup_free_ char *file = path_join(tmpl, "Containerfile");
        _cleanup_free_ char *iid = path_join(tmpl, "image-id");
        _cleanup_free_ char *ref = image_ref(sb);
        build_spec spec = {.containerfile = file,
                           .log = sb->build_log,
                           .context = tmpl,
                           .tag = ref,
                           .iidfile = iid,
                           .network = bf->network != NET_NONE,
                           .limits = limits_enforced()};
        _cleanup_free_ char *rt = path_join(tmpl, "oci-runtime");
        _cleanup_free_ char *guest_file = path_join(tmpl, "Containerfile.guest");
        _cleanup_free_ char *krun = NULL;
        if (where == BUILD_GUEST) {
            spec.guest = sb->backend->name;
            if (sb->backend->build_guest == BUILD_VM_KRUN) {
                r = krun_runtime(sb, &krun, err);
                spec.vm_runtime = krun;
            } else {
                spec.runtime = rt;
            }
            spec.containerfile = guest_file;
            _cleanup_free_ char *text = build_text(cf->text, strlen(cf->text), spec.guest);
            if (r == 0)
                r = write_file_atomic(guest_file, text, strlen(text), 0644, err);
        }
        if (r == 0)
            r = !spec.network && cf->fetch_end ? build_in_two(sb, cf, &spec, &out, err)
                                               : podman_build(sb, &spec, &out, err);
        /* Beside image-id, so that launches need not ask podman (image_user); when podman
         * cannot say, the first launch asks. */
        if (r == 0)
            (void)image_user_record(tmpl, ref, NULL);
    }
    if (r == 0)
        r = move_into_place(tmpl, dir, err);
    if (r == 0)
        image_record_ref(sb);
    if (r == 0)
        image_prune(previous); /* the image this build replaced, when nothing tags it now */
    (void)rm_rf(tmpl, NULL);
    return r;
}
