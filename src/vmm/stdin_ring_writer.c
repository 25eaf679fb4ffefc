/* bluebox-vmm's half of the stdin ring. See stdin_ring_writer.h and abi/abi.h. */
#include "vmm/stdin_ring_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "abi/abi.h"
#include "util/xalloc.h"

static uint64_t round_up(uint64_t n)
{
    return (n + ABI_STDIN_RING_ALIGN - 1) / ABI_STDIN_RING_ALIGN * ABI_STDIN_RING_ALIGN;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

bool stdin_ring_open(stdin_ring *r)
{
    *r = (stdin_ring){.fd = -1};
    int fd = open(ABI_STDIN_RING, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    /* Sparse: only what is written takes memory on the tmpfs. */
    if (ftruncate(fd, ABI_STDIN_RING_BYTES) < 0) {
        close(fd);
        unlink(ABI_STDIN_RING);
        return false;
    }
    r->fd = fd;
    return true;
}

void stdin_ring_kernel_args(const stdin_ring *r, strv *a)
{
    if (r->fd >= 0)
        strv_add(a, ABI_STDIN_RING_KARG);
}

size_t stdin_ring_room(const stdin_ring *r)
{
    if (r->fd < 0 || !r->usable || r->out >= STDIN_RING_FRAMES)
        return 0;
    uint64_t avail = ABI_STDIN_RING_BYTES - (r->written - r->acked);
    uint64_t to_end = ABI_STDIN_RING_BYTES - r->written % ABI_STDIN_RING_BYTES;
    uint64_t room = avail < to_end ? avail : to_end;
    return room < ABI_STDIN_RING_CHUNK ? (size_t)room : ABI_STDIN_RING_CHUNK;
}

bool stdin_ring_put(stdin_ring *r, const void *data, size_t n, uint8_t ret_frame[8])
{
    uint64_t off = r->written % ABI_STDIN_RING_BYTES;
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(r->fd, (const char *)data + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        done += (size_t)w;
    }
    put_u32(ret_frame, (uint32_t)off);
    put_u32(ret_frame + 4, (uint32_t)n);
    r->written += round_up(n);
    r->out++;
    return true;
}

bool stdin_ring_ack(stdin_ring *r, const uint8_t *p, size_t n)
{
    if (n != 4)
        return false;
    uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (r->out == 0 || v > r->written - r->acked)
        return false;
    r->acked += v;
    r->out--;
    return true;
}

void stdin_ring_close(stdin_ring *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
}
