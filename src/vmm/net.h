/* bluebox-vmm's network for `network: bridge`: UML's vector device (bess transport: one raw
 * ethernet frame per SOCK_SEQPACKET message) on a unix socket we listen on, fed to libslirp,
 * which opens real sockets in the container's network namespace. The guest sees 10.0.2.0/24:
 * itself at 10.0.2.15, the gateway at 10.0.2.2 (never the host's loopback), DNS at 10.0.2.3. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/strv.h"

typedef struct vmm_net vmm_net;
typedef struct secrets secrets;

/* A growing poll set shared by the relay and the network. */
typedef struct pollvec {
    struct pollfd *v;
    size_t n, cap;
} pollvec;
size_t pollvec_add(pollvec *pv, int fd, short events);

/* From BLUEBOX_NETWORK (none | bridge; unset = none) and BLUEBOX_FORWARD (comma-separated
 * ports forwarded from the container's namespace to the same port in the guest). NULL for
 * none without forwards; none with forwards is a restricted stack (the guest reaches nothing,
 * the forwards reach the guest). Dies with a clear message on a bad value or when the stack
 * cannot start. With an allowlist the egress engine takes secrets (egress.h; may be empty). */
vmm_net *net_setup(const char *mode, const char *forward, const secrets *sec);
/* The kernel's vec0 device for the guest (nothing for none). */
void net_kernel_args(const vmm_net *n, strv *argv);
/* Add the network's fds to pv and lower *timeout_ms (-1 = none) for its timers. */
void net_poll_fill(vmm_net *n, pollvec *pv, int *timeout_ms);
/* After poll(): handle what the fds added by net_poll_fill report, and due timers. */
void net_poll_done(vmm_net *n, const pollvec *pv, bool poll_failed);
void net_free(vmm_net *n);
