/* libFuzzer target: the agent frame decoder sees bytes from a hostile guest. The first input
 * byte picks how the rest is chopped into feeds (so frames split at arbitrary places); the
 * rest is the stream. Checks: consumed never exceeds what was fed, every frame has a valid
 * type, a length within FRAME_MAX and re-encodes to exactly the bytes it came from, memory
 * grows only with arrived bytes, an error is final, and the blocking reader on a pipe agrees
 * with the incremental decoder. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

typedef struct result {
    int frames;
    bool failed;
} result;

static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void check_frame(const frame *f, const uint8_t *stream, size_t start, size_t end)
{
    CHECK(frame_type_valid(f->type));
    CHECK(f->len <= FRAME_MAX);
    CHECK(f->data != NULL);
    CHECK(f->data[f->len] == 0);
    CHECK(end - start == FRAME_HEADER + (size_t)f->len);
    uint8_t hdr[FRAME_HEADER];
    frame_header(hdr, f->type, f->len);
    CHECK(memcmp(hdr, stream + start, FRAME_HEADER) == 0);
    CHECK(memcmp(f->data, stream + start + FRAME_HEADER, f->len) == 0);
}

static result decode_chunked(uint8_t mode, const uint8_t *in, size_t n)
{
    result res = {0};
    frame_decoder d;
    frame_decoder_init(&d);
    uint32_t seed = mode | 0x9e3779b9u;
    size_t off = 0, frame_start = 0;
    while (off < n) {
        size_t chunk = n - off;
        if (mode != 0) {
            size_t c = 1 + next_rand(&seed) % ((size_t)mode * 8);
            if (c < chunk)
                chunk = c;
        }
        const uint8_t *p = in + off;
        size_t left = chunk;
        while (left > 0) {
            frame f;
            size_t used = 0;
            bb_error *err = NULL;
            int r = frame_decoder_feed(&d, p, left, &used, &f, &err);
            CHECK(used <= left);
            CHECK(d.cap <= 65536 || d.cap < 2 * (d.have + 1));
            if (r < 0) {
                CHECK(err != NULL);
                bb_error_free(err);
                err = NULL;
                CHECK(frame_decoder_feed(&d, p, left, &used, &f, &err) == -1);
                CHECK(used == 0);
                bb_error_free(err);
                res.failed = true;
                frame_decoder_done(&d);
                return res;
            }
            CHECK(err == NULL);
            p += used;
            left -= used;
            off += used;
            if (r == 0) {
                CHECK(left == 0);
                break;
            }
            check_frame(&f, in, frame_start, off);
            frame_start = off;
            res.frames++;
        }
    }
    frame_decoder_done(&d);
    return res;
}

/* The same stream through frame_read on a pipe (small inputs fit the pipe buffer). */
static result decode_pipe(const uint8_t *in, size_t n)
{
    result res = {0};
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        abort();
    CHECK(write(p[1], in, n) == (ssize_t)n);
    close(p[1]);
    frame_decoder d;
    frame_decoder_init(&d);
    for (;;) {
        frame f;
        bb_error *err = NULL;
        int r = frame_read(p[0], &d, &f, &err);
        if (r <= 0) {
            res.failed = r < 0;
            CHECK((r < 0) == (err != NULL));
            bb_error_free(err);
            break;
        }
        CHECK(frame_type_valid(f.type) && f.len <= FRAME_MAX && f.data[f.len] == 0);
        res.frames++;
    }
    frame_decoder_done(&d);
    close(p[0]);
    return res;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *in = data + 1;
    size_t n = size - 1;
    result a = decode_chunked(data[0], in, n);
    result whole = decode_chunked(0, in, n);
    CHECK(a.frames == whole.frames && a.failed == whole.failed);
    if (n <= 32768) {
        result b = decode_pipe(in, n);
        /* The reader also fails on a frame cut short by EOF, which the decoder just waits on. */
        CHECK(b.frames == whole.frames);
        CHECK(b.failed || !whole.failed);
    }
    return 0;
}
