/* Writing /data as a tar archive without ever reading through what the guest planted:
 * every entry is opened beneath its parent's fd with O_NOFOLLOW (files with O_NONBLOCK, so
 * a fifo swapped in cannot block), checked with fstat against what the listing said, and
 * skipped and counted when it changed. Devices, fifos and sockets are skipped and counted;
 * setuid/setgid bits and host owners are not recorded; the guest's view of them, the
 * user.bluebox.* attributes (xattrs.h), is. */
#pragma once

#include <stdint.h>

#include "tally.h"
#include "util/err.h"

typedef enum { COMPRESS_GZIP, COMPRESS_ZSTD, COMPRESS_NONE } snap_compress;

/* ".tar.gz", ".tar.zst", ".tar". */
const char *compress_suffix(snap_compress c);
/* "gzip", "zstd", "none" and back. */
const char *compress_name(snap_compress c);
int compress_parse(const char *s, snap_compress *ret);

/* Called now and then with the bytes archived so far. */
typedef void (*snap_progress)(uint64_t bytes, void *ud);

/* Archive the directory data_fd (as "./…") into out_fd. */
int snapshot_write(int data_fd, int out_fd, snap_compress c, snap_progress progress, void *ud,
                   data_tally *t, bb_error **err);
