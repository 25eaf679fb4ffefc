/* libFuzzer target: the secrets broker's request-head rewriter (src/net/secrets.c) over what
 * a hostile guest sends. The first byte picks a cut: the input goes in whole and, again, in
 * pieces of that size. Checks: no read past the input (ASan); both runs agree byte for byte
 * (the rewriter does not depend on how reads are cut); a failed run releases nothing after
 * its failure; the real value of a secret that does not list the host never goes out, and
 * neither run puts out the listed one more often than it counted substitutions. The rest of
 * the input is also parsed as the host's JSON, which must not crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/secrets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static const char json[] =
    "[{\"name\":\"A\",\"placeholder\":\"BLUEBOX_SECRET_0123456789abcdef0123456789abcdef\","
    "\"value\":\"VALUE-A-zz\",\"hosts\":[\"api.example.com\"]},"
    "{\"name\":\"B\",\"placeholder\":\"BLUEBOX_SECRET_fedcba9876543210fedcba9876543210\","
    "\"value\":\"VALUE-B-zz\",\"hosts\":[\"other.example\"]}]";

static const secrets *the_secrets(void)
{
    static secrets s;
    static int done;
    if (!done) {
        CHECK(secrets_parse(json, strlen(json), &s, NULL) == 0);
        done = 1;
    }
    return &s;
}

static size_t count(const char *hay, size_t n, const char *needle)
{
    size_t k = 0, m = strlen(needle);
    for (const char *p = hay; p && (size_t)(p - hay) + m <= n;) {
        p = memmem(p, n - (size_t)(p - hay), needle, m);
        if (p) {
            k++;
            p++;
        }
    }
    return k;
}

static int run(const uint8_t *d, size_t n, size_t step, strbuf *out, subst *m)
{
    subst_init(m, the_secrets(), "api.example.com");
    int r = 0;
    for (size_t off = 0; off < n && r == 0;) {
        size_t k = step && n - off > step ? step : n - off;
        r = subst_feed(m, d + off, k, out);
        off += k;
    }
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = data[0] % 64 + 1;
    data++, size--;
    strbuf a = {0}, b = {0};
    subst ma, mb;
    int ra = run(data, size, 0, &a, &ma);
    int rb = run(data, size, step, &b, &mb);
    CHECK(ra == rb);
    CHECK(a.len == b.len && (a.len == 0 || memcmp(a.s, b.s, a.len) == 0));
    CHECK(count(a.s, a.len, "VALUE-B-zz") <= count((const char *)data, size, "VALUE-B-zz"));
    CHECK(count(a.s, a.len, "VALUE-A-zz") <=
          count((const char *)data, size, "VALUE-A-zz") + ma.substituted);
    /* (a failed run stops scanning where its feeds stopped: leaks agree only on success) */
    CHECK(ma.substituted == mb.substituted && (ra < 0 || ma.scan.leaks == mb.scan.leaks));
    subst_clear(&ma);
    subst_clear(&mb);
    free(a.s);
    free(b.s);
    secrets s = {0};
    if (secrets_parse((const char *)data, size, &s, NULL) == 0)
        secrets_clear(&s);
    return 0;
}
