/* network: bridge on the direct launch path: a network namespace of the run's
 * own, linked to the internet by slirp4netns, instead of podman's bridge.
 *
 * Why this shape (measured on the machine of bench/RESULTS.md): podman's CNI bridge costs
 * ~0.3 s a run over network none (veth, host-local IP, iptables chains per container, all
 * undone at exit); slirp4netns is up in ~40 ms, needs no address pool, no iptables or nft
 * rule and no veth, and what it holds goes with the run's processes. One long-lived
 * namespace shared by all direct runs would cost nothing per run but puts every sandbox's
 * VMM into one network stack: a VMM a guest took over could read the others' connections in
 * /proc/net, reach their loopback and abstract sockets and race them for ports — the
 * container boundary of SECURITY.md would stop at nothing. So each run gets its own.
 *
 * Per run the supervisor (direct.c, already in a mount namespace of its own) makes a fresh
 * network namespace, bind-mounts it on <run dir>/netns (the config.json's network path) and
 * starts slirp4netns from the host's namespace with --disable-host-loopback, its sandbox
 * (no capabilities but NET_BIND_SERVICE, an empty root) and seccomp; it dies with the
 * supervisor (its exit fd closes; PR_SET_PDEATHSIG) and the namespace with the run's last
 * process. The guest's view is unchanged: bluebox-vmm's libslirp opens its sockets in that
 * namespace after the same netpolicy (private ranges — slirp4netns's 10.0.2.0/24 among
 * them —, the host's addresses from ABI_ENV_NET_DENY, link-local/metadata, loopback, the
 * namespace's own addresses and gateway are refused), so the guest reaches the internet
 * only. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core/bluefile.h"
#include "launch.h"
#include "util/err.h"
#include "util/json.h"

/* Whether the direct path can give this Bluefile its network: none always, bridge when
 * slirp4netns is installed. */
bool direct_net_ok(const bluefile *bf);
/* One argument of the podman argv as the template's `podman create` gets it (NULL: left
 * out). A boot's secrets (egress.h) differ at every boot: their placeholders become fixed
 * stand-ins, replaced in each run's config.json, and --preserve-fds (which podman create
 * has not) becomes runc run's. */
char *direct_net_template_arg(const launch *l, const char *arg);
/* At bundle time: for bridge, point the config's network namespace at <dir>/netns and note
 * for the supervisor that the run wants a link (and which slirp4netns); with secrets, put
 * this boot's placeholders in and note that runc passes the memfd on. Nothing for none. */
int direct_net_bundle(json_t *cfg, const launch *l, const char *dir, bb_error **err);
/* In the supervisor: how many fds past stdio runc passes to the container (runc run
 * --preserve-fds): the secrets' memfd (at EGRESS_SECRETS_FD) when there are secrets, then the
 * lifeline (launch_lifeline_fd): "2" or "1". */
const char *direct_net_preserve_fds(const char *dir);

typedef struct {
    pid_t pid;   /* slirp4netns, or 0 */
    int exit_fd; /* closing it stops slirp4netns */
    char *netns; /* the bind mount to undo */
} direct_net;
#define DIRECT_NET_INIT                                                                            \
    {                                                                                              \
        .pid = 0, .exit_fd = -1, .netns = NULL                                                     \
    }

/* In the supervisor, in its own mount namespace, before runc: when the run wants a
 * network, make its namespace and wait until slirp4netns has configured it. `child_mask` is
 * the signal mask slirp4netns starts with. */
int direct_net_up(const char *dir, const sigset_t *child_mask, direct_net *ret, bb_error **err);
/* Stop slirp4netns and undo the mount (safe on DIRECT_NET_INIT). */
void direct_net_down(direct_net *n);
