/* Names in a connection's first bytes. See sniff.h. */
#include "net/sniff.h"

#include <string.h>
#include <strings.h>

#define TLS_HANDSHAKE    22
#define TLS_CLIENT_HELLO 1
#define TLS_RECORD_MAX   (16384 + 2048)
#define EXT_SERVER_NAME  0

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

bool sniff_name_ok(char *s)
{
    size_t n = strlen(s);
    if (n && s[n - 1] == '.')
        s[--n] = '\0';
    if (n == 0 || n > SNIFF_NAME_MAX)
        return false;
    size_t label = 0;
    for (char *p = s; *p; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z')
            *p = c = (char)(c - 'A' + 'a');
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
        if (++label > 63)
            return false;
    }
    return label > 0;
}

sniff_proto sniff_protocol(const uint8_t *b, size_t len)
{
    if (len == 0)
        return SNIFF_UNKNOWN;
    if (b[0] == TLS_HANDSHAKE)
        return len < 2 ? SNIFF_UNKNOWN : b[1] == 3 ? SNIFF_TLS : SNIFF_OTHER;
    /* A request line: an upper-case method token of up to 16 letters, then a space. */
    for (size_t i = 0; i < len && i <= 16; i++) {
        if (b[i] == ' ')
            return i ? SNIFF_HTTP : SNIFF_OTHER;
        if (b[i] < 'A' || b[i] > 'Z')
            return SNIFF_OTHER;
    }
    return len > 16 ? SNIFF_OTHER : SNIFF_UNKNOWN;
}

/* ---- TLS -------------------------------------------------------------------------------- */

/* The handshake bytes of the records b starts with, concatenated into hs (at most cap bytes):
 * their length, or -1 when the first record is not a handshake or one is malformed. Another
 * record type ends the handshake bytes. */
static long tls_handshake_bytes(const uint8_t *b, size_t len, uint8_t *hs, size_t cap)
{
    size_t off = 0, n = 0;
    while (off + 5 <= len) {
        if (b[off] != TLS_HANDSHAKE && n > 0)
            break;
        if (b[off] != TLS_HANDSHAKE || b[off + 1] != 3)
            return -1;
        size_t rl = be16(b + off + 3);
        if (rl == 0 || rl > TLS_RECORD_MAX)
            return -1;
        size_t have = len - off - 5 < rl ? len - off - 5 : rl;
        if (n + have > cap)
            have = cap - n;
        memcpy(hs + n, b + off + 5, have);
        n += have;
        if (n == cap || have < rl)
            break;
        off += 5 + rl;
    }
    return (long)n;
}

/* The server_name extension's body e (elen bytes): its first host_name. */
static sniff_result sni_from_ext(const uint8_t *e, size_t elen, char *out)
{
    if (elen < 2 || (size_t)be16(e) + 2 > elen)
        return SNIFF_NONE;
    size_t end = 2 + (size_t)be16(e);
    for (size_t off = 2; off + 3 <= end;) {
        uint8_t type = e[off];
        size_t nl = be16(e + off + 1);
        if (off + 3 + nl > end)
            return SNIFF_NONE;
        if (type == 0) {
            if (nl == 0 || nl > SNIFF_NAME_MAX || memchr(e + off + 3, '\0', nl))
                return SNIFF_NONE;
            memcpy(out, e + off + 3, nl);
            out[nl] = '\0';
            return sniff_name_ok(out) ? SNIFF_FOUND : SNIFF_NONE;
        }
        off += 3 + nl;
    }
    return SNIFF_NONE;
}

sniff_result sniff_tls_sni(const uint8_t *b, size_t len, char out[SNIFF_NAME_MAX + 1])
{
    static uint8_t hs[SNIFF_MAX];
    long got = tls_handshake_bytes(b, len, hs, sizeof hs);
    if (got < 0)
        return SNIFF_NONE;
    size_t n = (size_t)got;
    if (n < 4)
        return len >= SNIFF_MAX ? SNIFF_NONE : SNIFF_MORE;
    if (hs[0] != TLS_CLIENT_HELLO)
        return SNIFF_NONE;
    size_t body = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
    if (body + 4 > sizeof hs)
        return SNIFF_NONE; /* larger than we gather: decide without a name */
    if (n < body + 4)
        return len >= SNIFF_MAX ? SNIFF_NONE : SNIFF_MORE;
    const uint8_t *h = hs + 4;
    size_t off = 2 + 32; /* client_version, random */
    if (off + 1 > body)
        return SNIFF_NONE;
    off += 1 + h[off]; /* session_id */
    if (off + 2 > body)
        return SNIFF_NONE;
    off += 2 + (size_t)be16(h + off); /* cipher_suites */
    if (off + 1 > body)
        return SNIFF_NONE;
    off += 1 + h[off]; /* compression_methods */
    if (off + 2 > body)
        return SNIFF_NONE; /* no extensions at all */
    size_t end = off + 2 + (size_t)be16(h + off);
    if (end > body)
        return SNIFF_NONE;
    for (off += 2; off + 4 <= end;) {
        uint16_t type = be16(h + off);
        size_t el = be16(h + off + 2);
        if (off + 4 + el > end)
            return SNIFF_NONE;
        if (type == EXT_SERVER_NAME)
            return sni_from_ext(h + off + 4, el, out);
        off += 4 + el;
    }
    return SNIFF_NONE;
}

/* ---- HTTP ------------------------------------------------------------------------------- */

/* The end of the request head in b (just past the empty line), 0 when not there yet. */
static size_t head_end(const uint8_t *b, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (b[i] == '\n' && b[i + 1] == '\n')
            return i + 2;
        if (i + 3 < len && b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n')
            return i + 4;
    }
    return 0;
}

sniff_result sniff_http_host(const uint8_t *b, size_t len, char out[SNIFF_NAME_MAX + 1])
{
    if (sniff_protocol(b, len) != SNIFF_HTTP)
        return sniff_protocol(b, len) == SNIFF_UNKNOWN ? SNIFF_MORE : SNIFF_NONE;
    size_t end = head_end(b, len < SNIFF_MAX ? len : SNIFF_MAX);
    if (!end)
        return len >= SNIFF_MAX ? SNIFF_NONE : SNIFF_MORE;
    int found = 0;
    size_t line = 0;
    while (line < end) {
        const uint8_t *nl = memchr(b + line, '\n', end - line);
        size_t next = (size_t)(nl - b) + 1, l = next - line - 1;
        if (l && b[line + l - 1] == '\r')
            l--;
        if (line > 0 && l > 5 && strncasecmp((const char *)b + line, "host:", 5) == 0) {
            const uint8_t *v = b + line + 5;
            size_t vl = l - 5;
            while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            /* a port after the name: name:digits */
            for (size_t i = 0; i < vl; i++)
                if (v[i] == ':') {
                    for (size_t j = i + 1; j < vl; j++)
                        if (v[j] < '0' || v[j] > '9')
                            return SNIFF_NONE;
                    vl = i;
                    break;
                }
            if (found++ || vl == 0 || vl > SNIFF_NAME_MAX || memchr(v, '\0', vl))
                return SNIFF_NONE;
            memcpy(out, v, vl);
            out[vl] = '\0';
        } else if (line > 0 && l && (b[line] == ' ' || b[line] == '\t')) {
            return SNIFF_NONE; /* obsolete line folding: a header could hide in it */
        }
        line = next;
    }
    return found == 1 && sniff_name_ok(out) ? SNIFF_FOUND : SNIFF_NONE;
}
