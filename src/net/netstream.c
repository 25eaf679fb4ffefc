/* Ethernet frames over a stream socket, length-prefixed (netstream.h). */
#include "net/netstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "util/xalloc.h"

void netstream_rx_init(netstream_rx *rx, size_t max)
{
    *rx = (netstream_rx){.buf = xmalloc(NETSTREAM_HDR + max), .max = max};
}

void netstream_rx_free(netstream_rx *rx)
{
    free(rx->buf);
    *rx = (netstream_rx){0};
}

uint8_t *netstream_rx_space(netstream_rx *rx, size_t *room)
{
    /* What stays after a commit is less than one frame of at most max: room is never 0. */
    *room = NETSTREAM_HDR + rx->max - rx->len;
    return rx->buf + rx->len;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int netstream_rx_commit(netstream_rx *rx, size_t n, netstream_frame_fn *fn, void *opaque)
{
    rx->len += n;
    size_t off = 0;
    while (rx->len - off >= NETSTREAM_HDR) {
        uint32_t flen = be32(rx->buf + off);
        if (flen > rx->max) {
            rx->len = 0;
            return -1;
        }
        if (rx->len - off - NETSTREAM_HDR < flen)
            break;
        if (flen)
            fn(rx->buf + off + NETSTREAM_HDR, flen, opaque);
        off += NETSTREAM_HDR + flen;
    }
    if (off) {
        memmove(rx->buf, rx->buf + off, rx->len - off);
        rx->len -= off;
    }
    return 0;
}

int netstream_rx_feed(netstream_rx *rx, const uint8_t *data, size_t len, netstream_frame_fn *fn,
                      void *opaque)
{
    while (len) {
        size_t room;
        uint8_t *p = netstream_rx_space(rx, &room);
        size_t k = len < room ? len : room;
        memcpy(p, data, k);
        if (netstream_rx_commit(rx, k, fn, opaque) < 0)
            return -1;
        data += k;
        len -= k;
    }
    return 0;
}

int netstream_send(int fd, frameq *q, const void *frame, size_t len, size_t cap)
{
    uint8_t hdr[NETSTREAM_HDR] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                                  (uint8_t)len};
    if (!frameq_empty(q)) /* never ahead of what waits */
        return frameq_push2(q, hdr, sizeof hdr, frame, len, 0, cap) ? 1 : 0;
    struct iovec iov[2] = {{hdr, sizeof hdr}, {(void *)frame, len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t w;
    do
        w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0 && errno != EAGAIN)
        return -1;
    size_t sent = w < 0 ? 0 : (size_t)w;
    if (sent == sizeof hdr + len)
        return 1;
    /* With part of it gone, the rest must follow (frameq_push2 takes it whatever the cap), or
     * the stream loses its framing. */
    return frameq_push2(q, hdr, sizeof hdr, frame, len, sent, cap) ? 1 : 0;
}
