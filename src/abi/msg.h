/* The JSON payloads of agent frames (proto.h), with strict shapes: unknown fields
 * are ignored, a known field of the wrong type is refused. Both sides parse what the other
 * sent: the agent parses the host's hello, the host parses the guest's ready and exit. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "abi.h"
#include "util/err.h"
#include "util/strv.h"

typedef struct agent_hello {
    char *proof;     /* hex: the chain value of the index the challenge named (chain.h) */
    char *next_head; /* hex, or NULL: the next epoch's head, when the challenge asked */
    strv argv;       /* empty: a ping */
    strv env;        /* "NAME=value", added to the image's environment */
    char *dir;       /* NULL: the agent's default (/data) */
    int timeout_seconds;
    bool tty;
    unsigned rows, cols;
} agent_hello;

char *hello_encode(const agent_hello *h, size_t *ret_len);
/* Parse a hello. The proof is filled in first, and kept even when a later field is refused,
 * so that the agent answers an authenticated peer's mistake and stays silent to anyone else. */
int hello_decode(const char *data, size_t len, agent_hello *ret, bb_error **err);
void hello_clear(agent_hello *h);

/* C: the agent's first words on a connection: which chain value proves the peer. */
typedef struct agent_challenge {
    uint32_t epoch;
    uint32_t index; /* 1 .. CHAIN_LEN-1 */
    bool rotate;    /* send the next epoch's head with the hello */
} agent_challenge;

char *challenge_encode(const agent_challenge *c, size_t *ret_len);
int challenge_decode(const char *data, size_t len, agent_challenge *ret, bb_error **err);

typedef struct agent_exit {
    int code; /* 0-255 */
    bool timed_out;
    char *err; /* NULL when the command ran */
} agent_exit;

char *exit_encode(const agent_exit *x, size_t *ret_len);
int exit_decode(const char *data, size_t len, agent_exit *ret, bb_error **err);

char *ready_encode(const char *kernel, size_t *ret_len);
/* The kernel release a ready frame reports: printable, at most 64 bytes. */
int ready_decode(const char *data, size_t len, char **ret_kernel, bb_error **err);

/* W: {rows, cols}; K: {signal}. */
char *winsize_encode(unsigned rows, unsigned cols, size_t *ret_len);
int winsize_decode(const char *data, size_t len, unsigned *rows, unsigned *cols, bb_error **err);
char *signal_encode(int sig, size_t *ret_len);
/* Only the signals a user sends from a terminal (INT, QUIT, TERM, HUP) are accepted. */
int signal_decode(const char *data, size_t len, int *ret_sig, bb_error **err);
