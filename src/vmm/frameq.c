/* A queue of frames waiting for the guest's link (frameq.h). */
#include "frameq.h"

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

bool frameq_push(frameq *q, const void *frame, size_t len, size_t cap)
{
    if (q->bytes + len > cap)
        return false;
    frameq_item *it = xmalloc(sizeof *it + len);
    it->next = NULL;
    it->len = len;
    memcpy(it->data, frame, len);
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->bytes += len;
    return true;
}

static void pop(frameq *q)
{
    frameq_item *it = q->head;
    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= it->len;
    free(it);
}

int frameq_flush(frameq *q, int fd)
{
    while (q->head) {
        ssize_t w = send(fd, q->head->data, q->head->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w < 0) {
            frameq_clear(q);
            return -1;
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
