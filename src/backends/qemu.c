/* The qemu backend: QEMU's `microvm` machine as the container's VMM, with the
 * distribution's kernel and an initramfs of the static bluebox, under the same confinement
 * as the other backends. bluebox-vmm (from the qemu bundle, qemu_bundle.h) starts QEMU
 * (src/vmm/qemu_argv.h) in place of linux.uml, with the same control line, launch spec and file
 * server; the container's root reaches the guest read-only over virtio-fs.
 *
 * Acceleration is KVM. TCG, QEMU's software emulator, only when the user asks for it
 * (BLUEBOX_QEMU_ACCEL=tcg), never as a fallback: its boundary is QEMU's emulation code, a
 * software boundary, and the posture line says so. bluebox never picks this backend itself.
 *
 * The network is uml's engine: QEMU's virtio-net device on a stream netdev whose socket it
 * inherits from bluebox-vmm, whose libslirp (src/net/slirp.c) applies the same policy, allow:
 * list and secrets, and the same restricted mode for an up sandbox's agent with network:
 * none (only the published agent port is forwarded in). So run, shell, the isolation check,
 * both networks, allow:/secrets:, up/exec/down and the warm pool work as on uml.
 *
 * data_limit's disk is a virtio-blk device capped on the host as uml's ubd0 is; a fork's
 * /data is the guest's overlay over two virtio-fs exports, as on uml; single-file mounts
 * reach the guest through a directory of their own (src/vmm/qemu_argv.h, vmm/exports.c).
 *
 * Whether KVM can run a guest at all is doctor's probe boot (qemu_probe.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/home.h"
#include "backend.h"
#include "checks.h"
#include "util/fingerprint.h"
#include "util/hostaddr.h"
#include "qemu_bundle.h"
#include "qemu_probe.h"
#include "uml_bundle.h"
#include "upstream_ca.h"
#include "util/spawn.h"
#include "util/xalloc.h"

#define ACCEL_ENV ABI_ENV_QEMU_ACCEL

extern const backend backend_qemu;

/* BLUEBOX_QEMU_ACCEL: unset or "kvm" → KVM, "tcg" → TCG; anything else is refused. */
static int accel_tcg(bool *ret, bb_error **err)
{
    const char *a = getenv(ACCEL_ENV);
    if (!a || !*a || streq(a, "kvm")) {
        *ret = false;
        return 0;
    }
    if (streq(a, "tcg")) {
        *ret = true;
        return 0;
    }
    return bb_fail(err, EINVAL, ACCEL_ENV " must be kvm or tcg, got \"%s\"", a);
}

static bool is_tcg(void)
{
    bool tcg = false;
    return accel_tcg(&tcg, NULL) == 0 && tcg;
}

#define KVM_CANNOT_RUN "KVM opens but cannot run a standard guest kernel"
#define KVM_CANNOT_FIX                                                                             \
    ACCEL_ENV "=tcg runs qemu emulated (QEMU's software emulator: slower, a software boundary); "  \
              "or use backend: uml"

/* doctor's cached verdict, when it found that this host's KVM cannot run a guest: refused at
 * once rather than left to hang at boot. No verdict yet: the launch goes ahead (and a guest
 * that does not come up is stopped by bluebox-vmm's boot timeout, with the same advice). */
static int kvm_refused(const char *root, bb_error **err)
{
    kvm_probe p;
    qemu_kvm_cached(root, &p);
    if (p.verdict != KVM_CANNOT) {
        kvm_probe_clear(&p);
        return 0;
    }
    bb_fail(err, ENOTSUP,
            "backend: qemu: " KVM_CANNOT_RUN " on this host (bluebox doctor: %s). " KVM_CANNOT_FIX,
            p.detail);
    kvm_probe_clear(&p);
    return -1;
}

static int qemu_preflight(const launch *l, bb_error **err)
{
    bool tcg;
    if (preflight_podman(err) < 0 || accel_tcg(&tcg, err) < 0)
        return -1;
    if (access(qemu_binary_path(), X_OK) < 0)
        return bb_fail_errno(err, errno,
                             "backend: qemu needs %s (Debian and Ubuntu: apt-get install "
                             "qemu-system-x86; Fedora: dnf install qemu-system-x86-core)",
                             qemu_binary_path());
    _cleanup_free_ char *kernel = NULL, *modules = NULL;
    if (qemu_kernel_find(&kernel, &modules, err) < 0)
        return -1;
    _cleanup_free_ char *vmm = uml_vmm_locate(l->self);
    if (!vmm)
        return bb_fail(err, ENOENT,
                       "backend: qemu needs bluebox-vmm beside bluebox (or $BLUEBOX_VMM); "
                       "reinstall bluebox");
    int e = tcg ? 0 : kvm_unusable();
    if (e)
        return bb_fail(err, e,
                       "backend: qemu needs KVM, and %s. To run it emulated instead, set " ACCEL_ENV
                       "=tcg: QEMU's software emulator, much slower, whose boundary is "
                       "QEMU's emulation code (a software boundary, not hardware "
                       "virtualisation); or use backend: uml",
                       kvm_why(e));
    return tcg ? 0 : kvm_refused(l->root, err);
}

/* The network, as on uml (uml.c): bluebox-vmm's libslirp behind QEMU's virtio-net device
 * (src/net/slirp.h), its policy refusing the host's own addresses; an up sandbox's agent port
 * forwarded into the guest, with network: none too (libslirp's restricted mode). */
static int net_flags(const launch *l, strv *argv, bb_error **err)
{
    strv_push(argv, xasprintf("--env=" ABI_ENV_NETWORK "=%s", bf_network_name(l->bf->network)));
    if (l->bf->network == NET_BRIDGE) {
        _cleanup_free_ char *deny = host_addresses();
        strv_push(argv, xasprintf("--env=" ABI_ENV_NET_DENY "=%s", deny));
        /* The TLS broker's trust, for a sandbox with secrets (upstream_ca.h). */
        if (l->bf->n_secrets > 0 && upstream_ca_flags(argv, err) < 0)
            return -1;
    }
    if (l->mode == LAUNCH_AGENT) {
        /* For the socket filter that keeps the forwarded port to the host alone (some kernels
         * want CAP_NET_ADMIN to attach one); dropped before QEMU runs, as on uml. */
        strv_add(argv, "--cap-add=NET_ADMIN");
        strv_add(argv, "--env=" ABI_ENV_FORWARD "=" ABI_AGENT_PORT_STR);
    }
    return 0;
}

static int qemu_flags(const launch *l, strv *argv, bb_error **err)
{
    bool tcg;
    if (accel_tcg(&tcg, err) < 0)
        return -1;
    _cleanup_free_ char *vmm = uml_vmm_locate(l->self), *bundle = NULL;
    if (!vmm)
        return bb_fail(err, ENOENT, "bluebox-vmm not found");
    if (qemu_bundle_ensure(l->root, vmm, l->self, &bundle, err) < 0)
        return bb_prefix(err, "cannot prepare the qemu VMM bundle");
    /* As on uml (uml.c): for bluebox-vmm to build QEMU's view of the container (the jail:
     * no /proc, /sys, nothing of /dev but /dev/null and, with KVM, /dev/kvm) and for the
     * file server to take the container's root without the mounts on it; dropped from
     * every process, the bounding set too, before QEMU runs. */
    strv_add(argv, "--cap-add=SYS_ADMIN,SETPCAP");
    strv_add(argv, "--security-opt=apparmor=unconfined");
    /* The guest init writes its own /etc/hosts; with allow: podman's stays for the VMM's own
     * name lookups, out of the guest's view (uml.c says more). */
    if (!l->bf->has_allow)
        strv_add(argv, "--no-hosts");
    if (!tcg)
        strv_add(argv, "--device=/dev/kvm");
    if (l->bf->readonly)
        strv_add(argv, "--read-only-tmpfs=false");
    /* The spec, the file server's sockets and QEMU's log; the guest's RAM is QEMU's memfd. */
    strv_add(argv, "--tmpfs=" ABI_MEM_DIR ":rw,noexec,nosuid,nodev,size=16m");
    strv_add(argv, "-v");
    strv_push(argv, xasprintf("%s:" ABI_VMM_DIR ":ro", bundle));
    strv_add(argv, "--env=" ABI_ENV_VMM_KIND "=qemu");
    /* Never a build step's root, whatever the image's ENV says (runtime/buildvm.h). */
    strv_add(argv, "--env=" ABI_ENV_BUILD "=0");
    strv_push(argv, xasprintf("--env=" ABI_ENV_QEMU_ACCEL "=%s", tcg ? "tcg" : "kvm"));
    strv_push(argv, xasprintf("--env=" ABI_ENV_RAM_MIB "=%d", l->bf->ram_mib));
    strv_push(argv, xasprintf("--env=" ABI_ENV_CPUS "=%d", l->bf->cpus));
    strv_push(argv, xasprintf("--env=" ABI_ENV_MODE "=%s", abi_mode_name((abi_mode)l->mode)));
    if (net_flags(l, argv, err) < 0)
        return -1;
    /* Profiling aid, as BLUEBOX_UML_ARGS for uml: extra words for the guest kernel's command
     * line (e.g. initcall_debug), read by bluebox-vmm (src/vmm/qemu_argv.c). */
    const char *extra = getenv("BLUEBOX_QEMU_CMDLINE");
    if (extra && *extra)
        strv_push(argv, xasprintf("--env=BLUEBOX_QEMU_CMDLINE=%s", extra));
    strv_add(argv, "--entrypoint=" ABI_VMM_DIR "/bluebox-vmm");
    return 0;
}

static int qemu_entry(const launch *l, strv *argv, bb_error **err)
{
    if (l->mode == LAUNCH_PROBE || l->mode == LAUNCH_AGENT)
        strv_add(argv, ABI_GUEST_BINARY);
    return 0;
}

/* The first line of `qemu --version`, NULL when it cannot be run. */
static char *qemu_version(void)
{
    char *argv[] = {(char *)qemu_binary_path(), "--version", NULL};
    _cleanup_free_ char *out = NULL;
    if (spawn_capture(argv, &out, NULL, NULL) != 0 || !out)
        return NULL;
    return xstrndup(out, strcspn(out, "\n"));
}

static void qemu_fingerprint(const launch *l, fingerprint *fp)
{
    _cleanup_free_ char *vmm = uml_vmm_locate(l->self);
    _cleanup_free_ char *version = qemu_version();
    _cleanup_free_ char *kernel = NULL, *modules = NULL;
    uint64_t h = 0;
    char hex[17] = "none";
    if (vmm && l->self && qemu_bundle_fingerprint(vmm, l->self, &h, NULL) == 0)
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    fp_str(fp, "QEMU's version", version ? version : "none");
    fp_file(fp, qemu_binary_path());
    if (qemu_kernel_find(&kernel, &modules, NULL) == 0)
        fp_file(fp, kernel);
    fp_str(fp, "the qemu VMM bundle", hex);
    fp_str(fp, "the acceleration", is_tcg() ? "tcg" : "kvm");
}

/* Whether this host runs qemu guests the way it would launch them: TCG when asked for, else
 * KVM, and KVM only when a probe boot ran (its verdict cached per boot, kernel and QEMU). */
static bool doctor_accel(doctor_report *r, const char *root, bool tcg, int kvm)
{
    if (tcg) {
        doctor_add(r, "qemu acceleration", CHECK_OK,
                   xstrdup(ACCEL_ENV "=tcg: emulated, a software boundary"), NULL);
        return true;
    }
    if (kvm) {
        doctor_add(r, "qemu acceleration", CHECK_WARN,
                   kvm == ENOENT || kvm == ENODEV
                       ? xasprintf("KVM: %s", kvm_why(kvm))
                       : xasprintf("KVM: %s (%s)", kvm_why(kvm), strerror(kvm)),
                   xstrdup("on a host without KVM, " ACCEL_ENV "=tcg runs qemu emulated"));
        return false;
    }
    kvm_probe p;
    _cleanup_error_ bb_error *e = NULL;
    const char *env = backend_env();
    if (env && backend_named(env) != &backend_qemu) {
        /* Another backend is chosen: no probe boot (a cached verdict is still told). */
        qemu_kvm_cached(root, &p);
        if (p.verdict == KVM_UNKNOWN) {
            doctor_add(r, "qemu acceleration", CHECK_OK,
                       xasprintf("KVM: /dev/kvm opens; whether it runs a guest is not probed "
                                 "while BLUEBOX_BACKEND=%s (BLUEBOX_BACKEND=qemu bluebox doctor "
                                 "probes it)",
                                 env),
                       NULL);
            return false;
        }
    } else if (qemu_kvm_probe(root, &p, &e) < 0) {
        doctor_add(r, "qemu acceleration", CHECK_WARN,
                   xasprintf("KVM: /dev/kvm opens; not probed: %s", e->msg), NULL);
        return false;
    }
    bool runs = p.verdict == KVM_RUNS;
    const char *when = p.cached ? " (cached for this boot)" : "";
    if (runs)
        doctor_add(r, "qemu acceleration", CHECK_OK,
                   xasprintf("KVM runs a standard guest kernel: %s%s", p.detail, when), NULL);
    else
        doctor_add(r, "qemu acceleration", CHECK_WARN,
                   xasprintf(KVM_CANNOT_RUN ": %s%s", p.detail, when), xstrdup(KVM_CANNOT_FIX));
    kvm_probe_clear(&p);
    return runs;
}

/* The bundles' room on disk: each is QEMU, its libraries and the kernel (about 120 MB). */
static void doctor_bundle(doctor_report *r, const char *root)
{
    int n = 0;
    long long bytes = 0;
    qemu_bundle_usage(root, &n, &bytes);
    if (!n) {
        doctor_add(r, "qemu bundle", CHECK_OK,
                   xstrdup("none yet: the first qemu launch makes one (about 120 MB)"), NULL);
        return;
    }
    doctor_add(r, "qemu bundle", CHECK_OK,
               xasprintf("%.0f MB in %s/vmm (%d bundle%s; a new one replaces the old ones that "
                         "no sandbox uses)",
                         (double)bytes / 1e6, root, n, n == 1 ? "" : "s"),
               NULL);
}

static bool qemu_doctor(doctor_report *r)
{
    bool ok = true;
    _cleanup_free_ char *version = qemu_version();
    if (version)
        doctor_add(r, "qemu", CHECK_OK, xasprintf("%s (%s)", version, qemu_binary_path()), NULL);
    else
        doctor_add(
            r, "qemu", CHECK_WARN,
            xasprintf("%s cannot be run: backend: qemu is not available", qemu_binary_path()),
            xstrdup("apt-get install qemu-system-x86"));
    ok = ok && version;
    _cleanup_free_ char *kernel = NULL, *modules = NULL;
    _cleanup_error_ bb_error *e = NULL;
    if (qemu_kernel_find(&kernel, &modules, &e) == 0) {
        doctor_add(r, "qemu guest kernel", CHECK_OK, xasprintf("%s", kernel), NULL);
    } else {
        doctor_add(r, "qemu guest kernel", CHECK_WARN, xstrdup(e->msg),
                   xstrdup("apt-get install linux-image-cloud-amd64"));
        ok = false;
    }
    bool tcg = is_tcg();
    int kvm = kvm_unusable();
    _cleanup_free_ char *root = NULL;
    bool runs = false;
    if (home_root(&root, NULL) == 0) {
        runs = doctor_accel(r, root, tcg, kvm);
        doctor_bundle(r, root);
    } else {
        doctor_add(r, "qemu acceleration", CHECK_WARN,
                   xstrdup("not probed: no bluebox home (set HOME or BLUEBOX_HOME)"), NULL);
    }
    return ok && runs;
}

static const char *qemu_posture_head(void)
{
    return is_tcg() ? "qemu (TCG, emulated: a software boundary), guest kernel "
                    : "qemu (KVM), guest kernel ";
}

const backend backend_qemu = {
    .name = "qemu",
    .posture_head = "qemu (KVM), guest kernel ",
    .posture_head_now = qemu_posture_head,
    .posture_tail = "",
    .boundary = "QEMU microVMs on KVM (emulated with TCG only when asked for)",
    .install = "apt-get install qemu-system-x86 linux-image-cloud-amd64",
    .not_isolated_hint = "does QEMU boot the guest kernel? (bluebox doctor)",
    .max_ram_mib = BLUEFILE_MAX_RAM_MIB,
    .max_cpus = BLUEFILE_MAX_CPUS,
    .bridge_reach = "internet only: host, LAN, metadata refused", /* src/net/netpolicy.c */
    .guest_init = true,
    .agent = true,
    .agent_offline = true, /* none + forward = libslirp restricted (src/net/slirp.c) */
    .egress = true,        /* bluebox-vmm: every guest frame passes its libslirp */
    .kernel_path = NULL,
    .data_disk = true,            /* virtio-blk, capped by bluebox-vmm (src/vmm/disklimit.c) */
    .fork_data = true,            /* the guest's overlayfs over two file-server exports */
    .build_guest = BUILD_VM_QEMU, /* each step in a microVM (runtime/buildvm.h) */
    .preflight = qemu_preflight,
    .doctor = qemu_doctor,
    .vmm = true,
    .user_to_guest = true,
    .direct_ok = true,
    .launch_flags = qemu_flags,
    .entry = qemu_entry,
    .fingerprint = qemu_fingerprint,
};
