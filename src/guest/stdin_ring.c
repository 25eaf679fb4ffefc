/* The guest init's half of the stdin ring. See stdin_ring.h and abi/abi.h. */
#include "stdin_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "abi/abi.h"

/* O_DIRECT wants the file offset, the length and the buffer aligned to the device's logical
 * block (512 bytes on ubd); chunks start on ABI_STDIN_RING_ALIGN, lengths are rounded up. */
#define SECTOR 512u

static uint32_t u32_of(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool stdin_ring_reader_open(stdin_ring_reader *r)
{
    *r = (stdin_ring_reader){.fd = -1};
    void *buf = NULL;
    if (posix_memalign(&buf, ABI_STDIN_RING_ALIGN, ABI_STDIN_RING_CHUNK) != 0)
        return false;
    int fd = open(ABI_STDIN_RING_DEV, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        free(buf);
        return false;
    }
    r->fd = fd;
    r->buf = buf;
    return true;
}

ssize_t stdin_ring_take(stdin_ring_reader *r, const uint8_t *payload, size_t n,
                        const uint8_t **ret_data, uint8_t ret_ack[4])
{
    if (r->fd < 0 || n != 8)
        return -1;
    uint32_t off = u32_of(payload), len = u32_of(payload + 4);
    if (len == 0 || len > ABI_STDIN_RING_CHUNK || off % ABI_STDIN_RING_ALIGN ||
        off > ABI_STDIN_RING_BYTES - len)
        return -1;
    size_t want = (len + SECTOR - 1) / SECTOR * SECTOR;
    for (size_t got = 0; got < len;) {
        ssize_t k = pread(r->fd, r->buf + got, want - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0 || (size_t)k % SECTOR) /* O_DIRECT reads whole sectors or fails */
            return -1;
        got += (size_t)k;
    }
    uint32_t used = (len + ABI_STDIN_RING_ALIGN - 1) / ABI_STDIN_RING_ALIGN * ABI_STDIN_RING_ALIGN;
    ret_ack[0] = (uint8_t)(used >> 24), ret_ack[1] = (uint8_t)(used >> 16);
    ret_ack[2] = (uint8_t)(used >> 8), ret_ack[3] = (uint8_t)used;
    *ret_data = r->buf;
    return (ssize_t)len;
}
