/* Base64 for the API (b64.h). */
#include "b64.h"

#include <stdint.h>
#include <stdlib.h>

#include "util/xalloc.h"

static const char ALPHA[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t b64_encode_to(char *dst, const void *data, size_t n)
{
    const unsigned char *p = data;
    char *o = dst;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = ALPHA[v >> 18 & 63];
        *o++ = ALPHA[v >> 12 & 63];
        *o++ = ALPHA[v >> 6 & 63];
        *o++ = ALPHA[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = ALPHA[v >> 18 & 63];
        *o++ = ALPHA[v >> 12 & 63];
        *o++ = i + 1 < n ? ALPHA[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    return (size_t)(o - dst);
}

char *b64_encode(const void *data, size_t n, size_t *ret_len)
{
    char *out = xmalloc(B64_LEN(n) + 1);
    size_t len = b64_encode_to(out, data, n);
    out[len] = 0;
    if (ret_len)
        *ret_len = len;
    return out;
}

static int val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

bool b64_decode(const char *s, size_t n, unsigned char **ret, size_t *ret_len)
{
    if (n % 4)
        return false;
    unsigned char *out = xmalloc(n / 4 * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        bool last = i + 4 == n;
        for (int k = 0; k < 4; k++)
            v[k] = val(s[i + (size_t)k]);
        int pad = last && s[i + 3] == '=' ? (s[i + 2] == '=' ? 2 : 1) : 0;
        if (v[0] < 0 || v[1] < 0 || (pad < 2 && v[2] < 0) || (pad < 1 && v[3] < 0) ||
            (pad == 2 && (v[1] & 15)) || (pad == 1 && (v[2] & 3))) {
            free(out);
            return false;
        }
        uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
                     (uint32_t)(pad < 2 ? v[2] : 0) << 6 | (uint32_t)(pad < 1 ? v[3] : 0);
        out[o++] = (unsigned char)(x >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(x >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)x;
    }
    *ret = out;
    *ret_len = o;
    return true;
}
