/* The nodeid and fh tables (see inodes.h). */
#include "fsd/inodes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/xalloc.h"

#define SLOT_MAX 0x7fffffffu
#define CHUNK    1024u /* inodes per chunk */

static fsd_inode *at(const fsd_tables *t, uint32_t s)
{
    return &t->chunk[s / CHUNK][s % CHUNK];
}

fsd_inode *fsd_inode_root(fsd_tables *t)
{
    return at(t, 0);
}

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
    at(t, slot)->hashed = true;
    uint32_t b = hash(at(t, slot)->dev, at(t, slot)->ino) & (t->n_buckets - 1);
    at(t, slot)->next = t->buckets[b];
    t->buckets[b] = slot + 1;
}

static void chain_del(fsd_tables *t, uint32_t slot)
{
    if (!at(t, slot)->hashed)
        return;
    at(t, slot)->hashed = false;
    uint32_t b = hash(at(t, slot)->dev, at(t, slot)->ino) & (t->n_buckets - 1);
    for (uint32_t *p = &t->buckets[b]; *p; p = &at(t, *p - 1)->next) {
        if (*p == slot + 1) {
            *p = at(t, slot)->next;
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
        if (at(t, s)->used && at(t, s)->hashed)
            chain_add(t, s);
}

void fsd_tables_init(fsd_tables *t, int root_fd, const struct stat *st, uint64_t max_fds)
{
    *t = (fsd_tables){.max_fds = max_fds ? max_fds : UINT64_MAX};
    t->cap_in = 64;
    t->chunk = xcalloc(1, sizeof(*t->chunk));
    t->chunk[0] = xcalloc(CHUNK, sizeof(**t->chunk));
    t->cap_in = CHUNK;
    *at(t, 0) = (fsd_inode){.fd = root_fd,
                            .used = true,
                            .pinned = true,
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
    for (uint32_t s = 0; s < t->n_in; s++) {
        if (at(t, s)->fd >= 0)
            close(at(t, s)->fd);
        free(at(t, s)->name);
    }
    for (uint32_t s = 0; s < t->n_h; s++) {
        if (t->h[s].fd >= 0)
            close(t->h[s].fd);
        free(t->h[s].buf);
    }
    for (uint32_t c = 0; c < t->cap_in / CHUNK; c++)
        free(t->chunk[c]);
    free(t->chunk);
    free(t->buckets);
    free(t->h);
    *t = (fsd_tables){0};
}

/* The inode for a nodeid the guest sent, or NULL. */
static fsd_inode *fsd_inode_get(fsd_tables *t, uint64_t nodeid)
{
    uint32_t gen;
    uint32_t s = id_slot(nodeid, t->n_in, &gen);
    /* A slot kept only for its children (nlookup 0) is no nodeid of the guest's any more. */
    if (s == UINT32_MAX || !at(t, s)->used || at(t, s)->gen != gen || (s && !at(t, s)->nlookup))
        return NULL;
    at(t, s)->recent = true;
    at(t, s)->req = t->req;
    return at(t, s);
}

fsd_inode *fsd_inode_use(fsd_tables *t, uint64_t nodeid)
{
    fsd_inode *i = fsd_inode_get(t, nodeid);
    return i && fsd_inode_fd(t, i) >= 0 ? i : NULL;
}

uint64_t fsd_inode_id(const fsd_tables *t, const fsd_inode *i)
{
    return make_id(i->slot, i->gen);
}

fsd_inode *fsd_inode_find(fsd_tables *t, dev_t dev, ino_t ino)
{
    for (uint32_t s = t->buckets[hash(dev, ino) & (t->n_buckets - 1)]; s; s = at(t, s - 1)->next)
        if (at(t, s - 1)->ino == ino && at(t, s - 1)->dev == dev) {
            at(t, s - 1)->req = t->req;
            return at(t, s - 1);
        }
    return NULL;
}

/* Close the fd of one inode that can be reopened by name, the least recently used by the
 * clock; false when none can. */
static bool close_one(fsd_tables *t)
{
    for (uint64_t step = 0; step < 2 * (uint64_t)t->n_in; step++) {
        uint32_t s = t->hand;
        t->hand = t->hand + 1 < t->n_in ? t->hand + 1 : 0;
        fsd_inode *i = at(t, s);
        /* Never one the current request holds: its fd number is in use right now. */
        if (!i->used || i->fd < 0 || i->pinned || (!i->name && !i->gone) || i->req == t->req)
            continue;
        if (i->recent) {
            i->recent = false;
            continue;
        }
        close(i->fd);
        i->fd = -1;
        t->live--;
        return true;
    }
    return false;
}

/* Room for one more fd: under the cap, or after closing one that can be reopened. */
static bool room(fsd_tables *t)
{
    return t->live < t->max_fds || close_one(t);
}

static void set_name(fsd_tables *t, fsd_inode *i, fsd_inode *dir, const char *name)
{
    if (i->parent)
        at(t, i->parent - 1)->kids--;
    free(i->name);
    i->name = NULL;
    i->parent = 0;
    if (!dir || !name || i->host_type == S_IFDIR || i->pinned)
        return;
    i->name = xstrdup(name);
    i->parent = dir->slot + 1;
    dir->kids++;
}

fsd_inode *fsd_inode_add(fsd_tables *t, int fd, const struct stat *st, fsd_inode *dir,
                         const char *name)
{
    if (!room(t))
        return NULL;
    uint32_t s;
    if (t->free_in) {
        s = t->free_in - 1;
        t->free_in = at(t, s)->next;
    } else {
        if (t->n_in >= SLOT_MAX)
            return NULL;
        if (t->n_in == t->cap_in) {
            /* A chunk more: inodes never move, so pointers to them stay good. */
            uint32_t c = t->cap_in / CHUNK;
            t->chunk = xreallocarray(t->chunk, c + 1, sizeof(*t->chunk));
            t->chunk[c] = xcalloc(CHUNK, sizeof(**t->chunk));
            t->cap_in += CHUNK;
        }
        s = t->n_in++;
        at(t, s)->gen = 0;
    }
    fsd_inode *i = at(t, s);
    *i = (fsd_inode){.fd = fd,
                     .slot = s,
                     .used = true,
                     .recent = true,
                     .req = t->req,
                     .dev = st->st_dev,
                     .ino = st->st_ino,
                     .host_type = st->st_mode & S_IFMT,
                     .gen = i->gen + 1,
                     .nlookup = 1};
    /* A directory's fd is every child's way back: it stays. */
    i->pinned = i->host_type == S_IFDIR || !dir || !name;
    set_name(t, i, dir, name);
    chain_add(t, s);
    t->live++;
    if (t->n_in > t->n_buckets && t->n_buckets < (1u << 30))
        rehash(t, t->n_buckets * 2);
    return i;
}

int fsd_inode_fd(fsd_tables *t, fsd_inode *i)
{
    i->recent = true;
    i->req = t->req;
    if (i->fd >= 0)
        return i->fd;
    fsd_inode *dir = i->parent ? at(t, i->parent - 1) : NULL;
    if (!dir || !i->name || dir->fd < 0) {
        errno = ESTALE;
        return -1;
    }
    if (!room(t)) {
        errno = ENFILE;
        return -1;
    }
    int fd = openat(dir->fd, i->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_dev != i->dev || st.st_ino != i->ino)) {
        close(fd);
        fd = -1;
        errno = ESTALE;
    }
    if (fd < 0)
        return -1;
    i->fd = fd;
    t->live++;
    return fd;
}

void fsd_inode_name(fsd_tables *t, fsd_inode *i, fsd_inode *dir, const char *name)
{
    if (i->host_type != S_IFDIR && !i->pinned)
        set_name(t, i, dir, name);
}

static bool has_open_handle(const fsd_tables *t, const fsd_inode *i)
{
    uint64_t id = fsd_inode_id(t, i);
    for (uint32_t s = 0; s < t->n_h; s++)
        if (t->h[s].fd >= 0 && t->h[s].ino == id)
            return true;
    return false;
}

/* Keep `i`'s fd open for good: its name is about to go (unlink, a replacing rename). */
static void fsd_inode_pin(fsd_tables *t, fsd_inode *i)
{
    if (i->pinned)
        return;
    if (fsd_inode_fd(t, i) < 0)
        return; /* gone already: nothing to keep */
    i->pinned = true;
    set_name(t, i, NULL, NULL);
}

void fsd_inode_unnamed(fsd_tables *t, fsd_inode *i, const fsd_inode *dir, const char *name,
                       nlink_t nlink)
{
    bool recorded = i->name && i->parent == dir->slot + 1 && strcmp(i->name, name) == 0;
    if (nlink > 1 && !recorded)
        return;
    /* The guest may still use a file it has open (fstat, a handle-less SETATTR): keep its
     * fd. One it holds only by nodeid may lose its fd like any other, and is then ESTALE:
     * `rm -rf` of 20,000 files must not hold 20,000 fds until the guest forgets them. */
    if (has_open_handle(t, i)) {
        fsd_inode_pin(t, i);
        return;
    }
    set_name(t, i, NULL, NULL);
    i->gone = true;
}

void fsd_inode_unhash(fsd_tables *t, fsd_inode *i)
{
    if (i->slot != 0)
        chain_del(t, i->slot);
}

/* Free slot s, and then each parent left with neither lookups nor children. */
static void release(fsd_tables *t, uint32_t s)
{
    while (s != 0) {
        fsd_inode *i = at(t, s);
        if (i->nlookup || i->kids)
            return;
        uint32_t parent = i->parent;
        set_name(t, i, NULL, NULL);
        chain_del(t, s);
        if (i->fd >= 0) {
            close(i->fd);
            t->live--;
        }
        i->fd = -1;
        i->used = false;
        i->next = t->free_in;
        t->free_in = s + 1;
        if (!parent)
            return;
        s = parent - 1;
    }
}

void fsd_inode_forget(fsd_tables *t, uint64_t nodeid, uint64_t n)
{
    fsd_inode *i = fsd_inode_get(t, nodeid);
    if (!i || i->slot == 0)
        return;
    i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
    if (i->nlookup == 0)
        release(t, i->slot);
}

uint64_t fsd_handle_add(fsd_tables *t, int fd, bool dir, uint64_t nodeid)
{
    if (!room(t))
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
