/* bluebox-vmm's network for `network: bridge`: the guest's link fed to libslirp, which opens
 * real sockets in the container's network namespace. The link is UML's vector device (bess
 * transport: one raw ethernet frame per SOCK_SEQPACKET message) on a unix socket we listen
 * on, or, for QEMU, one end of a SOCK_STREAM socketpair carrying length-prefixed frames
 * (netstream.h, QEMU's stream netdev). Either way every frame takes the same path: the
 * egress engine or the network policy, then libslirp; and back through one queue. The guest
 * sees 10.0.2.0/24: itself at 10.0.2.15, the gateway at 10.0.2.2 (never the host's
 * loopback), DNS at 10.0.2.3. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/pollvec.h"
#include "util/strv.h"

typedef struct vmm_net vmm_net;
typedef struct secrets secrets;

/* The guest's link: UML's vector device or a stream socket (QEMU). */
typedef enum net_link { NET_LINK_BESS, NET_LINK_STREAM } net_link;

/* The link's MTU, on both sides (the guest's device and libslirp). */
#define NET_LINK_MTU 9000

/* From BLUEBOX_NETWORK (none | bridge; unset = none) and BLUEBOX_FORWARD (comma-separated
 * ports forwarded from the container's namespace to the same port in the guest). NULL for
 * none without forwards; none with forwards is a restricted stack (the guest reaches nothing,
 * the forwards reach the guest). Dies with a clear message on a bad value or when the stack cannot
 * start. With an allowlist the egress engine takes secrets (egress_engine.h; may be empty). */
vmm_net *net_setup(const char *mode, const char *forward, const secrets *sec, net_link link);
/* The kernel's vec0 device for the guest (nothing for none). */
void net_kernel_args(const vmm_net *n, strv *argv);
/* NET_LINK_STREAM: the socket's far end, for the VMM to inherit (close-on-exec: dup it); -1
 * for none. net_peer_close() once the VMM has it. */
int net_peer_fd(const vmm_net *n);
void net_peer_close(vmm_net *n);
/* Add the network's fds to pv and lower *timeout_ms (-1 = none) for its timers. */
void net_poll_fill(vmm_net *n, pollvec *pv, int *timeout_ms);
/* After poll(): handle what the fds added by net_poll_fill report, and due timers. */
void net_poll_done(vmm_net *n, const pollvec *pv, bool poll_failed);
void net_free(vmm_net *n);
