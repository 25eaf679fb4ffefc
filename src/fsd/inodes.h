/* The file server's tables: nodeid -> inode (an O_PATH fd keyed by st_dev/st_ino,
 * with the guest's lookup count and cached ownership record) and fh -> open handle (an fd
 * for I/O, and a directory's getdents state).
 *
 * The guest may hold far more inodes than the server may keep fds (a 50,000-file tree in
 * its cache; the container's RLIMIT_NOFILE can be 20,000): a file's or symlink's O_PATH fd
 * is closed when the cap is reached (least recently used first) and reopened on use by its
 * last known name beneath its parent directory, whose fd stays open; a reopened name that
 * no longer leads to the same st_dev/st_ino is ESTALE. Directories, the root and files
 * whose last name was removed while the guest still held them keep their fds (pinned).
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
    uint32_t slot; /* its index in the table */
    int fd;        /* O_PATH|O_NOFOLLOW; -1 for a free slot, or while closed (see above) */
    bool used;
    bool pinned;     /* its fd is never closed to make room */
    bool recent;     /* used since the clock hand last passed */
    bool gone;       /* its last name went while no handle had it open: no reopening */
    uint64_t req;    /* the request that last used it: its fd stays open during it */
    uint32_t parent; /* slot + 1 of the directory it was last named in, 0 none */
    uint32_t kids;   /* inodes naming this one as their parent */
    char *name;      /* its last name there (files and symlinks only) */
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
    fsd_inode **chunk;     /* CHUNK inodes each: an inode never moves once made */
    uint32_t n_in, cap_in; /* slots used high-water mark, allocated */
    uint32_t *buckets;     /* slot + 1 per chain head, 0 empty */
    uint32_t n_buckets;    /* power of two */
    uint32_t free_in;      /* free list of slots: slot + 1, 0 none (chained through next) */
    fsd_fh *h;
    uint32_t n_h, cap_h;
    uint32_t h_hint; /* no free handle slot below this */
    uint64_t live;   /* fds open: inodes' + handles' */
    uint64_t max_fds;
    uint32_t hand; /* the clock hand over inode slots, for closing fds */
    uint64_t req;  /* the request being served (fsd_handle() counts them) */
} fsd_tables;

#define FSD_ROOT_ID 1

/* The tables with `root_fd` (O_PATH, owned by the tables from now) as nodeid 1. */
void fsd_tables_init(fsd_tables *t, int root_fd, const struct stat *st, uint64_t max_fds);
void fsd_tables_free(fsd_tables *t);

fsd_inode *fsd_inode_root(fsd_tables *t);
/* The same with its fd open for the rest of this request (reopened by name if it was
 * closed); NULL also when that fails (ESTALE: the name now leads elsewhere). */
fsd_inode *fsd_inode_use(fsd_tables *t, uint64_t nodeid);
uint64_t fsd_inode_id(const fsd_tables *t, const fsd_inode *i);
/* The inode with this st_dev/st_ino, or NULL. */
fsd_inode *fsd_inode_find(fsd_tables *t, dev_t dev, ino_t ino);
/* A new inode for `fd` (owned by the table on success), named `name` in `dir` (both may be
 * NULL: then it is pinned); NULL when no fd can be made room for. */
fsd_inode *fsd_inode_add(fsd_tables *t, int fd, const struct stat *st, fsd_inode *dir,
                         const char *name);
/* `i`'s O_PATH fd, reopened by its name when it was closed; -1 with errno (ESTALE: the name
 * now leads elsewhere or nowhere). */
int fsd_inode_fd(fsd_tables *t, fsd_inode *i);
/* `i` is now called `name` in `dir` (a lookup, a rename or a link found it there). */
void fsd_inode_name(fsd_tables *t, fsd_inode *i, fsd_inode *dir, const char *name);
/* `name` in `dir`, one of `nlink` names of `i`, is about to go. When that leaves it no name
 * we know (its last link, or the name it is recorded by): pinned if an open handle has it,
 * else its fd may be closed for good (the nodeid is ESTALE from then on). A file with other
 * links (git links each object into place, then unlinks the temporary name) is unchanged. */
void fsd_inode_unnamed(fsd_tables *t, fsd_inode *i, const fsd_inode *dir, const char *name,
                       nlink_t nlink);
/* Make `i` unfindable by st_dev/st_ino (its host file is gone; the number may be reused). */
void fsd_inode_unhash(fsd_tables *t, fsd_inode *i);
/* Drop `n` lookups; the inode is closed and its slot freed at zero (never the root). */
void fsd_inode_forget(fsd_tables *t, uint64_t nodeid, uint64_t n);

/* A new handle for `fd` (owned on success); 0 when the cap is reached. */
uint64_t fsd_handle_add(fsd_tables *t, int fd, bool dir, uint64_t nodeid);
fsd_fh *fsd_handle_get(fsd_tables *t, uint64_t fh, bool dir);
/* Close and free; false when fh is not a live handle of that kind. */
bool fsd_handle_close(fsd_tables *t, uint64_t fh, bool dir);
