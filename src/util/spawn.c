/* Process helpers on posix_spawn. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "xalloc.h"

extern char **environ;

static int run(char *const argv[], bool quiet, bb_error **err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet) {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return bb_fail_errno(err, r, "cannot run %s", argv[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return bb_fail_errno(err, errno, "cannot wait for %s", argv[0]);
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int spawn_wait(char *const argv[], bb_error **err)
{
    return run(argv, false, err);
}

int spawn_quiet(char *const argv[], bb_error **err)
{
    return run(argv, true, err);
}

#define CAPTURE_MAX (1u << 20)

ssize_t read_or_close(int *fd, void *buf, size_t size)
{
    ssize_t n = read(*fd, buf, size);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return -1;
    }
    return n;
}

static void drain(int *fd, strbuf *b)
{
    char buf[16384];
    ssize_t n = read_or_close(fd, buf, sizeof buf);
    if (n <= 0)
        return;
    if (b->len < CAPTURE_MAX)
        sb_putn(b, buf, (size_t)n < CAPTURE_MAX - b->len ? (size_t)n : CAPTURE_MAX - b->len);
}

int spawn_capture(char *const argv[], char **ret_out, char **ret_err, bb_error **err)
{
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0)
        return bb_fail_errno(err, errno, "cannot make a pipe");
    if (pipe2(pe, O_CLOEXEC) < 0) {
        int e = errno;
        close(po[0]);
        close(po[1]);
        return bb_fail_errno(err, e, "cannot make a pipe");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    if (r != 0) {
        close(po[0]);
        close(pe[0]);
        return bb_fail_errno(err, r, "cannot run %s", argv[0]);
    }
    strbuf out = {0}, errb = {0};
    sb_puts(&out, "");
    sb_puts(&errb, "");
    int fds[2] = {po[0], pe[0]};
    while (fds[0] >= 0 || fds[1] >= 0) {
        struct pollfd p[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0] >= 0 && p[0].revents)
            drain(&fds[0], &out);
        if (fds[1] >= 0 && p[1].revents)
            drain(&fds[1], &errb);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            free(sb_steal(&out));
            free(sb_steal(&errb));
            return bb_fail_errno(err, errno, "cannot wait for %s", argv[0]);
        }
    }
    if (ret_out)
        *ret_out = sb_steal(&out);
    else
        free(sb_steal(&out));
    if (ret_err)
        *ret_err = sb_steal(&errb);
    else
        free(sb_steal(&errb));
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

char *program_find(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char *p = xasprintf("%.*s/%s", (int)n, path, name);
        if (n && p[0] == '/' && access(p, X_OK) == 0)
            return p;
        free(p);
        path += n + (path[n] == ':');
    }
    return NULL;
}

bool program_on_path(const char *name)
{
    _cleanup_free_ char *p = program_find(name);
    return p != NULL;
}
