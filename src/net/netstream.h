/* A network link over a SOCK_STREAM socket: each ethernet frame is a 4-byte big-endian length
 * and the frame. This is QEMU's stream (and older socket) netdev, passt's, and libkrun's
 * krun_add_net_unixstream; bluebox-vmm's libslirp serves the qemu backend's guest through it
 * (slirp.c), as it serves UML's vector device through a SOCK_SEQPACKET socket.
 *
 * The far end is the guest's VMM, which the guest drives: a length above the reader's bound
 * is no frame at all, and the link is to be dropped (the reader never allocates by a length
 * it was sent); a partial frame waits in the reader's one fixed buffer for its rest. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/frameq.h"

#define NETSTREAM_HDR 4 /* the length before each frame */

typedef struct netstream_rx {
    uint8_t *buf; /* NETSTREAM_HDR + max bytes */
    size_t len;   /* what it holds: the start of a frame not yet whole */
    size_t max;   /* the largest frame taken */
} netstream_rx;

typedef void netstream_frame_fn(const uint8_t *frame, size_t len, void *opaque);

void netstream_rx_init(netstream_rx *rx, size_t max);
void netstream_rx_free(netstream_rx *rx);
/* Forget a partial frame (a new link). */
static inline void netstream_rx_reset(netstream_rx *rx)
{
    rx->len = 0;
}
/* Where the next read goes, and *room bytes fit there (never 0). */
uint8_t *netstream_rx_space(netstream_rx *rx, size_t *room);
/* n bytes were read into the space: fn gets each whole frame (empty ones are skipped), a
 * partial one stays. -1 when a length passes max: the stream is not ours to follow, drop the
 * link. */
int netstream_rx_commit(netstream_rx *rx, size_t n, netstream_frame_fn *fn, void *opaque);
/* The same for bytes from elsewhere (tests, fuzzing): copied in through the space. */
int netstream_rx_feed(netstream_rx *rx, const uint8_t *data, size_t len, netstream_frame_fn *fn,
                      void *opaque);

/* Send one frame on the stream fd, or queue what the socket did not take behind what waits
 * (frameq.h, at most cap bytes). 1: sent or queued; 0: dropped, the queue being full; -1: the
 * socket failed (the link is gone). */
int netstream_send(int fd, frameq *q, const void *frame, size_t len, size_t cap);
