/* UTF-8 clean-up for `bluebox mcp` (mcp_text.h). */
#include "api/mcp_text.h"

#include <stdint.h>
#include <string.h>

/* The length of the valid UTF-8 character at p (at most n bytes), or 0 when it is not one:
 * overlong forms, surrogates and code points past U+10FFFF are not. */
static size_t utf8_char_len(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80)
        return 1;
    size_t need;
    uint32_t cp;
    if ((p[0] & 0xe0) == 0xc0) {
        need = 2;
        cp = p[0] & 0x1fu;
    } else if ((p[0] & 0xf0) == 0xe0) {
        need = 3;
        cp = p[0] & 0x0fu;
    } else if ((p[0] & 0xf8) == 0xf0) {
        need = 4;
        cp = p[0] & 0x07u;
    } else {
        return 0;
    }
    if (n < need)
        return 0;
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[need] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return need;
}

size_t text_append_clipped(strbuf *b, const char *data, size_t len, size_t max)
{
    const unsigned char *p = (const unsigned char *)data;
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_char_len(p + i, len - i);
        size_t take = n ? n : 1;
        if (i + take > max)
            break;
        if (n && p[i])
            sb_putn(b, data + i, n);
        else
            sb_puts(b, "\xef\xbf\xbd"); /* U+FFFD */
        i += take;
    }
    return len - i;
}
