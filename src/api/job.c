/* A child process per API operation (job.h). */
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "b64.h"
#include "util/macro.h"
#include "util/time.h"

#define CHUNK      (256 * 1024) /* a stream's line holds at most this much output */
#define KILL_GRACE 5000         /* ms from SIGTERM to SIGKILL when a stream's client went away */

void api_job_out_clear(api_job_out *o)
{
    free(o->out.s);
    free(o->err.s);
    json_decref(o->result);
    *o = (api_job_out){0};
}

static int stdin_fd(const api_job_io *io)
{
    if (!io->stdin_data)
        return open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fd = memfd_create("bluebox-stdin", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    for (size_t off = 0; off < io->stdin_len;) {
        ssize_t w = write(fd, io->stdin_data + off, io->stdin_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

_noreturn_ static void child(api_job_fn fn, void *arg, int in, int out, int err, int res)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT};
    for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
        signal(sigs[i], SIG_DFL);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 || dup2(res, 3) < 0)
        _exit(1);
    close_range(4, ~0U, 0);
    json_t *r = fn(arg);
    char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
    if (s) {
        size_t n = strlen(s);
        for (size_t off = 0; off < n;) {
            ssize_t w = write(3, s + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                break;
            off += (size_t)w;
        }
    }
    _exit(0);
}

/* One read from a command's stdout or stderr: streamed as a line, or kept up to the cap. */
static void take(api_job_out *o, const api_job_io *io, bool is_err, const char *buf, size_t n)
{
    if (io->on_line) {
        if (o->cancelled)
            return;
        /* {"stdout":"<base64>"}, encoded in place: a stream moves every byte through here */
        const char *head = is_err ? "{\"stderr\":\"" : "{\"stdout\":\"";
        size_t hl = strlen(head);
        _cleanup_free_ char *line = xmalloc(hl + B64_LEN(n) + 2);
        memcpy(line, head, hl);
        size_t len = hl + b64_encode_to(line + hl, buf, n);
        line[len++] = '"';
        line[len++] = '}';
        if (io->on_line(io->opaque, line, len) < 0)
            o->cancelled = true;
        return;
    }
    strbuf *b = is_err ? &o->err : &o->out;
    size_t room = b->len < API_OUTPUT_CAP ? API_OUTPUT_CAP - b->len : 0;
    if (n > room)
        o->truncated = true;
    if (room)
        sb_putn(b, buf, n < room ? n : room);
}

static void relay(pid_t pid, int fds[3], const api_job_io *io, api_job_out *o)
{
    strbuf res = {0};
    int64_t kill_at = -1;
    bool termed = false;
    char *buf = xmalloc(CHUNK);
    while (fds[0] >= 0 || fds[1] >= 0 || fds[2] >= 0) {
        if (o->cancelled && !termed) {
            kill(pid, SIGTERM);
            termed = true;
            kill_at = now_mono_ms() + KILL_GRACE;
        }
        struct pollfd p[3];
        for (int i = 0; i < 3; i++)
            p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        int pr = poll(p, 3, kill_at < 0 ? -1 : poll_timeout_until(kill_at, now_mono_ms()));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0) {
            kill(pid, SIGKILL);
            kill_at = -1;
            continue;
        }
        for (int i = 0; i < 3; i++) {
            if (fds[i] < 0 || !p[i].revents)
                continue;
            ssize_t n = read(fds[i], buf, CHUNK);
            if (n < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (n <= 0) {
                close(fds[i]);
                fds[i] = -1;
                continue;
            }
            if (i == 2)
                sb_putn(&res, buf, (size_t)n);
            else
                take(o, io, i == 1, buf, (size_t)n);
        }
    }
    free(buf);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (res.len)
        o->result = json_loadb(res.s, res.len, 0, NULL);
    free(res.s);
}

int api_job_run(api_job_fn fn, void *arg, const api_job_io *io, api_job_out *out)
{
    *out = (api_job_out){0};
    int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    int in = stdin_fd(io);
    bool ok = in >= 0;
    for (int i = 0; ok && i < 3; i++)
        ok = pipe2(p[i], O_CLOEXEC) == 0;
    if (ok && io->on_line) /* a stream's reads come in lines of up to CHUNK: fewer wakeups */
        (void)fcntl(p[1][0], F_SETPIPE_SZ, CHUNK);
    pid_t worker = getpid();
    pid_t pid = ok ? fork() : -1;
    if (pid == 0) {
        /* The job dies with its worker (which dies with the server): a run's job stops its
         * VM on SIGTERM, and the VM's lifeline (launch/lifeline.h) goes with the job. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != worker)
            _exit(1);
        child(fn, arg, in, p[0][1], p[1][1], p[2][1]);
    }
    if (in >= 0)
        close(in);
    for (int i = 0; i < 3; i++)
        if (p[i][1] >= 0)
            close(p[i][1]);
    if (pid < 0) {
        for (int i = 0; i < 3; i++)
            if (p[i][0] >= 0)
                close(p[i][0]);
        return -1;
    }
    int fds[3] = {p[0][0], p[1][0], p[2][0]};
    relay(pid, fds, io, out);
    return 0;
}
