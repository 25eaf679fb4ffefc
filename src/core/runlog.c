/* Run history: reading the tail of a log without reading the whole log. */
#include "runlog.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
