/* Running one `podman run` for the user: stdio through, exit code back, a timeout that
 * kills and removes the container, and signals (Ctrl-C, SIGTERM, SIGHUP) that stop it and
 * leave nothing behind. Output can be tee'd into the sandbox's log. */
#pragma once

#include <stdbool.h>

#include "util/err.h"

typedef struct {
    char *const *argv;     /* the podman argv */
    const char *container; /* its --name, for removal */
    int timeout_seconds;   /* 0: none */
    struct runlog *log;    /* NULL: no log; else output is copied here (runlog_write) */
    int fd3;               /* above 2: podman's fd 3 (--preserve-fds, launch/egress.h) */
} session;

typedef struct {
    int code;       /* exit code of podman run (the workload's), or ABI_EXIT_TIMEOUT / 128+n */
    bool timed_out; /* killed by the timeout */
    int signal;     /* the signal that stopped us, 0 when none */
    double seconds; /* wall time */
} session_result;

/* The session owns the VM: the lifeline (lifeline.h) it makes goes to podman (or the direct
 * supervisor) as the fd after fd3's (launch_lifeline_fd), and its own end lives as long as
 * this call, so that a bluebox killed with -9 takes its VM with it. */
int session_run(const session *s, session_result *ret, bb_error **err);
/* Remove a container now, quietly (podman rm -f -t 0). */
void session_remove(const char *container);
