/* The file server process (see serve.h): a single-threaded poll loop over each export's
 * listening socket, its vhost-user connection and its rings' kick fds. */
#include "fsd/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "fsd/fsd.h"
#include "util/lockdown.h"
#include "util/xalloc.h"

/* Descriptors kept for the server's own use beyond the inodes and handles it hands out. */
#define FD_RESERVE 64

typedef struct served {
    int listen_fd; /* until UML connects, then -1 */
    vu_dev dev;    /* dev.sock < 0 until connected, and again once the guest is gone */
    fsd *fs;
    bool done;
} served;

static int listen_at(const char *path, bb_error **err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return bb_fail(err, ENAMETOOLONG, "the file server's socket path %s is too long", path);
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bb_fail_errno(err, errno, "socket");
    (void)unlink(path);
    mode_t old = umask(0177); /* owner-only from the first instant */
    int r = bind(fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (r < 0 || listen(fd, 1) < 0) {
        int e = errno;
        close(fd);
        return bb_fail_errno(err, e, "cannot listen on %s", path);
    }
    return fd;
}

/* As many descriptors as the hard limit allows (beyond them, files' fds are closed and
 * reopened by name: src/fsd/inodes.h). BLUEBOX_FSD_MAX_FDS, a testing aid, sets a lower
 * cap. */
static uint64_t raise_nofile(void)
{
    struct rlimit rl;
    uint64_t cap = 1024 - FD_RESERVE;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
        cap = rl.rlim_cur > 2 * FD_RESERVE ? rl.rlim_cur - FD_RESERVE : FD_RESERVE;
    }
    const char *s = getenv("BLUEBOX_FSD_MAX_FDS");
    char *end;
    unsigned long long v = s && *s ? strtoull(s, &end, 10) : 0;
    if (v >= FD_RESERVE && v < cap && *end == '\0')
        cap = v;
    return cap;
}

static size_t handle(void *userdata, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    return fsd_handle(userdata, in, len, out, cap);
}

static void serve_rings(served *s, uint8_t *in, uint8_t *out)
{
    for (unsigned i = 0; i < VU_QUEUES; i++) {
        virtq *q = &s->dev.q[i];
        uint64_t v;
        ssize_t got = 1;
        /* Bounded: a kick is a counter or a few bytes, never an endless stream. */
        for (int k = 0; k < 64 && q->kick_fd >= 0 && got > 0; k++)
            got = read(q->kick_fd, &v, sizeof v);
        if (got == 0) {
            /* A kick pipe with no writer left: it would poll as ready forever. */
            close(q->kick_fd);
            q->kick_fd = -1;
        }
        (void)virtq_serve(q, &s->dev.mem, handle, s->fs, in, out, FSD_BUF_MAX);
    }
}

static _noreturn_ void serve(served *s, size_t n)
{
    _cleanup_free_ uint8_t *in = xmalloc(FSD_BUF_MAX), *out = xmalloc(FSD_BUF_MAX);
    _cleanup_free_ struct pollfd *pfd = xreallocarray(NULL, n * (1 + VU_QUEUES), sizeof *pfd);
    _cleanup_free_ size_t *owner = xreallocarray(NULL, n * (1 + VU_QUEUES), sizeof *owner);
    for (;;) {
        nfds_t k = 0;
        size_t live = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i].done)
                continue;
            live++;
            int fd = s[i].dev.sock >= 0 ? s[i].dev.sock : s[i].listen_fd;
            pfd[k] = (struct pollfd){.fd = fd, .events = POLLIN};
            owner[k++] = i;
            for (unsigned q = 0; q < VU_QUEUES && s[i].dev.sock >= 0; q++)
                if (s[i].dev.q[q].kick_fd >= 0) {
                    pfd[k] = (struct pollfd){.fd = s[i].dev.q[q].kick_fd, .events = POLLIN};
                    owner[k++] = i;
                }
        }
        if (live == 0)
            _exit(0);
        if (poll(pfd, k, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "bluebox-fsd: poll: %s\n", strerror(errno));
            _exit(1);
        }
        for (nfds_t j = 0; j < k; j++) {
            if (!pfd[j].revents)
                continue;
            served *e = &s[owner[j]];
            if (e->done)
                continue;
            if (pfd[j].fd == e->listen_fd && e->dev.sock < 0) {
                int c = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                    continue;
                close(e->listen_fd); /* one frontend, once */
                e->listen_fd = -1;
                e->dev.sock = c;
            } else if (pfd[j].fd == e->dev.sock) {
                if (vu_dev_handle(&e->dev) < 0) {
                    /* The guest's kernel went away or broke the protocol: this export
                     * is over for this run (the guest sees ENOTCONN). */
                    vu_dev_clear(&e->dev);
                    e->done = true;
                }
                break; /* the rings' fds may have changed: poll again */
            } else {
                serve_rings(e, in, out);
            }
        }
    }
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Everything the VMM had open but the listening sockets: above all UML's end of the control
 * line, whose last copy must close when UML exits. */
static void close_others(const served *s, size_t n)
{
    _cleanup_free_ int *keep = xreallocarray(NULL, n + 1, sizeof *keep);
    for (size_t i = 0; i < n; i++)
        keep[i] = s[i].listen_fd;
    qsort(keep, n, sizeof *keep, cmp_int);
    unsigned from = STDERR_FILENO + 1;
    for (size_t i = 0; i <= n; i++) {
        unsigned to = i < n ? (unsigned)keep[i] : ~0u;
        if (to > from && syscall(SYS_close_range, from, to - 1, 0) < 0)
            for (unsigned fd = from; fd < to && fd < 65536; fd++)
                close((int)fd);
        if (i < n)
            from = (unsigned)keep[i] + 1;
    }
}

static int open_export(const fsd_export *ex)
{
    if (!ex->one_mount)
        return open(ex->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, ex->path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return -1;
    /* Read-only in the kernel too, not only refused by the server (best effort: the
     * server refuses every write to a read-only export whatever the mount says). */
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
    if (ex->read_only)
        (void)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof a);
    return fd;
}

pid_t fsd_server_start(const fsd_export *ex, size_t n, bool build, int log_fd, bb_error **err)
{
    _cleanup_free_ served *s = xreallocarray(NULL, n ? n : 1, sizeof *s);
    size_t made = 0;
    pid_t pid = -1;
    for (; made < n; made++) {
        s[made] = (served){.listen_fd = -1};
        vu_dev_init(&s[made].dev, -1, ex[made].tag);
        s[made].listen_fd = listen_at(ex[made].sock_path, err);
        if (s[made].listen_fd < 0)
            goto fail;
    }
    pid_t parent = getpid();
    pid = fork();
    if (pid < 0) {
        bb_fail_errno(err, errno, "fork");
        goto fail;
    }
    if (pid > 0) {
        for (size_t i = 0; i < n; i++)
            close(s[i].listen_fd);
        return pid;
    }
    /* The server. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(1);
    int null = log_fd >= 0 ? log_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0)
        dup2(null, STDERR_FILENO);
    close_others(s, n);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_IGN);
    umask(0); /* the modes the server gives host files are exactly its own */
    fsd_options opt = {.max_fds = raise_nofile()};
    for (size_t i = 0; i < n; i++) {
        opt.read_only = ex[i].read_only;
        opt.real_owners = ex[i].real_owners;
        _cleanup_close_ int root = open_export(&ex[i]);
        _cleanup_error_ bb_error *e = NULL;
        if (root < 0 || fsd_new(&s[i].fs, root, &opt, &e) < 0) {
            fprintf(stderr, "bluebox-fsd: cannot serve %s: %s\n", ex[i].path,
                    e ? e->msg : strerror(errno));
            _exit(1);
        }
    }
    const char *what = "";
    /* User xattrs always: the guest's ownership lives there (fsd.h). */
    if (lockdown(&what, true, build) < 0) {
        fprintf(stderr, "bluebox-fsd: %s: %s\n", what, strerror(errno));
        _exit(1);
    }
    serve(s, n);
fail:
    for (size_t i = 0; i < made; i++)
        if (s[i].listen_fd >= 0) {
            close(s[i].listen_fd);
            (void)unlink(ex[i].sock_path);
        }
    return -1;
}
