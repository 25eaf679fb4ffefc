/* Unit tests for the stdin relay the agent and the guest init share (src/guest/stdin_relay.c):
 * bytes queued until the command's stdin takes them, EOF passed on only after them, input
 * after EOF dropped, a command that stopped reading, and a terminal's typed EOF. */
#include "unit.h"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/stdin_relay.h"

static void nonblocking_pipe(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
}

static size_t drain(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    ssize_t n;
    while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
        got += (size_t)n;
    return got;
}

static void relays_then_closes(void **state)
{
    int p[2];
    nonblocking_pipe(p);
    stdin_relay r;
    stdin_relay_init(&r, p[1], false);
    stdin_relay_add(&r, "hello ", 6);
    stdin_relay_add(&r, "world", 5);
    assert_int_equal(stdin_relay_queued(&r), 11);
    assert_true(stdin_relay_wants_write(&r));
    stdin_relay_eof(&r);
    assert_int_equal(r.fd, -1); /* written, then closed */
    assert_int_equal(stdin_relay_queued(&r), 0);
    stdin_relay_add(&r, "late", 4); /* after EOF: dropped */
    assert_int_equal(stdin_relay_queued(&r), 0);
    char buf[64];
    size_t n = drain(p[0], buf, sizeof buf);
    assert_int_equal(n, 11);
    assert_memory_equal(buf, "hello world", 11);
    assert_int_equal(read(p[0], buf, sizeof buf), 0); /* EOF */
    stdin_relay_done(&r);
    close(p[0]);
}

static void back_pressure(void **state)
{
    int p[2];
    nonblocking_pipe(p);
    stdin_relay r;
    stdin_relay_init(&r, p[1], false);
    size_t big = (size_t)4 << 20; /* more than a pipe holds */
    char *data = calloc(1, big);
    assert_non_null(data);
    stdin_relay_add(&r, data, big);
    stdin_relay_push(&r);
    size_t left = stdin_relay_queued(&r);
    assert_true(left > 0 && left < big);
    stdin_relay_eof(&r);
    assert_true(r.fd >= 0); /* EOF waits for the queue */
    char *buf = malloc(big);
    assert_non_null(buf);
    size_t got = 0;
    while (r.fd >= 0) {
        got += drain(p[0], buf + got, big - got);
        stdin_relay_push(&r);
    }
    got += drain(p[0], buf + got, big - got);
    assert_int_equal(got, big);
    free(buf);
    free(data);
    stdin_relay_done(&r);
    close(p[0]);
}

static void reader_gone(void **state)
{
    int p[2];
    nonblocking_pipe(p);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    stdin_relay r;
    stdin_relay_init(&r, p[1], false);
    stdin_relay_add(&r, "lost", 4);
    stdin_relay_push(&r); /* EPIPE: the rest is dropped, not retried */
    assert_int_equal(stdin_relay_queued(&r), 0);
    assert_false(stdin_relay_wants_write(&r));
    stdin_relay_done(&r);
    assert_int_equal(r.fd, -1);
}

static void terminal_gets_ctrl_d(void **state)
{
    int m, s;
    assert_int_equal(openpty(&m, &s, NULL, NULL, NULL), 0);
    stdin_relay r;
    stdin_relay_init(&r, m, true);
    stdin_relay_add(&r, "x", 1);
    stdin_relay_eof(&r);
    assert_int_equal(r.fd, m); /* a terminal stays open */
    assert_false(r.eof);       /* and takes more input after the ^D */
    stdin_relay_add(&r, "y", 1);
    assert_int_equal(stdin_relay_queued(&r), 1);
    stdin_relay_done(&r);
    close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(relays_then_closes),
        cmocka_unit_test(back_pressure),
        cmocka_unit_test(reader_gone),
        cmocka_unit_test(terminal_gets_ctrl_d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
