/* The krun backend: crun built with libkrun becomes the VMM (podman --runtime <krun>);
 * libkrun's init runs the command in the guest and podman carries stdio and the exit
 * code. It needs /dev/kvm and a `krun` that resolves to a crun with +LIBKRUN. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "checks.h"
#include "util/fingerprint.h"
#include "util/spawn.h"
#include "util/xalloc.h"

/* The absolute path of `krun` on PATH (the symlink itself, not its target: crun picks its
 * libkrun handler from the name it was started as). */
static char *krun_path(void)
{
    return program_find("krun");
}

extern const backend backend_krun;

static int krun_preflight(const launch *l, bb_error **err)
{
    if (preflight_podman(err) < 0)
        return -1;
    int e = kvm_unusable();
    if (e)
        return bb_fail(err, e,
                       "krun needs KVM and %s, so no microVM can start on this host. "
                       "backend: uml (or BLUEBOX_BACKEND=uml) gives each sandbox its own "
                       "user-mode-linux kernel without KVM; its boundary is ptrace, not hardware "
                       "virtualisation, so it is weaker than krun",
                       kvm_why(e));
    _cleanup_free_ char *krun = krun_path();
    if (krun)
        return 0;
    const backend *alt = backend_runs_instead(&backend_krun, l);
    _cleanup_free_ char *instead =
        alt ? xasprintf("; or set backend: %s in the Bluefile (or BLUEBOX_BACKEND=%s), which "
                        "runs on this host (%s)",
                        alt->name, alt->name, alt->boundary)
            : xstrdup("");
    return bb_fail(err, ENOENT,
                   "no krun on PATH: install crun built with libkrun, then make the symlink "
                   "named krun that starts it: sudo ln -sf \"$(command -v crun)\" "
                   "/usr/local/bin/krun%s",
                   instead);
}

/* Unlike uml (src/backends/uml.c, user_flags), krun leaves podman's --user as the image says:
 * crun sets the OCI process user and the command runs in the guest as libkrun's init starts
 * it. That is not because krun's VMM writes no guest files on the host: it does. crun hands
 * libkrun the container's root (krun_set_root "/"), and libkrun serves it, /data and every
 * mount included, to the guest over virtio-fs from the VMM process. Its passthrough creates
 * files as each guest caller's uid when the VMM has CAP_SETUID (a root VMM, no USER), else as
 * the VMM's own uid (the image's USER: host uid 1000 for `USER 1000` under root podman).
 * Forcing --user=0:0 here would turn the second case into the first, host owners chosen by
 * the guest, so it is no fix; krun's host owners are an open item (SECURITY.md, "Modes and
 * owners"). Not tested here: it needs libkrun. */
static int krun_flags(const launch *l, strv *argv, bb_error **err)
{
    _cleanup_free_ char *krun = krun_path();
    if (!krun)
        return bb_fail(err, ENOENT, "no krun on PATH");
    strv_push(argv, xasprintf("--runtime=%s", krun));
    strv_push(argv, xasprintf("--annotation=krun.cpus=%d", l->bf->cpus));
    strv_push(argv, xasprintf("--annotation=krun.ram_mib=%d", l->bf->ram_mib));
    if (l->bf->passt)
        strv_add(argv, "--annotation=krun.use_passt=1");
    if (l->mode == LAUNCH_PROBE || l->mode == LAUNCH_AGENT)
        strv_add(argv, "--entrypoint=" ABI_GUEST_BINARY);
    return 0;
}

static int krun_entry(const launch *l, strv *argv, bb_error **err)
{
    return 0; /* libkrun's init runs the image's command directly */
}

/* libkrun and libkrunfw decide what the VM is; crun loads them by soname. */
static const char *krun_libs[] = {
    "/usr/lib64/libkrun.so.1",
    "/usr/lib64/libkrunfw.so.4",
    "/usr/lib/x86_64-linux-gnu/libkrun.so.1",
    "/usr/lib/x86_64-linux-gnu/libkrunfw.so.4",
    "/usr/local/lib/libkrun.so.1",
    "/usr/local/lib/libkrunfw.so.4",
    "/usr/local/lib64/libkrun.so.1",
    "/usr/local/lib64/libkrunfw.so.4",
};

static void krun_fingerprint(const launch *l, fingerprint *fp)
{
    _cleanup_free_ char *krun = krun_path();
    fp_file(fp, krun ? krun : "krun");
    for (size_t i = 0; i < ELEMENTSOF(krun_libs); i++)
        fp_file(fp, krun_libs[i]);
}

static bool doctor_kvm(doctor_report *r)
{
    int e = kvm_unusable();
    if (!e) {
        doctor_add(r, "/dev/kvm", CHECK_OK, xstrdup("present and openable"), NULL);
        return true;
    }
    if (e == ENOENT)
        doctor_add(r, "/dev/kvm", CHECK_WARN,
                   xstrdup("not present: krun cannot start microVMs here"),
                   xstrdup("enable virtualisation (nested virtualisation on a VM), or use backend: "
                           "uml"));
    else if (e == ENODEV)
        doctor_add(r, "/dev/kvm", CHECK_WARN,
                   xstrdup("present but not a device node: krun cannot start microVMs here"),
                   xstrdup("remove the file /dev/kvm (something created it), then enable "
                           "virtualisation; or use backend: uml"));
    else
        doctor_add(r, "/dev/kvm", CHECK_WARN,
                   xasprintf("present but not openable: %s", strerror(e)),
                   xstrdup("usermod -aG kvm $USER, then log in again"));
    return false;
}

/* The preflight only asks for a krun on PATH; doctor also asks it whether it is crun built
 * with libkrun, which the isolation check would otherwise find out by booting. */
static bool doctor_krun(doctor_report *r)
{
    _cleanup_free_ char *krun = krun_path();
    if (!krun) {
        doctor_add(
            r, "krun", CHECK_WARN, xstrdup("no krun on PATH"),
            xstrdup("install crun built with libkrun, then: sudo ln -sf \"$(command -v crun)\" "
                    "/usr/local/bin/krun"));
        return false;
    }
    _cleanup_free_ char *target = realpath(krun, NULL);
    char *argv[] = {krun, "--version", NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0 || !strstr(out, "+LIBKRUN")) {
        doctor_add(
            r, "krun", CHECK_WARN,
            xasprintf("%s -> %s is not crun with +LIBKRUN: it would run plain containers", krun,
                      target ? target : "?"),
            xstrdup("point krun at a crun built with libkrun (crun --version lists +LIBKRUN)"));
        return false;
    }
    doctor_add(r, "krun", CHECK_OK, xasprintf("%s -> %s, +LIBKRUN", krun, target ? target : "?"),
               NULL);
    return true;
}

static bool krun_doctor(doctor_report *r)
{
    bool kvm = doctor_kvm(r);
    bool krun = doctor_krun(r);
    return kvm && krun;
}

const backend backend_krun = {
    .name = "krun",
    .alias = "podman",
    .posture_head = "krun microVM on KVM, guest kernel ",
    .posture_tail = "",
    .bridge_reach = "host and LAN NOT refused on krun yet",
    .boundary = "microVMs on KVM",
    .install = "on a KVM host install crun with libkrun",
    .not_isolated_hint = "is krun really crun built with +LIBKRUN? (bluebox doctor)",
    .max_ram_mib = BLUEFILE_MAX_RAM_MIB, /* libkrun names no maximum */
    .agent = true,
    .build_guest = BUILD_VM_KRUN, /* podman build --runtime krun (runtime/build.c) */
    .max_cpus = 16,               /* LIBKRUN_MAX_VCPUS (krun(1): "maximum 16") */
    .preflight = krun_preflight,
    .doctor = krun_doctor,
    .launch_flags = krun_flags,
    .entry = krun_entry,
    .fingerprint = krun_fingerprint,
};
