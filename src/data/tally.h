/* What a /data operation did: entries and bytes written, and what it left out and why. */
#pragma once

#include <limits.h>
#include <stdint.h>

/* The longest path below /data an operation takes (without "./"): what a restore can open
 * in one openat2, and a bound on the depth of every walk however deep a guest nests. */
#define DATA_PATH_MAX (PATH_MAX - 1)

/* The most data segments (runs between holes) a file in a snapshot has: the snapshot writer
 * puts the rest of a file with more in one segment, and a restore refuses an archive whose
 * entry has more. */
#define DATA_MAX_SEGMENTS 65536

typedef enum {
    SKIP_DEVICE,   /* character or block device */
    SKIP_FIFO,     /* named pipe */
    SKIP_SOCKET,   /* unix socket */
    SKIP_CHANGED,  /* swapped or removed between listing and reading */
    SKIP_CONFLICT, /* would replace an entry of another type */
    SKIP_DEEP,     /* a path longer than DATA_PATH_MAX: the subtree is left out */
    SKIP_N,
} skip_kind;

typedef struct {
    uint64_t entries;
    uint64_t bytes;
    uint64_t skipped[SKIP_N];
    /* Extended attributes not carried: in an archive, any name but user.bluebox.*; in any
     * source, those over the limits (xattrs.h). */
    uint64_t xattrs_ignored;
    /* Entries whose user.bluebox.* attributes the destination's file system did not take:
     * their guest ownership and modes are lost. */
    uint64_t xattrs_lost;
} data_tally;

uint64_t tally_skipped(const data_tally *t);
/* "2 fifos, 1 device": the skipped entries by kind (empty when none). */
char *tally_describe(const data_tally *t);
/* The one-line form the __data role prints, and its parser. */
char *tally_format(const data_tally *t);
int tally_parse(const char *s, data_tally *ret);
/* The skip kind for a file type (st_mode), or SKIP_N for one that can be copied. */
skip_kind skip_kind_of(unsigned mode);
