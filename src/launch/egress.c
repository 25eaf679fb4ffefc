/* The host side of the egress policy: the connection log, the secrets' memfd and the
 * placeholders. A secret's value lives in this process only between reading it and writing
 * it into the memfd; every copy is wiped before it is freed, and no message quotes it. */
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi.h"
#include "core/home.h"
#include "util/env.h"
#include "util/fs.h"
#include "util/xalloc.h"

char *egress_allow_value(const bluefile *bf)
{
    _cleanup_sb_ strbuf s = {0};
    sb_puts(&s, "");
    for (size_t i = 0; i < bf->allow.n; i++)
        sb_printf(&s, "%s%s", i ? "," : "", bf->allow.v[i]);
    return sb_steal(&s);
}

char *egress_placeholder(void)
{
    unsigned char r[EGRESS_PLACEHOLDER_HEX / 2];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            abort(); /* the kernel's CSPRNG is not optional */
        got += (size_t)n;
    }
    char hex[EGRESS_PLACEHOLDER_HEX + 1];
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(hex + 2 * i, 3, "%02x", r[i]);
    return xasprintf(ABI_SECRET_PREFIX "%s", hex);
}

/* ---- the connection log -------------------------------------------------------------- */

int egress_log_rotate(const char *path, bb_error **err)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        if (mkdir_p(dir, HOME_DIR_MODE, err) < 0)
            return -1;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return bb_fail(err, EINVAL, "%s is not a file; remove it (it is the connection log)",
                           path);
        if (st.st_size <= (off_t)EGRESS_LOG_ROTATE) {
            /* the sandbox root's under strict isolation: that root keeps it 0600 */
            if (st.st_uid == getuid() && (st.st_mode & 07777) != 0600 && chmod(path, 0600) < 0)
                return bb_fail_errno(err, errno, "cannot make %s private", path);
            return 0;
        }
        /* Generations: .2 -> .3 (the oldest dropped), .1 -> .2, the log -> .1. A guest that
         * fills the log at every boot needs NETLOG_GENERATIONS boots to push a line out. */
        for (int n = NETLOG_GENERATIONS; n >= 1; n--) {
            _cleanup_free_ char *to = xasprintf("%s.%d", path, n);
            _cleanup_free_ char *from = n > 1 ? xasprintf("%s.%d", path, n - 1) : xstrdup(path);
            if (rename(from, to) < 0 && (errno != ENOENT || n == 1))
                return bb_fail_errno(err, errno, "cannot rotate %s to %s", from, to);
        }
    } else if (errno != ENOENT) {
        return bb_fail_errno(err, errno, "cannot stat %s", path);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create the connection log %s", path);
    close(fd);
    return 0;
}

/* ---- secrets ----------------------------------------------------------------------------- */

void egress_secret_free(char *value)
{
    if (!value)
        return;
    explicit_bzero(value, strlen(value));
    free(value);
}

/* Printable ASCII only: a header value cannot hold a line break, and anything else would
 * be mangled on its way into one. */
static int check_value(const bf_secret *s, const char *v, bb_error **err)
{
    if (!*v)
        return bb_fail(err, EINVAL, "secret %s: its value is empty", s->name);
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return bb_fail(err, EINVAL,
                           "secret %s: its value holds a line break, control or non-ASCII "
                           "character at byte %zu; values go into HTTP headers and must be "
                           "printable ASCII",
                           s->name, (size_t)(p - v));
    return 0;
}

static int read_secret_file(const bf_secret *s, char **ret, bb_error **err)
{
    const char *path = s->from_file;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return bb_fail_errno(err, errno, "secret %s: cannot open its file %s (secrets.from_file)",
                             s->name, path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bb_fail_errno(err, errno, "secret %s: cannot stat %s", s->name, path);
    if (!S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "secret %s: %s is not a regular file", s->name, path);
    if (st.st_uid != geteuid())
        return bb_fail(err, EPERM,
                       "secret %s: %s is not yours (owner uid %u); a secret's file must belong to "
                       "you",
                       s->name, path, (unsigned)st.st_uid);
    if (st.st_mode & 077)
        return bb_fail(err, EPERM,
                       "secret %s: %s can be read by others (mode %04o); make it yours alone: "
                       "chmod 600 %s",
                       s->name, path, (unsigned)(st.st_mode & 07777), path);
    if (st.st_size > (off_t)EGRESS_SECRET_MAX)
        return bb_fail(err, EFBIG, "secret %s: %s is larger than %u bytes", s->name, path,
                       EGRESS_SECRET_MAX);
    /* one buffer, never grown: no copy is left behind in freed memory */
    char *buf = xmalloc(EGRESS_SECRET_MAX + 2);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, EGRESS_SECRET_MAX + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            explicit_bzero(buf, len);
            free(buf);
            return bb_fail_errno(err, e, "secret %s: cannot read %s", s->name, path);
        }
        if (n == 0 || (len += (size_t)n) > EGRESS_SECRET_MAX)
            break;
    }
    if (len > EGRESS_SECRET_MAX) {
        explicit_bzero(buf, len);
        free(buf);
        return bb_fail(err, EFBIG, "secret %s: %s is larger than %u bytes", s->name, path,
                       EGRESS_SECRET_MAX);
    }
    if (len && buf[len - 1] == '\n')
        len--;
    if (len && buf[len - 1] == '\r')
        len--;
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        explicit_bzero(buf, len);
        free(buf);
        return bb_fail(err, EINVAL, "secret %s: %s holds a NUL byte", s->name, path);
    }
    *ret = buf;
    return 0;
}

int egress_secret_read(const bf_secret *s, char **ret, bb_error **err)
{
    char *v = NULL;
    if (s->from_env) {
        v = env_take_secret(s->from_env);
        if (!v)
            return bb_fail(err, ENOENT,
                           "secret %s: the environment variable %s is not set; export it before "
                           "running bluebox (secrets.from_env)",
                           s->name, s->from_env);
    } else if (read_secret_file(s, &v, err) < 0) {
        return -1;
    }
    if (check_value(s, v, err) < 0) {
        egress_secret_free(v);
        return -1;
    }
    *ret = v;
    return 0;
}

/* A buffered writer to the memfd: its buffer is on the stack and wiped at the end. */
typedef struct {
    int fd;
    size_t n;
    int error;
    char buf[512];
} jw;

static void jw_flush(jw *w)
{
    size_t off = 0;
    while (off < w->n && !w->error) {
        ssize_t r = write(w->fd, w->buf + off, w->n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            w->error = r < 0 ? errno : EIO;
        else
            off += (size_t)r;
    }
    w->n = 0;
}

static void jw_putc(jw *w, char c)
{
    if (w->n == sizeof w->buf)
        jw_flush(w);
    w->buf[w->n++] = c;
}

static void jw_raw(jw *w, const char *s)
{
    for (; *s; s++)
        jw_putc(w, *s);
}

static void jw_str(jw *w, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    jw_putc(w, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            jw_putc(w, '\\');
            jw_putc(w, (char)*p);
        } else if (*p < 0x20 || *p == 0x7f) {
            jw_raw(w, "\\u00");
            jw_putc(w, hex[*p >> 4]);
            jw_putc(w, hex[*p & 15]);
        } else {
            jw_putc(w, (char)*p);
        }
    }
    jw_putc(w, '"');
}

int egress_secrets_memfd(const bluefile *bf, char *const *values, char *const *placeholders,
                         int *ret_fd, bb_error **err)
{
    _cleanup_close_ int fd = memfd_create("bluebox-secrets", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot make a memfd for the secrets");
    jw w = {.fd = fd};
    jw_putc(&w, '[');
    for (size_t i = 0; i < bf->n_secrets; i++) {
        const bf_secret *s = &bf->secrets[i];
        jw_raw(&w, i ? ",{\"name\":" : "{\"name\":");
        jw_str(&w, s->name);
        jw_raw(&w, ",\"placeholder\":");
        jw_str(&w, placeholders[i]);
        jw_raw(&w, ",\"value\":");
        jw_str(&w, values[i]);
        jw_raw(&w, ",\"hosts\":[");
        for (size_t j = 0; j < s->hosts.n; j++) {
            if (j)
                jw_putc(&w, ',');
            jw_str(&w, s->hosts.v[j]);
        }
        jw_raw(&w, "]");
        for (size_t j = 0; j < s->headers.n; j++) { /* optional: only when named */
            jw_raw(&w, j ? "," : ",\"headers\":[");
            jw_str(&w, s->headers.v[j]);
        }
        jw_raw(&w, s->headers.n ? "]}" : "}");
    }
    jw_putc(&w, ']');
    jw_flush(&w);
    explicit_bzero(w.buf, sizeof w.buf);
    if (w.error)
        return bb_fail_errno(err, w.error, "cannot write the secrets' memfd");
    /* The VMM reads it; nothing may change it on the way. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
        lseek(fd, 0, SEEK_SET) < 0)
        return bb_fail_errno(err, errno, "cannot seal the secrets' memfd");
    /* far from fd 3, where the spawn puts it: dup2 onto itself would keep O_CLOEXEC */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (high < 0)
        return bb_fail_errno(err, errno, "cannot move the secrets' memfd");
    *ret_fd = high;
    return 0;
}

/* ---- a boot's egress -------------------------------------------------------------------- */

static int prepare_secrets(const bluefile *bf, egress *e, bb_error **err)
{
    size_t n = bf->n_secrets;
    char **values = xcalloc(n + 1, sizeof *values), **ph = xcalloc(n + 1, sizeof *ph);
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        const bf_secret *sec = &bf->secrets[i];
        ph[i] = egress_placeholder();
        /* a variable named twice was taken out of the environment the first time */
        for (size_t j = 0; j < i && !values[i] && sec->from_env; j++)
            if (bf->secrets[j].from_env && streq(bf->secrets[j].from_env, sec->from_env))
                values[i] = xstrdup(values[j]);
        if (!values[i])
            r = egress_secret_read(sec, &values[i], err);
    }
    if (r == 0)
        r = egress_secrets_memfd(bf, values, ph, &e->secrets_fd, err);
    for (size_t i = 0; i < n; i++) {
        egress_secret_free(values[i]);
        if (r == 0)
            strv_push(&e->env, xasprintf("%s=%s", bf->secrets[i].name, ph[i]));
        free(ph[i]);
    }
    free(values);
    free(ph);
    return r;
}

int egress_prepare(const sandbox *sb, egress *ret, bb_error **err)
{
    *ret = EGRESS_NONE;
    const bluefile *bf = sb->bf;
    if (!bf->has_allow)
        return 0;
    _cleanup_(egress_done) egress e = EGRESS_NONE;
    if (bf->n_secrets && prepare_secrets(bf, &e, err) < 0)
        return -1;
    e.log = home_path_of(sb->root, HP_NET_LOG, sb->name);
    if (egress_log_rotate(e.log, err) < 0)
        return -1;
    *ret = e;
    e = EGRESS_NONE;
    return 0;
}

bool egress_has_secrets(const egress *e)
{
    return e && e->secrets_fd > STDERR_FILENO;
}

void egress_done(egress *e)
{
    if (egress_has_secrets(e))
        close(e->secrets_fd);
    free(e->log);
    strv_clear(&e->env);
    *e = EGRESS_NONE;
}
