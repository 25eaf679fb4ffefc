/* vurelay: a vhost-user relay between UML's virtio_uml (frontend) and a virtio-fs backend
 * that does not answer the config request (Debian 12's C virtiofsd).
 *
 *   vurelay LISTEN_SOCK BACKEND_SOCK TAG
 *
 * Accepts one frontend on LISTEN_SOCK, connects to BACKEND_SOCK and pumps vhost-user messages
 * (with their SCM_RIGHTS fds) both ways, except:
 *  - GET_PROTOCOL_FEATURES' reply gains F_CONFIG (bit 9), which the frontend then uses;
 *  - SET_PROTOCOL_FEATURES loses F_CONFIG before it reaches the backend;
 *  - GET_CONFIG is answered here with struct virtio_fs_config {tag[36], num_request_queues=1};
 *  - SET_CONFIG is acknowledged (if asked) and dropped.
 * The backend's slave channel fd (SET_SLAVE_REQ_FD) passes through untouched. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define F_CONFIG (1ull << 9)
#define F_REPLY_ACK (1ull << 3)
enum { GET_PROTOCOL_FEATURES = 15, SET_PROTOCOL_FEATURES = 16, GET_CONFIG = 24, SET_CONFIG = 25 };
#define FLAG_REPLY 0x4
#define FLAG_NEED_REPLY 0x8

struct hdr {
    uint32_t req, flags, size;
};
static int verbose;

/* One message: header + payload + up to 8 fds. Returns 0 on EOF. */
static int rx(int s, struct hdr *h, uint8_t *pl, int *fds, int *nfd)
{
    struct iovec iov = {h, sizeof *h};
    char cbuf[CMSG_SPACE(8 * sizeof(int))];
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    if (n <= 0) return 0;
    if (n != sizeof *h) { fprintf(stderr, "vurelay: short header %zd\n", n); exit(1); }
    *nfd = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(fds + *nfd, CMSG_DATA(c), k * sizeof(int));
            *nfd += k;
        }
    if (h->size > 4096) { fprintf(stderr, "vurelay: payload %u too big\n", h->size); exit(1); }
    size_t got = 0;
    while (got < h->size) {
        n = recv(s, pl + got, h->size - got, 0);
        if (n <= 0) return 0;
        got += n;
    }
    return 1;
}

static void tx(int s, struct hdr *h, uint8_t *pl, int *fds, int nfd)
{
    uint8_t buf[sizeof *h + 4096];
    memcpy(buf, h, sizeof *h);
    memcpy(buf + sizeof *h, pl, h->size);
    struct iovec iov = {buf, sizeof *h + h->size};
    char cbuf[CMSG_SPACE(8 * sizeof(int))];
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfd) {
        m.msg_control = cbuf;
        m.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfd * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfd * sizeof(int));
    }
    if (sendmsg(s, &m, MSG_NOSIGNAL) < 0) { perror("vurelay: sendmsg"); exit(1); }
    for (int i = 0; i < nfd; i++) close(fds[i]);
}

int main(int argc, char **argv)
{
    if (argc < 4) return fprintf(stderr, "usage: vurelay LISTEN BACKEND TAG\n"), 2;
    verbose = getenv("VURELAY_VERBOSE") != NULL;
    const char *tag = argv[3];
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
    unlink(argv[1]);
    if (bind(l, (void *)&a, sizeof a) < 0 || listen(l, 1) < 0) return perror("bind"), 1;
    int f = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    int b = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un ba = {.sun_family = AF_UNIX};
    strncpy(ba.sun_path, argv[2], sizeof ba.sun_path - 1);
    if (connect(b, (void *)&ba, sizeof ba) < 0) return perror("connect backend"), 1;
    uint64_t proto_feat = 0;
    uint8_t pl[4096];
    int fds[8], nfd;
    struct hdr h;
    for (;;) {
        struct pollfd p[2] = {{f, POLLIN}, {b, POLLIN}};
        if (poll(p, 2, -1) < 0) continue;
        if (p[0].revents) {
            if (!rx(f, &h, pl, fds, &nfd)) break;
            if (verbose) fprintf(stderr, "vurelay: front req %u flags %#x size %u fds %d\n", h.req, h.flags, h.size, nfd);
            if (h.req == GET_CONFIG) {
                uint32_t off, sz;
                memcpy(&off, pl, 4);
                memcpy(&sz, pl + 4, 4);
                uint8_t cfg[40] = {0};
                strncpy((char *)cfg, tag, 36);
                cfg[36] = 1; /* num_request_queues, le32 */
                memset(pl + 12, 0, sz);
                if (off < sizeof cfg) memcpy(pl + 12, cfg + off, sz < sizeof cfg - off ? sz : sizeof cfg - off);
                h.flags = (h.flags & 3) | FLAG_REPLY;
                tx(f, &h, pl, NULL, 0);
                continue;
            }
            if (h.req == SET_CONFIG) {
                if ((h.flags & FLAG_NEED_REPLY) && (proto_feat & F_REPLY_ACK)) {
                    uint64_t z = 0;
                    h.flags = (h.flags & 3) | FLAG_REPLY;
                    h.size = 8;
                    memcpy(pl, &z, 8);
                    tx(f, &h, pl, NULL, 0);
                }
                continue;
            }
            if (h.req == SET_PROTOCOL_FEATURES) {
                memcpy(&proto_feat, pl, 8);
                uint64_t v = proto_feat & ~F_CONFIG;
                memcpy(pl, &v, 8);
            }
            tx(b, &h, pl, fds, nfd);
        }
        if (p[1].revents) {
            if (!rx(b, &h, pl, fds, &nfd)) break;
            if (verbose) fprintf(stderr, "vurelay: back req %u flags %#x size %u\n", h.req, h.flags, h.size);
            if (h.req == GET_PROTOCOL_FEATURES && (h.flags & FLAG_REPLY)) {
                uint64_t v;
                memcpy(&v, pl, 8);
                v |= F_CONFIG;
                memcpy(pl, &v, 8);
            }
            tx(f, &h, pl, fds, nfd);
        }
    }
    fprintf(stderr, "vurelay: a side closed\n");
    return 0;
}
