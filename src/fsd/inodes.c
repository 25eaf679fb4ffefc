/* The nodeid and fh tables (see inodes.h). */
#include "fsd/inodes.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/xalloc.h"

#define SLOT_MAX 0x7fffffffu

static uint64_t make_id(uint32_t slot, uint32_t gen)
{
    return (uint64_t)gen << 32 | ((uint64_t)slot + 1);
}

/* Slot of an id, or UINT32_MAX when it cannot be one. */
static uint32_t id_slot(uint64_t id, uint32_t n, uint32_t *gen)
{
    uint64_t lo = id & 0xffffffffu;
    if (lo == 0 || lo > n)
        return UINT32_MAX;
    *gen = (uint32_t)(id >> 32);
    return (uint32_t)(lo - 1);
}

static uint32_t hash(dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4full;
    return (uint32_t)(h >> 32);
}

static void chain_add(fsd_tables *t, uint32_t slot)
{
    t->in[slot].hashed = true;
    uint32_t b = hash(t->in[slot].dev, t->in[slot].ino) & (t->n_buckets - 1);
    t->in[slot].next = t->buckets[b];
    t->buckets[b] = slot + 1;
}

static void chain_del(fsd_tables *t, uint32_t slot)
{
    if (!t->in[slot].hashed)
        return;
    t->in[slot].hashed = false;
    uint32_t b = hash(t->in[slot].dev, t->in[slot].ino) & (t->n_buckets - 1);
    for (uint32_t *p = &t->buckets[b]; *p; p = &t->in[*p - 1].next) {
        if (*p == slot + 1) {
            *p = t->in[slot].next;
            return;
        }
    }
}

static void rehash(fsd_tables *t, uint32_t n_buckets)
{
    free(t->buckets);
    t->buckets = xcalloc(n_buckets, sizeof(*t->buckets));
    t->n_buckets = n_buckets;
    for (uint32_t s = 0; s < t->n_in; s++)
        if (t->in[s].fd >= 0 && t->in[s].hashed)
            chain_add(t, s);
}

void fsd_tables_init(fsd_tables *t, int root_fd, const struct stat *st, uint64_t max_fds)
{
    *t = (fsd_tables){.max_fds = max_fds ? max_fds : UINT64_MAX};
    t->cap_in = 64;
    t->in = xcalloc(t->cap_in, sizeof(*t->in));
    t->in[0] = (fsd_inode){.fd = root_fd,
                           .dev = st->st_dev,
                           .ino = st->st_ino,
                           .host_type = st->st_mode & S_IFMT,
                           .nlookup = 1};
    t->n_in = 1;
    t->live = 1;
    t->n_buckets = 64;
    t->buckets = xcalloc(t->n_buckets, sizeof(*t->buckets));
    chain_add(t, 0);
}

void fsd_tables_free(fsd_tables *t)
{
    for (uint32_t s = 0; s < t->n_in; s++)
        if (t->in[s].fd >= 0)
            close(t->in[s].fd);
    for (uint32_t s = 0; s < t->n_h; s++) {
        if (t->h[s].fd >= 0)
            close(t->h[s].fd);
        free(t->h[s].buf);
    }
    free(t->in);
    free(t->buckets);
    free(t->h);
    *t = (fsd_tables){0};
}

fsd_inode *fsd_inode_get(fsd_tables *t, uint64_t nodeid)
{
    uint32_t gen;
    uint32_t s = id_slot(nodeid, t->n_in, &gen);
    if (s == UINT32_MAX || t->in[s].fd < 0 || t->in[s].gen != gen)
        return NULL;
    return &t->in[s];
}

uint64_t fsd_inode_id(const fsd_tables *t, const fsd_inode *i)
{
    return make_id((uint32_t)(i - t->in), i->gen);
}

fsd_inode *fsd_inode_find(fsd_tables *t, dev_t dev, ino_t ino)
{
    for (uint32_t s = t->buckets[hash(dev, ino) & (t->n_buckets - 1)]; s; s = t->in[s - 1].next)
        if (t->in[s - 1].ino == ino && t->in[s - 1].dev == dev)
            return &t->in[s - 1];
    return NULL;
}

fsd_inode *fsd_inode_add(fsd_tables *t, int fd, const struct stat *st)
{
    if (t->live >= t->max_fds)
        return NULL;
    uint32_t s;
    if (t->free_in) {
        s = t->free_in - 1;
        t->free_in = t->in[s].next;
    } else {
        if (t->n_in >= SLOT_MAX)
            return NULL;
        if (t->n_in == t->cap_in) {
            t->cap_in *= 2;
            t->in = xreallocarray(t->in, t->cap_in, sizeof(*t->in));
        }
        s = t->n_in++;
        t->in[s].gen = 0;
    }
    fsd_inode *i = &t->in[s];
    *i = (fsd_inode){.fd = fd,
                     .dev = st->st_dev,
                     .ino = st->st_ino,
                     .host_type = st->st_mode & S_IFMT,
                     .gen = i->gen + 1,
                     .nlookup = 1};
    chain_add(t, s);
    t->live++;
    if (t->live > t->n_buckets && t->n_buckets < (1u << 30))
        rehash(t, t->n_buckets * 2);
    return i;
}

void fsd_inode_unhash(fsd_tables *t, fsd_inode *i)
{
    if (i != t->in)
        chain_del(t, (uint32_t)(i - t->in));
}

void fsd_inode_forget(fsd_tables *t, uint64_t nodeid, uint64_t n)
{
    fsd_inode *i = fsd_inode_get(t, nodeid);
    if (!i || i == t->in)
        return;
    i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
    if (i->nlookup)
        return;
    uint32_t s = (uint32_t)(i - t->in);
    chain_del(t, s);
    close(i->fd);
    i->fd = -1;
    i->next = t->free_in;
    t->free_in = s + 1;
    t->live--;
}

uint64_t fsd_handle_add(fsd_tables *t, int fd, bool dir, uint64_t nodeid)
{
    if (t->live >= t->max_fds)
        return 0;
    uint32_t s = t->h_hint <= t->n_h ? t->h_hint : 0;
    while (s < t->n_h && t->h[s].fd >= 0)
        s++;
    if (s == t->n_h) {
        if (t->n_h >= SLOT_MAX)
            return 0;
        if (t->n_h == t->cap_h) {
            t->cap_h = t->cap_h ? t->cap_h * 2 : 16;
            t->h = xreallocarray(t->h, t->cap_h, sizeof(*t->h));
        }
        t->h[t->n_h++] = (fsd_fh){.fd = -1};
    }
    fsd_fh *h = &t->h[s];
    *h = (fsd_fh){.fd = fd, .gen = h->gen + 1, .dir = dir, .ino = nodeid};
    t->live++;
    t->h_hint = s + 1;
    return make_id(s, h->gen);
}

fsd_fh *fsd_handle_get(fsd_tables *t, uint64_t fh, bool dir)
{
    uint32_t gen;
    uint32_t s = id_slot(fh, t->n_h, &gen);
    if (s == UINT32_MAX || t->h[s].fd < 0 || t->h[s].gen != gen || t->h[s].dir != dir)
        return NULL;
    return &t->h[s];
}

bool fsd_handle_close(fsd_tables *t, uint64_t fh, bool dir)
{
    fsd_fh *h = fsd_handle_get(t, fh, dir);
    if (!h)
        return false;
    close(h->fd);
    h->fd = -1;
    free(h->buf);
    h->buf = NULL;
    t->live--;
    uint32_t s = (uint32_t)(h - t->h);
    if (s < t->h_hint)
        t->h_hint = s;
    return true;
}
