/* The host/guest ABI: what bluebox on the host, bluebox-vmm in the container and the guest
 * init (the same static bluebox, PID 1 of the uml guest) must agree on. Each value is spelled
 * here once. bluebox-vmm is built from its own sources without the core library, so this
 * header holds only macros, enums and a static inline: nothing that needs linking. */
#pragma once

#define ABI_STR_(x) #x
#define ABI_STR(x)  ABI_STR_(x)

/* Paths inside the container (and, through hostfs, in the uml guest's first view of it). */
#define ABI_DIR          "/.bluebox"          /* bluebox's own; reserved in Bluefiles */
#define ABI_GUEST_BINARY ABI_DIR "/bluebox"   /* the static bluebox: guest init, agent */
#define ABI_VMM_DIR      ABI_DIR "/vmm"       /* the uml VMM bundle, read-only */
#define ABI_VMM_LOADER   ABI_VMM_DIR "/ld.so" /* PT_INTERP of the bundle's binaries */
#define ABI_MEM_DIR      ABI_DIR "/mem"       /* exec tmpfs: UML's memory, the spec */
#define ABI_SPEC_PATH    ABI_MEM_DIR "/spec"  /* the launch spec (abi/spec.h) */
#define ABI_DATA_DISK    ABI_DIR "/data.img"  /* /data's disk image, when it has one */
/* A fork's lower layer: the parent's /data, bound read-only there and served read-only by
 * the file server; the guest makes /data an overlay of it (guest/root.c, data/fork.h). */
#define ABI_FORK_LOWER "/.bluebox-lower"

/* Files of the VMM bundle (in ABI_VMM_DIR) that bluebox-vmm or the guest init open by name. */
#define ABI_VMM_KERNEL   "linux.uml"         /* the UML kernel, started by bluebox-vmm */
#define ABI_VMM_XSTATE   "bluebox-xstate.so" /* preloaded into it when present (vmm/xstate.c) */
#define ABI_VMM_OVERLAY  "overlay.ko"        /* loaded by the guest init for its RAM layer */
#define ABI_VMM_FUSE     "fuse.ko"           /* loaded by the guest init for /data (src/fsd) */
#define ABI_VMM_VIRTIOFS "virtiofs.ko"       /* and this after it */
#define ABI_VMM_UNAME    "bluebox-uname.so"  /* always preloaded into it (vmm/uname.c) */

/* The qemu backend. Its bundle (backends/uml_bundle.c) holds these beside
 * bluebox-vmm; bluebox-vmm starts QEMU (vmm/qemu_argv.h) when ABI_ENV_VMM_KIND says so. The guest
 * boots the distribution's kernel with an initramfs of the static bluebox (/init), the
 * modules it loads (ABI_QEMU_MODULE_DIR, in the order of ABI_QEMU_MODULES) and a marker
 * that tells the guest init it is a qemu guest; the container's root reaches it read-only
 * over virtio-fs (tag ABI_QEMU_ROOT_TAG) and the launch spec as a fw_cfg file. */
#define ABI_VMM_QEMU        "qemu-system-x86_64"
#define ABI_QEMU_BIOS       "bios-microvm.bin"
#define ABI_QEMU_KERNEL     "vmlinuz"
#define ABI_QEMU_VMLINUX    "vmlinux" /* the same uncompressed, for PVH, when it has the note */
#define ABI_QEMU_INITRD     "initrd.img"
#define ABI_QEMU_ROOT_TAG   "bbroot"
#define ABI_QEMU_SPEC_FWCFG "opt/bluebox/spec"
#define ABI_QEMU_MARKER     "/bluebox-qemu"
#define ABI_QEMU_MODULE_DIR "/modules"
#define ABI_QEMU_MODULES                                                                           \
    {                                                                                              \
        "virtio_ring", "virtio", "virtio_mmio", "fuse", "virtiofs", "overlay", "qemu_fw_cfg",      \
            "virtio_blk", "virtio_console"                                                         \
    }
/* With a network (QEMU's virtio-net device, vmm/qemu_argv.h): its driver, after its
 * dependencies. */
#define ABI_QEMU_NET_MODULES                                                                       \
    {                                                                                              \
        "failover", "net_failover", "virtio_net"                                                   \
    }
#define ABI_QEMU_NET_DEV   "eth0"               /* the kernel's name for it; uml's is vec0 */
#define ABI_ENV_VMM_KIND   "BLUEBOX_VMM_KIND"   /* "qemu"; unset: uml */
#define ABI_ENV_QEMU_ACCEL "BLUEBOX_QEMU_ACCEL" /* "kvm" or "tcg", chosen by bluebox */
#define ABI_ENV_CPUS       "BLUEBOX_CPUS"       /* qemu: the guest's CPUs */

/* What bluebox sets in the container's environment for bluebox-vmm (which takes its own
 * variables out of the workload's environment), and the agent's chain head, which reaches
 * the guest init through the launch spec and is taken out there. */
#define ABI_ENV_MODE       "BLUEBOX_MODE"       /* abi_mode_name() */
#define ABI_ENV_RAM_MIB    "BLUEBOX_RAM_MIB"    /* the guest's memory */
#define ABI_ENV_NETWORK    "BLUEBOX_NETWORK"    /* none or bridge */
#define ABI_ENV_FORWARD    "BLUEBOX_FORWARD"    /* guest ports the host may reach */
#define ABI_ENV_NET_DENY   "BLUEBOX_NET_DENY"   /* bridge: host addresses/subnets refused */
#define ABI_ENV_USER       "BLUEBOX_USER"       /* the image's USER, resolved by the guest */
#define ABI_ENV_DATA_DISK  "BLUEBOX_DATA_DISK"  /* ABI_DATA_DISK, when /data has a disk */
#define ABI_ENV_AGENT_HEAD "BLUEBOX_AGENT_HEAD" /* up: the hash chain's head (abi/chain.h) */
/* "1": a build step (runtime/buildvm.h): the guest's root is the container's own
 * root, written in place (it is the layer podman commits), with its owners and modes. */
#define ABI_ENV_BUILD "BLUEBOX_BUILD"
/* A VM's lifeline (launch/lifeline.h): the number of an inherited fd, the read end
 * of a pipe whose write ends only the VM's owners hold. When the last owner is gone (EOF) the
 * VMM stops the guest and exits; one ABI_LIFELINE_RELEASE byte first hands the VM to an owner
 * that is no process (up's state, the warm pool's entry) and the VMM stops watching. */
#define ABI_ENV_LIFELINE     "BLUEBOX_LIFELINE_FD"
#define ABI_LIFELINE_RELEASE 'R'

/* Egress by name. ABI_ENV_NET_ALLOW present (even empty) = allowlist mode: the
 * normalized Bluefile `allow:` list, comma-separated entries HOST[:PORT]; HOST is a lower-case
 * DNS name, "*.suffix" (any name below suffix, not suffix itself) or a CIDR; no PORT = 80 and
 * 443 for names, any port for a CIDR. ABI_ENV_NET_LOG: the connection log inside the
 * container (a bind mount of logs/<name>.net.log), one JSON line per decision.
 * ABI_ENV_SECRETS_FD: the number of an inherited fd (memfd) holding the secrets as one JSON
 * array [{"name","placeholder","value","hosts":[...]}]; the VMM reads it and closes it before
 * the guest boots. ABI_ENV_SANDBOX: the sandbox's name, for the log. */
#define ABI_ENV_NET_ALLOW  "BLUEBOX_NET_ALLOW"
#define ABI_ENV_NET_LOG    "BLUEBOX_NET_LOG"
#define ABI_NET_LOG        "/.bluebox/net.log"
#define ABI_ENV_SECRETS_FD "BLUEBOX_SECRETS_FD"
#define ABI_ENV_SANDBOX    "BLUEBOX_SANDBOX"
/* Placeholders the guest sees instead of a secret's value: this prefix and 32 hex digits. */
#define ABI_SECRET_PREFIX "BLUEBOX_SECRET_"

/* What bluebox-vmm's TLS broker verifies real servers against (src/net/tlsbroker.h): the
 * host's CA bundle and, when ABI_ENV_UPSTREAM_CA names a PEM file on the host, that file too,
 * bind-mounted read-only. */
#define ABI_ENV_UPSTREAM_CA    "BLUEBOX_UPSTREAM_CA"
#define ABI_UPSTREAM_CA_SYSTEM ABI_DIR "/ca/system.pem"
#define ABI_UPSTREAM_CA_EXTRA  ABI_DIR "/ca/extra.pem"

/* A uml run's stdin in bulk. UML's serial line reads its input one byte per host read()
 * (about 2 MB/s), so bluebox-vmm writes stdin into a ring file on the exec tmpfs instead,
 * which the kernel has as a read-only block device without COW header (ubd1, the guest's
 * /dev/ubdb), and says on the control line where each chunk is; the guest init reads it with
 * O_DIRECT (no page cache to go stale) and hands the space back. Every chunk starts on an
 * ABI_STDIN_RING_ALIGN boundary and is at most ABI_STDIN_RING_CHUNK bytes. */
#define ABI_STDIN_RING       ABI_MEM_DIR "/stdin"
#define ABI_STDIN_RING_KARG  "ubd1rd=" ABI_STDIN_RING
#define ABI_STDIN_RING_DEV   "/dev/ubdb"
#define ABI_STDIN_RING_BYTES (4u << 20)
#define ABI_STDIN_RING_ALIGN 4096u
#define ABI_STDIN_RING_CHUNK 65536u

/* The guest memory bluebox-vmm gives a uml guest (BLUEBOX_RAM_MIB), in MiB. */
#define ABI_UML_MIN_RAM_MIB 64
#define ABI_UML_MAX_RAM_MIB 65536

/* The agent's TCP port in the guest (published on the host's 127.0.0.1 only). */
#define ABI_AGENT_PORT     7700
#define ABI_AGENT_PORT_STR ABI_STR(ABI_AGENT_PORT)

/* Exit codes of our own, beside the workload's (timeout(1) and env(1) conventions): the
 * timeout ran out; the sandbox could not be set up or the request was bad (podman's own code
 * for "could not run"); the command could not be started. */
#define ABI_EXIT_TIMEOUT 124
#define ABI_EXIT_SETUP   125
#define ABI_EXIT_NOSTART 127

/* The launch modes; bluebox hands the name to bluebox-vmm (BLUEBOX_MODE), which writes it
 * into the launch spec for the guest init. */
typedef enum {
    ABI_MODE_RUN,
    ABI_MODE_SHELL,
    ABI_MODE_PROBE,
    ABI_MODE_AGENT,
    ABI_MODE_COUNT,
} abi_mode;

/* The mode's name, or "?" when out of range. */
static inline const char *abi_mode_name(abi_mode m)
{
    static const char *const names[ABI_MODE_COUNT] = {
        [ABI_MODE_RUN] = "run",
        [ABI_MODE_SHELL] = "shell",
        [ABI_MODE_PROBE] = "probe",
        [ABI_MODE_AGENT] = "agent",
    };
    return (unsigned)m < ABI_MODE_COUNT ? names[m] : "?";
}
