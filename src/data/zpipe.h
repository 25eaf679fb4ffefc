/* zstd compression on a thread of its own, so reading /data and compressing overlap the way
 * `tar --zstd` and its zstd process do. The static libzstd has no worker threads of its own. */
#pragma once

#include <stddef.h>

typedef struct zpipe zpipe;

/* Start the compressor thread; it writes one zstd frame to out_fd. */
zpipe *zpipe_start(int out_fd, int level);
/* Hand bytes over (copied; waits while the queue is full). -1 with errno set once the
 * compressor has failed (e.g. ENOSPC): stop writing and call zpipe_finish. */
int zpipe_write(zpipe *z, const void *data, size_t len);
/* End the frame, wait for the thread, free. 0, or -1 with errno of the first failure. */
int zpipe_finish(zpipe *z);
