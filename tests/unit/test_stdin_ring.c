/* Unit tests for the uml stdin ring (src/vmm/stdin_ring_writer.c, the writer, and
 * src/guest/stdin_ring.c, the reader) over a plain file: chunks arrive byte-exact across the
 * ring's end, the writer never hands out space the reader has not given back, and the
 * reader refuses a chunk the frame places badly. */
#include "unit.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/abi.h"
#include "guest/stdin_ring.h"
#include "vmm/stdin_ring_writer.h"

static int ring_file(void)
{
    char path[] = "/tmp/bluebox-ring-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(ftruncate(fd, ABI_STDIN_RING_BYTES), 0);
    return fd;
}

static void reader_on(stdin_ring_reader *rd, int fd)
{
    void *buf = NULL;
    assert_int_equal(posix_memalign(&buf, ABI_STDIN_RING_ALIGN, ABI_STDIN_RING_CHUNK), 0);
    *rd = (stdin_ring_reader){.fd = fd, .buf = buf};
}

static void round_trip_across_the_end(void **s)
{
    (void)s;
    int fd = ring_file();
    stdin_ring w = {.fd = fd, .usable = true};
    stdin_ring_reader rd;
    reader_on(&rd, fd);
    uint8_t *chunk = malloc(ABI_STDIN_RING_CHUNK);
    uint64_t sent = 0, got = 0;
    /* Odd sizes, several laps of the ring; each chunk is read back before the next. */
    for (unsigned i = 0; i < 400; i++) {
        size_t room = stdin_ring_room(&w);
        assert_true(room > 0 && room <= ABI_STDIN_RING_CHUNK);
        size_t n = (size_t)(i * 7919u % ABI_STDIN_RING_CHUNK) + 1;
        if (n > room)
            n = room;
        for (size_t k = 0; k < n; k++)
            chunk[k] = (uint8_t)(sent + k);
        uint8_t where[8], ack[4];
        assert_true(stdin_ring_put(&w, chunk, n, where));
        sent += n;
        const uint8_t *data;
        assert_int_equal(stdin_ring_take(&rd, where, sizeof where, &data, ack), (ssize_t)n);
        for (size_t k = 0; k < n; k++)
            assert_int_equal(data[k], (uint8_t)(got + k));
        got += n;
        assert_true(stdin_ring_ack(&w, ack, sizeof ack));
    }
    assert_true(w.written > 2ull * ABI_STDIN_RING_BYTES); /* it went round */
    assert_int_equal(w.written, w.acked);
    free(chunk);
    free(rd.buf);
    close(fd);
}

static void full_ring_waits_for_acks(void **s)
{
    (void)s;
    int fd = ring_file();
    stdin_ring w = {.fd = fd, .usable = true};
    uint8_t *big = calloc(1, ABI_STDIN_RING_CHUNK), where[8];
    size_t chunks = 0;
    /* Whole chunks: the ring's bytes run out first. */
    while (stdin_ring_room(&w) > 0) {
        assert_int_equal(stdin_ring_room(&w), ABI_STDIN_RING_CHUNK);
        assert_true(stdin_ring_put(&w, big, ABI_STDIN_RING_CHUNK, where));
        chunks++;
    }
    assert_int_equal(chunks, ABI_STDIN_RING_BYTES / ABI_STDIN_RING_CHUNK);
    assert_true(chunks < STDIN_RING_FRAMES);
    /* A guest that gives back more than is out is refused, and changes nothing. */
    uint8_t too_much[4] = {0xff, 0xff, 0xff, 0xff}, short_ack[3] = {0, 0, 1};
    assert_false(stdin_ring_ack(&w, too_much, 4));
    assert_false(stdin_ring_ack(&w, short_ack, 3));
    assert_int_equal(stdin_ring_room(&w), 0);
    uint8_t ack[4] = {0, 0, ABI_STDIN_RING_ALIGN >> 8, 0};
    assert_true(stdin_ring_ack(&w, ack, 4));
    assert_int_equal(stdin_ring_room(&w), ABI_STDIN_RING_ALIGN);
    /* Not in use until the guest said so. */
    w.usable = false;
    assert_int_equal(stdin_ring_room(&w), 0);
    free(big);
    close(fd);
}

static void small_chunks_are_bounded_by_count(void **s)
{
    (void)s;
    int fd = ring_file();
    stdin_ring w = {.fd = fd, .usable = true};
    uint8_t one[1] = {'x'}, where[8];
    size_t chunks = 0;
    while (stdin_ring_room(&w) > 0) {
        assert_true(stdin_ring_put(&w, one, 1, where)); /* each takes a whole alignment unit */
        chunks++;
    }
    /* The line's frames stop at the bound, long before the ring's bytes would. */
    assert_int_equal(chunks, STDIN_RING_FRAMES);
    assert_true(w.written < ABI_STDIN_RING_BYTES);
    uint8_t ack[4] = {0, 0, ABI_STDIN_RING_ALIGN >> 8, 0};
    assert_true(stdin_ring_ack(&w, ack, 4));
    assert_true(stdin_ring_room(&w) > 0);
    assert_true(stdin_ring_put(&w, one, 1, where));
    assert_int_equal(stdin_ring_room(&w), 0);
    /* An acknowledgement with no chunk out is refused, even one that gives back nothing. */
    for (unsigned i = 0; i < STDIN_RING_FRAMES; i++)
        assert_true(stdin_ring_ack(&w, ack, 4));
    assert_int_equal(w.out, 0);
    uint8_t nothing[4] = {0};
    assert_false(stdin_ring_ack(&w, nothing, 4));
    close(fd);
}

static void put_frame(uint8_t p[8], uint32_t off, uint32_t len)
{
    uint32_t v[2] = {off, len};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < 4; b++)
            p[i * 4 + b] = (uint8_t)(v[i] >> (24 - 8 * b));
}

static void reader_refuses_bad_chunks(void **s)
{
    (void)s;
    int fd = ring_file();
    stdin_ring_reader rd;
    reader_on(&rd, fd);
    const uint8_t *data;
    uint8_t p[8], ack[4];
    static const uint32_t bad[][2] = {
        {0, 0},                                                                  /* empty */
        {100, 10},                                                               /* unaligned */
        {0, ABI_STDIN_RING_CHUNK + 1},                                           /* too long */
        {ABI_STDIN_RING_BYTES - ABI_STDIN_RING_ALIGN, 2 * ABI_STDIN_RING_ALIGN}, /* past end */
        {ABI_STDIN_RING_BYTES, 1},                                               /* outside */
        {0xfffff000u, 0x2000},                                                   /* wraps u32 */
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        put_frame(p, bad[i][0], bad[i][1]);
        assert_int_equal(stdin_ring_take(&rd, p, sizeof p, &data, ack), -1);
    }
    put_frame(p, ABI_STDIN_RING_BYTES - ABI_STDIN_RING_ALIGN, ABI_STDIN_RING_ALIGN);
    assert_int_equal(stdin_ring_take(&rd, p, sizeof p, &data, ack), ABI_STDIN_RING_ALIGN);
    assert_int_equal(stdin_ring_take(&rd, p, 7, &data, ack), -1); /* short payload */
    free(rd.buf);
    rd.buf = NULL;
    close(fd);
    stdin_ring_reader none = {.fd = -1};
    assert_int_equal(stdin_ring_take(&none, p, sizeof p, &data, ack), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_across_the_end),
        cmocka_unit_test(full_ring_waits_for_acks),
        cmocka_unit_test(small_chunks_are_bounded_by_count),
        cmocka_unit_test(reader_refuses_bad_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
