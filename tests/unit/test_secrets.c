/* Unit tests for the VMM's secrets (src/net/secrets.c): the host's JSON is read strictly and
 * no error ever quotes a value; placeholders are found across reads; the request-head
 * rewriter substitutes only in header values, only for hosts the secret lists, whatever the
 * cuts, across pipelined requests and their bodies, and refuses what it cannot frame. */
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "net/secrets.h"

#define PH_A  "BLUEBOX_SECRET_0123456789abcdef0123456789abcdef"
#define PH_B  "BLUEBOX_SECRET_fedcba9876543210fedcba9876543210"
#define VAL_A "sk-live-AAAA-very-secret"
#define VAL_B "ghp_BBBB-other-secret"

static const char good_json[] =
    "[{\"name\":\"API_TOKEN\",\"placeholder\":\"" PH_A "\",\"value\":\"" VAL_A "\","
    "\"hosts\":[\"api.example.com\",\"*.Svc.Example.NET.\"]},"
    "{\"name\":\"GH\",\"placeholder\":\"" PH_B "\",\"value\":\"" VAL_B "\","
    "\"hosts\":[\"github.example.org\"]}]";

static secrets load_good(void)
{
    secrets s = {0};
    bb_error *err = NULL;
    assert_int_equal(secrets_parse(good_json, strlen(good_json), &s, &err), 0);
    assert_null(err);
    return s;
}

static void test_parse_good(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v[0].name, "API_TOKEN");
    assert_string_equal(s.v[0].placeholder, PH_A);
    assert_memory_equal(s.v[0].value, VAL_A, strlen(VAL_A));
    assert_int_equal(s.v[0].value_len, strlen(VAL_A));
    assert_int_equal(s.v[0].hosts.n, 2);
    assert_string_equal(s.v[0].hosts.v[1], "*.svc.example.net");
}

/* Each is refused, and the message never holds the value "hunter2secret". */
static void test_parse_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "{}",
        "[1]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\"}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\",\"hosts\":[]}]",
        "[{\"name\":\"A\",\"placeholder\":\"BLUEBOX_SECRET_xyz\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\\r\\nX: y\","
        "\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\\u0000\","
        "\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"\",\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example/x\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"],\"extra\":1}]",
        "[{\"name\":\"1A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"]},{\"name\":\"B\",\"placeholder\":\"" PH_A "\","
        "\"value\":\"hunter2secret\",\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"value\":\"x\",\"hosts\":[\"a.example\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"],\"headers\":[]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"],\"headers\":[\"X Key\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"],\"headers\":[\"x:y\"]}]",
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\","
        "\"hosts\":[\"a.example\"],\"headers\":\"x-key\"}]",
        /* a JSON error right after the value: jansson's own text would quote it */
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"hunter2secret\" oops}]",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        secrets s = {0};
        bb_error *err = NULL;
        assert_int_equal(secrets_parse(bad[i], strlen(bad[i]), &s, &err), -1);
        assert_non_null(err);
        if (strstr(err->msg, "hunter2"))
            fail_msg("case %zu: the error quotes the value: %s", i, err->msg);
        assert_int_equal(s.n, 0);
        bb_error_free(err);
    }
}

static void test_load_fd(void **state)
{
    (void)state;
    int fd = memfd_create("secrets", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, good_json, strlen(good_json)), (ssize_t)strlen(good_json));
    /* The writer leaves the offset at the end; the reader reads from the start. */
    char num[16];
    snprintf(num, sizeof num, "%d", fd);
    setenv(ABI_ENV_SECRETS_FD, num, 1);
    secrets s = {0};
    bb_error *err = NULL;
    assert_int_equal(secrets_load_env(&s, &err), 0);
    assert_int_equal(s.n, 2);
    assert_null(getenv(ABI_ENV_SECRETS_FD));
    assert_int_equal(fcntl(fd, F_GETFD), -1); /* closed */
    secrets_clear(&s);
    /* No variable: nothing to do. */
    assert_int_equal(secrets_load_env(&s, &err), 0);
    assert_int_equal(s.n, 0);
    setenv(ABI_ENV_SECRETS_FD, "2", 1);
    assert_int_equal(secrets_load_env(&s, &err), -1);
    bb_error_free(err);
}

static void test_hosts(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    assert_true(secrets_for_host(&s, "api.example.com"));
    assert_true(secrets_for_host(&s, "API.Example.com."));
    assert_true(secrets_for_host(&s, "a.svc.example.net"));
    assert_true(secrets_for_host(&s, "b.a.svc.example.net"));
    assert_false(secrets_for_host(&s, "svc.example.net"));
    assert_false(secrets_for_host(&s, "xsvc.example.net"));
    assert_false(secrets_for_host(&s, "api.example.com.evil"));
    assert_false(secrets_for_host(&s, "example.com"));
    assert_false(secret_has_host(&s.v[0], "github.example.org"));
    assert_true(secret_has_host(&s.v[1], "github.example.org"));
}

static void test_leak_scan_cuts(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    const char text[] =
        "x " PH_A " y " PH_B PH_A " BLUEBOX_SECRET_00000000000000000000000000000000";
    size_t n = strlen(text);
    /* Every cut into two pieces, and byte by byte: the same count. */
    for (size_t cut = 0; cut <= n; cut++) {
        leak_scan ls;
        leak_scan_init(&ls, &s, "api.example.com");
        leak_scan_feed(&ls, text, cut);
        leak_scan_feed(&ls, text + cut, n - cut);
        assert_int_equal(ls.seen, 3);
        assert_int_equal(ls.leaks, 1); /* PH_B is not for api.example.com */
    }
    leak_scan ls;
    leak_scan_init(&ls, &s, NULL);
    for (size_t i = 0; i < n; i++)
        leak_scan_feed(&ls, text + i, 1);
    assert_int_equal(ls.seen, 3);
    assert_int_equal(ls.leaks, 3);
}

/* Feed `in` cut every `step` bytes (0: whole); return what went out. */
static char *run(subst *m, const char *in, size_t n, size_t step, int *ret)
{
    strbuf out = {0};
    *ret = 0;
    for (size_t off = 0; off < n && *ret == 0;) {
        size_t k = step && n - off > step ? step : n - off;
        *ret = subst_feed(m, in + off, k, &out);
        off += k;
    }
    sb_putn(&out, "", 0);
    return sb_steal(&out);
}

static const char pipelined[] =
    "POST /v1/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH_A "\r\n"
    "X-Other: " PH_B "\r\nContent-Length: 60\r\n\r\n"
    "body keeps " PH_A "\r\n"
    "GET /q?k=" PH_A " HTTP/1.1\r\nHost: api.example.com\r\nX-Two:  a" PH_A "b" PH_A
    "  \r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
    "5;ext=1\r\nhello\r\n2f\r\n" PH_A "\r\n0\r\nX-Trailer: " PH_A "\r\n\r\n"
    "GET /last HTTP/1.0\nHost: API.example.com.:443\nAuthorization: " PH_A "\n\n";

static const char pipelined_out[] =
    "POST /v1/x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " VAL_A "\r\n"
    "X-Other: " PH_B "\r\nContent-Length: 60\r\n\r\n"
    "body keeps " PH_A "\r\n"
    "GET /q?k=" PH_A " HTTP/1.1\r\nHost: api.example.com\r\nX-Two: a" PH_A "b" PH_A
    "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
    "5;ext=1\r\nhello\r\n2f\r\n" PH_A "\r\n0\r\nX-Trailer: " PH_A "\r\n\r\n"
    "GET /last HTTP/1.0\r\nHost: API.example.com.:443\r\nAuthorization: " VAL_A "\r\n\r\n";

static void test_subst_pipelined_any_cut(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    /* The body's length is what the request says it is. */
    assert_int_equal(strlen("body keeps " PH_A "\r\n"), 60);
    for (size_t step = 0; step <= 64; step++) {
        subst m;
        subst_init(&m, &s, "api.example.com");
        subst_release_values(&m); /* as the broker does once the host verified */
        int r;
        _cleanup_free_ char *out = run(&m, pipelined, strlen(pipelined), step, &r);
        assert_int_equal(r, 0);
        assert_string_equal(out, pipelined_out);
        assert_int_equal(m.requests, 3);
        assert_int_equal(m.substituted, 2);
        /* PH_B, in a header for a host not its own; PH_A twice in X-Two (not a credential
         * header: the host may echo it) */
        assert_int_equal(m.scan.leaks, 3);
        assert_int_equal(m.state, SUBST_HEAD);
        subst_clear(&m);
    }
}

/* The same requests to a host no secret lists: nothing replaced, every placeholder a leak. */
static void test_subst_other_host(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    subst m;
    subst_init(&m, &s, "elsewhere.example");
    _cleanup_sb_ strbuf in = {0};
    for (const char *p = pipelined, *hit; *p; p = hit + strlen("api.example.com")) {
        hit = strcasestr(p, "api.example.com");
        if (!hit) {
            sb_puts(&in, p);
            break;
        }
        sb_putn(&in, p, (size_t)(hit - p));
        sb_puts(&in, "elsewhere.example");
    }
    int r;
    _cleanup_free_ char *out = run(&m, in.s, in.len, 7, &r);
    assert_int_equal(r, 0);
    assert_null(strstr(out, VAL_A));
    assert_null(strstr(out, VAL_B));
    assert_non_null(strstr(out, "Authorization: Bearer " PH_A));
    assert_int_equal(m.substituted, 0);
    assert_int_equal(m.scan.leaks, 9);
    assert_int_equal(m.scan.seen, 9);
    subst_clear(&m);
}

static void test_subst_oversize(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    subst m;
    subst_init(&m, &s, "api.example.com");
    _cleanup_sb_ strbuf in = {0};
    sb_puts(&in, "GET / HTTP/1.1\r\nAuthorization: " PH_A "\r\n");
    while (in.len <= SUBST_HEAD_MAX)
        sb_puts(&in, "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    sb_puts(&in, "\r\n");
    int r;
    _cleanup_free_ char *out = run(&m, in.s, in.len, 1000, &r);
    assert_int_equal(r, -1);
    assert_string_equal(out, ""); /* nothing of it went out */
    assert_non_null(m.error);
    /* And nothing after it either. */
    strbuf more = {0};
    assert_int_equal(subst_feed(&m, "GET / HTTP/1.1\r\n\r\n", 18, &more), -1);
    assert_int_equal(more.len, 0);
    subst_clear(&m);
}

/* Heads it cannot frame end the connection, and the bad head is not released. */
static void test_subst_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "POST / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A
        "\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A
        "\r\nContent-Length: 5\r\nTransfer-Encoding: "
        "chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A "\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A
        "\r\nTransfer-Encoding: gzip\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A "\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A "\r\nNo colon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A "\r\nBad name: x\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A
        "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "POST / HTTP/1.1\r\nHost: api.example.com\r\nA: " PH_A
        "\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
    };
    _cleanup_secrets_ secrets s = load_good();
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        subst m;
        subst_init(&m, &s, "api.example.com");
        int r;
        _cleanup_free_ char *out = run(&m, bad[i], strlen(bad[i]), 0, &r);
        if (r != -1)
            fail_msg("case %zu accepted: %s", i, out);
        assert_non_null(m.error);
        if (i < 7)
            assert_string_equal(out, "");
        subst_clear(&m);
    }
}

/* A request for another host than the connection's gets nothing, its head not a byte: the
 * target (absolute form, CONNECT) and the one Host header must both name the host. */
static void test_subst_other_target(void **state)
{
    (void)state;
    static const char first[] = "GET /1 HTTP/1.1\r\nHost: Api.Example.Com:8443\r\n"
                                "Authorization: " PH_A "\r\n\r\n";
    static const char *const bad[] = {
        "GET /2 HTTP/1.1\r\nHost: evil.example\r\nAuthorization: " PH_A "\r\n\r\n",
        "GET http://evil.example/2 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: " PH_A
        "\r\n\r\n",
        "GET http://api.example.com@evil.example/ HTTP/1.1\r\nHost: api.example.com\r\n"
        "Authorization: " PH_A "\r\n\r\n",
        "CONNECT evil.example:443 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: " PH_A
        "\r\n\r\n",
        "GET /2 HTTP/1.1\r\nHost: api.example.com\r\nHost: evil.example\r\nAuthorization: " PH_A
        "\r\n\r\n",
        "GET /2 HTTP/1.1\r\nAuthorization: " PH_A "\r\n\r\n",
        "GET /2 HTTP/1.1\r\nHost: api.example.com.evil.example\r\nAuthorization: " PH_A "\r\n\r\n",
        "GET /2 HTTP/1.1\r\nHost: api.example.com:x\r\nAuthorization: " PH_A "\r\n\r\n",
        "GET evil.example/2 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: " PH_A "\r\n\r\n",
        "GET /2 HTTP/1.1\r\nX: a\rHost: evil.example\r\nHost: api.example.com\r\n"
        "Authorization: " PH_A "\r\n\r\n",
    };
    _cleanup_secrets_ secrets s = load_good();
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        subst m;
        subst_init(&m, &s, "api.example.com");
        _cleanup_sb_ strbuf in = {0};
        sb_puts(&in, first);
        sb_puts(&in, bad[i]);
        int r;
        _cleanup_free_ char *out = run(&m, in.s, in.len, 0, &r);
        if (r != -1)
            fail_msg("case %zu accepted: %s", i, out);
        assert_non_null(m.error);
        /* The first request went (with its value), nothing of the second. */
        assert_non_null(strstr(out, "GET /1 HTTP/1.1"));
        assert_null(strstr(out, "/2"));
        assert_null(strstr(out, "evil"));
        subst_clear(&m);
    }
    /* The same host in the forms that name it. */
    static const char *const good[] = {
        "GET http://API.example.com.:80/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
        "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        subst m;
        subst_init(&m, &s, "api.example.com");
        int r;
        _cleanup_free_ char *out = run(&m, good[i], strlen(good[i]), 0, &r);
        if (r != 0)
            fail_msg("case %zu refused: %s", i, m.error);
        assert_string_equal(out, good[i]);
        subst_clear(&m);
    }
}

/* The value goes only into credential headers: Authorization, Proxy-Authorization,
 * X-Api-Key and those the secret names ("headers", optional in the JSON). A placeholder in
 * any other header stays (a header the host echoes, like Origin into CORS, would bring the
 * value back to the guest) and counts as an attempted leak. */
static void test_subst_headers(void **state)
{
    (void)state;
    static const char json[] =
        "[{\"name\":\"A\",\"placeholder\":\"" PH_A "\",\"value\":\"" VAL_A "\","
        "\"hosts\":[\"api.example.com\"],\"headers\":[\"X-Goog-Api-Key\"]},"
        "{\"name\":\"B\",\"placeholder\":\"" PH_B "\",\"value\":\"" VAL_B "\","
        "\"hosts\":[\"api.example.com\"]}]";
    _cleanup_secrets_ secrets s = {0};
    bb_error *err = NULL;
    assert_int_equal(secrets_parse(json, strlen(json), &s, &err), 0);
    assert_int_equal(s.v[0].headers.n, 1);
    assert_string_equal(s.v[0].headers.v[0], "x-goog-api-key");
    assert_int_equal(s.v[1].headers.n, 0);
    static const char in[] = "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
                             "Origin: " PH_A "\r\n"
                             "Cookie: s=" PH_B "\r\n"
                             "authorization: Bearer " PH_A "\r\n"
                             "Proxy-Authorization: Basic " PH_B "\r\n"
                             "X-API-KEY: " PH_B "\r\n"
                             "X-Goog-Api-Key: " PH_A "\r\n"
                             "X-Goog-Api-Key-2: " PH_A "\r\n"
                             "X-Other-Key: " PH_B "\r\n\r\n";
    static const char want[] = "GET / HTTP/1.1\r\nHost: api.example.com\r\n"
                               "Origin: " PH_A "\r\n"
                               "Cookie: s=" PH_B "\r\n"
                               "authorization: Bearer " VAL_A "\r\n"
                               "Proxy-Authorization: Basic " VAL_B "\r\n"
                               "X-API-KEY: " VAL_B "\r\n"
                               "X-Goog-Api-Key: " VAL_A "\r\n"
                               "X-Goog-Api-Key-2: " PH_A "\r\n"
                               "X-Other-Key: " PH_B "\r\n\r\n";
    subst m;
    subst_init(&m, &s, "api.example.com");
    subst_release_values(&m);
    int r;
    _cleanup_free_ char *out = run(&m, in, strlen(in), 5, &r);
    assert_int_equal(r, 0);
    assert_string_equal(out, want);
    assert_int_equal(m.substituted, 4);
    assert_int_equal(m.scan.leaks, 4);
    subst_clear(&m);
}

/* Strict (plain HTTP on a name entry, httpcheck.h): requests only, to the end. What the
 * lenient machine passes as a tunnel fails here, and CONNECT or Upgrade to the same host do
 * not stop the reading: a server that ignores them reads the next request, which must be
 * checked too. */
static void test_subst_strict(void **state)
{
    (void)state;
    static const char ok1[] = "GET /a HTTP/1.1\r\nHost: plain.example\r\n\r\n"
                              "POST /b HTTP/1.1\r\nHost: PLAIN.example.:80\r\n"
                              "Content-Length: 3\r\n\r\nxyz";
    static const char *const bad[] = {
        "GET /2 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "GET http://evil.example/2 HTTP/1.1\r\nHost: plain.example\r\n\r\n",
        "CONNECT evil.example:443 HTTP/1.1\r\nHost: plain.example\r\n\r\n",
        "CONNECT plain.example:443 HTTP/1.1\r\nHost: plain.example\r\n\r\n"
        "GET /2 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "GET /ws HTTP/1.1\r\nHost: plain.example\r\nUpgrade: websocket\r\n\r\n"
        "GET /2 HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "GET /ws HTTP/1.1\r\nHost: plain.example\r\nUpgrade: websocket\r\n\r\n\x81\x85/2evil",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n/2evil",
        "GET /2 HTTP/1.2\r\nHost: evil.example\r\n\r\n",
        "\x16\x03\x01/2evil\r\n\r\n",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        subst m;
        subst_init_strict(&m, NULL, "plain.example");
        _cleanup_sb_ strbuf in = {0};
        sb_puts(&in, ok1);
        sb_puts(&in, bad[i]);
        for (size_t step = 0; step <= 16; step += 16) {
            subst_clear(&m);
            subst_init_strict(&m, NULL, "plain.example");
            int r;
            _cleanup_free_ char *out = run(&m, in.s, in.len, step, &r);
            if (r != -1)
                fail_msg("case %zu accepted: %s", i, out);
            assert_non_null(m.error);
            assert_non_null(strstr(out, "xyz")); /* the good requests went */
            assert_null(strstr(out, "/2"));
            assert_null(strstr(out, "evil"));
        }
        subst_clear(&m);
    }
    subst m;
    subst_init_strict(&m, NULL, "plain.example");
    int r;
    _cleanup_free_ char *out = run(&m, ok1, strlen(ok1), 1, &r);
    assert_int_equal(r, 0);
    assert_string_equal(out, ok1);
    assert_int_equal(m.requests, 2);
    subst_clear(&m);
}

/* What is not HTTP/1.x, and what stops being it, passes as it is. */
static void test_subst_tunnel(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    static const char *const cases[] = {
        "\x16\x03\x01 tls-ish " PH_A "\r\n\r\n",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nAuthorization: " PH_A "\r\n\r\n",
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        subst m;
        subst_init(&m, &s, "api.example.com");
        int r;
        _cleanup_free_ char *out = run(&m, cases[i], strlen(cases[i]), 3, &r);
        assert_int_equal(r, 0);
        assert_string_equal(out, cases[i]);
        assert_int_equal(m.substituted, 0);
        subst_clear(&m);
    }
    /* An upgrade: its head is rewritten, what follows is the new protocol's. */
    const char up[] =
        "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: websocket\r\n"
        "Authorization: " PH_A "\r\n\r\nGET / HTTP/1.1\r\nAuthorization: " PH_A "\r\n\r\n";
    subst m;
    subst_init(&m, &s, "api.example.com");
    subst_release_values(&m);
    int r;
    _cleanup_free_ char *out = run(&m, up, strlen(up), 0, &r);
    assert_int_equal(r, 0);
    assert_int_equal(m.substituted, 1);
    assert_int_equal(m.state, SUBST_TUNNEL);
    assert_non_null(strstr(out, "GET / HTTP/1.1\r\nAuthorization: " PH_A));
    subst_clear(&m);
}

/* Not released (cleartext, or TLS the broker did not verify): no value goes out, whatever
 * the machine reads. The requests that get values when released keep their placeholders and
 * count as held; an upgrade mid-stream (to TLS or anything) changes nothing; the strict
 * machine of plain HTTP holds them too. */
static void test_subst_cleartext(void **state)
{
    (void)state;
    _cleanup_secrets_ secrets s = load_good();
    static const char up[] =
        "GET / HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: TLS/1.2\r\nConnection: Upgrade\r\n"
        "Authorization: Bearer " PH_A "\r\n\r\n"
        "\x16\x03\x01\x00\x05hello GET / HTTP/1.1\r\nAuthorization: " PH_A "\r\n\r\n";
    const char *const ins[] = {pipelined, up};
    for (size_t i = 0; i < 2 * ELEMENTSOF(ins); i++) {
        bool strict = i >= ELEMENTSOF(ins);
        const char *in = ins[i % ELEMENTSOF(ins)];
        if (strict && in == up)
            continue; /* strict refuses the upgrade's bytes: nothing of them goes at all */
        for (size_t step = 0; step <= 9; step += 3) {
            subst m;
            if (strict)
                subst_init_strict(&m, &s, "api.example.com");
            else
                subst_init(&m, &s, "api.example.com");
            int r;
            _cleanup_free_ char *out = run(&m, in, strlen(in), step, &r);
            assert_int_equal(r, 0);
            assert_null(strstr(out, VAL_A));
            assert_null(strstr(out, VAL_B));
            assert_non_null(strstr(out, "Authorization: Bearer " PH_A));
            assert_int_equal(m.substituted, 0);
            assert_int_equal(m.held, in == up ? 1 : 2);
            subst_clear(&m);
        }
    }
    /* the same bytes, released: the values go (the machine's one switch) */
    subst m;
    subst_init(&m, &s, "api.example.com");
    subst_release_values(&m);
    int r;
    _cleanup_free_ char *out = run(&m, pipelined, strlen(pipelined), 0, &r);
    assert_int_equal(r, 0);
    assert_non_null(strstr(out, "Authorization: Bearer " VAL_A));
    assert_int_equal(m.substituted, 2);
    assert_int_equal(m.held, 0);
    subst_clear(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_load_fd),
        cmocka_unit_test(test_hosts),
        cmocka_unit_test(test_leak_scan_cuts),
        cmocka_unit_test(test_subst_pipelined_any_cut),
        cmocka_unit_test(test_subst_other_host),
        cmocka_unit_test(test_subst_oversize),
        cmocka_unit_test(test_subst_refused),
        cmocka_unit_test(test_subst_tunnel),
        cmocka_unit_test(test_subst_other_target),
        cmocka_unit_test(test_subst_headers),
        cmocka_unit_test(test_subst_strict),
        cmocka_unit_test(test_subst_cleartext),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
