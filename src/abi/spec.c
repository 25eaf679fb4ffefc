/* The uml launch spec: writer (bluebox-vmm) and strict reader (guest init). */
#include "spec.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "util/xalloc.h"

/* Record tags. Singular ones must appear exactly once; lists any number of times. */
enum {
    T_MODE = 'm',
    T_ARG = 'a',
    T_ENV = 'e',
    T_CWD = 'c',
    T_HOST = 'h',
    T_UID = 'u',
    T_GID = 'g',
    T_GROUP = 'G',
    T_ROWS = 'r',
    T_COLS = 'k',
    T_ROOT = 'R',
    T_MOUNT = 'M',
    T_USER = 'U',
    T_TTY = 't',
    T_CA = 'C', /* optional, at most once */
};
static const char singular[] = {T_MODE, T_CWD,  T_HOST, T_UID,  T_GID,
                                T_ROWS, T_COLS, T_ROOT, T_USER, T_TTY};

/* Limits far above anything real; they only keep a damaged file from costing much. */
#define SPEC_MAX_ITEMS 65536
#define SPEC_HOST_MAX  64
#define SPEC_MOUNT_MAX 1024
#define SPEC_USER_MAX  1024

static const char *spec_mode_name(spec_mode m)
{
    return abi_mode_name((abi_mode)m);
}

int spec_mode_parse(const char *s, spec_mode *ret)
{
    for (int i = 0; i < ABI_MODE_COUNT; i++)
        if (streq(s, abi_mode_name((abi_mode)i))) {
            *ret = (spec_mode)i;
            return 0;
        }
    return -1;
}

static void put_rec(strbuf *b, char tag, const void *data, size_t n)
{
    uint8_t hdr[5] = {(uint8_t)tag, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
                      (uint8_t)n};
    sb_putn(b, (const char *)hdr, sizeof hdr);
    sb_putn(b, data, n);
}

static void put_str(strbuf *b, char tag, const char *s)
{
    put_rec(b, tag, s, strlen(s));
}

static void put_u32(strbuf *b, char tag, uint32_t v)
{
    uint8_t d[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put_rec(b, tag, d, sizeof d);
}

char *spec_encode(const launch_spec *s, size_t *ret_len)
{
    strbuf b = {0};
    sb_puts(&b, SPEC_MAGIC);
    put_str(&b, T_MODE, spec_mode_name(s->mode));
    for (size_t i = 0; i < s->argv.n; i++)
        put_str(&b, T_ARG, s->argv.v[i]);
    for (size_t i = 0; i < s->env.n; i++)
        put_str(&b, T_ENV, s->env.v[i]);
    put_str(&b, T_CWD, s->cwd);
    put_str(&b, T_HOST, s->hostname);
    put_u32(&b, T_UID, s->uid);
    put_u32(&b, T_GID, s->gid);
    for (size_t i = 0; i < s->n_groups; i++)
        put_u32(&b, T_GROUP, s->groups[i]);
    put_u32(&b, T_ROWS, s->rows);
    put_u32(&b, T_COLS, s->cols);
    put_u32(&b, T_ROOT, s->root_flags);
    for (size_t i = 0; i < s->n_mounts; i++) {
        /* One flags byte, then the path. */
        size_t n = strlen(s->mounts[i].path);
        _cleanup_free_ char *rec = xmalloc(n + 1);
        rec[0] = (char)s->mounts[i].flags;
        memcpy(rec + 1, s->mounts[i].path, n);
        put_rec(&b, T_MOUNT, rec, n + 1);
    }
    put_u32(&b, T_TTY, s->tty ? 1 : 0);
    put_str(&b, T_USER, s->user ? s->user : "");
    if (s->ca_pem)
        put_str(&b, T_CA, s->ca_pem);
    *ret_len = b.len;
    return sb_steal(&b);
}

static int u32_of(const uint8_t *d, size_t n, uint32_t *ret)
{
    if (n != 4)
        return -1;
    *ret = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
    return 0;
}

/* A string record: no NUL inside. */
static char *str_of(const uint8_t *d, size_t n)
{
    return memchr(d, '\0', n) ? NULL : xstrndup((const char *)d, n);
}

static int take_id(const uint8_t *d, size_t n, uint32_t *ret)
{
    /* (uid_t)-1 means "leave unchanged" to setuid and friends: never a valid id. */
    return u32_of(d, n, ret) < 0 || *ret == UINT32_MAX ? -1 : 0;
}

static int take_size(const uint8_t *d, size_t n, unsigned *ret)
{
    uint32_t v;
    if (u32_of(d, n, &v) < 0 || v > 65535)
        return -1;
    *ret = v;
    return 0;
}

static int take_list(strv *v, const uint8_t *d, size_t n, bool need_eq)
{
    char *str = str_of(d, n);
    if (!str || v->n >= SPEC_MAX_ITEMS || (need_eq && (str[0] == '=' || !strchr(str, '=')))) {
        free(str);
        return -1;
    }
    strv_push(v, str);
    return 0;
}

bool spec_mount_path_ok(const char *p)
{
    if (p[0] != '/' || p[1] == '\0' || strlen(p) >= PATH_MAX)
        return false;
    /* Every component non-empty and neither "." nor "..": the guest mounts at exactly the
     * path the VMM saw, and hostfs opens the same path on the host. */
    for (const char *c = p + 1;;) {
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        if (c[n] == '\0')
            return true;
        c += n + 1;
    }
}

void spec_add_mount(launch_spec *s, const char *path, unsigned flags)
{
    s->mounts = xreallocarray(s->mounts, s->n_mounts + 1, sizeof *s->mounts);
    s->mounts[s->n_mounts++] = (spec_mount){.path = xstrdup(path), .flags = flags};
}

static int take_mount(launch_spec *s, const uint8_t *d, size_t n)
{
    if (n < 2 || (d[0] & ~SPEC_MOUNT_FLAGS) || s->n_mounts >= SPEC_MOUNT_MAX)
        return -1;
    _cleanup_free_ char *path = str_of(d + 1, n - 1);
    if (!path || !spec_mount_path_ok(path))
        return -1;
    spec_add_mount(s, path, d[0]);
    return 0;
}

static int take_one(launch_spec *s, uint8_t tag, const uint8_t *d, size_t n)
{
    uint32_t v;
    _cleanup_free_ char *str = NULL;
    switch (tag) {
    case T_ARG:
        return take_list(&s->argv, d, n, false);
    case T_ENV:
        return take_list(&s->env, d, n, true);
    case T_GROUP:
        if (take_id(d, n, &v) < 0 || s->n_groups >= SPEC_MAX_ITEMS)
            return -1;
        s->groups = xreallocarray(s->groups, s->n_groups + 1, sizeof *s->groups);
        s->groups[s->n_groups++] = v;
        return 0;
    case T_MODE:
        str = str_of(d, n);
        return str ? spec_mode_parse(str, &s->mode) : -1;
    case T_CWD:
        s->cwd = str_of(d, n);
        return s->cwd && s->cwd[0] == '/' ? 0 : -1;
    case T_HOST:
        s->hostname = str_of(d, n);
        return s->hostname && n <= SPEC_HOST_MAX ? 0 : -1;
    case T_UID:
        if (take_id(d, n, &v) < 0)
            return -1;
        s->uid = v;
        return 0;
    case T_GID:
        if (take_id(d, n, &v) < 0)
            return -1;
        s->gid = v;
        return 0;
    case T_USER:
        s->user = str_of(d, n);
        return s->user && n <= SPEC_USER_MAX ? 0 : -1;
    case T_ROWS:
        return take_size(d, n, &s->rows);
    case T_COLS:
        return take_size(d, n, &s->cols);
    case T_ROOT:
        if (u32_of(d, n, &v) < 0 || (v & ~(SPEC_ROOT_RO | SPEC_ROOT_BUILD)))
            return -1;
        s->root_flags = v;
        return 0;
    case T_MOUNT:
        return take_mount(s, d, n);
    case T_TTY:
        if (u32_of(d, n, &v) < 0 || v > 1)
            return -1;
        s->tty = v == 1;
        return 0;
    case T_CA:
        if (s->ca_pem || n > SPEC_CA_MAX || n < strlen(SPEC_CA_BEGIN) ||
            memcmp(d, SPEC_CA_BEGIN, strlen(SPEC_CA_BEGIN)) != 0)
            return -1;
        s->ca_pem = str_of(d, n);
        return s->ca_pem ? 0 : -1;
    default:
        return -1;
    }
}

static int decode(const uint8_t *p, size_t len, launch_spec *s, bb_error **err)
{
    size_t magic = strlen(SPEC_MAGIC);
    if (len < magic || memcmp(p, SPEC_MAGIC, magic) != 0)
        return bb_fail(err, EINVAL, "launch spec: not a bluebox launch spec (version mismatch?)");
    unsigned seen = 0;
    for (size_t off = magic; off < len;) {
        if (len - off < 5)
            return bb_fail(err, EINVAL, "launch spec: truncated at byte %zu", off);
        uint8_t tag = p[off];
        uint32_t n;
        u32_of(p + off + 1, 4, &n);
        off += 5;
        if (n > len - off)
            return bb_fail(err, EINVAL, "launch spec: truncated at byte %zu", off);
        const char *one = memchr(singular, tag, sizeof singular);
        if (one) {
            unsigned bit = 1u << (one - singular);
            if (seen & bit)
                return bb_fail(err, EINVAL, "launch spec: '%c' given twice", tag);
            seen |= bit;
        }
        if (take_one(s, tag, p + off, n) < 0)
            return bb_fail(err, EINVAL, "launch spec: bad record '%c' at byte %zu", tag, off - 5);
        off += n;
    }
    if (seen != (1u << sizeof singular) - 1)
        return bb_fail(err, EINVAL, "launch spec: incomplete");
    if (s->argv.n == 0 || s->argv.v[0][0] == '\0')
        return bb_fail(err, EINVAL, "launch spec: no command");
    return 0;
}

int spec_decode(const char *data, size_t len, launch_spec *ret, bb_error **err)
{
    if (len > SPEC_MAX)
        return bb_fail(err, EFBIG, "launch spec is larger than %u bytes", SPEC_MAX);
    launch_spec s = {0};
    if (decode((const uint8_t *)data, len, &s, err) < 0) {
        spec_clear(&s);
        return -1;
    }
    *ret = s;
    return 0;
}

void spec_clear(launch_spec *s)
{
    strv_clear(&s->argv);
    strv_clear(&s->env);
    free(s->cwd);
    free(s->hostname);
    free(s->groups);
    for (size_t i = 0; i < s->n_mounts; i++)
        free(s->mounts[i].path);
    free(s->mounts);
    free(s->user);
    free(s->ca_pem);
    *s = (launch_spec){0};
}
