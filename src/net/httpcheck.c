/* The per-request host check of plain HTTP connections. See httpcheck.h. */
#include "net/httpcheck.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CHECK_BUF 65536

int relay_send_all(int fd, const void *buf, size_t n)
{
    const char *b = buf;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w, n -= (size_t)w;
    }
    return 0;
}

/* What the guest sent: through the machine, and up what it releases. */
static int up(subst *m, int u, const void *d, size_t n, relay_stats *st)
{
    strbuf out = {0};
    st->up += n;
    int r = subst_feed(m, d, n, &out);
    if (r < 0)
        st->error = m->error, st->refused = true;
    else if (out.len && relay_send_all(u, out.s, out.len) < 0)
        r = -1, st->error = "writing to the host failed";
    free(out.s);
    return r;
}

int http_relay_checked(int g, const uint8_t *pre, size_t pre_len, int u, const char *host,
                       const secrets *sec, relay_stats *st)
{
    static const secrets none = {0};
    *st = (relay_stats){0};
    subst m;
    subst_init_strict(&m, sec ? sec : &none, host);
    int rc = pre_len ? up(&m, u, pre, pre_len, st) : 0;
    char *buf = malloc(CHECK_BUF);
    bool open_in[2] = {true, true}; /* g still sends / u still sends */
    if (!buf)
        rc = -1, st->error = "out of memory";
    while (rc == 0 && (open_in[0] || open_in[1])) {
        struct pollfd p[2] = {{.fd = open_in[0] ? g : -1, .events = POLLIN},
                              {.fd = open_in[1] ? u : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            rc = -1, st->error = "poll failed";
            break;
        }
        for (int i = 0; i < 2 && rc == 0; i++) {
            if (!p[i].revents)
                continue;
            int from = i == 0 ? g : u, to = i == 0 ? u : g;
            ssize_t r = recv(from, buf, CHECK_BUF, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                open_in[i] = false;
                shutdown(to, SHUT_WR);
                if (r < 0)
                    rc = -1, st->error = "a side failed during the relay";
                continue;
            }
            if (i == 0) {
                rc = up(&m, u, buf, (size_t)r, st);
            } else {
                st->down += (uint64_t)r;
                if (relay_send_all(g, buf, (size_t)r) < 0)
                    rc = -1, st->error = "writing to the guest failed";
            }
        }
    }
    free(buf);
    st->requests = m.requests;
    st->leaks = m.scan.leaks;
    subst_clear(&m);
    return rc;
}
