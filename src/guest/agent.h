/* The in-guest agent: a long-lived sandbox's main process. It listens on TCP ABI_AGENT_PORT
 * and runs commands for whoever proves, from the per-VM token, a value of the hash chain
 * whose head it was given (chain.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"
#include "util/sha256.h"

typedef struct agent_config {
    uint8_t head[SHA256_LEN]; /* head_0 of the chain: it cannot authenticate anyone */
    char *const *env;         /* every command's base environment (the image's), NULL-terminated */
    const char *dir;          /* working directory when the request names none */
    int listen_fd;            /* > 0: serve this bound TCP socket instead of ABI_AGENT_PORT */
    bool set_ids;             /* run commands as uid/gid/groups (the guest init is root) */
    uid_t uid;
    gid_t gid;
    const gid_t *groups;
    size_t n_groups;
} agent_config;

/* Serve forever. Returns only when the agent cannot work at all (no socket). */
int agent_serve(const agent_config *c, bb_error **err);

/* `bluebox __agent`: the agent as the guest's command (krun: libkrun's init starts it). */
int agent_main(int argc, char **argv);
