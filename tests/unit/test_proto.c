/* Unit tests for the agent frame codec: encoding, the incremental decoder's limits and the
 * blocking one-frame reader. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>

#include "abi/proto.h"
#include "util/xalloc.h"

static const uint8_t all_types[] = {FRAME_CHALLENGE, FRAME_HELLO,     FRAME_READY,  FRAME_GO,
                                    FRAME_STDIN,     FRAME_STDIN_EOF, FRAME_STDOUT, FRAME_STDERR,
                                    FRAME_WINSIZE,   FRAME_EXIT,      FRAME_SIGNAL, FRAME_RING,
                                    FRAME_RING_ACK};

typedef struct encoded {
    uint8_t *buf;
    size_t len, cap;
} encoded;

static void enc_free(encoded *e)
{
    free(e->buf);
}

/* Feed everything; check exactly one frame comes out and uses all bytes. */
static void decode_one(const uint8_t *in, size_t n, uint8_t type, const void *payload, size_t plen)
{
    frame_decoder d;
    frame_decoder_init(&d);
    frame f = {0};
    size_t used = 0;
    bb_error *err = NULL;
    assert_int_equal(frame_decoder_feed(&d, in, n, &used, &f, &err), 1);
    assert_int_equal(used, n);
    assert_int_equal(f.type, type);
    assert_int_equal(f.len, plen);
    assert_non_null(f.data);
    assert_int_equal(f.data[plen], 0);
    if (plen)
        assert_memory_equal(f.data, payload, plen);
    frame_decoder_done(&d);
}

static void type_table(void **s)
{
    (void)s;
    for (size_t i = 0; i < ELEMENTSOF(all_types); i++)
        assert_true(frame_type_valid(all_types[i]));
    unsigned valid = 0;
    for (unsigned t = 0; t < 256; t++)
        valid += frame_type_valid((uint8_t)t);
    assert_int_equal(valid, ELEMENTSOF(all_types));
    assert_false(frame_type_valid(0));
    assert_false(frame_type_valid('h'));
}

static void header_big_endian(void **s)
{
    (void)s;
    uint8_t h[FRAME_HEADER];
    frame_header(h, FRAME_STDOUT, 0x01020304u);
    const uint8_t want[] = {'O', 1, 2, 3, 4};
    assert_memory_equal(h, want, sizeof want);
}

static void round_trip_each_type(void **s)
{
    (void)s;
    const char *payload = "{\"code\":0}";
    for (size_t i = 0; i < ELEMENTSOF(all_types); i++) {
        encoded e = {0};
        frame_append(&e.buf, &e.len, &e.cap, all_types[i], payload, strlen(payload));
        assert_int_equal(e.len, FRAME_HEADER + strlen(payload));
        decode_one(e.buf, e.len, all_types[i], payload, strlen(payload));
        enc_free(&e);
    }
}

static void empty_payload(void **s)
{
    (void)s;
    encoded e = {0};
    frame_append(&e.buf, &e.len, &e.cap, FRAME_GO, NULL, 0);
    assert_int_equal(e.len, FRAME_HEADER);
    decode_one(e.buf, e.len, FRAME_GO, NULL, 0);
    enc_free(&e);
}

/* Every split of a two-frame stream into two feeds yields the same two frames. */
static void split_every_boundary(void **s)
{
    (void)s;
    encoded e = {0};
    frame_append(&e.buf, &e.len, &e.cap, FRAME_STDOUT, "hello", 5);
    frame_append(&e.buf, &e.len, &e.cap, FRAME_STDIN_EOF, NULL, 0);
    frame_append(&e.buf, &e.len, &e.cap, FRAME_STDERR, "oops!!", 6);
    for (size_t cut = 0; cut <= e.len; cut++) {
        frame_decoder d;
        frame_decoder_init(&d);
        const uint8_t types[] = {FRAME_STDOUT, FRAME_STDIN_EOF, FRAME_STDERR};
        const char *payloads[] = {"hello", "", "oops!!"};
        size_t got = 0;
        const struct {
            size_t off, n;
        } parts[] = {{0, cut}, {cut, e.len - cut}};
        for (size_t p = 0; p < 2; p++) {
            const uint8_t *in = e.buf + parts[p].off;
            size_t n = parts[p].n;
            for (;;) {
                frame f;
                size_t used = 0;
                bb_error *err = NULL;
                int r = frame_decoder_feed(&d, in, n, &used, &f, &err);
                assert_true(r >= 0);
                assert_true(used <= n);
                in += used;
                n -= used;
                if (r == 0) {
                    assert_int_equal(n, 0);
                    break;
                }
                assert_true(got < 3);
                assert_int_equal(f.type, types[got]);
                assert_int_equal(f.len, strlen(payloads[got]));
                assert_memory_equal(f.data, payloads[got], f.len);
                got++;
            }
        }
        assert_int_equal(got, 3);
        assert_false(d.in_payload);
        assert_int_equal(d.hdr_have, 0);
        frame_decoder_done(&d);
    }
    enc_free(&e);
}

/* One byte at a time, too. */
static void byte_by_byte(void **s)
{
    (void)s;
    encoded e = {0};
    frame_append(&e.buf, &e.len, &e.cap, FRAME_HELLO, "{\"argv\":[]}", 11);
    frame_decoder d;
    frame_decoder_init(&d);
    int frames = 0;
    for (size_t i = 0; i < e.len; i++) {
        frame f;
        size_t used = 0;
        int r = frame_decoder_feed(&d, e.buf + i, 1, &used, &f, NULL);
        assert_int_equal(used, 1);
        assert_int_equal(r, i + 1 == e.len ? 1 : 0);
        if (r == 1) {
            assert_string_equal((char *)f.data, "{\"argv\":[]}");
            frames++;
        }
    }
    assert_int_equal(frames, 1);
    frame_decoder_done(&d);
    enc_free(&e);
}

static void several_in_one_buffer(void **s)
{
    (void)s;
    encoded e = {0};
    char payload[32];
    for (int i = 0; i < 10; i++) {
        int n = snprintf(payload, sizeof payload, "chunk-%d", i);
        frame_append(&e.buf, &e.len, &e.cap, FRAME_STDOUT, payload, (size_t)n);
    }
    frame_decoder d;
    frame_decoder_init(&d);
    const uint8_t *in = e.buf;
    size_t n = e.len;
    for (int i = 0; i < 10; i++) {
        frame f;
        size_t used = 0;
        assert_int_equal(frame_decoder_feed(&d, in, n, &used, &f, NULL), 1);
        snprintf(payload, sizeof payload, "chunk-%d", i);
        assert_int_equal(used, FRAME_HEADER + strlen(payload));
        assert_string_equal((char *)f.data, payload);
        in += used;
        n -= used;
    }
    assert_int_equal(n, 0);
    frame_decoder_done(&d);
    enc_free(&e);
}

static void exactly_max_accepted(void **s)
{
    (void)s;
    uint8_t *payload = malloc(FRAME_MAX);
    for (size_t i = 0; i < FRAME_MAX; i++)
        payload[i] = (uint8_t)(i * 31 + 7);
    encoded e = {0};
    frame_append(&e.buf, &e.len, &e.cap, FRAME_STDIN, payload, FRAME_MAX);
    decode_one(e.buf, e.len, FRAME_STDIN, payload, FRAME_MAX);
    enc_free(&e);
    free(payload);
}

static void refused(const uint8_t hdr[FRAME_HEADER], const char *msg)
{
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    size_t used = 0;
    bb_error *err = NULL;
    assert_int_equal(frame_decoder_feed(&d, hdr, FRAME_HEADER, &used, &f, &err), -1);
    assert_non_null(err);
    assert_contains(err->msg, msg);
    bb_error_free(err);
    err = NULL;
    /* It stays failed, even when valid bytes follow. */
    assert_true(d.failed);
    uint8_t ok[FRAME_HEADER];
    frame_header(ok, FRAME_GO, 0);
    assert_int_equal(frame_decoder_feed(&d, ok, sizeof ok, &used, &f, &err), -1);
    assert_int_equal(used, 0);
    assert_non_null(err);
    bb_error_free(err);
    assert_null(d.buf);
    frame_decoder_done(&d);
}

static void over_max_refused(void **s)
{
    (void)s;
    uint8_t h[FRAME_HEADER];
    frame_header(h, FRAME_STDOUT, FRAME_MAX + 1);
    refused(h, "exceeds the 1 MiB limit");
    frame_header(h, FRAME_STDOUT, 0xffffffffu);
    refused(h, "exceeds the 1 MiB limit");
}

static void unknown_type_refused(void **s)
{
    (void)s;
    uint8_t h[FRAME_HEADER];
    frame_header(h, 'Z', 1);
    refused(h, "unknown frame type 0x5a");
    frame_header(h, 0, 0);
    refused(h, "unknown frame type 0x00");
}

static void writer_refuses_oversized(void **s)
{
    (void)s;
    bb_error *err = NULL;
    assert_int_equal(frame_write(-1, FRAME_STDOUT, "", (size_t)FRAME_MAX + 1, &err), -1);
    assert_contains(err->msg, "larger than");
    bb_error_free(err);
}

/* A header that declares 1 MiB, then three bytes: the decoder holds a small buffer, not the
 * declared megabyte. */
static void declared_length_not_allocated(void **s)
{
    (void)s;
    uint8_t in[FRAME_HEADER + 3];
    frame_header(in, FRAME_STDOUT, FRAME_MAX);
    memcpy(in + FRAME_HEADER, "abc", 3);
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    size_t used = 0;
    assert_int_equal(frame_decoder_feed(&d, in, sizeof in, &used, &f, NULL), 0);
    assert_int_equal(used, sizeof in);
    assert_true(d.in_payload);
    assert_int_equal(d.have, 3);
    assert_true(d.cap <= 4096);
    /* More arrives: it grows by doubling, not in one jump. */
    uint8_t *more = calloc(1, 10000);
    assert_int_equal(frame_decoder_feed(&d, more, 10000, &used, &f, NULL), 0);
    assert_int_equal(d.have, 10003);
    assert_true(d.cap <= 16384);
    free(more);
    frame_decoder_done(&d);
}

/* A small declared length caps the buffer at that length (plus the NUL). */
static void small_frame_small_buffer(void **s)
{
    (void)s;
    encoded e = {0};
    frame_append(&e.buf, &e.len, &e.cap, FRAME_WINSIZE, "{\"rows\":24}", 11);
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    assert_int_equal(frame_decoder_feed(&d, e.buf, e.len, NULL, &f, NULL), 1);
    assert_int_equal(d.cap, 12);
    frame_decoder_done(&d);
    enc_free(&e);
}

static void pipe_fds(int p[2])
{
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
}

static void write_raw(int fd, const void *b, size_t n)
{
    assert_int_equal(write(fd, b, n), (ssize_t)n);
}

static void read_truncated(void **s)
{
    (void)s;
    /* EOF inside the payload. */
    int p[2];
    pipe_fds(p);
    uint8_t h[FRAME_HEADER];
    frame_header(h, FRAME_STDOUT, 10);
    write_raw(p[1], h, sizeof h);
    write_raw(p[1], "abc", 3);
    close(p[1]);
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    bb_error *err = NULL;
    assert_int_equal(frame_read(p[0], &d, &f, &err), -1);
    assert_contains(err->msg, "truncated frame");
    bb_error_free(err);
    close(p[0]);
    frame_decoder_done(&d);

    /* EOF inside the header. */
    pipe_fds(p);
    write_raw(p[1], h, 2);
    close(p[1]);
    frame_decoder_init(&d);
    err = NULL;
    assert_int_equal(frame_read(p[0], &d, &f, &err), -1);
    assert_contains(err->msg, "truncated frame");
    bb_error_free(err);
    close(p[0]);
    frame_decoder_done(&d);
}

static void read_clean_eof(void **s)
{
    (void)s;
    int p[2];
    pipe_fds(p);
    close(p[1]);
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    assert_int_equal(frame_read(p[0], &d, &f, NULL), 0);
    close(p[0]);
    frame_decoder_done(&d);
}

/* Two frames in a pipe: frame_read takes exactly the first and leaves the second for any
 * other reader of the fd. */
static void read_does_not_over_read(void **s)
{
    (void)s;
    int p[2];
    pipe_fds(p);
    bb_error *err = NULL;
    assert_int_equal(frame_write(p[1], FRAME_READY, "{\"kernel\":\"6.1\"}", 16, &err), 0);
    assert_int_equal(frame_write(p[1], FRAME_GO, NULL, 0, &err), 0);
    assert_int_equal(frame_write(p[1], FRAME_STDOUT, "tail", 4, &err), 0);
    close(p[1]);

    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    assert_int_equal(frame_read(p[0], &d, &f, &err), 1);
    assert_int_equal(f.type, FRAME_READY);
    assert_string_equal((char *)f.data, "{\"kernel\":\"6.1\"}");
    frame_decoder_done(&d);

    /* A fresh decoder (as another reader would be) sees the second frame whole. */
    frame_decoder_init(&d);
    assert_int_equal(frame_read(p[0], &d, &f, &err), 1);
    assert_int_equal(f.type, FRAME_GO);
    assert_int_equal(f.len, 0);
    frame_decoder_done(&d);

    /* And the raw bytes of the third are still in the pipe. */
    uint8_t raw[16];
    assert_int_equal(read(p[0], raw, sizeof raw), FRAME_HEADER + 4);
    assert_int_equal(raw[0], FRAME_STDOUT);
    assert_memory_equal(raw + FRAME_HEADER, "tail", 4);
    close(p[0]);
}

/* A big frame through a pipe: frame_write loops on short writes while a child reads. */
static void big_frame_through_pipe(void **s)
{
    (void)s;
    int p[2];
    pipe_fds(p);
    uint8_t *payload = malloc(FRAME_MAX);
    for (size_t i = 0; i < FRAME_MAX; i++)
        payload[i] = (uint8_t)(i ^ (i >> 8));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        _exit(frame_write(p[1], FRAME_STDOUT, payload, FRAME_MAX, NULL) == 0 ? 0 : 1);
    }
    close(p[1]);
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    bb_error *err = NULL;
    assert_int_equal(frame_read(p[0], &d, &f, &err), 1);
    assert_int_equal(f.len, FRAME_MAX);
    assert_memory_equal(f.data, payload, FRAME_MAX);
    assert_int_equal(frame_read(p[0], &d, &f, &err), 0);
    frame_decoder_done(&d);
    close(p[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    free(payload);
}

static void read_refuses_bad_header(void **s)
{
    (void)s;
    int p[2];
    pipe_fds(p);
    uint8_t h[FRAME_HEADER];
    frame_header(h, 'q', 4);
    write_raw(p[1], h, sizeof h);
    close(p[1]);
    frame_decoder d;
    frame_decoder_init(&d);
    frame f;
    bb_error *err = NULL;
    assert_int_equal(frame_read(p[0], &d, &f, &err), -1);
    assert_contains(err->msg, "unknown frame type");
    bb_error_free(err);
    err = NULL;
    assert_int_equal(frame_read(p[0], &d, &f, &err), -1);
    assert_contains(err->msg, "already failed");
    bb_error_free(err);
    frame_decoder_done(&d);
    close(p[0]);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(type_table),
        cmocka_unit_test(header_big_endian),
        cmocka_unit_test(round_trip_each_type),
        cmocka_unit_test(empty_payload),
        cmocka_unit_test(split_every_boundary),
        cmocka_unit_test(byte_by_byte),
        cmocka_unit_test(several_in_one_buffer),
        cmocka_unit_test(exactly_max_accepted),
        cmocka_unit_test(over_max_refused),
        cmocka_unit_test(unknown_type_refused),
        cmocka_unit_test(writer_refuses_oversized),
        cmocka_unit_test(declared_length_not_allocated),
        cmocka_unit_test(small_frame_small_buffer),
        cmocka_unit_test(read_truncated),
        cmocka_unit_test(read_clean_eof),
        cmocka_unit_test(read_does_not_over_read),
        cmocka_unit_test(big_frame_through_pipe),
        cmocka_unit_test(read_refuses_bad_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
