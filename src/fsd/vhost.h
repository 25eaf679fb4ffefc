/* The backend side of vhost-user for one virtio-fs device: the control messages UML's
 * virtio_uml sends on the device's socket (features, the guest's memory, the rings, the
 * config space with the tag). Two queues: 0 (high priority: FORGET, INTERRUPT) and 1
 * (requests). Only what virtio_uml needs is offered (see VU_PROTOCOL_FEATURES): no
 * reply-acks, no in-band notifications. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fsd/virtq.h"

#define VU_QUEUES  2
#define VU_TAG_MAX 36 /* virtio_fs_config.tag */

typedef struct vu_dev {
    int sock;
    int backend_fd; /* the backend request channel: held, never used */
    char tag[VU_TAG_MAX];
    uint64_t features, protocol_features;
    guest_mem mem;
    virtq q[VU_QUEUES];
} vu_dev;

void vu_dev_init(vu_dev *d, int sock, const char *tag);
void vu_dev_clear(vu_dev *d); /* unmaps, closes every fd incl. the socket */
/* Read and act on one message. 0, or -1 when the connection is over (closed, or a
 * message that breaks the protocol); errno is not meaningful. */
int vu_dev_handle(vu_dev *d);
