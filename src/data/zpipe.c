/* See zpipe.h. A fixed ring of buffers between the archive writer and one compressor. */
#include "zpipe.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "util/fs.h"
#include "util/xalloc.h"

#define ZBUF  (1u << 20)
#define NBUFS 4 /* memory stays at NBUFS MiB plus zstd's window, whatever the archive size */

typedef struct {
    char *data;
    size_t len;
} zbuf;

struct zpipe {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    zbuf bufs[NBUFS];
    size_t head, count; /* filled buffers waiting for the compressor: bufs[head..head+count) */
    size_t fill;        /* the buffer the writer fills: bufs[(head + count) % NBUFS] */
    bool done;          /* no more input after the queued buffers */
    int error;          /* first failure of the compressor, 0 while fine */
    int out_fd;
    ZSTD_CCtx *cctx;
    char *out;
    size_t out_size;
};

static int flush(zpipe *z, const char *data, size_t len, ZSTD_EndDirective mode)
{
    ZSTD_inBuffer in = {data, len, 0};
    for (;;) {
        ZSTD_outBuffer out = {z->out, z->out_size, 0};
        size_t left = ZSTD_compressStream2(z->cctx, &out, &in, mode);
        if (ZSTD_isError(left))
            return EIO;
        _cleanup_error_ bb_error *e = NULL;
        if (out.pos > 0 && write_full(z->out_fd, z->out, out.pos, "the archive", &e) < 0)
            return e->status;
        if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size)
            return 0;
    }
}

static void *compressor(void *arg)
{
    zpipe *z = arg;
    pthread_mutex_lock(&z->lock);
    for (;;) {
        while (z->count == 0 && !z->done)
            pthread_cond_wait(&z->changed, &z->lock);
        if (z->count == 0)
            break;
        zbuf *b = &z->bufs[z->head];
        pthread_mutex_unlock(&z->lock);
        int e = z->error ? 0 : flush(z, b->data, b->len, ZSTD_e_continue);
        pthread_mutex_lock(&z->lock);
        if (e && !z->error)
            z->error = e;
        b->len = 0;
        z->head = (z->head + 1) % NBUFS;
        z->count--;
        pthread_cond_broadcast(&z->changed);
    }
    pthread_mutex_unlock(&z->lock);
    int e = z->error ? 0 : flush(z, NULL, 0, ZSTD_e_end);
    pthread_mutex_lock(&z->lock);
    if (e && !z->error)
        z->error = e;
    pthread_mutex_unlock(&z->lock);
    return NULL;
}

zpipe *zpipe_start(int out_fd, int level)
{
    zpipe *z = xmalloc(sizeof *z);
    *z = (zpipe){.out_fd = out_fd, .out_size = ZSTD_CStreamOutSize()};
    z->cctx = ZSTD_createCCtx();
    if (!z->cctx)
        abort();
    ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, level);
    z->out = xmalloc(z->out_size);
    for (size_t i = 0; i < NBUFS; i++)
        z->bufs[i].data = xmalloc(ZBUF);
    pthread_mutex_init(&z->lock, NULL);
    pthread_cond_init(&z->changed, NULL);
    if (pthread_create(&z->thread, NULL, compressor, z) != 0)
        abort();
    return z;
}

/* Queue the buffer being filled and wait for a free one. Called with the lock held. */
static void push(zpipe *z)
{
    z->count++;
    pthread_cond_broadcast(&z->changed);
    while (z->count == NBUFS && !z->error)
        pthread_cond_wait(&z->changed, &z->lock);
    z->fill = (z->head + z->count) % NBUFS;
}

int zpipe_write(zpipe *z, const void *data, size_t len)
{
    const char *p = data;
    pthread_mutex_lock(&z->lock);
    while (len > 0 && !z->error) {
        zbuf *b = &z->bufs[z->fill];
        size_t n = len < ZBUF - b->len ? len : ZBUF - b->len;
        memcpy(b->data + b->len, p, n); /* this buffer is the writer's alone */
        b->len += n;
        p += n;
        len -= n;
        if (b->len == ZBUF)
            push(z);
    }
    int e = z->error;
    pthread_mutex_unlock(&z->lock);
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}

int zpipe_finish(zpipe *z)
{
    pthread_mutex_lock(&z->lock);
    if (z->bufs[z->fill].len > 0 && !z->error) {
        z->count++;
        z->fill = NBUFS; /* never filled again */
    }
    z->done = true;
    pthread_cond_broadcast(&z->changed);
    pthread_mutex_unlock(&z->lock);
    pthread_join(z->thread, NULL);
    int e = z->error;
    for (size_t i = 0; i < NBUFS; i++)
        free(z->bufs[i].data);
    free(z->out);
    ZSTD_freeCCtx(z->cctx);
    pthread_mutex_destroy(&z->lock);
    pthread_cond_destroy(&z->changed);
    free(z);
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}
