/* A queue of frames waiting for the guest's link (frameq.h). */
#include "net/frameq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/xalloc.h"

struct frameq_item {
    frameq_item *next;
    size_t len;
    unsigned char data[];
};

bool frameq_push2(frameq *q, const void *a, size_t alen, const void *b, size_t blen, size_t sent,
                  size_t cap)
{
    size_t len = alen + blen;
    if ((!sent && q->bytes + len > cap) || sent > len || (sent && q->head))
        return false;
    frameq_item *it = xmalloc(sizeof *it + len);
    it->next = NULL;
    it->len = len;
    if (alen)
        memcpy(it->data, a, alen);
    if (blen)
        memcpy(it->data + alen, b, blen);
    if (!q->head)
        q->head_sent = sent;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->bytes += len;
    return true;
}

bool frameq_push(frameq *q, const void *frame, size_t len, size_t cap)
{
    return frameq_push2(q, frame, len, NULL, 0, 0, cap);
}

static void pop(frameq *q)
{
    frameq_item *it = q->head;
    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= it->len;
    q->head_sent = 0;
    free(it);
}

int frameq_flush(frameq *q, int fd)
{
    while (q->head) {
        size_t left = q->head->len - q->head_sent;
        ssize_t w = send(fd, q->head->data + q->head_sent, left, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w < 0) {
            frameq_clear(q);
            return -1;
        }
        if ((size_t)w < left) { /* a stream took part: its buffer is full */
            q->head_sent += (size_t)w;
            return 0;
        }
        pop(q);
    }
    return 0;
}

void frameq_clear(frameq *q)
{
    while (q->head)
        pop(q);
}
