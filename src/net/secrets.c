/* Secrets the guest never holds: loading, host matching, placeholder search and the
 * request-head rewriter. See secrets.h. */
#include "net/secrets.h"

#include <ctype.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/json.h"

#define PREFIX     ABI_SECRET_PREFIX
#define PREFIX_LEN (sizeof ABI_SECRET_PREFIX - 1)
#define NAME_MAX_  256
#define HOST_MAX   253
/* A chunk-size line (with extensions) longer than this is not a client we know. */
#define CHUNK_LINE_MAX 1024

/* ---- loading ---- */

/* jansson's strings hold the values while the array is parsed: its memory is wiped before
 * it goes back to the allocator. */
static void wiping_free(void *p)
{
    if (p)
        explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_ || isdigit((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return false;
    return true;
}

static bool placeholder_ok(const char *s)
{
    if (strlen(s) != SECRET_PLACEHOLDER_LEN || strncmp(s, PREFIX, PREFIX_LEN) != 0)
        return false;
    for (size_t i = PREFIX_LEN; i < SECRET_PLACEHOLDER_LEN; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
            return false;
    return true;
}

/* What a header value may carry: visible ASCII, space, tab and bytes above 0x7f. */
static bool value_ok(const char *v, size_t n)
{
    if (n == 0 || n > SECRET_VALUE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* A host name as the allowlist normalizes them, optionally "*." first. Lower-cased in place,
 * a trailing dot dropped. */
static bool host_norm(char *h)
{
    size_t n = strlen(h);
    if (n && h[n - 1] == '.')
        h[--n] = '\0';
    const char *name = strncmp(h, "*.", 2) == 0 ? h + 2 : h;
    if (!*name || strlen(name) > HOST_MAX || *name == '.' || *name == '-')
        return false;
    for (char *c = h; *c; c++) {
        *c = (char)tolower((unsigned char)*c);
        if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && !(c == h && *c == '*'))
            return false;
    }
    return !strstr(name, "..");
}

static int take_hosts(secret *sec, json_t *hosts, size_t i, bb_error **err)
{
    if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
        json_array_size(hosts) > SECRET_HOSTS_MAX)
        return bb_fail(err, EINVAL, "secret %zu (%s): hosts must be a list of 1 to %d names", i,
                       sec->name, SECRET_HOSTS_MAX);
    size_t k;
    json_t *h;
    json_array_foreach(hosts, k, h)
    {
        _cleanup_free_ char *copy = json_is_string(h) ? xstrdup(json_string_value(h)) : NULL;
        if (!copy || !host_norm(copy))
            return bb_fail(err, EINVAL, "secret %zu (%s): host %zu is not a host name", i,
                           sec->name, k);
        strv_push(&sec->hosts, steal_pointer(&copy));
    }
    return 0;
}

/* "headers" (optional): HTTP token names, lower-cased. */
static int take_headers(secret *sec, json_t *headers, size_t i, bb_error **err)
{
    if (!headers)
        return 0;
    if (!json_is_array(headers) || json_array_size(headers) == 0 ||
        json_array_size(headers) > SECRET_HEADERS_MAX)
        return bb_fail(err, EINVAL, "secret %zu (%s): headers must be a list of 1 to %d names", i,
                       sec->name, SECRET_HEADERS_MAX);
    size_t k;
    json_t *h;
    json_array_foreach(headers, k, h)
    {
        const char *v = json_is_string(h) ? json_string_value(h) : "";
        size_t n = strlen(v);
        bool ok = n > 0 && n <= 128;
        for (size_t j = 0; ok && j < n; j++)
            ok = isalnum((unsigned char)v[j]) || strchr("!#$%&'*+-.^_`|~", v[j]);
        if (!ok)
            return bb_fail(err, EINVAL, "secret %zu (%s): header %zu is not a header name", i,
                           sec->name, k);
        char *copy = xstrdup(v);
        for (char *c = copy; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        strv_push(&sec->headers, copy);
    }
    return 0;
}

static int take_one(secrets *s, json_t *o, size_t i, bb_error **err)
{
    static const char *const keys[] = {"name", "placeholder", "value", "hosts", "headers"};
    if (!json_is_object(o))
        return bb_fail(err, EINVAL, "secret %zu: not an object", i);
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        bool known = false;
        for (size_t k = 0; k < ELEMENTSOF(keys); k++)
            known |= streq(key, keys[k]);
        if (!known)
            return bb_fail(err, EINVAL, "secret %zu: unknown key", i);
    }
    json_t *name = json_object_get(o, "name"), *ph = json_object_get(o, "placeholder");
    json_t *value = json_object_get(o, "value");
    if (!json_is_string(name) || !name_ok(json_string_value(name)))
        return bb_fail(err, EINVAL, "secret %zu: name must be an environment variable name", i);
    secret *sec = &s->v[s->n++];
    *sec = (secret){.name = xstrdup(json_string_value(name))};
    if (!json_is_string(ph) || !placeholder_ok(json_string_value(ph)))
        return bb_fail(err, EINVAL, "secret %zu (%s): placeholder must be %s and 32 hex digits", i,
                       sec->name, PREFIX);
    sec->placeholder = xstrdup(json_string_value(ph));
    for (size_t k = 0; k + 1 < s->n; k++)
        if (streq(s->v[k].placeholder, sec->placeholder) || streq(s->v[k].name, sec->name))
            return bb_fail(err, EINVAL, "secret %zu (%s): name or placeholder given twice", i,
                           sec->name);
    if (!json_is_string(value) || !value_ok(json_string_value(value), json_string_length(value)))
        return bb_fail(err, EINVAL,
                       "secret %zu (%s): the value must be 1 to %d bytes with no line break, "
                       "NUL or other control character",
                       i, sec->name, SECRET_VALUE_MAX);
    sec->value_len = json_string_length(value);
    sec->value = xmalloc(sec->value_len + 1);
    memcpy(sec->value, json_string_value(value), sec->value_len + 1);
    if (take_hosts(sec, json_object_get(o, "hosts"), i, err) < 0)
        return -1;
    return take_headers(sec, json_object_get(o, "headers"), i, err);
}

static int parse(const char *json, size_t len, secrets *s, bb_error **err)
{
    json_error_t jerr;
    _cleanup_json_ json_t *a = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson's message quotes the input near the error: only the position is said. */
    if (!a)
        return bb_fail(err, EINVAL, "not valid JSON (at byte %d)", jerr.position);
    if (!json_is_array(a) || json_array_size(a) > SECRETS_MAX)
        return bb_fail(err, EINVAL, "not a list of at most %d secrets", SECRETS_MAX);
    s->v = xcalloc(json_array_size(a) + 1, sizeof *s->v);
    size_t i;
    json_t *o;
    json_array_foreach(a, i, o)
    {
        if (take_one(s, o, i, err) < 0)
            return -1;
    }
    return 0;
}

int secrets_parse(const char *json, size_t len, secrets *ret, bb_error **err)
{
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    json_set_alloc_funcs(malloc, wiping_free);
    secrets s = {0};
    int r = parse(json, len, &s, err);
    json_set_alloc_funcs(m, f);
    if (r < 0) {
        secrets_clear(&s);
        return bb_prefix(err, "secrets from bluebox");
    }
    *ret = s;
    return 0;
}

/* (buf is never NULL; GCC's -Wnonnull in the ASan build cannot tell, hence the check.) */
static void wipe_input(char *buf, size_t len)
{
    if (buf)
        explicit_bzero(buf, len);
}

int secrets_load_fd(int fd, secrets *ret, bb_error **err)
{
    _cleanup_close_ int owned = fd;
    struct stat st;
    if (fstat(owned, &st) < 0)
        return bb_fail_errno(err, errno, "secrets from bluebox: fd %d", fd);
    if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > SECRETS_INPUT_MAX)
        return bb_fail(err, EINVAL, "secrets from bluebox: fd %d is not a file of 1 to %u bytes",
                       fd, SECRETS_INPUT_MAX);
    size_t len = (size_t)st.st_size;
    _cleanup_free_ char *buf = xmalloc(len);
    /* From the start, whatever the writer left the shared offset at. */
    for (size_t off = 0; off < len;) {
        ssize_t n = pread(owned, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            wipe_input(buf, len);
            return bb_fail_errno(err, n < 0 ? errno : EIO, "secrets from bluebox: cannot read");
        }
        off += (size_t)n;
    }
    int r = secrets_parse(buf, len, ret, err);
    explicit_bzero(buf, len);
    return r;
}

int secrets_load_env(secrets *ret, bb_error **err)
{
    *ret = (secrets){0};
    const char *v = getenv(ABI_ENV_SECRETS_FD);
    if (!v)
        return 0;
    char *end;
    errno = 0;
    long fd = strtol(v, &end, 10);
    bool ok = !errno && *v && !*end && fd > STDERR_FILENO && fd < 65536;
    unsetenv(ABI_ENV_SECRETS_FD);
    if (!ok)
        return bb_fail(err, EINVAL, ABI_ENV_SECRETS_FD " must name an inherited fd");
    return secrets_load_fd((int)fd, ret, err);
}

void secrets_clear(secrets *s)
{
    for (size_t i = 0; i < s->n; i++) {
        secret *sec = &s->v[i];
        if (sec->value)
            explicit_bzero(sec->value, sec->value_len);
        free(sec->value);
        free(sec->name);
        free(sec->placeholder);
        strv_clear(&sec->hosts);
        strv_clear(&sec->headers);
    }
    free(s->v);
    *s = (secrets){0};
}

/* ---- matching ---- */

static bool host_matches(const char *pattern, const char *host, size_t n)
{
    if (strncmp(pattern, "*.", 2) == 0) {
        const char *suffix = pattern + 1; /* ".example.org" */
        size_t k = strlen(suffix);
        return n > k && strncasecmp(host + n - k, suffix, k) == 0;
    }
    return strlen(pattern) == n && strncasecmp(pattern, host, n) == 0;
}

bool secret_has_host(const secret *sec, const char *host)
{
    if (!host)
        return false;
    size_t n = strlen(host);
    if (n && host[n - 1] == '.')
        n--;
    for (size_t i = 0; i < sec->hosts.n; i++)
        if (host_matches(sec->hosts.v[i], host, n))
            return true;
    return false;
}

bool secrets_for_host(const secrets *s, const char *host)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (secret_has_host(&s->v[i], host))
            return true;
    return false;
}

/* The secret whose placeholder starts at p (SECRET_PLACEHOLDER_LEN bytes readable), or NULL. */
static const secret *secrets_match(const secrets *s, const char *p)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (memcmp(s->v[i].placeholder, p, SECRET_PLACEHOLDER_LEN) == 0)
            return &s->v[i];
    return NULL;
}

/* ---- placeholder search ---- */

void leak_scan_init(leak_scan *ls, const secrets *s, const char *host)
{
    *ls = (leak_scan){.s = s, .host = host};
}

/* Count the placeholders that start before `starts` and end within n. */
static void scan(leak_scan *ls, const char *p, size_t n, size_t starts)
{
    for (size_t i = 0; i < starts && n - i >= SECRET_PLACEHOLDER_LEN;) {
        const char *hit = memmem(p + i, n - i, PREFIX, PREFIX_LEN);
        if (!hit)
            return;
        size_t at = (size_t)(hit - p);
        if (at >= starts || n - at < SECRET_PLACEHOLDER_LEN)
            return;
        const secret *sec = secrets_match(ls->s, hit);
        if (sec) {
            ls->seen++;
            ls->leaks += !secret_has_host(sec, ls->host);
        }
        i = at + 1;
    }
}

void leak_scan_feed(leak_scan *ls, const void *data, size_t n)
{
    const size_t keep = sizeof ls->carry;
    const char *d = data;
    if (!ls->s || ls->s->n == 0 || n == 0)
        return;
    if (ls->carry_len) {
        /* Placeholders that began in what the last feed left over. */
        char tmp[2 * sizeof ls->carry];
        size_t take = n < keep ? n : keep;
        memcpy(tmp, ls->carry, ls->carry_len);
        memcpy(tmp + ls->carry_len, d, take);
        scan(ls, tmp, ls->carry_len + take, ls->carry_len);
        if (n < keep) { /* the carry stays the tail of both */
            size_t total = ls->carry_len + n;
            size_t from = total > keep ? total - keep : 0;
            memmove(ls->carry, tmp + from, total - from);
            ls->carry_len = total - from;
            return;
        }
    }
    scan(ls, d, n, n);
    size_t from = n > keep ? n - keep : 0;
    memcpy(ls->carry, d + from, n - from);
    ls->carry_len = n - from;
}

/* ---- the request-head rewriter ---- */

void subst_init(subst *m, const secrets *s, const char *host)
{
    *m = (subst){.s = s, .host = host, .state = SUBST_HEAD};
    leak_scan_init(&m->scan, s, host);
}

void subst_init_strict(subst *m, const secrets *s, const char *host)
{
    subst_init(m, s, host);
    m->strict = true;
}

void subst_release_values(subst *m)
{
    m->release = true;
}

void subst_clear(subst *m)
{
    if (m->head.s)
        explicit_bzero(m->head.s, m->head.cap);
    free(m->head.s);
    m->head = (strbuf){0};
}

static int fail(subst *m, const char *why)
{
    m->state = SUBST_FAILED;
    m->error = why;
    return -1;
}

static bool is_tchar(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* One line of the head: [p, eol) without its CR/LF. */
typedef struct line {
    const char *p;
    size_t n;
} line;

static bool next_line(const char **cur, const char *end, line *l)
{
    const char *nl = memchr(*cur, '\n', (size_t)(end - *cur));
    if (!nl)
        return false;
    l->p = *cur;
    l->n = (size_t)(nl - *cur);
    if (l->n && l->p[l->n - 1] == '\r')
        l->n--;
    *cur = nl + 1;
    return true;
}

static bool name_is(const line *l, size_t name_len, const char *want)
{
    return name_len == strlen(want) && strncasecmp(l->p, want, name_len) == 0;
}

static void trim(const char **v, size_t *n)
{
    while (*n && (**v == ' ' || **v == '\t'))
        (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
        (*n)--;
}

/* Whether the header [name, name+n) is one sec's value goes into. */
static bool credential_header(const secret *sec, const char *name, size_t n)
{
    static const char *const always[] = SECRET_HEADERS;
    for (size_t k = 0; always[k]; k++)
        if (strlen(always[k]) == n && strncasecmp(always[k], name, n) == 0)
            return true;
    for (size_t k = 0; k < sec->headers.n; k++)
        if (strlen(sec->headers.v[k]) == n && strncasecmp(sec->headers.v[k], name, n) == 0)
            return true;
    return false;
}

/* The value of header `name` with every placeholder of a secret that lists the host and
 * goes into this header replaced (once released). One that lists the host but not the
 * header stays, and is an attempted leak: a header the guest picks may come back (CORS
 * reflects Origin). */
static void put_value(subst *m, const char *name, size_t name_len, const char *v, size_t n,
                      strbuf *out)
{
    size_t i = 0;
    while (i < n) {
        const char *hit =
            n - i >= SECRET_PLACEHOLDER_LEN ? memmem(v + i, n - i, PREFIX, PREFIX_LEN) : NULL;
        size_t at = hit ? (size_t)(hit - v) : n;
        const secret *sec =
            hit && n - at >= SECRET_PLACEHOLDER_LEN ? secrets_match(m->s, hit) : NULL;
        bool here = sec && secret_has_host(sec, m->host);
        if (here && !credential_header(sec, name, name_len)) {
            m->scan.leaks++;
            here = false;
        }
        if (here && !m->release) { /* cleartext, or TLS not verified: the placeholder goes */
            m->held++;
            here = false;
        }
        if (here) {
            sb_putn(out, v + i, at - i);
            sb_putn(out, sec->value, sec->value_len);
            m->substituted++;
            i = at + SECRET_PLACEHOLDER_LEN;
        } else {
            size_t upto = hit ? at + 1 : n;
            sb_putn(out, v + i, upto - i);
            i = upto;
        }
    }
}

typedef struct framing {
    bool have_len, chunked, te, tunnel;
    uint64_t len;
} framing;

static int take_length(subst *m, framing *f, const char *v, size_t n)
{
    uint64_t len = 0;
    if (n == 0 || n > 19)
        return fail(m, "a Content-Length the proxy cannot read");
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return fail(m, "a Content-Length the proxy cannot read");
        len = len * 10 + (uint64_t)(v[i] - '0');
    }
    if (f->have_len && f->len != len)
        return fail(m, "two different Content-Length headers");
    f->have_len = true;
    f->len = len;
    return 0;
}

/* Transfer-Encoding: a request's must end in chunked (RFC 9112 6.3). */
static int take_te(subst *m, framing *f, const char *v, size_t n)
{
    f->te = true;
    const char *last = v;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ',')
            last = v + i + 1;
    size_t k = n - (size_t)(last - v);
    trim(&last, &k);
    f->chunked = k == 7 && strncasecmp(last, "chunked", 7) == 0;
    return f->chunked ? 0 : fail(m, "a Transfer-Encoding that does not end in chunked");
}

static int header_line(subst *m, const line *l, framing *f, strbuf *out)
{
    if (l->n && (l->p[0] == ' ' || l->p[0] == '\t'))
        return fail(m, "a folded header line");
    const char *colon = memchr(l->p, ':', l->n);
    size_t name_len = colon ? (size_t)(colon - l->p) : 0;
    if (!colon || name_len == 0)
        return fail(m, "a header line without a name");
    /* A bare CR ends a line for some servers (RFC 9112 2.2): a header hidden in a value. */
    if (memchr(l->p, '\r', l->n) || memchr(l->p, '\0', l->n))
        return fail(m, "a header line with a bare CR or a NUL");
    for (size_t i = 0; i < name_len; i++)
        if (!is_tchar(l->p[i]))
            return fail(m, "a header name with a character HTTP does not allow");
    const char *v = colon + 1;
    size_t vn = l->n - name_len - 1;
    trim(&v, &vn);
    if (name_is(l, name_len, "content-length") && take_length(m, f, v, vn) < 0)
        return -1;
    if (name_is(l, name_len, "transfer-encoding") && take_te(m, f, v, vn) < 0)
        return -1;
    if (name_is(l, name_len, "upgrade"))
        f->tunnel = true;
    sb_putn(out, l->p, name_len + 1);
    sb_putc(out, ' ');
    put_value(m, l->p, name_len, v, vn, out);
    sb_puts(out, "\r\n");
    return 0;
}

/* Whether the request line is HTTP/1.x; CONNECT sets tunnel. */
static bool request_line(const line *l, framing *f)
{
    const char *sp = memchr(l->p, ' ', l->n);
    if (!sp || sp == l->p)
        return false;
    for (const char *c = l->p; c < sp; c++)
        if (!is_tchar(*c))
            return false;
    static const char v10[] = " HTTP/1.0", v11[] = " HTTP/1.1";
    size_t k = sizeof v10 - 1;
    if (l->n < k || (memcmp(l->p + l->n - k, v10, k) != 0 && memcmp(l->p + l->n - k, v11, k) != 0))
        return false;
    f->tunnel = (size_t)(sp - l->p) == 7 && memcmp(l->p, "CONNECT", 7) == 0;
    return true;
}

/* Whether the name [h, h+n) (a port after ':' dropped, a trailing dot ignored) is the
 * connection's host, case-insensitively. A bracketed IPv6 literal never is. */
static bool same_host(const subst *m, const char *h, size_t n)
{
    if (!m->host)
        return false;
    const char *colon = memchr(h, ':', n);
    if (colon) {
        for (const char *c = colon + 1; c < h + n; c++)
            if (!isdigit((unsigned char)*c))
                return false;
        n = (size_t)(colon - h);
    }
    if (n && h[n - 1] == '.')
        n--;
    size_t k = strlen(m->host);
    if (k && m->host[k - 1] == '.')
        k--;
    return n && n == k && strncasecmp(h, m->host, n) == 0;
}

/* The request line's target: [p, p+n) between the method and the version. */
static void request_target(const line *l, const char **p, size_t *n)
{
    const char *sp = memchr(l->p, ' ', l->n);
    *p = sp + 1;
    size_t end = l->n - (sizeof " HTTP/1.1" - 1);
    *n = (size_t)(l->p + end - *p);
}

/* Whether the request goes to the connection's host (RFC 9112 3.2, 7.2): the authority of
 * an absolute-form or CONNECT target, which a server prefers over Host, and exactly one Host
 * header whatever the form (a client must send one; a server that reads Host first must see
 * the same name). Anything that cannot be read that way is refused: the request is for a
 * host this check cannot name. */
static int check_target(subst *m, const line *rl, const char *head_end)
{
    const char *t;
    size_t tn;
    request_target(rl, &t, &tn);
    for (size_t i = 0; i < tn; i++)
        if ((unsigned char)t[i] <= ' ' || t[i] == 0x7f)
            return fail(m, "a request target with a space or control character");
    bool connect = t - rl->p == 8 && memcmp(rl->p, "CONNECT ", 8) == 0;
    const char *auth = NULL;
    size_t an = 0;
    if (connect) {
        auth = t, an = tn;
    } else if (tn && t[0] != '/' && !(tn == 1 && t[0] == '*')) {
        const char *sep = tn > 3 ? memmem(t, tn, "://", 3) : NULL;
        if (!sep || sep == t)
            return fail(m, "a request target the proxy cannot read");
        for (const char *c = t; c < sep; c++)
            if (!isalnum((unsigned char)*c) && *c != '+' && *c != '-' && *c != '.')
                return fail(m, "a request target the proxy cannot read");
        auth = sep + 3;
        while (auth + an < t + tn && !strchr("/?#", auth[an]))
            an++;
    } else if (!tn) {
        return fail(m, "a request target the proxy cannot read");
    }
    if (auth) {
        const char *at = NULL;
        for (size_t i = 0; i < an; i++)
            if (auth[i] == '@')
                at = auth + i;
        if (at) /* user info: the host is after it */
            an -= (size_t)(at + 1 - auth), auth = at + 1;
        if (!same_host(m, auth, an))
            return fail(m, "a request for another host than the connection's (its target)");
    }
    /* The Host headers. */
    const char *cur = rl->p + rl->n;
    cur = memchr(cur, '\n', (size_t)(head_end - cur));
    cur = cur ? cur + 1 : head_end;
    size_t hosts = 0;
    line l;
    while (next_line(&cur, head_end, &l) && l.n) {
        const char *colon = memchr(l.p, ':', l.n);
        if (!colon || !name_is(&l, (size_t)(colon - l.p), "host"))
            continue;
        const char *v = colon + 1;
        size_t vn = l.n - (size_t)(colon + 1 - l.p);
        trim(&v, &vn);
        if (++hosts > 1)
            return fail(m, "a request with more than one Host header");
        if (!same_host(m, v, vn))
            return fail(m, "a request for another host than the connection's (its Host)");
    }
    if (hosts == 0)
        return fail(m, "a request without a Host header");
    return 0;
}

/* A whole head is in m->head: rewrite it into out and pick what follows. */
static int rewrite(subst *m, strbuf *out)
{
    const char *cur = m->head.s, *end = m->head.s + m->head.len;
    line l = {0};
    framing f = {0};
    m->requests++;
    if (!next_line(&cur, end, &l) ||
        !request_line(&l, &f)) { /* not HTTP/1.x after all: as it is, and so on */
        if (m->strict)
            return fail(m, "bytes that are not an HTTP/1.x request (an upgraded stream needs "
                           "TLS or a NAME:PORT entry)");
        sb_putn(out, m->head.s, m->head.len);
        m->state = SUBST_TUNNEL;
        return 0;
    }
    /* Before a byte of it goes out: a value goes only to its host, and a request on the
     * connection for another host gets nothing (the connection ends). */
    if (check_target(m, &l, end) < 0)
        return -1;
    sb_putn(out, l.p, l.n);
    sb_puts(out, "\r\n");
    while (next_line(&cur, end, &l) && l.n)
        if (header_line(m, &l, &f, out) < 0)
            return -1;
    sb_puts(out, "\r\n");
    if (f.te && f.have_len)
        return fail(m, "both Transfer-Encoding and Content-Length");
    m->left = f.len;
    m->state = f.tunnel && !m->strict ? SUBST_TUNNEL
               : f.chunked            ? SUBST_CHUNK_SIZE
               : f.len                ? SUBST_BODY
                                      : SUBST_HEAD;
    return 0;
}

/* The rewritten head goes out whole or not at all (it may hold values). */
static int head_done(subst *m, strbuf *out)
{
    strbuf h = {0};
    int r = rewrite(m, &h);
    if (r == 0)
        sb_putn(out, h.s, h.len);
    if (h.s)
        explicit_bzero(h.s, h.cap);
    free(h.s);
    return r;
}

/* The end of the head: an empty line (CRLF CRLF, or bare LFs as some servers take them). */
static const char *head_end(const char *p, size_t n, size_t from)
{
    for (size_t i = from; i < n; i++) {
        if (p[i] != '\n')
            continue;
        if (i + 1 < n && p[i + 1] == '\n')
            return p + i + 2;
        if (i + 2 < n && p[i + 1] == '\r' && p[i + 2] == '\n')
            return p + i + 3;
    }
    return NULL;
}

/* Head bytes: collect until complete. Returns how many bytes of d were used. */
static ssize_t feed_head(subst *m, const char *d, size_t n, strbuf *out)
{
    /* Something that does not even start like a method (TLS, HTTP/2's preface is caught at
     * its request line): not ours to parse. */
    if (m->head.len == 0 && !is_tchar(d[0])) {
        if (m->strict)
            return fail(m, "bytes that are not an HTTP/1.x request (an upgraded stream needs "
                           "TLS or a NAME:PORT entry)");
        m->state = SUBST_TUNNEL;
        return 0;
    }
    size_t before = m->head.len;
    size_t room = SUBST_HEAD_MAX - before;
    size_t take = n < room ? n : room;
    sb_putn(&m->head, d, take);
    const char *e = head_end(m->head.s, m->head.len, before > 2 ? before - 2 : 0);
    if (!e) {
        if (m->head.len >= SUBST_HEAD_MAX)
            return fail(m, "a request head larger than 64 KiB");
        return (ssize_t)take;
    }
    size_t used = (size_t)(e - m->head.s) - before;
    m->head.len = (size_t)(e - m->head.s);
    int r = head_done(m, out);
    explicit_bzero(m->head.s, m->head.cap);
    m->head.len = 0;
    return r < 0 ? -1 : (ssize_t)used;
}

/* A chunk-size line, a chunk's CRLF or a trailer line: collect to LF. */
static ssize_t feed_line(subst *m, const char *d, size_t n, strbuf *out)
{
    const char *nl = memchr(d, '\n', n);
    size_t take = nl ? (size_t)(nl - d) + 1 : n;
    size_t max = m->state == SUBST_TRAILER ? SUBST_HEAD_MAX : CHUNK_LINE_MAX;
    if (m->head.len + take > max)
        return fail(m, "a chunked body the proxy cannot read");
    sb_putn(&m->head, d, take);
    if (!nl)
        return (ssize_t)take;
    sb_putn(out, m->head.s, m->head.len);
    const char *s = m->head.s;
    size_t len = m->head.len - 1 - (m->head.len >= 2 && s[m->head.len - 2] == '\r');
    m->head.len = 0;
    if (m->state == SUBST_CHUNK_END) {
        if (len != 0)
            return fail(m, "chunk data longer than its size");
        m->state = SUBST_CHUNK_SIZE;
    } else if (m->state == SUBST_TRAILER) {
        if (len == 0)
            m->state = SUBST_HEAD;
    } else {
        uint64_t size = 0;
        size_t i = 0;
        for (; i < len && isxdigit((unsigned char)s[i]); i++) {
            if (i >= 15)
                return fail(m, "a chunk size the proxy cannot read");
            size = size * 16 +
                   (uint64_t)(isdigit((unsigned char)s[i]) ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10);
        }
        if (i == 0 || (i < len && s[i] != ';' && s[i] != ' ' && s[i] != '\t'))
            return fail(m, "a chunk size the proxy cannot read");
        m->left = size;
        m->state = size ? SUBST_CHUNK_DATA : SUBST_TRAILER;
    }
    return (ssize_t)take;
}

static ssize_t feed_body(subst *m, const char *d, size_t n, strbuf *out)
{
    size_t take = m->left < n ? (size_t)m->left : n;
    sb_putn(out, d, take);
    m->left -= take;
    if (m->left == 0)
        m->state = m->state == SUBST_CHUNK_DATA ? SUBST_CHUNK_END : SUBST_HEAD;
    return (ssize_t)take;
}

int subst_feed(subst *m, const void *data, size_t n, strbuf *out)
{
    const char *d = data;
    if (m->state == SUBST_FAILED)
        return -1;
    leak_scan_feed(&m->scan, d, n);
    while (n) {
        ssize_t used;
        switch (m->state) {
        case SUBST_HEAD:
            used = feed_head(m, d, n, out);
            break;
        case SUBST_BODY:
        case SUBST_CHUNK_DATA:
            used = feed_body(m, d, n, out);
            break;
        case SUBST_CHUNK_SIZE:
        case SUBST_CHUNK_END:
        case SUBST_TRAILER:
            used = feed_line(m, d, n, out);
            break;
        case SUBST_TUNNEL:
            sb_putn(out, d, n);
            used = (ssize_t)n;
            break;
        default:
            return -1;
        }
        if (used < 0)
            return -1;
        d += used;
        n -= (size_t)used;
    }
    return 0;
}
