/* The session loop: signalfd + poll, so a timeout, a signal and output all arrive on one
 * path and nothing races a handler. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "core/runlog.h"
#include "direct.h"
#include "lifeline.h"
#include "util/spawn.h"
#include "util/time.h"

extern char **environ;

void session_remove(const char *container)
{
    if (direct_stop(container)) /* a direct launch's supervisor removes what it made */
        return;
    char *argv[] = {"podman", "rm", "-f", "-t", "0", "--ignore", (char *)container, NULL};
    (void)spawn_quiet(argv, NULL);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed stdout or a full disk must not stop the workload */
        p += w;
        n -= (size_t)w;
    }
}

/* Copy what is readable from *fd to out and the log; close it at EOF. */
static void relay(int *fd, int out, runlog *log)
{
    char buf[65536];
    ssize_t n = read_or_close(fd, buf, sizeof buf);
    if (n <= 0)
        return;
    write_all(out, buf, (size_t)n);
    runlog_write(log, buf, (size_t)n);
}

static int reap(pid_t pid, int *status, bool block)
{
    for (;;) {
        pid_t r = waitpid(pid, status, block ? 0 : WNOHANG);
        if (r < 0 && errno == EINTR)
            continue;
        return r;
    }
}

static int spawn_podman(const session *s, const sigset_t *old, int pipes[2][2], int vm_end,
                        pid_t *ret, bb_error **err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawnattr_setsigmask(&at, old);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (s->log) {
        posix_spawn_file_actions_adddup2(&fa, pipes[0][1], 1);
        posix_spawn_file_actions_adddup2(&fa, pipes[1][1], 2);
    }
    int next = 3;
    if (s->fd3 > STDERR_FILENO)
        posix_spawn_file_actions_adddup2(&fa, s->fd3, next++);
    /* after the secrets' memfd: launch_lifeline_fd (lifeline_open keeps it above both) */
    posix_spawn_file_actions_adddup2(&fa, vm_end, next);
    int r = posix_spawnp(ret, s->argv[0], &fa, &at, s->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (r != 0)
        return bb_fail_errno(err, r, "cannot run %s", s->argv[0]);
    return 0;
}

static int ms_until(double when, double now)
{
    return when <= now ? 0 : (int)((when - now) * 1000) + 1;
}

/* Stop a run: remove its container, which ends the attached podman client, quietly. A
 * SIGTERM to the client instead would make podman forward it to a container that is gone
 * and print its own error ("forwarding signal 15 to container …: no such container") into
 * the workload's stderr and the run log; SIGKILL cannot be forwarded, so a client that is
 * still there after STOP_GRACE_S gets that. Returns when to send it. */
#define STOP_GRACE_S 5.0
static double stop(const session *s)
{
    session_remove(s->container);
    return now_mono_s() + STOP_GRACE_S;
}

int session_run(const session *s, session_result *ret, bb_error **err)
{
    *ret = (session_result){0};
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    int pipes[2][2] = {{-1, -1}, {-1, -1}};
    if (s->log && (pipe2(pipes[0], O_CLOEXEC) < 0 || pipe2(pipes[1], O_CLOEXEC) < 0)) {
        int e = errno;
        for (int i = 0; i < 4; i++)
            if (pipes[i / 2][i % 2] >= 0)
                close(pipes[i / 2][i % 2]);
        return bb_fail_errno(err, e, "cannot make a pipe");
    }
    /* A reader that closes our stdout must not kill us: the VM still has to be stopped and
     * the exit recorded. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    sigaction(SIGPIPE, &ign, &old_pipe);
    sigprocmask(SIG_BLOCK, &mask, &old);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    pid_t pid = -1;
    double start = now_mono_s();
    /* We own the VM: its lifeline's write end is ours alone until we return (lifeline.h). */
    _cleanup_(lifeline_close) lifeline life = LIFELINE_NONE;
    int r = sfd < 0 ? bb_fail_errno(err, errno, "signalfd") : lifeline_open(&life, err);
    if (r == 0)
        r = spawn_podman(s, &old, pipes, life.vm, &pid, err);
    lifeline_passed(&life);
    int out[2] = {pipes[0][0], pipes[1][0]};
    if (s->log) {
        close(pipes[0][1]);
        close(pipes[1][1]);
    }
    if (r < 0) {
        for (int i = 0; i < 2; i++)
            if (out[i] >= 0)
                close(out[i]);
        if (sfd >= 0)
            close(sfd);
        sigprocmask(SIG_SETMASK, &old, NULL);
        sigaction(SIGPIPE, &old_pipe, NULL);
        return -1;
    }

    double deadline = s->timeout_seconds > 0 ? start + s->timeout_seconds : 0;
    int status = 0;
    bool exited = false, stopping = false;
    double grace = 0, kill_at = 0;
    while (!exited || out[0] >= 0 || out[1] >= 0) {
        int wait_ms = -1;
        double t = now_mono_s();
        if (deadline > 0 && !stopping)
            wait_ms = ms_until(deadline, t);
        if (stopping && !exited)
            wait_ms = ms_until(kill_at, t);
        if (exited) /* the client is gone; do not wait forever on a pipe someone else holds */
            wait_ms = ms_until(grace, t);
        struct pollfd p[3] = {{.fd = sfd, .events = POLLIN},
                              {.fd = out[0], .events = POLLIN},
                              {.fd = out[1], .events = POLLIN}};
        int n = poll(p, 3, wait_ms);
        if (n < 0 && errno != EINTR)
            break;
        if (n == 0 && exited)
            break;
        if (n == 0 && stopping && !exited && now_mono_s() >= kill_at) {
            kill(pid, SIGKILL); /* a client that outlived its container */
            kill_at = now_mono_s() + 3600;
            continue;
        }
        if (n == 0 && deadline > 0 && now_mono_s() >= deadline && !stopping) {
            ret->timed_out = true;
            stopping = true;
            kill_at = stop(s);
            continue;
        }
        if (n > 0 && p[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                if (!ret->signal)
                    ret->signal = (int)si.ssi_signo;
                if (!stopping) {
                    stopping = true;
                    kill_at = stop(s);
                }
            }
        }
        for (int i = 0; i < 2; i++)
            if (out[i] >= 0 && n > 0 && p[i + 1].revents)
                relay(&out[i], i == 0 ? STDOUT_FILENO : STDERR_FILENO, s->log);
        if (!exited && reap(pid, &status, false) == pid) {
            exited = true;
            grace = now_mono_s() + 2;
        }
    }
    if (!exited)
        reap(pid, &status, true);
    for (int i = 0; i < 2; i++)
        if (out[i] >= 0)
            close(out[i]);
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    ret->seconds = now_mono_s() - start;
    if (ret->timed_out)
        ret->code = ABI_EXIT_TIMEOUT;
    else if (ret->signal)
        ret->code = 128 + ret->signal;
    else
        ret->code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return 0;
}
