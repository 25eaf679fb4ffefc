/* The uml backend: Debian's user-mode-linux kernel runs as the container's process, under
 * the same confinement as krun's VMM. bluebox-vmm (from the VMM bundle, bind-mounted
 * read-only at /.bluebox/vmm) starts the kernel with the container's filesystem as the
 * guest's root and relays the workload's stdio and exit code; the guest's init is the static
 * bluebox at /.bluebox/bluebox. The boundary is ptrace, not hardware virtualisation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "checks.h"
#include "util/fingerprint.h"
#include "util/hostaddr.h"
#include "uml_bundle.h"
#include "upstream_ca.h"
#include "util/spawn.h"
#include "util/xalloc.h"

static int uml_preflight(const launch *l, bb_error **err)
{
    if (preflight_podman(err) < 0)
        return -1;
    const char *kernel = uml_kernel_path();
    if (access(kernel, X_OK) < 0)
        return bb_fail_errno(err, errno,
                             "backend: uml needs the user-mode-linux kernel %s (Debian: "
                             "apt-get install user-mode-linux)",
                             kernel);
    _cleanup_free_ char *vmm = uml_vmm_locate(l->self);
    if (!vmm)
        return bb_fail(err, ENOENT,
                       "backend: uml needs bluebox-vmm beside bluebox (or $BLUEBOX_VMM); "
                       "reinstall bluebox");
    return 0;
}

static int uml_flags(const launch *l, strv *argv, bb_error **err)
{
    _cleanup_free_ char *vmm = uml_vmm_locate(l->self), *bundle = NULL;
    if (!vmm)
        return bb_fail(err, ENOENT, "bluebox-vmm not found");
    if (uml_bundle_ensure(l->root, vmm, &bundle, err) < 0)
        return bb_prefix(err, "cannot prepare the uml VMM bundle");
    /* For bluebox-vmm to build the kernel's view of the container (a mount namespace without
     * /proc, /sys and /dev: hostfs opens any path the guest names). Dropped, from the
     * bounding set too, and the syscalls they allow refused by a second seccomp filter,
     * before UML runs: the running VMM has the six capabilities of every launch. AppArmor's
     * container profile forbids every mount, so it cannot apply to this setup. */
    strv_add(argv, "--cap-add=SYS_ADMIN,SETPCAP");
    /* up: also for the socket filter that keeps the agent's forwarded port to the host alone
     * (some kernels want CAP_NET_ADMIN to attach one); dropped with the other two. */
    if (l->mode == LAUNCH_AGENT)
        strv_add(argv, "--cap-add=NET_ADMIN");
    strv_add(argv, "--security-opt=apparmor=unconfined");
    if (!l->bf->has_allow) {
        /* podman's /etc/hosts carries the host's entries: the guest init writes its own
         * (src/guest/root.c). Its /etc/resolv.conf stays for the VMM's libslirp, which
         * forwards the guest's DNS to those resolvers; the jail keeps it out of the guest's
         * view. With allow: the VMM answers the guest's DNS and resolves allowed names itself
         * (src/net/egress_engine.h), so podman's file stays, equally out of the guest's view; the
         * list, the log and the secrets are launch.c's egress flags. */
        strv_add(argv, "--no-hosts");
    }
    /* A read-only root's /tmp, /run and /var/tmp are the guest's own tmpfs (in its RAM), not
     * podman's on the host. */
    if (l->bf->readonly)
        strv_add(argv, "--read-only-tmpfs=false");
    /* UML maps its memory from a file in TMPDIR, which must allow exec. */
    strv_push(argv, xasprintf("--tmpfs=" ABI_MEM_DIR ":rw,exec,nosuid,nodev,size=%dm",
                              l->bf->ram_mib + 64));
    strv_add(argv, "-v");
    strv_push(argv, xasprintf("%s:" ABI_VMM_DIR ":ro", bundle));
    strv_push(argv, xasprintf("--env=" ABI_ENV_RAM_MIB "=%d", l->bf->ram_mib));
    /* Never a build step's root, whatever the image's ENV says (runtime/buildvm.h). */
    strv_add(argv, "--env=" ABI_ENV_BUILD "=0");
    strv_push(argv, xasprintf("--env=" ABI_ENV_MODE "=%s", abi_mode_name((abi_mode)l->mode)));
    strv_push(argv, xasprintf("--env=" ABI_ENV_NETWORK "=%s", bf_network_name(l->bf->network)));
    if (l->bf->network == NET_BRIDGE) { /* refused by the VMM's network policy */
        _cleanup_free_ char *deny = host_addresses();
        strv_push(argv, xasprintf("--env=" ABI_ENV_NET_DENY "=%s", deny));
        /* The TLS broker's trust, for a sandbox with secrets (upstream_ca.h). */
        if (l->bf->n_secrets > 0 && upstream_ca_flags(argv, err) < 0)
            return -1;
    }
    /* Debugging and profiling aid (bench/boot_profile.py): extra words for the guest kernel's
     * command line, e.g. initcall_debug; the user's own choice, like BLUEBOX_UML_HOSTFS. */
    const char *extra = getenv("BLUEBOX_UML_ARGS");
    if (extra && *extra)
        strv_push(argv, xasprintf("--env=BLUEBOX_UML_ARGS=%s", extra));
    if (l->mode == LAUNCH_AGENT) /* slirp forwards the published port to the guest's agent */
        strv_add(argv, "--env=" ABI_ENV_FORWARD "=" ABI_AGENT_PORT_STR);
    strv_add(argv, "--entrypoint=" ABI_VMM_DIR "/bluebox-vmm");
    return 0;
}

static int uml_entry(const launch *l, strv *argv, bb_error **err)
{
    if (l->mode == LAUNCH_PROBE || l->mode == LAUNCH_AGENT)
        strv_add(argv, ABI_GUEST_BINARY);
    return 0;
}

static void uml_fingerprint(const launch *l, fingerprint *fp)
{
    _cleanup_free_ char *vmm = uml_vmm_locate(l->self);
    uint64_t h = 0;
    char hex[17] = "none";
    if (vmm && uml_bundle_fingerprint(vmm, &h, NULL) == 0)
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    /* The bundle covers both; named alone they say which one changed. */
    fp_file(fp, uml_kernel_path());
    fp_file(fp, vmm ? vmm : "bluebox-vmm");
    fp_str(fp, "the uml VMM bundle", hex);
}

static bool uml_doctor(doctor_report *r)
{
    const char *k = uml_kernel_path();
    if (access(k, X_OK) < 0) {
        doctor_add(r, "user-mode-linux", CHECK_WARN, xasprintf("%s: %s", k, strerror(errno)),
                   xstrdup("apt-get install user-mode-linux (the backend for hosts without KVM)"));
        return false;
    }
    doctor_add(r, "user-mode-linux", CHECK_OK,
               xasprintf("%s (backend: uml; a ptrace boundary, weaker than KVM)", k), NULL);
    return true;
}

const backend backend_uml = {
    .name = "uml",
    .posture_head = "uml guest kernel ",
    .posture_tail = " (ptrace boundary, weaker than KVM)",
    .boundary = "own kernel, ptrace boundary instead of hardware virtualisation",
    .install = "elsewhere apt-get install user-mode-linux",
    .max_ram_mib = ABI_UML_MAX_RAM_MIB, /* bluebox-vmm's bound on BLUEBOX_RAM_MIB */
    .max_cpus = BLUEFILE_MAX_CPUS,      /* accepted; the posture line says it is ignored */
    .guest_cpus = 1,                    /* Debian's UML kernel: CONFIG_NR_CPUS=1, no SMP */
    .guest_cpus_why = "uml has no SMP",
    .bridge_reach = "internet only: host, LAN, metadata refused", /* src/net/netpolicy.c */
    .guest_init = true,
    .agent = true,
    .agent_offline = true,       /* none + forward = libslirp restricted (src/net/slirp.c) */
    .data_disk = true,           /* ubd0, capped by bluebox-vmm (src/vmm/disklimit.c) */
    .fork_data = true,           /* the guest's overlayfs over two file-server exports */
    .egress = true,              /* bluebox-vmm: every guest frame passes its libslirp */
    .build_guest = BUILD_VM_UML, /* podman build through bluebox's OCI runtime (buildvm.h) */
    .kernel_path = uml_kernel_path,
    .preflight = uml_preflight,
    .doctor = uml_doctor,
    .vmm = true,
    .user_to_guest = true,
    .direct_ok = true,
    .launch_flags = uml_flags,
    .entry = uml_entry,
    .fingerprint = uml_fingerprint,
};
