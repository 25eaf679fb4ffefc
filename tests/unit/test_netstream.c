/* Unit tests for the stream link's framing (net/netstream.h), QEMU's and passt's 4-byte
 * big-endian length before each frame: frames come out whole and in order however the bytes
 * arrive (split anywhere, several in one read), empty ones are skipped, a frame of exactly the
 * bound passes and a length past it cuts the link without growing anything; over a real
 * socketpair whose buffer fills, a frame the socket took part of is finished first, so the
 * reader never loses the framing. */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/macro.h"
#include "net/netstream.h"

#define MAX 65536

typedef struct seen {
    size_t n;
    size_t lens[64];
    uint32_t seqs[64];
} seen;

static void on_frame(const uint8_t *f, size_t len, void *opaque)
{
    seen *s = opaque;
    assert_true(s->n < ELEMENTSOF(s->lens));
    s->lens[s->n] = len;
    uint32_t seq = 0;
    if (len >= sizeof seq)
        memcpy(&seq, f, sizeof seq);
    for (size_t i = sizeof seq; i < len; i++) /* the body is the sequence's low byte */
        assert_int_equal(f[i], seq & 0xff);
    s->seqs[s->n++] = seq;
}

/* Appends one framed frame of len bytes, numbered seq, to buf at *off. */
static void put(uint8_t *buf, size_t *off, uint32_t seq, size_t len)
{
    uint8_t *p = buf + *off;
    p[0] = (uint8_t)(len >> 24), p[1] = (uint8_t)(len >> 16), p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
    memset(p + 4, (int)(seq & 0xff), len);
    if (len >= sizeof seq)
        memcpy(p + 4, &seq, sizeof seq);
    *off += 4 + len;
}

static void frames_whole_however_split(void **state)
{
    (void)state;
    static const size_t lens[] = {60, 1514, 0, 9014, 4, MAX, 98};
    size_t total = 0;
    for (size_t i = 0; i < ELEMENTSOF(lens); i++)
        total += 4 + lens[i];
    uint8_t *stream = malloc(total);
    size_t off = 0;
    for (size_t i = 0; i < ELEMENTSOF(lens); i++)
        put(stream, &off, (uint32_t)i, lens[i]);
    /* in chunks of 1 byte, 3 bytes, ..., and all at once */
    static const size_t chunks[] = {1, 3, 4, 5, 1000, 70000, 0};
    for (size_t c = 0; c < ELEMENTSOF(chunks); c++) {
        size_t step = chunks[c] ? chunks[c] : total;
        netstream_rx rx;
        netstream_rx_init(&rx, MAX);
        seen s = {0};
        for (size_t at = 0; at < total; at += step)
            assert_int_equal(netstream_rx_feed(&rx, stream + at,
                                               step < total - at ? step : total - at, on_frame, &s),
                             0);
        assert_int_equal(s.n, ELEMENTSOF(lens) - 1); /* the empty one is skipped */
        for (size_t i = 0, k = 0; i < ELEMENTSOF(lens); i++) {
            if (!lens[i])
                continue;
            assert_int_equal(s.lens[k], lens[i]);
            assert_int_equal(s.seqs[k], i);
            k++;
        }
        assert_int_equal(rx.len, 0);
        netstream_rx_free(&rx);
    }
    free(stream);
}

static void a_partial_frame_waits(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t off = 0;
    put(buf, &off, 7, 40);
    netstream_rx rx;
    netstream_rx_init(&rx, MAX);
    seen s = {0};
    assert_int_equal(netstream_rx_feed(&rx, buf, 2, on_frame, &s), 0); /* half a length */
    assert_int_equal(netstream_rx_feed(&rx, buf + 2, 20, on_frame, &s), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(rx.len, 22);
    assert_int_equal(netstream_rx_feed(&rx, buf + 22, off - 22, on_frame, &s), 0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.lens[0], 40);
    assert_int_equal(s.seqs[0], 7);
    netstream_rx_free(&rx);
}

/* A hostile length (past the bound, up to 4 GiB) is refused at its header: nothing is
 * allocated by it, nothing is delivered, and the buffer stays the bound's size. */
static void a_huge_length_cuts_the_link(void **state)
{
    (void)state;
    static const uint32_t bad[] = {MAX + 1, 0x7fffffff, 0xffffffff};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        uint8_t buf[128];
        size_t off = 0;
        put(buf, &off, 1, 20); /* a good frame first: delivered */
        buf[off] = (uint8_t)(bad[i] >> 24), buf[off + 1] = (uint8_t)(bad[i] >> 16);
        buf[off + 2] = (uint8_t)(bad[i] >> 8), buf[off + 3] = (uint8_t)bad[i];
        memset(buf + off + 4, 0, 20);
        netstream_rx rx;
        netstream_rx_init(&rx, MAX);
        seen s = {0};
        assert_int_equal(netstream_rx_feed(&rx, buf, off + 24, on_frame, &s), -1);
        assert_int_equal(s.n, 1);
        assert_int_equal(rx.len, 0);
        size_t room;
        netstream_rx_space(&rx, &room);
        assert_int_equal(room, 4 + MAX);
        netstream_rx_free(&rx);
    }
}

/* The sender over a socketpair whose buffer is small: what the socket does not take waits,
 * a frame cut in the middle is finished before the next, and the reader sees every frame
 * whole and in order. */
static void sends_keep_the_framing(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 8192;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    frameq q = {0};
    uint8_t *frame = malloc(9014);
    enum { N = 60 };
    bool cut = false;
    for (uint32_t i = 0; i < N; i++) {
        size_t len = i % 3 == 0 ? 9014 : 60 + i;
        memset(frame, (int)(i & 0xff), len);
        memcpy(frame, &i, sizeof i);
        assert_int_equal(netstream_send(sv[0], &q, frame, len, 8u << 20), 1);
        cut = cut || q.head_sent > 0;
    }
    assert_true(cut); /* the socket did take part of one */
    assert_false(frameq_empty(&q));
    netstream_rx rx;
    netstream_rx_init(&rx, MAX);
    seen s = {0};
    while (s.n < N) {
        assert_int_equal(frameq_flush(&q, sv[0]), 0);
        size_t room;
        uint8_t *p = netstream_rx_space(&rx, &room);
        ssize_t r = recv(sv[1], p, room, MSG_DONTWAIT);
        if (r < 0 && errno == EAGAIN)
            continue;
        assert_true(r > 0);
        assert_int_equal(netstream_rx_commit(&rx, (size_t)r, on_frame, &s), 0);
    }
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(s.seqs[i], i);
        assert_int_equal(s.lens[i], i % 3 == 0 ? 9014 : 60 + i);
    }
    assert_true(frameq_empty(&q));
    /* the cap: a full queue drops whole frames, never part of one */
    frameq full = {0};
    assert_true(frameq_push(&full, frame, 100, 200));
    assert_int_equal(netstream_send(sv[0], &full, frame, 100, 200), 0);
    assert_int_equal(full.bytes, 100);
    frameq_clear(&full);
    /* a dead peer is a failed link */
    close(sv[1]);
    assert_int_equal(netstream_send(sv[0], &q, frame, 60, 8u << 20), -1);
    close(sv[0]);
    netstream_rx_free(&rx);
    free(frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_whole_however_split),
        cmocka_unit_test(a_partial_frame_waits),
        cmocka_unit_test(a_huge_length_cuts_the_link),
        cmocka_unit_test(sends_keep_the_framing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
