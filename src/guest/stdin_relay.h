/* A command's stdin, fed from frames: what the peer sent, queued until the command's
 * (non-blocking) stdin takes it, then the peer's EOF. Shared by the agent (one per session)
 * and the uml guest init (its one command). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct stdin_relay {
    int fd;   /* our end of the command's stdin; -1 once closed */
    bool pty; /* fd is a terminal's master: EOF is typed (^D), fd stays open */
    bool eof; /* the peer's EOF: passed on once the queue is written */
    uint8_t *buf;
    size_t len, off, cap;
} stdin_relay;

/* Start relaying to fd (made non-blocking by the caller). */
void stdin_relay_init(stdin_relay *r, int fd, bool pty);
/* Queue bytes from the peer; dropped after the peer's EOF or once stdin is closed. */
void stdin_relay_add(stdin_relay *r, const void *data, size_t n);
/* The peer's EOF: stdin is closed (a terminal gets ^D) once the queue is written. */
void stdin_relay_eof(stdin_relay *r);
/* Write what the command takes without blocking. A command that stopped reading (EPIPE)
 * loses the rest of the queue. */
void stdin_relay_push(stdin_relay *r);
/* Bytes queued and not yet written (for back-pressure on the peer). */
size_t stdin_relay_queued(const stdin_relay *r);
/* Whether there is something to write: poll fd for POLLOUT. */
bool stdin_relay_wants_write(const stdin_relay *r);
/* Close fd (when open) and free the queue. */
void stdin_relay_done(stdin_relay *r);
