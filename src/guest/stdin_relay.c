/* The stdin relay: a queue in front of a command's non-blocking stdin. */
#include "stdin_relay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/xalloc.h"

void stdin_relay_init(stdin_relay *r, int fd, bool pty)
{
    *r = (stdin_relay){.fd = fd, .pty = pty};
}

void stdin_relay_add(stdin_relay *r, const void *data, size_t n)
{
    if (r->eof || r->fd < 0)
        return;
    if (r->off == r->len)
        r->off = r->len = 0;
    if (r->len + n > r->cap) {
        r->cap = r->len + n;
        r->buf = xrealloc(r->buf, r->cap);
    }
    if (n)
        memcpy(r->buf + r->len, data, n);
    r->len += n;
}

static void close_stdin(stdin_relay *r)
{
    if (r->pty) {
        /* A terminal has no EOF of its own: type the EOF character, as a keyboard would. */
        (void)!write(r->fd, "\x04", 1);
        r->eof = false;
        return;
    }
    close(r->fd);
    r->fd = -1;
}

void stdin_relay_push(stdin_relay *r)
{
    while (r->fd >= 0 && r->off < r->len) {
        ssize_t w = write(r->fd, r->buf + r->off, r->len - r->off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) { /* EPIPE: the command stopped reading; drop the rest */
            r->off = r->len;
            break;
        }
        r->off += (size_t)w;
    }
    if (r->off < r->len)
        return;
    r->off = r->len = 0;
    if (r->eof && r->fd >= 0)
        close_stdin(r);
}

void stdin_relay_eof(stdin_relay *r)
{
    r->eof = true;
    stdin_relay_push(r);
}

size_t stdin_relay_queued(const stdin_relay *r)
{
    return r->len - r->off;
}

bool stdin_relay_wants_write(const stdin_relay *r)
{
    return r->fd >= 0 && r->off < r->len;
}

void stdin_relay_done(stdin_relay *r)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
    r->len = r->off = r->cap = 0;
}
