/* The file server's tables (issue 14): nodeid -> inode (an O_PATH fd keyed by st_dev/st_ino,
 * with the guest's lookup count and cached ownership record) and fh -> open handle (an fd
 * for I/O, and a directory's getdents state).
 *
 * Nodeids and fhs are the guest's word: each is a slot index plus a generation, checked on
 * every use, never a pointer. Slot 0 of the inode table is the export root (nodeid 1,
 * FUSE_ROOT_ID) and is never forgotten. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "fsd/owner.h"

typedef struct fsd_inode {
    int fd; /* O_PATH|O_NOFOLLOW; -1 for a free slot */
    dev_t dev;
    ino_t ino;
    mode_t host_type; /* S_IFMT of the host file */
    uint32_t gen;
    uint64_t nlookup;
    fsd_own own;     /* the guest's view */
    bool own_stored; /* own came from (or is in) the xattr */
    bool hashed;     /* findable by st_dev/st_ino (false once the host file is gone) */
    uint32_t next;   /* hash chain: slot + 1, 0 ends */
} fsd_inode;

typedef struct fsd_fh {
    int fd; /* -1 for a free slot */
    uint32_t gen;
    bool dir;
    uint64_t ino; /* the inode's nodeid, to check FSYNC/SETATTR fh against it */
    /* A directory's getdents64 buffer: bytes [pos, end) are entries not yet sent; `off` is
     * the offset of the entry at pos (what the guest passes to continue from there). */
    uint8_t *buf;
    size_t pos, end;
    uint64_t off;
} fsd_fh;

typedef struct fsd_tables {
    fsd_inode *in;
    uint32_t n_in, cap_in; /* slots used high-water mark, allocated */
    uint32_t *buckets;     /* slot + 1 per chain head, 0 empty */
    uint32_t n_buckets;    /* power of two */
    uint32_t free_in;      /* free list of slots: slot + 1, 0 none (chained through next) */
    fsd_fh *h;
    uint32_t n_h, cap_h;
    uint32_t h_hint; /* no free handle slot below this */
    uint64_t live;   /* inodes + handles open */
    uint64_t max_fds;
} fsd_tables;

#define FSD_ROOT_ID 1

/* The tables with `root_fd` (O_PATH, owned by the tables from now) as nodeid 1. */
void fsd_tables_init(fsd_tables *t, int root_fd, const struct stat *st, uint64_t max_fds);
void fsd_tables_free(fsd_tables *t);

/* The inode for a nodeid the guest sent, or NULL. */
fsd_inode *fsd_inode_get(fsd_tables *t, uint64_t nodeid);
uint64_t fsd_inode_id(const fsd_tables *t, const fsd_inode *i);
/* The inode with this st_dev/st_ino, or NULL. */
fsd_inode *fsd_inode_find(fsd_tables *t, dev_t dev, ino_t ino);
/* A new inode for `fd` (owned by the table on success); NULL when the cap is reached. */
fsd_inode *fsd_inode_add(fsd_tables *t, int fd, const struct stat *st);
/* Make `i` unfindable by st_dev/st_ino (its host file is gone; the number may be reused). */
void fsd_inode_unhash(fsd_tables *t, fsd_inode *i);
/* Drop `n` lookups; the inode is closed and its slot freed at zero (never the root). */
void fsd_inode_forget(fsd_tables *t, uint64_t nodeid, uint64_t n);

/* A new handle for `fd` (owned on success); 0 when the cap is reached. */
uint64_t fsd_handle_add(fsd_tables *t, int fd, bool dir, uint64_t nodeid);
fsd_fh *fsd_handle_get(fsd_tables *t, uint64_t fh, bool dir);
/* Close and free; false when fh is not a live handle of that kind. */
bool fsd_handle_close(fsd_tables *t, uint64_t fh, bool dir);
