/* /data commands for a data_limit disk, through the guest (diskjob.h). The guest's bluebox
 * runs the `__data` role on its own /data (src/data/diskops.c); what it sends back is a tar
 * stream that the host only reads with safetar. */
#include "diskjob.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot.h"
#include "launch/session.h"
#include "util/strv.h"
#include "util/xalloc.h"

/* podman inherits our stdio: point it at the job's files for the one session. */
static int swap_fd(int target, int with, int *saved)
{
    *saved = -1;
    if (with < 0 || with == target)
        return 0;
    *saved = fcntl(target, F_DUPFD_CLOEXEC, 3);
    if (*saved < 0 || dup2(with, target) < 0)
        return -1;
    return 0;
}

static void restore_fd(int target, int saved)
{
    if (saved < 0)
        return;
    dup2(saved, target);
    close(saved);
}

/* What the guest sends back goes through a pipe to a copier of ours that stops at a bound:
 * a guest that sends more than a compressed archive of its disk could be is cut off there
 * instead of filling the host's disk (and the job fails). */
static unsigned long long out_bound(const bluefile *bf)
{
    return 2 * bf->data_limit + (64ULL << 20);
}

#define COPIER_OVER 3

static _noreturn_ void copier(int in, int out, unsigned long long bound)
{
    static char buf[1 << 16];
    unsigned long long total = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(n < 0 ? 1 : 0);
        total += (unsigned long long)n;
        if (total > bound) {
            kill(getppid(), SIGTERM); /* session_run stops the VM and removes it */
            _exit(COPIER_OVER);
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                _exit(1);
            off += w;
        }
    }
}

/* Start the copier from a new pipe into out; *ret_w is the pipe's end for podman. */
static pid_t start_copier(int out, unsigned long long bound, int *ret_w)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[1]);
        copier(p[0], out, bound);
    }
    close(p[0]);
    *ret_w = p[1];
    return pid;
}

static int wait_copier(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int diskjob_run(sandbox *sb, char *const *args, int in_fd, int out_fd, bb_error **err)
{
    _cleanup_(boot_done) boot b = {0};
    if (boot_prepare(sb, BOOT_CACHED, NULL, &b, err) < 0)
        return -1;
    _cleanup_strv_ strv cmd = {0};
    strv_add(&cmd, ABI_GUEST_BINARY);
    strv_add(&cmd, "__data");
    for (char *const *a = args; *a; a++)
        strv_add(&cmd, *a);
    b.l.cmd = cmd.v;
    b.l.mode = LAUNCH_RUN;
    b.l.interactive = in_fd >= 0;
    b.l.guest_root = true;
    _cleanup_strv_ strv argv = {0};
    if (launch_argv(b.b, &b.l, &argv, err) < 0)
        return -1;
    session s = {.argv = argv.v, .container = b.container};
    session_result res;
    int saved_in = -1, saved_out = -1, pipe_w = -1, r;
    fflush(stdout);
    pid_t cp = start_copier(out_fd, out_bound(b.bf), &pipe_w);
    if (cp < 0)
        r = bb_fail_errno(err, errno, "cannot start the copier of the guest's output");
    else if (swap_fd(STDIN_FILENO, in_fd, &saved_in) < 0 ||
             swap_fd(STDOUT_FILENO, pipe_w, &saved_out) < 0)
        r = bb_fail_errno(err, errno, "cannot redirect the guest's stdio");
    else
        r = session_run(&s, &res, err);
    restore_fd(STDOUT_FILENO, saved_out);
    restore_fd(STDIN_FILENO, saved_in);
    if (pipe_w >= 0)
        close(pipe_w);
    int copied = cp < 0 ? -1 : wait_copier(cp);
    if (r < 0)
        return -1;
    if (copied == COPIER_OVER)
        return bb_fail(err, EFBIG,
                       "the guest sent more than %llu MiB for a /data of %llu MiB; refusing it",
                       out_bound(b.bf) >> 20, b.bf->data_limit >> 20);
    if (copied != 0)
        return bb_fail(err, EIO, "cannot write what the guest sent");
    if (res.code != 0)
        return bb_fail(err, EIO, "the guest could not %s its /data (exit status %d)", args[0],
                       res.code);
    return 0;
}
