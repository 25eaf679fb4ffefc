/* The machine bluebox-vmm boots: UML (machine_uml.c) or QEMU (machine_qemu.c), as
 * ABI_ENV_VMM_KIND says. Each builds its own command line and starts its own process; both
 * get the same control line, launch spec, file server and network, and run in the same jail
 * (jail.h). What differs beyond that is data here, so no other file asks which one it is. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "net/slirp.h"
#include "util/strv.h"
#include "vmm/disklimit.h"
#include "vmm/exports.h"
#include "vmm/stdin_ring_writer.h"

/* What a machine's command line is made from. */
typedef struct machine_conf {
    const char *dir; /* the bundle: the kernel (and QEMU), their libraries */
    unsigned ram_mib;
    const exports *ex;
    const vmm_net *net; /* NULL: no network */
    const disk_limit *disk;
    const stdin_ring *ring;
} machine_conf;

/* What its process inherits. */
typedef struct machine_io {
    const char *dir;
    int serial;           /* the control line's far end, at VMM_SERIAL_FD */
    int net;              /* the network's far end (stream link), at VMM_NET_FD; -1 none */
    int log_fd;           /* its stdout and stderr; -1: /dev/null */
    const sigset_t *mask; /* the signal mask it starts with */
    const strv *served;   /* mounts left out of its view (exports.unjailed) */
} machine_io;

typedef struct machine {
    const char *name; /* in the log lines shown to the user */
    net_link link;
    /* Every mount and the container's root reach the guest through the file server (no
     * hostfs). */
    bool serves_all;
    /* The machine copied the launch spec into the guest at its start (fw_cfg): the file goes
     * once the guest is up. */
    bool spec_copied;
    void (*argv)(const machine_conf *c, strv *argv);
    /* Fork and exec the machine in its own process group (it forks helpers; they are
     * stopped as one), jailed. Dies on failure. */
    pid_t (*start)(char *const *argv, const machine_io *io);
    /* Kill it and its helpers at once and reap it: whether it is reaped (*status set). */
    bool (*stop)(pid_t pid, int *status);
    /* After the guest failed to finish: NULL, or the failure is said again as the last line
     * (bluebox shows the VMM's last line), followed by this note (may be ""). */
    const char *(*failure_note)(bool ready);
} machine;

/* The machine ABI_ENV_VMM_KIND names (uml when unset). */
const machine *machine_get(void);

/* For the machines' start: fork, jail the child (`kvm`: with /dev/kvm), give it io's fds and
 * exec argv with envp; then lock our own process (jail_lock). */
pid_t machine_spawn(char *const *argv, char *const *envp, const machine_io *io, bool kvm);
/* For the machines' stop: kill the process group machine_spawn made and reap its leader. */
bool machine_stop(pid_t pid, int *status);

extern const machine machine_uml, machine_qemu;
