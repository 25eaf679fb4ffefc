/* Allocation that aborts on out-of-memory, and a growable string buffer. Nothing here
 * returns a failure: there is no NULL to check. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

#include "macro.h"

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* realloc(p, n * size) with overflow check. */
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) _printf_(1, 2);
char *xvasprintf(const char *fmt, va_list ap) _printf_(1, 0);

/* A growable byte buffer, always NUL-terminated. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf;

void sb_putn(strbuf *b, const char *s, size_t n);
void sb_puts(strbuf *b, const char *s);
void sb_putc(strbuf *b, char c);
void sb_printf(strbuf *b, const char *fmt, ...) _printf_(2, 3);
/* Return the string, leaving the buffer empty. Never NULL. */
char *sb_steal(strbuf *b);
static inline void sb_freep(strbuf *b)
{
    free(b->s);
}
#define _cleanup_sb_ _cleanup_(sb_freep)
