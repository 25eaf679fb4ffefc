/* Agent frame codec: encoder, incremental decoder and blocking one-frame reader. The
 * decoder's input comes from a guest we do not trust, so every length is checked before it
 * is used and memory grows only with bytes that actually arrived. */
#include "proto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/xalloc.h"

/* First payload allocation; later ones double, capped at the declared length. */
#define FRAME_BUF_MIN ((size_t)4096)
/* A buffer bigger than this left over from an earlier frame is released at the next frame,
 * so one large frame does not pin a megabyte for the connection's lifetime. */
#define FRAME_BUF_KEEP ((size_t)65536)

bool frame_type_valid(uint8_t type)
{
    switch (type) {
    case FRAME_CHALLENGE:
    case FRAME_HELLO:
    case FRAME_READY:
    case FRAME_GO:
    case FRAME_STDIN:
    case FRAME_STDIN_EOF:
    case FRAME_STDOUT:
    case FRAME_STDERR:
    case FRAME_WINSIZE:
    case FRAME_EXIT:
    case FRAME_SIGNAL:
    case FRAME_RING:
    case FRAME_RING_ACK:
        return true;
    default:
        return false;
    }
}

void frame_header(uint8_t hdr[FRAME_HEADER], uint8_t type, uint32_t len)
{
    hdr[0] = type;
    hdr[1] = (uint8_t)(len >> 24);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 8);
    hdr[4] = (uint8_t)len;
}

void payload_write(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, -1);
            continue;
        }
        if (w <= 0)
            return;
        p += w;
        len -= (size_t)w;
    }
}

int frame_write(int fd, uint8_t type, const void *data, size_t len, bb_error **err)
{
    if (len > FRAME_MAX)
        return bb_fail(err, EMSGSIZE, "agent frame of %zu bytes is larger than the %u byte limit",
                       len, FRAME_MAX);
    uint8_t hdr[FRAME_HEADER];
    frame_header(hdr, type, (uint32_t)len);
    struct iovec iov[2] = {
        {.iov_base = hdr, .iov_len = sizeof hdr},
        {.iov_base = (void *)data, .iov_len = len},
    };
    struct iovec *v = iov;
    int cnt = len ? 2 : 1;
    while (cnt > 0) {
        ssize_t n = writev(fd, v, cnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "cannot write agent frame");
        }
        size_t done = (size_t)n;
        while (cnt > 0 && done >= v->iov_len) {
            done -= v->iov_len;
            v++;
            cnt--;
        }
        if (cnt > 0) {
            v->iov_base = (uint8_t *)v->iov_base + done;
            v->iov_len -= done;
        }
    }
    return 0;
}

void frame_append(uint8_t **buf, size_t *len, size_t *cap, uint8_t type, const void *data, size_t n)
{
    /* A caller passing more than FRAME_MAX is a programming error, not input. */
    if (n > FRAME_MAX)
        abort();
    size_t need = *len + FRAME_HEADER + n;
    if (need > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < need)
            c *= 2;
        *buf = xrealloc(*buf, c);
        *cap = c;
    }
    frame_header(*buf + *len, type, (uint32_t)n);
    if (n)
        memcpy(*buf + *len + FRAME_HEADER, data, n);
    *len = need;
}

void frame_decoder_init(frame_decoder *d)
{
    *d = (frame_decoder){0};
}

void frame_decoder_done(frame_decoder *d)
{
    free(d->buf);
    *d = (frame_decoder){0};
}

/* The header is complete: check it and get ready for the payload. */
static int begin_payload(frame_decoder *d, bb_error **err)
{
    if (!frame_type_valid(d->hdr[0])) {
        d->failed = true;
        return bb_fail(err, EPROTO, "agent protocol error: unknown frame type 0x%02x", d->hdr[0]);
    }
    uint32_t len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
                   (uint32_t)d->hdr[3] << 8 | (uint32_t)d->hdr[4];
    if (len > FRAME_MAX) {
        d->failed = true;
        return bb_fail(err, EPROTO,
                       "agent protocol error: frame of %u bytes exceeds the 1 MiB limit", len);
    }
    if (d->cap > FRAME_BUF_KEEP) {
        free(d->buf);
        d->buf = NULL;
        d->cap = 0;
    }
    d->want = len;
    d->have = 0;
    d->in_payload = true;
    return 0;
}

/* Make room for `need` bytes (payload so far plus a terminating NUL), never more than the
 * declared length plus one. */
static void ensure_cap(frame_decoder *d, size_t need)
{
    if (need <= d->cap)
        return;
    size_t c = d->cap > FRAME_BUF_MIN ? d->cap : FRAME_BUF_MIN;
    while (c < need)
        c *= 2;
    if (c > (size_t)d->want + 1)
        c = (size_t)d->want + 1;
    d->buf = xrealloc(d->buf, c);
    d->cap = c;
}

static void finish(frame_decoder *d, frame *out)
{
    ensure_cap(d, d->have + 1);
    d->buf[d->have] = 0;
    out->type = d->hdr[0];
    out->len = d->want;
    out->data = d->buf;
    d->in_payload = false;
    d->hdr_have = 0;
}

int frame_decoder_feed(frame_decoder *d, const uint8_t *in, size_t n, size_t *consumed, frame *out,
                       bb_error **err)
{
    size_t used = 0;
    if (consumed)
        *consumed = 0;
    if (d->failed)
        return bb_fail(err, EPROTO, "agent protocol error: stream already failed");
    while (used < n || (d->in_payload && d->have == d->want)) {
        if (!d->in_payload) {
            size_t take = FRAME_HEADER - d->hdr_have;
            if (take > n - used)
                take = n - used;
            memcpy(d->hdr + d->hdr_have, in + used, take);
            d->hdr_have += take;
            used += take;
            if (d->hdr_have < FRAME_HEADER)
                break;
            if (begin_payload(d, err) < 0) {
                if (consumed)
                    *consumed = used;
                return -1;
            }
            continue;
        }
        size_t take = d->want - d->have;
        if (take > n - used)
            take = n - used;
        if (take) {
            ensure_cap(d, d->have + take + 1);
            memcpy(d->buf + d->have, in + used, take);
            d->have += take;
            used += take;
        }
        if (d->have == d->want) {
            finish(d, out);
            if (consumed)
                *consumed = used;
            return 1;
        }
    }
    if (consumed)
        *consumed = used;
    return 0;
}

int frame_read(int fd, frame_decoder *d, frame *out, bb_error **err)
{
    uint8_t chunk[16384];
    for (;;) {
        if (d->failed)
            return bb_fail(err, EPROTO, "agent protocol error: stream already failed");
        /* Ask for no more than the current frame still needs, so the bytes after it stay in
         * the fd for the next reader. */
        size_t want = d->in_payload ? d->want - d->have : FRAME_HEADER - d->hdr_have;
        if (want > sizeof chunk)
            want = sizeof chunk;
        ssize_t r = 0;
        if (want > 0) {
            r = read(fd, chunk, want);
            if (r < 0) {
                if (errno == EINTR)
                    continue;
                return bb_fail_errno(err, errno, "cannot read agent frame");
            }
            if (r == 0) {
                if (!d->in_payload && d->hdr_have == 0)
                    return 0;
                d->failed = true;
                return bb_fail(err, EPROTO, "agent protocol error: truncated frame");
            }
        }
        size_t used = 0;
        int k = frame_decoder_feed(d, chunk, (size_t)r, &used, out, err);
        if (k != 0)
            return k;
    }
}
