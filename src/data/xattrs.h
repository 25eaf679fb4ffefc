/* The extended attributes a copy of /data carries: the guest's view of ownership and modes
 * (user.bluebox.own) and the guest's own extended attributes (user.bluebox.x.<name>), which
 * bluebox's /data file server keeps on the host files. Snapshots, restores, data export and
 * import carry these and nothing else: never security.* (file capabilities), trusted.*,
 * system.* (ACLs) or another user.* name, whatever a source or an archive holds. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tally.h"
#include "util/err.h"
#include "util/macro.h"

#define XATTR_CARRIED_PREFIX "user.bluebox."
/* Linux's own limits on one attribute (XATTR_NAME_MAX, XATTR_SIZE_MAX)... */
#define XATTR_NAME_LEN_MAX 255
#define XATTR_VALUE_MAX    65536
/* ...and bluebox's on one entry: what a restore reads into memory per entry stays small,
 * and the pax header that holds them stays well under the 1 MiB libarchive reads. */
#define XATTR_PER_ENTRY_MAX   64
#define XATTR_ENTRY_BYTES_MAX (512 * 1024)

typedef struct {
    char *name;
    char *value;
    size_t len;
} xattr_pair;

typedef struct {
    xattr_pair *v;
    size_t n;
    size_t bytes; /* of names and values */
} xattr_set;

typedef enum {
    XATTR_ADDED,
    XATTR_FOREIGN, /* not a user.bluebox.* name */
    XATTR_OVER,    /* over a limit above */
    XATTR_DUP,     /* the name is in the set already (an archive with two records of it) */
} xattr_added;

/* Whether name is one a copy carries: "user.bluebox." and more, at most 255 bytes. */
bool xattr_carried(const char *name);
/* Add name=value to s when it is carried and within the limits; says why not. */
xattr_added xattr_set_add(xattr_set *s, const char *name, const void *value, size_t len);
void xattr_set_free(xattr_set *s);
static inline void xattr_set_freep(xattr_set *s)
{
    xattr_set_free(s);
}
#define _cleanup_xattrs_ _cleanup_(xattr_set_freep)

/* The carried attributes of the file or directory open at fd (not O_PATH). A file system
 * without extended attributes has none; those over the limits are counted in
 * t->xattrs_ignored. */
int xattrs_read(int fd, const char *name, xattr_set *ret, data_tally *t, bb_error **err);
/* Write s to fd (a file or directory this operation created and may write). When the file
 * system does not take them (no user xattrs here, no room for them), the entry counts in
 * t->xattrs_lost and the copy goes on; any other failure is an error. */
int xattrs_write(int fd, const char *name, const xattr_set *s, data_tally *t, bb_error **err);
/* xattrs_read from src, xattrs_write to dst. */
int xattrs_copy(int src, int dst, const char *name, data_tally *t, bb_error **err);
