/* libFuzzer target: the file server's virtio split rings (src/fsd/virtq.c), which a hostile
 * guest writes as it likes. An input is a ring size, the three ring addresses, whether the
 * size changes after the addresses were checked (vhost-user's SET_VRING_NUM may come
 * late), and the guest's memory itself (descriptors, avail and used rings, buffers). The
 * memory is allocated at its exact size so ASan sees any access past it; a request handed
 * to the handler must fit the scratch buffer, and the ring is served twice (the second time
 * from where the first stopped). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fsd/virtq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

#define MEM     (32 * 1024)
#define GPA     0x10000ull
#define SCRATCH 4096
#define HEAD    16 /* num, resize, three addresses, padding */

static size_t echo(void *userdata, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    (void)userdata;
    CHECK(len <= SCRATCH && cap <= SCRATCH);
    size_t n = len < cap ? len : cap;
    memcpy(out, in, n);
    return n + (len & 1); /* sometimes claims a byte more than it may: the ring must cap it */
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HEAD)
        return 0;
    static uint8_t in[SCRATCH], out[SCRATCH];
    uint8_t *mem = calloc(1, MEM);
    size_t n = size - HEAD < MEM ? size - HEAD : MEM;
    memcpy(mem, data + HEAD, n);
    guest_mem gm = {.n = 1};
    gm.r[0] = (guest_region){.gpa = GPA, .uaddr = GPA, .size = MEM, .host = mem};
    virtq q;
    virtq_init(&q);
    q.num = 1u << (data[0] % 11);
    /* Addresses around the guest's memory: inside, at its edges and beyond. */
    q.desc_ua = GPA - 64 + get32(data + 2) % (MEM + 128);
    q.avail_ua = GPA - 64 + get32(data + 6) % (MEM + 128);
    q.used_ua = GPA - 64 + get32(data + 10) % (MEM + 128);
    q.enabled = true;
    if (virtq_map(&q, &gm) == 0 || (data[1] & 2)) {
        if (data[1] & 1)
            q.num = 1u << (data[1] >> 4) % 11; /* resized after the check */
        (void)virtq_serve(&q, &gm, echo, NULL, in, out, SCRATCH);
        (void)virtq_serve(&q, &gm, echo, NULL, in, out, SCRATCH);
    }
    free(mem);
    return 0;
}
