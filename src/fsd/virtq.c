/* The device side of a virtio split ring (see virtq.h). */
#include "fsd/virtq.h"

#include <errno.h>
#include <linux/virtio_ring.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/xalloc.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "virtio 1.x rings are little-endian; this reads them natively");

void guest_mem_clear(guest_mem *m)
{
    for (unsigned i = 0; i < m->n; i++)
        if (m->r[i].map_base)
            munmap(m->r[i].map_base, m->r[i].map_len);
    *m = (guest_mem){0};
}

static void *region_at(const guest_mem *m, bool user, uint64_t a, uint64_t len)
{
    for (unsigned i = 0; i < m->n; i++) {
        const guest_region *r = &m->r[i];
        uint64_t start = user ? r->uaddr : r->gpa;
        if (a < start)
            continue;
        uint64_t off = a - start;
        if (off > r->size || len > r->size - off)
            continue;
        return r->host + off;
    }
    return NULL;
}

/* Host pointer to [gpa, gpa+len) when one region holds all of it, else NULL. */
static void *guest_mem_at(const guest_mem *m, uint64_t gpa, uint64_t len)
{
    return region_at(m, false, gpa, len);
}

/* The same for a frontend (user) address. */
static void *guest_mem_user(const guest_mem *m, uint64_t uaddr, uint64_t len)
{
    return region_at(m, true, uaddr, len);
}

void virtq_init(virtq *q)
{
    *q = (virtq){.kick_fd = -1, .call_fd = -1};
}

void virtq_reset(virtq *q)
{
    if (q->kick_fd >= 0)
        close(q->kick_fd);
    if (q->call_fd >= 0)
        close(q->call_fd);
    virtq_init(q);
}

int virtq_map(virtq *q, const guest_mem *m)
{
    q->desc = NULL;
    q->avail = NULL;
    q->used = NULL;
    q->mapped_num = 0;
    if (q->num == 0 || q->num > VIRTQ_MAX || (q->num & (q->num - 1)))
        return -1;
    q->desc = guest_mem_user(m, q->desc_ua, (uint64_t)q->num * sizeof(struct vring_desc));
    q->avail = guest_mem_user(m, q->avail_ua,
                              sizeof(struct vring_avail) + (uint64_t)q->num * sizeof(uint16_t));
    q->used = guest_mem_user(m, q->used_ua,
                             sizeof(struct vring_used) +
                                 (uint64_t)q->num * sizeof(struct vring_used_elem));
    /* The rings hold 16- and 32-bit fields read in place. */
    if (!q->desc || !q->avail || !q->used || ((uintptr_t)q->desc & 15) ||
        ((uintptr_t)q->avail & 1) || ((uintptr_t)q->used & 3))
        return -1;
    q->mapped_num = q->num;
    return 0;
}

bool virtq_ready(const virtq *q)
{
    return q->enabled && !q->broken && q->desc && q->avail && q->used && q->mapped_num == q->num;
}

typedef struct chain {
    size_t in_len;
    struct {
        uint8_t *p;
        size_t len;
    } out[VIRTQ_MAX];
    unsigned n_out;
    size_t out_cap;
} chain;

/* Gather one descriptor chain: device-readable parts copied into `in`, device-writable
 * parts listed. -1 when the chain is malformed (the ring is then broken). */
static int chain_gather(virtq *q, const guest_mem *m, uint16_t head, uint8_t *in, size_t in_cap,
                        chain *c)
{
    c->in_len = 0;
    c->n_out = 0;
    c->out_cap = 0;
    bool too_big = false;
    uint16_t i = head;
    for (unsigned seen = 0;; seen++) {
        if (i >= q->num || seen >= q->num)
            return -1; /* out of the table, or a loop */
        struct vring_desc d;
        memcpy(&d, &q->desc[i], sizeof d); /* once: the guest may change it under us */
        if (d.flags & VRING_DESC_F_INDIRECT)
            return -1; /* not offered */
        uint8_t *p = d.len ? guest_mem_at(m, d.addr, d.len) : NULL;
        if (d.len && !p)
            return -1;
        if (d.flags & VRING_DESC_F_WRITE) {
            c->out[c->n_out].p = p;
            c->out[c->n_out].len = d.len;
            c->n_out++;
            c->out_cap += d.len;
        } else if (c->n_out) {
            return -1; /* readable after writable: not a virtio chain */
        } else if (d.len > in_cap - c->in_len) {
            too_big = true;
        } else if (p) { /* a zero-length descriptor has no address to copy from */
            memcpy(in + c->in_len, p, d.len);
            c->in_len += d.len;
        }
        if (!(d.flags & VRING_DESC_F_NEXT))
            break;
        i = d.next;
    }
    /* A request larger than any the server accepts gets no bytes back: the guest's
     * driver sees a short reply and fails that one request. */
    if (too_big)
        c->in_len = 0;
    return 0;
}

static void chain_scatter(const chain *c, const uint8_t *out, size_t len)
{
    size_t off = 0;
    for (unsigned k = 0; k < c->n_out && off < len; k++) {
        size_t n = c->out[k].len < len - off ? c->out[k].len : len - off;
        if (n)
            memcpy(c->out[k].p, out + off, n);
        off += n;
    }
}

static void signal_call(const virtq *q)
{
    if (q->call_fd < 0)
        return;
    uint64_t one = 1;
    /* A full pipe means an interrupt is already pending: nothing is lost. */
    while (write(q->call_fd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

unsigned virtq_serve(virtq *q, const guest_mem *m, virtq_handler h, void *userdata,
                     uint8_t *scratch_in, uint8_t *scratch_out, size_t scratch_len)
{
    static chain c; /* large (VIRTQ_MAX entries); the server is single-threaded */
    unsigned served = 0;
    if (!virtq_ready(q))
        return 0;
    for (;;) {
        uint16_t avail = __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE);
        if (avail == q->last_avail)
            break;
        if ((uint16_t)(avail - q->last_avail) > q->num) {
            q->broken = true;
            break;
        }
        uint16_t head = q->avail->ring[q->last_avail % q->num];
        if (chain_gather(q, m, head, scratch_in, scratch_len, &c) < 0) {
            q->broken = true;
            break;
        }
        size_t cap = c.out_cap < scratch_len ? c.out_cap : scratch_len;
        size_t len = c.in_len ? h(userdata, scratch_in, c.in_len, scratch_out, cap) : 0;
        if (len > cap)
            len = cap;
        chain_scatter(&c, scratch_out, len);
        q->last_avail++;
        struct vring_used_elem *e = &q->used->ring[q->used_idx % q->num];
        e->id = head;
        e->len = (uint32_t)len;
        q->used_idx++;
        __atomic_store_n(&q->used->idx, q->used_idx, __ATOMIC_RELEASE);
        served++;
    }
    if (served)
        signal_call(q);
    return served;
}
