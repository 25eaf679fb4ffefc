/* Backends: where a sandbox's guest kernel comes from. A backend is data (what it is called,
 * what it can give a guest, how the posture line and doctor describe its boundary) plus the
 * hooks every launch calls; launch.h builds the one podman argv around those hooks, so every
 * VMM gets the same confinement. The registry (backends.c) lists every backend: adding one is
 * a file of its own and a line there. Nothing outside a backend's own file compares names. */
#pragma once

#include <stdbool.h>

#include "abi/abi.h"
#include "core/bluefile.h"
#include "core/sandbox.h"
#include "util/err.h"
#include "util/strv.h"

struct egress;
struct fingerprint;
struct doctor_report;
typedef struct launch launch;

typedef enum {
    LAUNCH_RUN = ABI_MODE_RUN,
    LAUNCH_SHELL = ABI_MODE_SHELL,
    LAUNCH_PROBE = ABI_MODE_PROBE,
    LAUNCH_AGENT = ABI_MODE_AGENT,
} launch_mode;

struct launch {
    const char *root;          /* BLUEBOX_HOME: the home-wide parts (bundles, the isolation cache) */
    const struct sandbox *sb;  /* the sandbox it boots; NULL only for doctor's cache look-up */
    const bluefile *bf;
    const char *container; /* unique container name */
    launch_mode mode;
    bool interactive;  /* -i */
    bool tty;          /* -t */
    const char *image; /* NULL: the sandbox's own, image_ref() */
    char *const *cmd;  /* command in the guest, NULL-terminated */
    const char *self;  /* host path of the static bluebox for the guest (probe, agent, init) */
    bool guest_root;   /* the command runs as the guest's root whatever the image's USER */

    /* A fork: the parent's /data (the fork's own holds the overlay's layers); else NULL. */
    const char *fork_lower;
    /* allow:'s log and secrets for this boot (launch/egress.h); NULL: none prepared. A
     * launch whose spawn places egress->secrets_fd at EGRESS_SECRETS_FD (session.h, up.c). */
    const struct egress *egress;
};

/* How a backend's builds run their RUN steps: on the host's kernel (none), in its guest
 * through bluebox's OCI runtime (uml, qemu: runtime/buildvm.h), or with podman build
 * --runtime of its own VM runtime (krun). */
typedef enum { BUILD_VM_NONE, BUILD_VM_UML, BUILD_VM_QEMU, BUILD_VM_KRUN } backend_build;

typedef struct backend {
    const char *name;
    const char *alias; /* another name for it (Bluefile and BLUEBOX_BACKEND), or NULL */
    /* The posture line's words for the guest kernel and its boundary:
     * "<posture_head><release><posture_tail>". */
    const char *posture_head, *posture_tail;
    /* When set, the posture head as this host launches it now (qemu: KVM or TCG). */
    const char *(*posture_head_now)(void);
    /* doctor's words for the boundary, "krun (<boundary>)", and for how to get the backend
     * when none can run (every backend's, in registry order, joined by "; "). */
    const char *boundary, *install;
    /* Added to the isolation check's "not isolated" refusal, or NULL. */
    const char *not_isolated_hint;
    /* The most a guest can be given; backend_for refuses Bluefiles that ask for more. */
    int max_ram_mib, max_cpus;
    /* The CPUs every guest gets whatever the Bluefile's cpus, or 0 when it gets as many as it
     * asks; and why, for the posture line when a Bluefile asks for more. */
    int guest_cpus;
    const char *guest_cpus_why;
    /* What `network: bridge` reaches on this backend, in the posture line's and bluebox env's
     * words: whether the host, the LAN and the metadata address are refused. */
    const char *bridge_reach;
    bool guest_init; /* the guest's init is the static bluebox: mount it on every launch */
    /* Its VMM is bluebox-vmm: run, shell and up give it a lifeline (launch/lifeline.h). */
    bool vmm;
    /* Its VMM runs as the container's root and hands the image's USER to the guest init. */
    bool user_to_guest;
    /* The direct launcher (launch/direct.h) can start it with runc, without podman: its VMM
     * is bluebox-vmm, which podman's config.json describes whole (krun's crun+libkrun VM it
     * does not, so krun stays on podman). */
    bool direct_ok;
    /* Its VM can run bluebox's agent as its main process (bluebox up, the warm pool). */
    bool agent;
    /* network: none can stay offline while the agent's port is published (bluebox up). */
    bool agent_offline;
    /* Can attach /data as a disk image (Bluefile data_limit; src/runtime/datadisk.h). */
    bool data_disk;
    /* Can boot a fork: its guest makes /data an overlay of the parent's (ABI_FORK_LOWER). */
    bool fork_data;
    /* Its VMM enforces `allow:` and brokers `secrets:` (launch/egress.h); backend_for
     * refuses a Bluefile with them on a backend without. */
    bool egress;
    /* Where bluebox build runs the steps (runtime/build.h), unless --host-kernel. */
    backend_build build_guest;
    /* The host path of its guest kernel; NULL when the kernel is no file of its own. */
    const char *(*kernel_path)(void);
    /* Can this host boot this backend? The message says what to do when not. */
    int (*preflight)(const launch *l, bb_error **err);
    /* bluebox doctor: add this backend's checks; true when it can boot a guest here. */
    bool (*doctor)(struct doctor_report *r);
    /* Flags of this backend, appended before the image. */
    int (*launch_flags)(const launch *l, strv *argv, bb_error **err);
    /* What runs as the container's process: the image is followed by this + the command. */
    int (*entry)(const launch *l, strv *argv, bb_error **err);
    /* Mix in the stat data of this backend's runtime files (may be NULL). */
    void (*fingerprint)(const launch *l, struct fingerprint *fp);
} backend;

/* Every backend, NULL-terminated; the first is the default (the Bluefile's backend: krun). */
extern const backend *const backend_registry[];

/* The part of every preflight that is not the backend's own: podman is installed. */
int preflight_podman(bb_error **err);
/* 0 when /dev/kvm is a device node that opens, else why not: an errno, ENODEV when the path
 * is something else (a regular file left there opens, and podman then refuses it). */
int kvm_unusable(void);
/* Words for kvm_unusable's answer: "/dev/kvm does not exist", "... is not a device node". */
const char *kvm_why(int e);
/* The first backend other than `self` whose preflight passes on this host (for a refusal's
 * "or use backend: X, which runs here"), NULL when none does. */
const backend *backend_runs_instead(const backend *self, const launch *l);
/* BLUEBOX_BACKEND when it is set and not empty, else NULL. */
const char *backend_env(void);
/* A backend by name or alias, NULL when unknown. */
const backend *backend_named(const char *name);
/* The backend a Bluefile asks for, overridden by BLUEBOX_BACKEND; refuses a Bluefile that
 * asks for more RAM or CPUs than that backend can give a guest, for allow: on a backend
 * that cannot enforce it, or for a warm pool it cannot keep (no agent; network: none on a
 * backend that cannot keep an agent VM offline). */
int backend_for(const bluefile *bf, const backend **ret, bb_error **err);
/* The CPUs a guest of bf really gets from b (the posture line and `bluebox env` say it). */
int backend_guest_cpus(const backend *b, const bluefile *bf);
