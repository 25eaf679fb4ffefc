/* A growing poll set, shared by the VMM's relay and its network. */
#pragma once

#include <poll.h>
#include <stddef.h>

typedef struct pollvec {
    struct pollfd *v;
    size_t n, cap;
} pollvec;

/* Add fd with events; returns its index in v. */
size_t pollvec_add(pollvec *pv, int fd, short events);
