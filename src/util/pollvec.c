#include "pollvec.h"

#include "xalloc.h"

size_t pollvec_add(pollvec *pv, int fd, short events)
{
    if (pv->n == pv->cap) {
        pv->cap = pv->cap ? pv->cap * 2 : 16;
        pv->v = xreallocarray(pv->v, pv->cap, sizeof *pv->v);
    }
    pv->v[pv->n] = (struct pollfd){.fd = fd, .events = events};
    return pv->n++;
}
