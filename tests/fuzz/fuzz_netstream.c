/* libFuzzer target: the stream link's framing (net/netstream.h) over bytes from a hostile
 * guest's VMM. The first byte picks the read size; the rest is the stream. Checks: no read or
 * write past the buffer (ASan), no frame longer than the bound or empty, and the frames match
 * a plain reference parse of the whole input however the reads cut it, up to the first bad
 * length, after which the link is cut (-1) and nothing more is delivered. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/netstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX 2048 /* small, so the fuzzer reaches the bound */

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

typedef struct ref {
    const uint8_t *s;
    size_t len, off; /* the reference parse's position in s */
    bool bad;
    size_t delivered;
} ref;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The next non-empty frame of the reference parse, or false. */
static bool ref_next(ref *r, const uint8_t **f, size_t *flen)
{
    while (!r->bad && r->len - r->off >= 4) {
        uint32_t l = be32(r->s + r->off);
        if (l > MAX) {
            r->bad = true;
            return false;
        }
        if (r->len - r->off - 4 < l)
            return false;
        *f = r->s + r->off + 4;
        *flen = l;
        r->off += 4 + l;
        if (l)
            return true;
    }
    return false;
}

static void on_frame(const uint8_t *frame, size_t len, void *opaque)
{
    ref *r = opaque;
    CHECK(len > 0 && len <= MAX);
    const uint8_t *want;
    size_t wlen;
    CHECK(ref_next(r, &want, &wlen));
    CHECK(wlen == len && memcmp(want, frame, len) == 0);
    r->delivered++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] * 37 + 1;
    ref r = {.s = data + 1, .len = size - 1};
    netstream_rx rx;
    netstream_rx_init(&rx, MAX);
    int rc = 0;
    for (size_t at = 0; at < r.len && rc == 0; at += step) {
        size_t room;
        uint8_t *p = netstream_rx_space(&rx, &room);
        CHECK(room > 0 && room <= 4 + MAX);
        size_t k = step < r.len - at ? step : r.len - at;
        if (k > room)
            k = room;
        memcpy(p, r.s + at, k);
        rc = netstream_rx_commit(&rx, k, on_frame, &r);
        if (k < step && at + k < r.len) /* the rest of this read next time */
            at -= step - k;
    }
    const uint8_t *f;
    size_t flen;
    if (rc < 0) {
        CHECK(!ref_next(&r, &f, &flen) && r.bad); /* cut exactly at the first bad length */
    } else {
        CHECK(!ref_next(&r, &f, &flen) && !r.bad); /* all delivered; a partial one waits */
        CHECK(rx.len == r.len - r.off);
    }
    netstream_rx_free(&rx);
    return 0;
}
