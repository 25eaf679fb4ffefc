/* Unit tests for the frames that wait for the guest's link (net/frameq.h): over a real
 * SOCK_SEQPACKET pair whose buffer fills, frames leave whole and in order once the reader
 * drains, the cap refuses what would pass it, and a dead peer clears the queue. */
#include "unit.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/frameq.h"

#define FRAME 9014

static void fill(unsigned char *b, unsigned seq)
{
    memset(b, (int)(seq & 0xff), FRAME);
    memcpy(b, &seq, sizeof seq);
}

static void frames_wait_and_leave_in_order(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    int small = 32768;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    frameq q = {0};
    unsigned char b[FRAME];
    unsigned sent = 0, queued = 0;
    /* What the socket takes goes now; the rest waits, as slirp.c does it. */
    for (unsigned i = 0; i < 200; i++) {
        fill(b, i);
        if (frameq_empty(&q) && send(sv[0], b, FRAME, MSG_DONTWAIT) == FRAME) {
            sent++;
            continue;
        }
        assert_true(frameq_push(&q, b, FRAME, 8u << 20));
        queued++;
    }
    assert_true(queued > 0 && sent > 0);
    assert_int_equal(q.bytes, (size_t)queued * FRAME);
    unsigned next = 0;
    while (next < 200) {
        assert_int_equal(frameq_flush(&q, sv[0]), 0);
        ssize_t r = recv(sv[1], b, sizeof b, MSG_DONTWAIT);
        if (r < 0 && errno == EAGAIN)
            continue;
        assert_int_equal(r, FRAME);
        unsigned seq;
        memcpy(&seq, b, sizeof seq);
        assert_int_equal(seq, next);
        assert_int_equal(b[FRAME - 1], next & 0xff);
        next++;
    }
    assert_true(frameq_empty(&q));
    assert_int_equal(q.bytes, 0);
    close(sv[0]);
    close(sv[1]);
}

static void the_cap_refuses_and_a_dead_link_clears(void **state)
{
    (void)state;
    frameq q = {0};
    unsigned char b[FRAME] = {0};
    assert_true(frameq_push(&q, b, FRAME, 2 * FRAME));
    assert_true(frameq_push(&q, b, FRAME, 2 * FRAME));
    assert_false(frameq_push(&q, b, 1, 2 * FRAME));
    assert_int_equal(q.bytes, 2 * FRAME);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    close(sv[1]);
    assert_int_equal(frameq_flush(&q, sv[0]), -1);
    assert_true(frameq_empty(&q));
    assert_int_equal(q.bytes, 0);
    close(sv[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_wait_and_leave_in_order),
        cmocka_unit_test(the_cap_refuses_and_a_dead_link_clears),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
