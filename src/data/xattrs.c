/* Reading and writing the user.bluebox.* attributes a copy of /data carries, by fd only. */
#include "xattrs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/xattr.h>

#include "util/xalloc.h"

bool xattr_carried(const char *name)
{
    size_t n = strlen(name), p = strlen(XATTR_CARRIED_PREFIX);
    return n > p && n <= XATTR_NAME_LEN_MAX && strncmp(name, XATTR_CARRIED_PREFIX, p) == 0;
}

xattr_added xattr_set_add(xattr_set *s, const char *name, const void *value, size_t len)
{
    if (!xattr_carried(name))
        return XATTR_FOREIGN;
    for (size_t i = 0; i < s->n; i++)
        if (streq(s->v[i].name, name))
            return XATTR_DUP;
    size_t bytes = strlen(name) + len;
    if (len > XATTR_VALUE_MAX || s->n >= XATTR_PER_ENTRY_MAX ||
        s->bytes + bytes > XATTR_ENTRY_BYTES_MAX)
        return XATTR_OVER;
    s->bytes += bytes;
    s->v = xreallocarray(s->v, s->n + 1, sizeof *s->v);
    xattr_pair *x = &s->v[s->n++];
    x->name = xstrdup(name);
    x->value = xmalloc(len ? len : 1);
    if (len)
        memcpy(x->value, value, len);
    x->len = len;
    return XATTR_ADDED;
}

void xattr_set_free(xattr_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].name);
        free(s->v[i].value);
    }
    free(s->v);
    *s = (xattr_set){0};
}

/* No extended attributes here at all, or none of this kind. */
static bool unsupported(int e)
{
    return e == ENOTSUP || e == EOPNOTSUPP;
}

/* The NUL-separated names of fd's attributes in *ret (NULL and 0 when it has none). */
static ssize_t list_names(int fd, char **ret)
{
    *ret = NULL;
    for (int tries = 0; tries < 8; tries++) {
        ssize_t n = flistxattr(fd, NULL, 0);
        if (n <= 0)
            return n;
        char *buf = xmalloc((size_t)n);
        ssize_t m = flistxattr(fd, buf, (size_t)n);
        if (m >= 0) {
            *ret = buf;
            return m;
        }
        free(buf);
        if (errno != ERANGE) /* else it grew between the two calls */
            return -1;
    }
    errno = EAGAIN;
    return -1;
}

int xattrs_read(int fd, const char *name, xattr_set *ret, data_tally *t, bb_error **err)
{
    *ret = (xattr_set){0};
    _cleanup_free_ char *names = NULL;
    ssize_t len = list_names(fd, &names);
    if (len < 0 && unsupported(errno))
        return 0;
    if (len < 0)
        return bb_fail_errno(err, errno, "cannot list the extended attributes of %s", name);
    _cleanup_free_ char *buf = NULL;
    for (char *n = names; n && n < names + len; n += strlen(n) + 1) {
        if (!xattr_carried(n))
            continue;
        if (!buf)
            buf = xmalloc(XATTR_VALUE_MAX);
        ssize_t v = fgetxattr(fd, n, buf, XATTR_VALUE_MAX);
        if (v < 0 && errno == ENODATA)
            continue; /* removed since the listing */
        if (v < 0 && errno == ERANGE) {
            t->xattrs_ignored++;
            continue;
        }
        if (v < 0) {
            int e = errno;
            xattr_set_free(ret);
            return bb_fail_errno(err, e, "cannot read the extended attribute %s of %s", n, name);
        }
        if (xattr_set_add(ret, n, buf, (size_t)v) == XATTR_OVER)
            t->xattrs_ignored++;
    }
    return 0;
}

/* The file system cannot hold them: none at all, or not this many or this large. */
static bool not_taken(int e)
{
    return unsupported(e) || e == ENOSPC || e == E2BIG || e == ERANGE || e == EDQUOT;
}

int xattrs_write(int fd, const char *name, const xattr_set *s, data_tally *t, bb_error **err)
{
    for (size_t i = 0; i < s->n; i++) {
        if (fsetxattr(fd, s->v[i].name, s->v[i].value, s->v[i].len, 0) == 0)
            continue;
        if (not_taken(errno)) {
            t->xattrs_lost++;
            return 0;
        }
        return bb_fail_errno(err, errno, "cannot set the extended attribute %s of %s", s->v[i].name,
                             name);
    }
    return 0;
}

int xattrs_copy(int src, int dst, const char *name, data_tally *t, bb_error **err)
{
    _cleanup_xattrs_ xattr_set s = {0};
    if (xattrs_read(src, name, &s, t, err) < 0)
        return -1;
    return xattrs_write(dst, name, &s, t, err);
}
