/* The host side of the agent protocol: connect, say hello, check the kernel the agent
 * reports, and relay one command's stdio. Everything the agent sends is decoded as hostile
 * input (it comes from the guest). */
#pragma once

#include <stdbool.h>

#include "abi/msg.h"
#include "abi/proto.h"
#include "util/err.h"

typedef struct agent_conn {
    int fd;
    frame_decoder dec;
    int handshake_ms; /* how long the agent may take to answer the hello */
} agent_conn;

void agent_conn_close(agent_conn *c);
static inline void agent_conn_closep(agent_conn *c)
{
    agent_conn_close(c);
}
#define _cleanup_agent_conn_ _cleanup_(agent_conn_closep)

/* agent_connect and agent_handshake, tried again (a few times, backing off) when the
 * agent dropped the connection before its ready frame: nothing ran then. */
int agent_open(const char *addr, const char *token, const agent_hello *h, agent_conn *c,
               char **ret_kernel, bb_error **err);
/* Hello with an empty argv, and the exit frame that answers it, within timeout_ms. */
int agent_ping(const char *addr, const char *token, int timeout_ms, char **ret_kernel,
               bb_error **err);

typedef struct agent_io {
    bool forward_stdin;  /* stdin to the command; otherwise it sees EOF at once */
    bool tty;            /* the hello asked for a pty: raw local terminal, window sizes */
    struct runlog *log;  /* NULL, or where output is copied (runlog_write) */
    int timeout_seconds; /* the agent's timeout; 0: none. We wait that long plus a grace */
} agent_io;

/* After a successful hello: send go, relay stdio (Ctrl-C and friends go to the remote
 * group), until the exit frame. Fails when the connection is lost before it, when the
 * agent stays silent past timeout_seconds plus a grace (ETIMEDOUT), or on a second
 * interrupting signal (EINTR, exit code 128+n): a guest that never sends the exit frame
 * must not hold the client. */
int agent_session(agent_conn *c, const agent_io *io, agent_exit *ret, bb_error **err);
