/* spike-14 prototype: a libslirp instance used only to carry 9p to the uml guest.
 *
 *   proto MTU UNIXSOCK -- linux.uml ARGS...
 *
 * Starts linux.uml (with the xstate shim preloaded) with an extra
 *   vec0:transport=bess,src=$D/uml.sock,dst=$D/net.sock
 * and runs a restricted libslirp (guest reaches nothing) whose only exit is a guestfwd
 * 10.0.2.100:564 -> connect(UNIXSOCK) (slirp_add_unix), where diod (or any 9p server)
 * listens. Same poll-loop shape as bluebox's src/vmm/net.c. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <slirp/libslirp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAX 70000

static struct pollfd pfd[256];
static int npfd;
static int conn_fd = -1;
static uint64_t drops, fin, fout;

typedef struct tm_ {
    SlirpTimerCb cb;
    void *opaque;
    int64_t exp;
    struct tm_ *next;
} tm_;
static tm_ *timers;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
static ssize_t cb_send(const void *buf, size_t len, void *o)
{
    if (conn_fd < 0) {
        drops++;
        return len;
    }
    ssize_t w;
    do
        w = send(conn_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        drops++;
    else
        fout++;
    return len;
}
static void cb_err(const char *m, void *o) { fprintf(stderr, "slirp guest error: %s\n", m); }
static int64_t cb_clock(void *o) { return now_ns(); }
static void *cb_tnew(SlirpTimerCb cb, void *co, void *o)
{
    tm_ *t = calloc(1, sizeof *t);
    *t = (tm_){cb, co, -1, timers};
    timers = t;
    return t;
}
static void cb_tfree(void *t, void *o)
{
    for (tm_ **p = &timers; *p; p = &(*p)->next)
        if (*p == t) {
            *p = (*p)->next;
            free(t);
            return;
        }
}
static void cb_tmod(void *t, int64_t e, void *o) { ((tm_ *)t)->exp = e; }
static void cb_nop_fd(int fd, void *o) {}
static void cb_notify(void *o) {}
static const SlirpCb cbs = {.send_packet = cb_send,
                            .guest_error = cb_err,
                            .clock_get_ns = cb_clock,
                            .timer_new = cb_tnew,
                            .timer_free = cb_tfree,
                            .timer_mod = cb_tmod,
                            .register_poll_fd = cb_nop_fd,
                            .unregister_poll_fd = cb_nop_fd,
                            .notify = cb_notify};

static int add_poll(int fd, int ev, void *o)
{
    short e = 0;
    if (ev & SLIRP_POLL_IN) e |= POLLIN;
    if (ev & SLIRP_POLL_OUT) e |= POLLOUT;
    if (ev & SLIRP_POLL_PRI) e |= POLLPRI;
    pfd[npfd] = (struct pollfd){.fd = fd, .events = e};
    return npfd++;
}
static int get_rev(int i, void *o)
{
    if (i < 0 || i >= npfd) return 0;
    short r = pfd[i].revents;
    int e = 0;
    if (r & POLLIN) e |= SLIRP_POLL_IN;
    if (r & POLLOUT) e |= SLIRP_POLL_OUT;
    if (r & POLLPRI) e |= SLIRP_POLL_PRI;
    if (r & (POLLERR | POLLNVAL)) e |= SLIRP_POLL_ERR;
    if (r & POLLHUP) e |= SLIRP_POLL_HUP;
    return e;
}
static struct in_addr ip4(const char *s)
{
    struct in_addr a;
    inet_pton(AF_INET, s, &a);
    return a;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: proto MTU UNIXSOCK -- linux.uml ARGS...\n");
        return 2;
    }
    int mtu = atoi(argv[1]);
    const char *unixsock = argv[2];
    char dir[] = "/tmp/spike14.XXXXXX";
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    char net_sock[128], uml_sock[128];
    snprintf(net_sock, sizeof net_sock, "%s/net.sock", dir);
    snprintf(uml_sock, sizeof uml_sock, "%s/uml.sock", dir);
    int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, net_sock);
    if (bind(lfd, (void *)&sa, sizeof sa) < 0 || listen(lfd, 4) < 0) return perror("bind"), 1;
    int sb = 4 << 20;
    setsockopt(lfd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof sb);

    SlirpConfig cfg = {
        .version = 4,
        .restricted = true, /* the guest reaches nothing but the guestfwd */
        .in_enabled = true,
        .vnetwork = ip4("10.0.2.0"),
        .vnetmask = ip4("255.255.255.0"),
        .vhost = ip4("10.0.2.2"),
        .vdhcp_start = ip4("10.0.2.15"),
        .vnameserver = ip4("10.0.2.3"),
        .disable_host_loopback = true,
        .if_mtu = mtu,
        .if_mru = mtu,
    };
    Slirp *slirp = slirp_new(&cfg, &cbs, NULL);
    if (!slirp) return fprintf(stderr, "slirp_new failed\n"), 1;
    struct in_addr ga = ip4("10.0.2.100");
    if (slirp_add_unix(slirp, unixsock, &ga, 564) < 0) return perror("slirp_add_unix"), 1;

    /* UML */
    char **a = calloc(argc + 4, sizeof *a);
    int k = 0;
    for (int i = 4; i < argc; i++) a[k++] = argv[i];
    char vec[512];
    snprintf(vec, sizeof vec, "vec0:transport=bess,src=%s,dst=%s%s", uml_sock, net_sock, getenv("VECOPTS") ? getenv("VECOPTS") : "");
    a[k++] = vec;
    a[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LD_PRELOAD", "/work/main/build/bluebox-xstate.so", 1);
        setenv("TMPDIR", dir, 1);
        execv(a[0], a);
        perror("exec");
        _exit(127);
    }
    signal(SIGPIPE, SIG_IGN);
    static uint8_t buf[FRAME_MAX];
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) break;
        npfd = 0;
        pfd[npfd++] = (struct pollfd){.fd = lfd, .events = POLLIN};
        pfd[npfd++] = (struct pollfd){.fd = conn_fd, .events = POLLIN};
        uint32_t t = 200;
        int64_t now = now_ns() / 1000000;
        for (tm_ *tm = timers; tm; tm = tm->next)
            if (tm->exp >= 0) {
                int64_t left = tm->exp > now ? tm->exp - now : 0;
                if (left < t) t = left;
            }
        slirp_pollfds_fill(slirp, &t, add_poll, NULL);
        int r = poll(pfd, npfd, t);
        if (r > 0) {
            if (pfd[0].revents & POLLIN) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd >= 0) {
                    if (conn_fd >= 0) close(conn_fd);
                    conn_fd = fd;
                    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof sb);
                }
            }
            if (conn_fd >= 0 && pfd[1].fd == conn_fd && pfd[1].revents)
                for (int i = 0; i < 256; i++) {
                    ssize_t n = recv(conn_fd, buf, sizeof buf, MSG_DONTWAIT);
                    if (n < 0 && errno == EINTR) continue;
                    if (n < 0) break;
                    if (n == 0) {
                        close(conn_fd);
                        conn_fd = -1;
                        break;
                    }
                    fin++;
                    slirp_input(slirp, buf, n);
                }
        }
        slirp_pollfds_poll(slirp, r < 0, get_rev, NULL);
        for (bool again = true; again;) {
            again = false;
            int64_t nw = now_ns() / 1000000;
            for (tm_ *tm = timers; tm; tm = tm->next)
                if (tm->exp >= 0 && tm->exp <= nw) {
                    tm->exp = -1;
                    tm->cb(tm->opaque);
                    again = true;
                    break;
                }
        }
    }
    fprintf(stderr, "proto: frames in %llu out %llu dropped-out %llu\n", (unsigned long long)fin,
            (unsigned long long)fout, (unsigned long long)drops);
    unlink(net_sock);
    rmdir(dir);
    return 0;
}
