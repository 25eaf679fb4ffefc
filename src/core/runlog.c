/* Run history: reading the tail of a log without reading the whole log. */
#include "runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "envout.h"
#include "util/fs.h"
#include "util/xalloc.h"

int runlog_tail(const char *path, size_t lines, char **ret, size_t *ret_len, bb_error **err)
{
    *ret = xstrdup("");
    *ret_len = 0;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", path);
    if (!S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s is not a regular file", path);
    if (lines == 0 || st.st_size == 0)
        return 0;
    off_t end = st.st_size, start = end;
    size_t newlines = 0;
    char buf[8192];
    /* A final newline ends the last line; it does not start another one. */
    bool skip_last = true;
    while (start > 0) {
        size_t chunk = start < (off_t)sizeof buf ? (size_t)start : sizeof buf;
        ssize_t n = pread(fd, buf, chunk, start - (off_t)chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < (ssize_t)chunk)
            return bb_fail_errno(err, n < 0 ? errno : EIO, "cannot read %s", path);
        for (size_t i = chunk; i-- > 0;) {
            if (buf[i] != '\n')
                continue;
            off_t at = start - (off_t)chunk + (off_t)i;
            if (skip_last && at == end - 1)
                continue;
            if (++newlines == lines) {
                start = at + 1;
                goto found;
            }
        }
        skip_last = false;
        start -= (off_t)chunk;
    }
found:;
    size_t len = (size_t)(end - start);
    char *out = xmalloc(len + 1);
    for (size_t off = 0; off < len;) {
        ssize_t n = pread(fd, out + off, len - off, start + (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(out);
            return bb_fail_errno(err, n < 0 ? errno : EIO, "cannot read %s", path);
        }
        off += (size_t)n;
    }
    out[len] = '\0';
    free(*ret);
    *ret = out;
    *ret_len = len;
    return 0;
}

int runlog_begin(const char *path, const char *what, char *const *argv, bb_error **err)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        if (mkdir_p(dir, 0700, err) < 0)
            return -1;
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    char stamp[32];
    time_t t = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    _cleanup_sb_ strbuf b = {0};
    sb_printf(&b, "\n=== %s %s:", stamp, what);
    for (char *const *a = argv; a && *a; a++) {
        sb_putc(&b, ' ');
        shell_quote(&b, *a);
    }
    sb_putc(&b, '\n');
    if (write(fd, b.s, b.len) != (ssize_t)b.len) {
        int e = errno;
        close(fd);
        return bb_fail_errno(err, e, "cannot write %s", path);
    }
    return fd;
}

void runlog_end(int fd, int code, double seconds)
{
    if (fd < 0)
        return;
    dprintf(fd, "=== exit %d (%.2fs)\n", code, seconds);
    close(fd);
}
