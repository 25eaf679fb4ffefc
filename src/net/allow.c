/* The allowlist. See allow.h. */
#include "net/allow.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/sniff.h"
#include "util/macro.h"
#include "util/xalloc.h"

static const uint16_t name_default_ports[] = {80, 443};

static bool cidr_ok(const char *s)
{
    char buf[INET6_ADDRSTRLEN + 8];
    uint8_t a[16];
    if (strlen(s) >= sizeof buf)
        return false;
    strcpy(buf, s);
    char *slash = strchr(buf, '/');
    if (slash)
        *slash = '\0';
    int v4 = inet_pton(AF_INET, buf, a) == 1;
    if (!v4 && inet_pton(AF_INET6, buf, a) != 1)
        return false;
    if (!slash)
        return true;
    char *end;
    errno = 0;
    unsigned long bits = strtoul(slash + 1, &end, 10);
    return !errno && end != slash + 1 && !*end && bits <= (v4 ? 32u : 128u);
}

static int parse_port(const char *s, uint16_t *ret)
{
    char *end;
    errno = 0;
    unsigned long p = strtoul(s, &end, 10);
    if (errno || end == s || *end || p < 1 || p > 65535)
        return -1;
    *ret = (uint16_t)p;
    return 0;
}

/* One entry w (modified) into e. */
static int parse_entry(char *w, allow_entry *e)
{
    char *port = NULL;
    if (w[0] == '[') { /* [v6cidr]:port */
        char *close = strchr(w, ']');
        if (!close || (close[1] && close[1] != ':'))
            return -1;
        *close = '\0';
        port = close[1] ? close + 2 : NULL;
        w++;
    } else if (strchr(w, ':') == strrchr(w, ':')) { /* not a bare IPv6 address */
        port = strchr(w, ':');
        if (port)
            *port++ = '\0';
    }
    if (port && parse_port(port, &e->port) < 0)
        return -1;
    if (cidr_ok(w)) {
        e->cidr = true;
    } else {
        if (w[0] == '*' && w[1] == '.') {
            e->wildcard = true;
            w += 2;
        }
        if (!sniff_name_ok(w))
            return -1;
    }
    e->host = xstrdup(w);
    return 0;
}

int allowlist_parse(const char *s, allowlist *ret, const char **ret_bad)
{
    *ret = (allowlist){0};
    const char *p = s;
    while (*p) {
        size_t l = strcspn(p, ",");
        if (l) {
            _cleanup_free_ char *w = xstrndup(p, l);
            allow_entry e = {0};
            if (parse_entry(w, &e) < 0) {
                if (ret_bad)
                    *ret_bad = p;
                allowlist_clear(ret);
                errno = EINVAL;
                return -1;
            }
            e.text = xstrndup(p, l);
            ret->v = xreallocarray(ret->v, ret->n + 1, sizeof *ret->v);
            ret->v[ret->n++] = e;
        }
        p += l + (p[l] == ',');
    }
    return 0;
}

void allowlist_clear(allowlist *a)
{
    for (size_t i = 0; i < a->n; i++) {
        free(a->v[i].text);
        free(a->v[i].host);
    }
    free(a->v);
    *a = (allowlist){0};
}

static bool names(const allow_entry *e, const char *name)
{
    if (e->cidr)
        return false;
    if (!e->wildcard)
        return streq(e->host, name);
    size_t n = strlen(name), s = strlen(e->host);
    return n > s + 1 && name[n - s - 1] == '.' && streq(name + n - s, e->host);
}

const allow_entry *allowlist_match(const allowlist *a, const char *name, uint16_t port)
{
    for (size_t i = 0; i < a->n; i++) {
        const allow_entry *e = &a->v[i];
        if (!names(e, name))
            continue;
        if (e->port == port)
            return e;
        if (!e->port)
            for (size_t k = 0; k < ELEMENTSOF(name_default_ports); k++)
                if (name_default_ports[k] == port)
                    return e;
    }
    return NULL;
}

const allow_entry *allowlist_name_entry(const allowlist *a, const char *name)
{
    for (size_t i = 0; i < a->n; i++)
        if (names(&a->v[i], name))
            return &a->v[i];
    return NULL;
}

static size_t add_port(uint16_t *ports, size_t n, size_t max, uint16_t p)
{
    for (size_t i = 0; i < n; i++)
        if (ports[i] == p)
            return n;
    if (n < max)
        ports[n++] = p;
    return n;
}

size_t allowlist_ports(const allowlist *a, const char *name, uint16_t *ports, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++) {
        const allow_entry *e = &a->v[i];
        if (!names(e, name))
            continue;
        if (e->port)
            n = add_port(ports, n, max, e->port);
        else
            for (size_t k = 0; k < ELEMENTSOF(name_default_ports); k++)
                n = add_port(ports, n, max, name_default_ports[k]);
    }
    return n;
}
