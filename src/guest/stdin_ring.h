/* A uml run's stdin in bulk (abi/abi.h, ABI_STDIN_RING): the guest init's half. bluebox-vmm
 * writes a chunk into the ring and names it in a FRAME_RING; this reads it from the ring's
 * block device, bypassing the page cache, and says how much of the ring to give back. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct stdin_ring_reader {
    int fd;       /* ABI_STDIN_RING_DEV, O_DIRECT; -1 without a ring */
    uint8_t *buf; /* one chunk, aligned for O_DIRECT */
} stdin_ring_reader;

/* Open the ring's device. Returns false (and leaves fd at -1) when the kernel has none. */
bool stdin_ring_reader_open(stdin_ring_reader *r);
/* The chunk a FRAME_RING payload names: its length, with *ret_data pointing at its bytes
 * (valid until the next call) and ret_ack the FRAME_RING_ACK payload to send back. -1 for a
 * payload that names no valid chunk, or a read that failed. */
ssize_t stdin_ring_take(stdin_ring_reader *r, const uint8_t *payload, size_t n,
                        const uint8_t **ret_data, uint8_t ret_ack[4]);
