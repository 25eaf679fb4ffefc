/* Run history: writing a run's log clipped and rotated, and reading the tail of a log
 * without reading the whole log. */
#include "runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "envout.h"
#include "util/fs.h"
#include "util/xalloc.h"

static int tail_one(const char *path, size_t lines, char **ret, size_t *ret_len, bb_error **err)
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

static size_t count_lines(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += s[i] == '\n';
    return n + (len && s[len - 1] != '\n');
}

char *runlog_generation(const char *path, int n)
{
    return xasprintf("%s.%d", path, n);
}

int runlog_tail(const char *path, size_t lines, char **ret, size_t *ret_len, bb_error **err)
{
    if (tail_one(path, lines, ret, ret_len, err) < 0)
        return -1;
    size_t have = count_lines(*ret, *ret_len);
    if (have >= lines)
        return 0;
    /* Just rotated: the rest comes from the generation before. */
    _cleanup_free_ char *older = runlog_generation(path, 1), *text = NULL;
    size_t len = 0;
    if (tail_one(older, lines - have, &text, &len, err) < 0)
        return -1;
    if (len == 0)
        return 0;
    char *both = xmalloc(len + *ret_len + 1);
    memcpy(both, text, len);
    memcpy(both + len, *ret, *ret_len + 1);
    free(*ret);
    *ret = both;
    *ret_len += len;
    return 0;
}

struct runlog {
    int fd;
    uint64_t seen; /* bytes of output so far */
    bool bol;      /* the log is at the start of a line (the next output byte gets the prefix) */
    char *tail;    /* ring of the last RUNLOG_KEEP_BYTES after the start, once there is more */
    size_t pos, held;
};

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* a full disk loses log lines, never the run */
        p += n;
        len -= (size_t)n;
    }
}

/* <log> becomes <log>.1, <log>.1 becomes <log>.2, and so on; the oldest goes. */
static void rotate(const char *path)
{
    for (int n = RUNLOG_GENERATIONS; n > 1; n--) {
        _cleanup_free_ char *from = runlog_generation(path, n - 1),
                            *to = runlog_generation(path, n);
        (void)rename(from, to);
    }
    _cleanup_free_ char *first = runlog_generation(path, 1);
    (void)rename(path, first);
}

/* Open the log for appending, rotating it first when it is too large. Concurrent runs
 * (execs of one up sandbox) rotate once: under a lock on the log, and only if the path
 * still names the file that was found too large. */
static int open_log(const char *path, bb_error **err)
{
    for (int tries = 0;; tries++) {
        int fd =
            open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
        if (fd < 0)
            return bb_fail_errno(err, errno, "cannot open %s", path);
        struct stat st, now;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            return bb_fail(err, EINVAL, "%s is not a regular file", path);
        }
        if (st.st_size < RUNLOG_ROTATE_BYTES || tries == 3)
            return fd;
        if (flock(fd, LOCK_EX) == 0 && lstat(path, &now) == 0 && now.st_ino == st.st_ino &&
            now.st_dev == st.st_dev)
            rotate(path);
        close(fd);
    }
}

/* One argument, on one line whatever it holds: shell-quoted as '…', or as $'…' (bash's
 * ANSI-C quoting) when it has a control character, so that a newline in an argument cannot
 * start a line of the log. */
static void quote_arg(strbuf *b, const char *a)
{
    bool plain = true;
    for (const unsigned char *c = (const unsigned char *)a; *c && plain; c++)
        plain = *c >= 0x20 && *c != 0x7f;
    if (plain) {
        shell_quote(b, a);
        return;
    }
    sb_puts(b, "$'");
    for (const unsigned char *c = (const unsigned char *)a; *c; c++) {
        if (*c == '\n')
            sb_puts(b, "\\n");
        else if (*c == '\t')
            sb_puts(b, "\\t");
        else if (*c == '\r')
            sb_puts(b, "\\r");
        else if (*c < 0x20 || *c == 0x7f)
            sb_printf(b, "\\x%02x", *c);
        else if (*c == '\\' || *c == '\'')
            sb_printf(b, "\\%c", *c);
        else
            sb_putc(b, (char)*c);
    }
    sb_putc(b, '\'');
}

runlog *runlog_begin(const char *path, const char *what, char *const *argv, bb_error **err)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        if (mkdir_p(dir, 0700, err) < 0)
            return NULL;
    }
    int fd = open_log(path, err);
    if (fd < 0)
        return NULL;
    char stamp[32];
    time_t t = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    _cleanup_sb_ strbuf b = {0};
    sb_printf(&b, "\n=== %s %s:", stamp, what);
    size_t start = b.len;
    for (char *const *a = argv; a && *a; a++) {
        if (b.len - start > RUNLOG_ARGV_BYTES) {
            size_t more = 0;
            while (a[more])
                more++;
            sb_printf(&b, " [… %zu more arguments clipped …]", more);
            break;
        }
        sb_putc(&b, ' ');
        quote_arg(&b, *a);
    }
    sb_putc(&b, '\n');
    if (write(fd, b.s, b.len) != (ssize_t)b.len) {
        int e = errno;
        close(fd);
        bb_fail_errno(err, e, "cannot write %s", path);
        return NULL;
    }
    runlog *l = xmalloc(sizeof *l);
    *l = (runlog){.fd = fd, .bol = true};
    return l;
}

static void hold(runlog *l, const char *p, size_t len)
{
    if (!l->tail)
        l->tail = xmalloc(RUNLOG_KEEP_BYTES);
    if (len >= RUNLOG_KEEP_BYTES) {
        memcpy(l->tail, p + len - RUNLOG_KEEP_BYTES, RUNLOG_KEEP_BYTES);
        l->pos = 0;
        l->held = RUNLOG_KEEP_BYTES;
        return;
    }
    size_t first = RUNLOG_KEEP_BYTES - l->pos < len ? RUNLOG_KEEP_BYTES - l->pos : len;
    memcpy(l->tail + l->pos, p, first);
    memcpy(l->tail, p + first, len - first);
    l->pos = (l->pos + len) % RUNLOG_KEEP_BYTES;
    l->held = l->held + len < RUNLOG_KEEP_BYTES ? l->held + len : RUNLOG_KEEP_BYTES;
}

/* Output into the log: every line of it starts with RUNLOG_OUTPUT_PREFIX, so nothing the
 * guest prints can start a line as a record does. */
static void put_output(runlog *l, const char *p, size_t len)
{
    _cleanup_sb_ strbuf b = {0};
    while (len) {
        if (l->bol)
            sb_puts(&b, RUNLOG_OUTPUT_PREFIX);
        const char *nl = memchr(p, '\n', len);
        size_t n = nl ? (size_t)(nl - p) + 1 : len;
        sb_putn(&b, p, n);
        l->bol = nl != NULL;
        p += n;
        len -= n;
    }
    write_all(l->fd, b.s, b.len);
}

void runlog_write(runlog *l, const void *buf, size_t len)
{
    if (!l || len == 0)
        return;
    const char *p = buf;
    size_t head = l->seen < RUNLOG_KEEP_BYTES ? RUNLOG_KEEP_BYTES - (size_t)l->seen : 0;
    if (head > len)
        head = len;
    if (head)
        put_output(l, p, head);
    l->seen += len;
    if (len > head)
        hold(l, p + head, len - head);
}

void runlog_end(runlog *l, int code, double seconds)
{
    if (!l)
        return;
    uint64_t clipped =
        l->seen - (l->seen < RUNLOG_KEEP_BYTES ? l->seen : RUNLOG_KEEP_BYTES) - l->held;
    if (clipped) {
        dprintf(l->fd, "%s=== [… %llu bytes clipped …]\n", l->bol ? "" : "\n",
                (unsigned long long)clipped);
        l->bol = true;
    }
    if (l->held) {
        /* In order: the ring's oldest byte is at pos once it has wrapped. */
        size_t from = l->held < RUNLOG_KEEP_BYTES ? 0 : l->pos;
        put_output(l, l->tail + from, l->held - from);
        put_output(l, l->tail, from);
    }
    dprintf(l->fd, "%s=== exit %d (%.2fs)\n", l->bol ? "" : "\n", code, seconds);
    close(l->fd);
    free(l->tail);
    free(l);
}
