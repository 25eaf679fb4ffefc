/* Terminal facts, and text made safe to show on a terminal. */
#include "tty.h"

#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

bool stdin_is_interactive(void)
{
    struct stat st;
    return fstat(STDIN_FILENO, &st) == 0 && S_ISCHR(st.st_mode) && isatty(STDIN_FILENO);
}

/* The length of the well-formed UTF-8 sequence at s[0..avail) (shortest form, no
 * surrogates), with its code point; 0 if there is none. */
static size_t utf8_seq(const unsigned char *s, size_t avail, unsigned *ret_cp)
{
    size_t n = *s >= 0xf0 && *s <= 0xf4 ? 4 : *s >= 0xe0 ? 3 : *s >= 0xc2 && *s < 0xe0 ? 2 : 0;
    if (n == 0 || n > avail)
        return 0;
    unsigned cp = *s & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    *ret_cp = cp;
    return n;
}

bool tty_escape(strbuf *b, const char *text, size_t len, unsigned flags)
{
    const unsigned char *s = (const unsigned char *)text, *end = s + len;
    bool keep = flags & TTY_KEEP_LINES, escaped = false;
    while (s < end) {
        unsigned cp = 0;
        size_t n = *s >= 0x80 ? utf8_seq(s, (size_t)(end - s), &cp) : 1;
        if (keep && (*s == '\n' || *s == '\t')) {
            sb_putc(b, (char)*s);
        } else if (keep && *s == '\r' && s + 1 < end && s[1] == '\n') {
            sb_puts(b, "\r\n");
            n = 2;
        } else if (*s == '\n' || *s == '\t') {
            sb_puts(b, *s == '\n' ? "\\n" : "\\t");
            escaped = true;
        } else if (*s < 0x20 || *s == 0x7f || n == 0) {
            sb_printf(b, "\\x%02x", *s);
            escaped = true;
            n = 1;
        } else if (n > 1 && cp < 0xa0) {
            sb_printf(b, "\\u%04x", cp);
            escaped = true;
        } else {
            sb_putn(b, (const char *)s, n);
        }
        s += n;
    }
    return escaped;
}
