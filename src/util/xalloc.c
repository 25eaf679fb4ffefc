/* Allocation helpers: out of memory is not a recoverable condition for bluebox. */
#include "xalloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _noreturn_ void oom(void)
{
    static const char msg[] = "bluebox: out of memory\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        oom();
    return xrealloc(p, n * size);
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        oom();
    return s;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

static void sb_grow(strbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            oom();
        cap *= 2;
    }
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void sb_putn(strbuf *b, const char *s, size_t n)
{
    sb_grow(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_puts(strbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

void sb_putc(strbuf *b, char c)
{
    sb_putn(b, &c, 1);
}

void sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *s = xvasprintf(fmt, ap);
    va_end(ap);
    sb_puts(b, s);
}

char *sb_steal(strbuf *b)
{
    char *s = b->s ? b->s : xstrdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}
