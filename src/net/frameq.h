/* Frames for the guest that its link could not take yet. UML's end of the vector link is a
 * SOCK_SEQPACKET socket whose send buffer holds only a few large frames; dropping the rest
 * (what a full NIC ring does) costs the guest's TCP a retransmission timeout each time, which
 * stalled connections for seconds when many opened at once. So frames wait here, in order,
 * until the socket is writable, up to a cap past which they are dropped after all.
 * On a stream link (netstream.h) a socket may take part of one: the rest of it stays at the
 * head and goes first, so the stream never loses its framing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct frameq_item frameq_item;

typedef struct frameq {
    frameq_item *head, *tail;
    size_t bytes;
    size_t head_sent; /* of the head, what a stream socket took already */
} frameq;

/* Queue a copy of one frame; false (nothing queued) when that would pass cap bytes. */
bool frameq_push(frameq *q, const void *frame, size_t len, size_t cap);
/* Queue a copy of a and b as one item, of which the first `sent` bytes left already (a stream
 * socket took part of it: only into an empty queue, and then whatever the cap, since the
 * rest must follow). Else false as frameq_push. */
bool frameq_push2(frameq *q, const void *a, size_t alen, const void *b, size_t blen, size_t sent,
                  size_t cap);
/* Send queued frames to fd in order until it would block. -1 when fd failed (the queue is
 * then cleared: the link is gone). */
int frameq_flush(frameq *q, int fd);
static inline bool frameq_empty(const frameq *q)
{
    return !q->head;
}
void frameq_clear(frameq *q);
