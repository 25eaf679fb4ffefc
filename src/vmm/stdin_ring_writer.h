/* A uml run's stdin on its way in through the ring (abi/abi.h, ABI_STDIN_RING): bluebox-vmm's
 * half. The guest is not trusted: what it gives back is checked against what is out. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/strv.h"

/* At most this many chunks out at once, however small. Each is a 13-byte frame on the control
 * line, and the guest stops reading that line while its command is behind (guest/init.c,
 * STDIN_HIGH): 128 of them stay far below the 4 KiB a guest tty holds before it throttles
 * the line. UML's serial line, once throttled, can stop reading its host socket for good
 * (seen under load: the run then waits forever), so it must never get there. */
#define STDIN_RING_FRAMES 128u

typedef struct stdin_ring {
    int fd;           /* the ring file; -1 when there is none */
    bool usable;      /* the guest said it reads the ring (its ready frame) */
    uint64_t written; /* ring bytes handed out, each chunk rounded up to the alignment */
    uint64_t acked;   /* ring bytes the guest has given back */
    unsigned out;     /* chunks handed out and not given back */
    bool warned;      /* a bad acknowledgement was reported */
} stdin_ring;

/* Create the ring file (before boot, so that the guest cannot have put anything in its
 * place). Returns false when it cannot: stdin then goes over the control line. */
bool stdin_ring_open(stdin_ring *r);
/* The kernel argument that gives the ring to the guest, when there is one. */
void stdin_ring_kernel_args(const stdin_ring *r, strv *a);
/* How many bytes the next chunk may hold (0: the ring is full, STDIN_RING_FRAMES chunks are
 * out, or it is not in use). */
size_t stdin_ring_room(const stdin_ring *r);
/* Write a chunk of n <= stdin_ring_room() bytes into the ring and fill the FRAME_RING
 * payload that tells the guest where it is. Returns false when the write failed (nothing
 * was handed out; send the bytes over the line instead). */
bool stdin_ring_put(stdin_ring *r, const void *data, size_t n, uint8_t ret_frame[8]);
/* A FRAME_RING_ACK payload (one per chunk). Returns false for one that gives back more than
 * is out. */
bool stdin_ring_ack(stdin_ring *r, const uint8_t *data, size_t n);
void stdin_ring_close(stdin_ring *r);
