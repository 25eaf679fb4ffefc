/* A virtio split ring in the guest's memory, served from the device side (virtio 1.x,
 * no indirect descriptors, no event index: neither is offered, so a guest that uses them
 * breaks its own ring). Every descriptor, index and length is the guest's word: a ring
 * that points outside the memory the guest shared, loops, or counts past its size is
 * marked broken and served no more. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUEST_MEM_REGIONS 8

typedef struct guest_region {
    uint64_t gpa;   /* guest-physical start */
    uint64_t uaddr; /* the frontend's own address of it (ring addresses use this) */
    uint64_t size;
    uint8_t *host;  /* our mapping */
    size_t map_len; /* what was mmap'ed (mmap_offset + size, page-rounded) */
    uint8_t *map_base;
} guest_region;

typedef struct guest_mem {
    guest_region r[GUEST_MEM_REGIONS];
    unsigned n;
} guest_mem;

void guest_mem_clear(guest_mem *m);

typedef struct virtq {
    unsigned num;        /* ring size, a power of two ≤ VIRTQ_MAX */
    unsigned mapped_num; /* the size the addresses were checked for (0: not mapped) */
    uint64_t desc_ua, avail_ua, used_ua;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint16_t last_avail; /* next avail entry to take */
    uint16_t used_idx;
    int kick_fd, call_fd; /* -1 when not given */
    bool enabled, broken;
} virtq;

#define VIRTQ_MAX 1024

void virtq_init(virtq *q);
void virtq_reset(virtq *q); /* closes the fds */
/* Resolve the ring's addresses against the guest's memory: 0, or -1 (ring unusable). A
 * ring whose size changes afterwards is not served until it is mapped again. */
int virtq_map(virtq *q, const guest_mem *m);
bool virtq_ready(const virtq *q);

/* One request's buffers: what the guest wrote (gathered into `in`) and where the reply
 * goes. Called for each available chain; returns the number of bytes written back. */
typedef size_t (*virtq_handler)(void *userdata, const uint8_t *in, size_t in_len, uint8_t *out,
                                size_t out_cap);

/* Serve every available chain; `scratch_in`/`scratch_out` are buffers of `scratch_len`
 * bytes each. Signals the call fd when anything was used. Returns the number of chains. */
unsigned virtq_serve(virtq *q, const guest_mem *m, virtq_handler h, void *userdata,
                     uint8_t *scratch_in, uint8_t *scratch_out, size_t scratch_len);
