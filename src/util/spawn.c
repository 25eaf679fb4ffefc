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

#include "tty.h"
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

/* How much of s[0..n) can be escaped now: all but an unfinished UTF-8 sequence or a \r at
 * the end, which the next read may complete (a sequence or a \r\n cut in two would be shown
 * escaped). */
static size_t complete_prefix(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    if (n && s[n - 1] == '\r')
        return n - 1;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = s[n - back];
        if ((c & 0xc0) != 0x80) {
            size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
            return want > back ? n - back : n;
        }
    }
    return n;
}

typedef struct {
    int in, out;  /* the pipe's read end (-1 once closed) and our fd */
    bool escape;  /* our fd is a terminal: escape what is shown */
    strbuf carry; /* held back: an unfinished sequence, or (with a filter) line */
} relay;

static void write_all(int fd, const char *s, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, s + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* our terminal or log is gone: keep draining so the program is not blocked */
        off += (size_t)w;
    }
}

static void show(const relay *r, const char *s, size_t n)
{
    if (!r->escape) {
        write_all(r->out, s, n);
        return;
    }
    _cleanup_sb_ strbuf b = {0};
    tty_escape(&b, s, n, TTY_KEEP_LINES);
    write_all(r->out, b.s, b.len);
}

/* Show what is complete in the carry: whole lines that pass the filter, or (without one)
 * all but an unfinished sequence. At the end (all), the rest too. */
static void relay_flush(relay *r, const spawn_tee *t, bool all)
{
    size_t n = 0;
    if (t && t->show_line) {
        for (char *nl; (nl = memchr(r->carry.s + n, '\n', r->carry.len - n));
             n = (size_t)(nl - r->carry.s) + 1)
            if (t->show_line(r->carry.s + n, (size_t)(nl - r->carry.s) + 1 - n))
                show(r, r->carry.s + n, (size_t)(nl - r->carry.s) + 1 - n);
        if (all && n < r->carry.len) {
            if (t->show_line(r->carry.s + n, r->carry.len - n))
                show(r, r->carry.s + n, r->carry.len - n);
            n = r->carry.len;
        }
    } else {
        n = all || !r->escape ? r->carry.len : complete_prefix(r->carry.s, r->carry.len);
        show(r, r->carry.s, n);
    }
    memmove(r->carry.s, r->carry.s + n, r->carry.len - n);
    r->carry.len -= n;
    r->carry.s[r->carry.len] = '\0';
}

static void relays_close(relay r[2])
{
    for (int i = 0; i < 2; i++) {
        if (r[i].in >= 0)
            close(r[i].in);
        r[i].in = -1;
        free(r[i].carry.s);
        r[i].carry = (strbuf){0};
    }
}

int spawn_wait_tee(char *const argv[], const spawn_tee *t, bb_error **err)
{
    relay r[2] = {{.in = -1, .out = STDOUT_FILENO, .escape = isatty(STDOUT_FILENO)},
                  {.in = -1, .out = STDERR_FILENO, .escape = isatty(STDERR_FILENO)}};
    bool log = t && t->log_fd >= 0, filter = t && t->show_line;
    if (!log && !filter && !r[0].escape && !r[1].escape)
        return spawn_wait(argv, err);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int ends[2][2] = {{-1, -1}, {-1, -1}};
    for (int i = 0; i < 2; i++) {
        if (!log && !filter && !r[i].escape)
            continue; /* straight through */
        if (pipe2(ends[i], O_CLOEXEC) < 0) {
            int e = errno;
            for (int k = 0; k < i; k++)
                if (ends[k][0] >= 0) {
                    close(ends[k][0]);
                    close(ends[k][1]);
                }
            posix_spawn_file_actions_destroy(&fa);
            return bb_fail_errno(err, e, "cannot make a pipe");
        }
        posix_spawn_file_actions_adddup2(&fa, ends[i][1], r[i].out);
        r[i].in = ends[i][0];
        sb_puts(&r[i].carry, "");
    }
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 2; i++)
        if (ends[i][1] >= 0)
            close(ends[i][1]);
    if (rc != 0) {
        relays_close(r);
        return bb_fail_errno(err, rc, "cannot run %s", argv[0]);
    }
    while (r[0].in >= 0 || r[1].in >= 0) {
        struct pollfd p[2] = {{.fd = r[0].in, .events = POLLIN}, {.fd = r[1].in, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (r[i].in < 0 || !p[i].revents)
                continue;
            char buf[16384];
            ssize_t n = read_or_close(&r[i].in, buf, sizeof buf);
            if (n > 0) {
                if (log)
                    write_all(t->log_fd, buf, (size_t)n);
                sb_putn(&r[i].carry, buf, (size_t)n);
            }
            relay_flush(&r[i], t, r[i].in < 0);
        }
    }
    relays_close(r);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return bb_fail_errno(err, errno, "cannot wait for %s", argv[0]);
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
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
    return spawn_capture_fds(argv, NULL, 0, ret_out, ret_err, err);
}

int spawn_capture_fds(char *const argv[], const int *fds3, size_t n_fds, char **ret_out,
                      char **ret_err, bb_error **err)
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
    for (size_t i = 0; i < n_fds; i++)
        posix_spawn_file_actions_adddup2(&fa, fds3[i], 3 + (int)i);
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
