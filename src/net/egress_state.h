/* The egress engine's state, shared by its files: the engine (egress_engine.c: setup, fake
 * addresses, DNS answers, frames, polling), its connection log (egress_log.c) and its proxy
 * (egress_proxy.c: the pool and the per-connection worker). Not for use outside them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/allow.h"
#include "net/egress_types.h"
#include "net/sniff.h"
#include "util/macro.h"

/* Fake addresses: 10.0.2.FAKE_FIRST and up, inside slirp's 10.0.2.0/24 (the guest is .15,
 * DHCP hands out .15-.30, the gateway is .2 and DNS .3). When all are taken, the name resolved
 * longest ago gives its address up (its open connections stay), once the guest's DNS cache of
 * it has expired; until then new names get SERVFAIL. */
#define FAKE_FIRST 100
#define FAKE_N     (255 - FAKE_FIRST)
#define FAKE_PORTS 8
#define DNS_TTL    60
/* How long a child waits for the guest's first bytes: for a name on 80/443 (which must bring
 * TLS or HTTP) and for a TLS or HTTP message begun on any port; and for the first byte on a
 * NAME:PORT entry (whose protocol may have the server speak first). */
#define FIRST_BYTES_MS   10000
#define FIRST_BYTES_PORT 300
#define CONNECT_MS       10000
#define LOG_LINE_MAX     2048
/* Where the listeners slirp connects to live: in the container's /dev, which UML's jail does
 * not bind (src/vmm/jail.c), so the guest cannot reach the directory through hostfs to swap a
 * socket for a symlink to another one (libslirp connects by path). Made before the jail. */
#define SOCK_DIR "/dev/bluebox-egress"
/* Proxy processes at once, the pool's own included: each is a process of the container,
 * whose pids limit UML shares. */
#define MAX_CHILDREN 64
/* Workers the pool keeps forked and waiting, so that a connection never waits for a fork. */
#define POOL_IDLE 2
#define RELAY_BUF 65536

/* A name's upstream address, kept a while for the next connection's child (which would
 * otherwise ask the container's resolver again each time). */
#define RESOLVED_MS 30000

typedef struct resolved {
    int lock;
    char name[SNIFF_NAME_MAX + 1];
    int family;
    uint8_t addr[16];
    int64_t expires_ms;
} resolved;

/* Memory shared by the engine and its children. */
typedef struct shared_state {
    uint64_t logged;                         /* bytes of tcp (and the log's own) lines this boot */
    uint64_t logged_dns, logged_frame;       /* bytes of dns and frame lines: their own shares */
    uint64_t unwritten_dns, unwritten_frame; /* lines past their share: counted only */
    resolved cache[FAKE_N];                  /* by fake address slot */
    /* Connections handed to the pool and not yet ended: the engine adds one per hand-off, the
     * pool takes one off as it reaps the worker that took it. Exact, unlike the pool's own
     * counts, which a busy host's scheduler can leave behind a burst of connections. */
    int conns;
} shared_state;

/* What the engine hands a pool worker with the guest's connection (SCM_RIGHTS): the worker was
 * forked before the name may have had its fake address, so it learns both from here. */
typedef struct handoff {
    uint32_t slot; /* the fake address's index */
    uint16_t port;
    char name[SNIFF_NAME_MAX + 1];
} handoff;

typedef struct fake {
    char name[SNIFF_NAME_MAX + 1]; /* "" = free */
    uint16_t ports[FAKE_PORTS];
    int listen_fd[FAKE_PORTS];
    size_t nports;
    int64_t used_ms;
} fake;

struct egress_engine {
    Slirp *slirp;
    allowlist allow;
    netpolicy *frames; /* what frames may reach slirp beyond DNS and the fake addresses */
    netpolicy *rebind; /* what a name may resolve into */
    egress_send_fn *send;
    void *opaque;
    fake fakes[FAKE_N];
    int log_fd;
    shared_state *shared; /* with the children */
    int pool_fd;          /* the hand-off socket to the pool's workers; -1: no pool yet */
    pid_t pool_pid;
    const char *sandbox;
    const secrets *secrets; /* vmm/main.c's; NULL or empty: no broker, no leak scan */
    bool weaken_dns, weaken_sni;
    size_t pv_start, pv_n; /* the listeners' slots in this round's poll set */
};

typedef struct logrec {
    const char *kind, *name, *decision, *rule, *reason, *seen, *addr;
    int port;      /* -1: none */
    bool stats;    /* bytes and duration present */
    bool brokered; /* relayed by the secrets broker: its counters present */
    relay_stats st;
    int64_t ms;
} logrec;

/* The connection log (egress_log.c). */
void elog(egress_engine *e, const logrec *r);
void log_unwritten(egress_engine *e);
void json_str(char *buf, size_t cap, size_t *off, const char *key, const char *v);

/* The proxy pool (egress_proxy.c). */
int pool_spawn(egress_engine *e);
void pool_gone(egress_engine *e);
int pool_send(egress_engine *e, const fake *f, uint16_t port, int g);
