/* Unit tests for the egress engine's pure parts: the TLS SNI and HTTP Host sniffers (a
 * ClientHello split over records and segments, hostile lengths, two Host headers) and the
 * allowlist (wildcards, ports, CIDRs). */
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "net/allow.h"
#include "net/sniff.h"

typedef struct buf {
    uint8_t b[4096];
    size_t n;
} buf;

static void put(buf *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put8(buf *o, unsigned v)
{
    o->b[o->n++] = (uint8_t)v;
}

static void put16(buf *o, unsigned v)
{
    put8(o, v >> 8), put8(o, v & 0xff);
}

/* A ClientHello body (handshake type and length included) naming sni (NULL: no extension). */
static buf client_hello(const char *sni)
{
    buf ext = {0}, h = {0}, body = {0};
    put16(&ext, 0x000a), put16(&ext, 4), put16(&ext, 2), put16(&ext, 0x001d); /* groups */
    if (sni) {
        size_t l = strlen(sni);
        put16(&ext, 0), put16(&ext, (unsigned)(l + 5)), put16(&ext, (unsigned)(l + 3));
        put8(&ext, 0), put16(&ext, (unsigned)l), put(&ext, sni, l);
    }
    put16(&body, 0x0303);
    for (int i = 0; i < 32; i++)
        put8(&body, (unsigned)i);
    put8(&body, 32);
    for (int i = 0; i < 32; i++)
        put8(&body, 0xaa);
    put16(&body, 4), put16(&body, 0x1301), put16(&body, 0x1302);
    put8(&body, 1), put8(&body, 0);
    put16(&body, (unsigned)ext.n), put(&body, ext.b, ext.n);
    put8(&h, 1), put8(&h, 0), put16(&h, (unsigned)body.n), put(&h, body.b, body.n);
    return h;
}

/* hs wrapped in TLS records of at most chunk bytes each. */
static buf records(const buf *hs, size_t chunk)
{
    buf r = {0};
    for (size_t off = 0; off < hs->n; off += chunk) {
        size_t l = hs->n - off < chunk ? hs->n - off : chunk;
        put8(&r, 22), put16(&r, 0x0301), put16(&r, (unsigned)l), put(&r, hs->b + off, l);
    }
    return r;
}

static void tls_sni_found(void **state)
{
    char out[SNIFF_NAME_MAX + 1];
    buf hs = client_hello("Api.Example.ORG");
    buf r = records(&hs, 16384);
    assert_int_equal(sniff_protocol(r.b, r.n), SNIFF_TLS);
    assert_int_equal(sniff_tls_sni(r.b, r.n, out), SNIFF_FOUND);
    assert_string_equal(out, "api.example.org");
}

static void tls_sni_split(void **state)
{
    char out[SNIFF_NAME_MAX + 1];
    buf hs = client_hello("split.example.org");
    buf r = records(&hs, 7);               /* many tiny records */
    for (size_t cut = 0; cut < r.n; cut++) /* every TCP segment boundary: gather more */
        assert_int_equal(sniff_tls_sni(r.b, cut, out), SNIFF_MORE);
    assert_int_equal(sniff_tls_sni(r.b, r.n, out), SNIFF_FOUND);
    assert_string_equal(out, "split.example.org");
}

static void tls_sni_absent_or_hostile(void **state)
{
    char out[SNIFF_NAME_MAX + 1];
    buf hs = client_hello(NULL);
    buf r = records(&hs, 16384);
    assert_int_equal(sniff_tls_sni(r.b, r.n, out), SNIFF_NONE);
    /* a name with a NUL or a bad byte */
    hs = client_hello("a.example.org\x01");
    r = records(&hs, 16384);
    assert_int_equal(sniff_tls_sni(r.b, r.n, out), SNIFF_NONE);
    /* a handshake length larger than anything we gather: decide without a name */
    hs = client_hello("x.org");
    hs.b[1] = 0x7f;
    r = records(&hs, 16384);
    assert_int_equal(sniff_tls_sni(r.b, r.n, out), SNIFF_NONE);
    /* an extension length running past the message */
    hs = client_hello("x.org");
    r = records(&hs, 16384);
    r.b[r.n - 12] = 0xff;
    assert_int_not_equal(sniff_tls_sni(r.b, r.n, out), SNIFF_FOUND);
    /* not a handshake record */
    const uint8_t alert[] = {21, 3, 3, 0, 2, 2, 40};
    assert_int_equal(sniff_tls_sni(alert, sizeof alert, out), SNIFF_NONE);
}

static void http_host(void **state)
{
    char out[SNIFF_NAME_MAX + 1];
    const char *req = "GET /x HTTP/1.1\r\nUser-Agent: t\r\nHOST:  Deb.Example.org:80 \r\n\r\n";
    assert_int_equal(sniff_protocol((const uint8_t *)req, strlen(req)), SNIFF_HTTP);
    assert_int_equal(sniff_http_host((const uint8_t *)req, strlen(req), out), SNIFF_FOUND);
    assert_string_equal(out, "deb.example.org");
    for (size_t cut = 1; cut < strlen(req) - 1; cut++)
        assert_int_equal(sniff_http_host((const uint8_t *)req, cut, out), SNIFF_MORE);
    const char *two = "GET / HTTP/1.1\r\nHost: a.org\r\nHost: b.org\r\n\r\n";
    assert_int_equal(sniff_http_host((const uint8_t *)two, strlen(two), out), SNIFF_NONE);
    const char *none = "GET / HTTP/1.0\r\n\r\n";
    assert_int_equal(sniff_http_host((const uint8_t *)none, strlen(none), out), SNIFF_NONE);
    const char *fold = "GET / HTTP/1.1\r\nHost: a.org\r\n x\r\n\r\n";
    assert_int_equal(sniff_http_host((const uint8_t *)fold, strlen(fold), out), SNIFF_NONE);
    const char *port = "GET / HTTP/1.1\r\nHost: a.org:8x\r\n\r\n";
    assert_int_equal(sniff_http_host((const uint8_t *)port, strlen(port), out), SNIFF_NONE);
    const char *lf = "POST / HTTP/1.0\nhost: a.org\n\n";
    assert_int_equal(sniff_http_host((const uint8_t *)lf, strlen(lf), out), SNIFF_FOUND);
    assert_int_equal(sniff_protocol((const uint8_t *)"SSH-2.0-x\r\n", 11), SNIFF_OTHER);
    assert_int_equal(sniff_protocol((const uint8_t *)"GE", 2), SNIFF_UNKNOWN);
}

static void names(void **state)
{
    char a[] = "Example.COM.", b[] = "a..b", c[] = "-ok_.x", d[] = "sp ace";
    assert_true(sniff_name_ok(a));
    assert_string_equal(a, "example.com");
    assert_false(sniff_name_ok(b));
    assert_true(sniff_name_ok(c));
    assert_false(sniff_name_ok(d));
    char long_label[80];
    memset(long_label, 'a', 64);
    long_label[64] = '\0';
    assert_false(sniff_name_ok(long_label));
}

static void allow_entries(void **state)
{
    allowlist a;
    const char *bad = NULL;
    assert_int_equal(allowlist_parse("deb.example.org,*.example.com,api.example.net:8443,"
                                     "192.0.2.0/24:5432,10.1.2.3,2001:db8::/32",
                                     &a, &bad),
                     0);
    assert_int_equal(a.n, 6);
    assert_non_null(allowlist_match(&a, "deb.example.org", 80));
    assert_non_null(allowlist_match(&a, "deb.example.org", 443));
    assert_null(allowlist_match(&a, "deb.example.org", 22));
    assert_non_null(allowlist_match(&a, "x.example.com", 443));
    assert_null(allowlist_match(&a, "example.com", 443)); /* not the suffix itself */
    assert_null(allowlist_match(&a, "xexample.com", 443));
    assert_null(allowlist_match(&a, "api.example.net", 443));
    assert_string_equal(allowlist_match(&a, "api.example.net", 8443)->text, "api.example.net:8443");
    assert_null(allowlist_name_entry(&a, "192.0.2.0/24"));
    assert_string_equal(allowlist_name_entry(&a, "y.example.com")->text, "*.example.com");
    assert_true(a.v[3].cidr && a.v[3].port == 5432);
    assert_true(a.v[5].cidr && a.v[5].port == 0);
    uint16_t ports[8];
    assert_int_equal(allowlist_ports(&a, "deb.example.org", ports, 8), 2);
    allowlist_clear(&a);
    assert_int_equal(allowlist_parse("", &a, NULL), 0);
    assert_int_equal(a.n, 0);
    assert_int_equal(allowlist_parse("ok.org,bad name", &a, &bad), -1);
    assert_string_equal(bad, "bad name");
    assert_int_equal(allowlist_parse("a.org:0", &a, NULL), -1);
    assert_int_equal(allowlist_parse("a.org:99999", &a, NULL), -1);
    assert_int_equal(allowlist_parse("10.0.0.0/33", &a, NULL), -1);
    assert_int_equal(allowlist_parse("[2001:db8::/32]:443,[::1]", &a, NULL), 0);
    assert_true(a.v[0].cidr && a.v[0].port == 443 && a.v[1].cidr && a.v[1].port == 0);
    assert_string_equal(a.v[0].host, "2001:db8::/32");
    allowlist_clear(&a);
    assert_int_equal(allowlist_parse("[2001:db8::]x", &a, NULL), -1);
    assert_int_equal(allowlist_parse("*.", &a, NULL), -1);
    assert_int_equal(allowlist_parse("*", &a, NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tls_sni_found),
        cmocka_unit_test(tls_sni_split),
        cmocka_unit_test(tls_sni_absent_or_hostile),
        cmocka_unit_test(http_host),
        cmocka_unit_test(names),
        cmocka_unit_test(allow_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
