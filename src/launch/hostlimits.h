/* The nofile and nproc limits every container bluebox starts gets: podman's defaults where
 * they fit this host, else the most the host allows, passed as --ulimit on every path (build,
 * the isolation baseline, run, up, pool, and the direct launch's template).
 *
 * Why: without CAP_SYS_RESOURCE (root in some VMs and CI containers) no limit can be raised
 * above the hard limit. Root podman asks for nofile 1048576 and nproc pid_max (its
 * containers.conf default, which it also sets on itself; without that default it asks for
 * nproc 1048576); runc cannot give the container more than podman holds, so above the hard
 * limits every container fails with "error setting rlimit type 7 (or 6): operation not
 * permitted". Rootless podman derives its defaults from the current limits and always fits.
 *
 * A containers.conf that sets default_ulimits (CONTAINERS_CONF when set, else
 * /etc/containers/containers.conf and its containers.conf.d, and CONTAINERS_CONF_OVERRIDE)
 * is the user's choice and wins: bluebox then passes none, since podman's --ulimit replaces
 * that whole list rather than adding to it. `bluebox doctor` shows whether it fits. */
#pragma once

#include <stdbool.h>

#include "util/strv.h"

/* podman's own default for nofile, and for nproc when pid_max is unknown. */
#define PODMAN_RLIMIT_DEFAULT 1048576ULL
/* A hard limit of RLIM_INFINITY. */
#define HOSTLIMIT_NONE (~0ULL)

typedef struct {
    unsigned long long nofile_hard; /* getrlimit's rlim_max; HOSTLIMIT_NONE: unlimited */
    unsigned long long nproc_hard;
    unsigned long long pid_max; /* /proc/sys/kernel/pid_max; 0: unknown */
    unsigned long long nr_open; /* /proc/sys/fs/nr_open, the kernel's nofile ceiling; 0: unknown */
    bool can_raise;             /* CAP_SYS_RESOURCE: podman raises its limits past the hard ones */
    bool rootless;
    char *conf_ulimits; /* the containers.conf that sets default_ulimits, or NULL */
} host_limits;

typedef struct {
    unsigned long long nofile, nproc; /* what fits this host */
    bool nofile_fits, nproc_fits;     /* podman's own default is within it */
    bool pass;                        /* bluebox passes them as --ulimit */
} ulimit_plan;

/* The decision, from the host's facts alone (tests/unit/test_hostlimits.c). */
void hostlimits_decide(const host_limits *h, ulimit_plan *ret);
/* This host's facts and plan, read once per process. */
const host_limits *hostlimits_host(void);
const ulimit_plan *hostlimits_plan(void);
/* For tests: decide from h instead of this host from now on (NULL: this host again). */
void hostlimits_use(const host_limits *h);

/* --ulimit=nofile=N:N and --ulimit=nproc=M:M when the plan passes them; nothing otherwise. */
void hostlimits_argv(strv *argv);
/* podman build's: nproc is the build's own cap (at most what fits), and nofile as above. */
void hostlimits_build_argv(strv *argv, unsigned long long build_nproc);
/* The containers.conf lines that fit this host, for a fix: default_ulimits = [...]. */
char *hostlimits_conf_line(void);
