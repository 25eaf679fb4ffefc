/* The TLS broker: the per-sandbox CA, leaf certificates per host, and the relay that
 * substitutes secrets between the guest and the real host. See tlsbroker.h. */
#include "net/tlsbroker.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util/xalloc.h"

#define CA_DAYS   3650
#define LEAF_DAYS 7
/* A handshake that takes longer than this is a peer that is not going to finish one. */
#define HANDSHAKE_S 30
#define IO_CHUNK    65536

struct tlsbroker {
    EVP_PKEY *ca_key; /* in this process's memory only */
    X509 *ca;
    EVP_PKEY *leaf_key; /* one key for every leaf of this sandbox */
    char *ca_pem;
    SSL_CTX *server; /* toward the guest */
    SSL_CTX *client; /* toward the real host */
};

static int ssl_fail(bb_error **err, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return bb_fail(err, EPROTO, "TLS broker: %s%s%s", what, *buf ? ": " : "", buf);
}

static bool add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate with a random serial, valid from an hour ago (clocks differ) for `days`. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, int days)
{
    X509 *x = X509_new();
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    if (!x || RAND_bytes(serial, sizeof serial) != 1)
        goto fail;
    serial[0] &= 0x7f; /* positive */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn || !X509_set_version(x, X509_VERSION_3) ||
        !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), days, 0, NULL) || !X509_set_pubkey(x, key))
        goto fail;
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"bluebox", -1,
                                    -1, 0) ||
        (cn && strlen(cn) <= 64 &&
         !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                     0)))
        goto fail;
    BN_free(bn);
    return x;
fail:
    BN_free(bn);
    X509_free(x);
    return NULL;
}

/* The CA may sign for the secrets' hosts only: even its key could vouch for nothing else. */
static char *name_constraints(const secrets *s)
{
    strbuf b = {0};
    sb_puts(&b, "critical");
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->v[i].hosts.n; k++) {
            const char *h = s->v[i].hosts.v[k];
            /* "*.example.org": names below it, the leading dot says so */
            sb_printf(&b, ",permitted;DNS:%s", h[0] == '*' ? h + 1 : h);
        }
    return sb_steal(&b);
}

static int make_ca(tlsbroker *b, const secrets *s, bb_error **err)
{
    b->ca_key = EVP_EC_gen("P-256");
    b->leaf_key = EVP_EC_gen("P-256");
    if (!b->ca_key || !b->leaf_key)
        return ssl_fail(err, "cannot make a key");
    b->ca = cert_new(b->ca_key, "bluebox sandbox CA", CA_DAYS);
    if (!b->ca || !X509_set_issuer_name(b->ca, X509_get_subject_name(b->ca)))
        return ssl_fail(err, "cannot make the CA certificate");
    _cleanup_free_ char *nc = name_constraints(s);
    if (!add_ext(b->ca, b->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_ext(b->ca, b->ca, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_ext(b->ca, b->ca, NID_subject_key_identifier, "hash") ||
        !add_ext(b->ca, b->ca, NID_name_constraints, nc) ||
        !X509_sign(b->ca, b->ca_key, EVP_sha256()))
        return ssl_fail(err, "cannot sign the CA certificate");
    BIO *mem = BIO_new(BIO_s_mem());
    char *data;
    long n;
    if (!mem || !PEM_write_bio_X509(mem, b->ca) || (n = BIO_get_mem_data(mem, &data)) <= 0) {
        BIO_free(mem);
        return ssl_fail(err, "cannot write the CA certificate");
    }
    b->ca_pem = xstrndup(data, (size_t)n);
    BIO_free(mem);
    return 0;
}

/* Only "http/1.1" is spoken to the guest: heads are rewritten in HTTP/1.x alone. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl, (void)arg;
    for (unsigned i = 0; i < inlen && i + 1u + in[i] <= inlen; i += 1u + in[i])
        if (in[i] == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
            *out = in + i + 1;
            *outlen = 8;
            return SSL_TLSEXT_ERR_OK;
        }
    return SSL_TLSEXT_ERR_NOACK;
}

static int make_ctxs(tlsbroker *b, const char *const *trust, size_t n_trust, bb_error **err)
{
    b->server = SSL_CTX_new(TLS_server_method());
    b->client = SSL_CTX_new(TLS_client_method());
    if (!b->server || !b->client)
        return ssl_fail(err, "cannot make a TLS context");
    for (SSL_CTX **c = (SSL_CTX *[]){b->server, b->client}, **e = c + 2; c < e; c++) {
        SSL_CTX_set_min_proto_version(*c, TLS1_2_VERSION);
        /* poll() decides when to read: a read that finds only a session ticket must return
         * rather than wait for data that the other side is waiting for us to send first. */
        SSL_CTX_clear_mode(*c, SSL_MODE_AUTO_RETRY);
    }
    SSL_CTX_set_alpn_select_cb(b->server, alpn_select, NULL);
    SSL_CTX_set_verify(b->client, SSL_VERIFY_PEER, NULL);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(b->client, alpn, sizeof alpn - 1);
    X509_STORE *store = SSL_CTX_get_cert_store(b->client);
    int loaded = 0;
    for (size_t i = 0; i < n_trust; i++) {
        if (access(trust[i], R_OK) < 0)
            continue;
        if (X509_STORE_load_file(store, trust[i]) != 1)
            return ssl_fail(err, "cannot read the CA certificates of the upstream trust");
        loaded++;
    }
    if (!loaded)
        return bb_fail(err, ENOENT,
                       "TLS broker: no CA certificates to verify servers with (the host's CA "
                       "bundle is mounted at %s)",
                       ABI_UPSTREAM_CA_SYSTEM);
    return 0;
}

int tlsbroker_start(secrets *s, const char *const *trust, size_t n_trust, bb_error **err)
{
    /* The image's openssl.cnf is not ours to load: it could name modules to run here. */
    OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
    tlsbroker *b = xcalloc(1, sizeof *b);
    if (make_ca(b, s, err) < 0 || make_ctxs(b, trust, n_trust, err) < 0) {
        tlsbroker_free(b);
        return -1;
    }
    s->broker = b;
    return 0;
}

const char *tlsbroker_ca_pem(const tlsbroker *b)
{
    return b->ca_pem;
}

void tlsbroker_free(tlsbroker *b)
{
    if (!b)
        return;
    EVP_PKEY_free(b->ca_key);
    EVP_PKEY_free(b->leaf_key);
    X509_free(b->ca);
    SSL_CTX_free(b->server);
    SSL_CTX_free(b->client);
    free(b->ca_pem);
    free(b);
}

/* A name we put into a certificate: letters, digits, dots and dashes, as DNS has them. */
static bool host_ok(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n > 253)
        return false;
    for (const char *c = h; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '-'))
            return false;
    return true;
}

static X509 *mint_leaf(const tlsbroker *b, const char *host)
{
    X509 *x = cert_new(b->leaf_key, host, LEAF_DAYS);
    _cleanup_free_ char *san = xasprintf("DNS:%s", host);
    if (!x || !X509_set_issuer_name(x, X509_get_subject_name(b->ca)) ||
        !add_ext(b->ca, x, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(b->ca, x, NID_key_usage, "critical,digitalSignature") ||
        !add_ext(b->ca, x, NID_ext_key_usage, "serverAuth") ||
        !add_ext(b->ca, x, NID_subject_alt_name, san) ||
        !add_ext(b->ca, x, NID_authority_key_identifier, "keyid:always") ||
        !X509_sign(x, b->ca_key, EVP_sha256())) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* ---- the guest's side: a socket BIO that first gives back the bytes already read ---- */

typedef struct pre_bio {
    int fd;
    const char *pre;
    size_t left;
} pre_bio;

static int pre_read(BIO *bio, char *buf, int len)
{
    pre_bio *p = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (len <= 0)
        return 0;
    if (p->left) {
        size_t n = p->left < (size_t)len ? p->left : (size_t)len;
        memcpy(buf, p->pre, n);
        p->pre += n;
        p->left -= n;
        return (int)n;
    }
    ssize_t n;
    do
        n = read(p->fd, buf, (size_t)len);
    while (n < 0 && errno == EINTR);
    return (int)n;
}

static int pre_write(BIO *bio, const char *buf, int len)
{
    pre_bio *p = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    ssize_t n;
    do
        n = send(p->fd, buf, (size_t)len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return (int)n;
}

static long pre_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    (void)bio, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static BIO *pre_bio_new(pre_bio *p)
{
    static BIO_METHOD *meth;
    if (!meth) {
        meth = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "bluebox guest");
        if (!meth || !BIO_meth_set_read(meth, pre_read) || !BIO_meth_set_write(meth, pre_write) ||
            !BIO_meth_set_ctrl(meth, pre_ctrl))
            return NULL;
    }
    BIO *bio = BIO_new(meth);
    if (bio) {
        BIO_set_data(bio, p);
        BIO_set_init(bio, 1);
    }
    return bio;
}

/* ---- one end of the relay: a socket, or TLS over one ---- */

typedef struct end {
    int fd;
    SSL *ssl;
    bool eof;
    bool truncated; /* TLS ended without close_notify: passed on as such, not as a clean end */
} end;

/* >0 bytes, 0 at EOF, -1 on error; -2: nothing to hand out yet (TLS records that carry no
 * data, such as session tickets). */
static ssize_t end_read(end *e, void *buf, size_t n)
{
    if (!e->ssl) {
        ssize_t r;
        do
            r = read(e->fd, buf, n);
        while (r < 0 && errno == EINTR);
        return r;
    }
    size_t got = 0;
    errno = 0;
    if (SSL_read_ex(e->ssl, buf, n, &got) == 1)
        return (ssize_t)got;
    switch (SSL_get_error(e->ssl, 0)) {
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return -2;
    case SSL_ERROR_SYSCALL: /* our guest BIO's plain EOF */
        if (ERR_peek_error() != 0 || errno != 0)
            return -1;
        e->truncated = true;
        return 0;
    case SSL_ERROR_SSL:
        /* An EOF without close_notify: many clients and servers end so. */
        if (ERR_GET_REASON(ERR_peek_error()) != SSL_R_UNEXPECTED_EOF_WHILE_READING)
            return -1;
        ERR_clear_error();
        e->truncated = true;
        return 0;
    default:
        return -1;
    }
}

static int end_write(end *e, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        size_t w = 0;
        if (e->ssl) {
            if (SSL_write_ex(e->ssl, p, n, &w) != 1) {
                int k = SSL_get_error(e->ssl, 0);
                if (k == SSL_ERROR_WANT_READ || k == SSL_ERROR_WANT_WRITE)
                    continue;
                return -1;
            }
        } else {
            ssize_t r = send(e->fd, p, n, MSG_NOSIGNAL);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -1;
            w = (size_t)r;
        }
        p += w;
        n -= w;
    }
    return 0;
}

static void end_close_write(end *e)
{
    if (e->ssl)
        SSL_shutdown(e->ssl);
    else
        shutdown(e->fd, SHUT_WR);
}

static bool end_pending(const end *e)
{
    return e->ssl && SSL_pending(e->ssl) > 0;
}

static void set_timeout(int fd, int seconds)
{
    struct timeval tv = {.tv_sec = seconds};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int relay_fail(relay_stats *st, const char *why)
{
    if (!st->error)
        st->error = why;
    ERR_clear_error();
    return -1;
}

/* The guest's TLS: a leaf for host, and the bytes it already sent. */
static int accept_guest(const tlsbroker *b, end *g, pre_bio *pb, const char *host, relay_stats *st)
{
    X509 *leaf = mint_leaf(b, host);
    BIO *bio = pre_bio_new(pb);
    g->ssl = SSL_new(b->server);
    int ok = leaf && bio && g->ssl && SSL_use_certificate(g->ssl, leaf) == 1 &&
             SSL_use_PrivateKey(g->ssl, b->leaf_key) == 1;
    X509_free(leaf);
    if (!ok) {
        BIO_free(bio);
        return relay_fail(st, "cannot make a certificate for the host");
    }
    SSL_set_bio(g->ssl, bio, bio);
    set_timeout(g->fd, HANDSHAKE_S);
    int r = SSL_accept(g->ssl);
    set_timeout(g->fd, 0);
    return r == 1 ? 0 : relay_fail(st, "the guest's TLS handshake failed");
}

static int connect_upstream(const tlsbroker *b, end *u, const char *host, relay_stats *st)
{
    u->ssl = SSL_new(b->client);
    if (!u->ssl || SSL_set_fd(u->ssl, u->fd) != 1 || SSL_set_tlsext_host_name(u->ssl, host) != 1 ||
        SSL_set1_host(u->ssl, host) != 1)
        return relay_fail(st, "cannot start TLS toward the host");
    set_timeout(u->fd, HANDSHAKE_S);
    int r = SSL_connect(u->ssl);
    set_timeout(u->fd, 0);
    /* SSL_VERIFY_PEER already fails the handshake on a chain or name that does not verify;
     * asked again here because the values are released on this answer alone. */
    bool verified =
        SSL_get_verify_result(u->ssl) == X509_V_OK && SSL_get0_peer_certificate(u->ssl) != NULL;
    if (r == 1 && verified)
        return 0;
    return relay_fail(st, !verified
                              ? "the host's certificate did not verify against the host's CA store"
                              : "the TLS handshake with the host failed");
}

#ifdef BB_WEAKEN_KNOBS
/* security/weaken's secret-cleartext (bluebox-vmm-weak only, never installed): values
 * substituted on plain connections too, as before, so the escape suite's
 * secret-cleartext check can be seen to fail. */
static bool weaken_cleartext(void)
{
    const char *v = getenv("BLUEBOX_WEAKEN_CLEARTEXT");
    return v && streq(v, "1");
}
#else
static bool weaken_cleartext(void)
{
    return false;
}
#endif

/* What the guest's client reads when the broker cannot reach the real host: a reason. */
static void tell_guest(end *g, const char *why)
{
    _cleanup_free_ char *msg =
        xasprintf("HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                  "Content-Length: %zu\r\n\r\nbluebox: %s\n",
                  strlen("bluebox: ") + strlen(why) + 1, why);
    (void)end_write(g, msg, strlen(msg));
}

/* Guest → upstream: through the rewriter. */
static int pump_up(end *g, end *u, subst *m, relay_stats *st)
{
    char buf[IO_CHUNK];
    ssize_t n = end_read(g, buf, sizeof buf);
    if (n == -2)
        return 0;
    if (n < 0)
        return relay_fail(st, "reading from the guest failed");
    if (n == 0) {
        g->eof = true;
        end_close_write(u);
        return 0;
    }
    st->up += (uint64_t)n;
    strbuf out = {0};
    int r = subst_feed(m, buf, (size_t)n, &out);
    st->refused |= r < 0;
    if (r == 0 && out.len && end_write(u, out.s, out.len) < 0)
        r = relay_fail(st, "writing to the host failed");
    if (out.s)
        explicit_bzero(out.s, out.cap);
    free(out.s);
    return r < 0 ? relay_fail(st, m->error ? m->error : "writing to the host failed") : 0;
}

/* Upstream → guest, as it is. 1 at the host's EOF. */
static int pump_down(end *g, end *u, relay_stats *st)
{
    char buf[IO_CHUNK];
    ssize_t n = end_read(u, buf, sizeof buf);
    if (n == -2)
        return 0;
    if (n < 0)
        return relay_fail(st, "reading from the host failed");
    if (n == 0)
        return 1;
    st->down += (uint64_t)n;
    return end_write(g, buf, (size_t)n) < 0 ? relay_fail(st, "writing to the guest failed") : 0;
}

static int relay_loop(end *g, end *u, subst *m, relay_stats *st)
{
    for (;;) {
        bool gp = !g->eof && end_pending(g), up = end_pending(u);
        struct pollfd p[2] = {{.fd = g->eof ? -1 : g->fd, .events = POLLIN},
                              {.fd = u->fd, .events = POLLIN}};
        if (poll(p, 2, gp || up ? 0 : -1) < 0) {
            if (errno == EINTR)
                continue;
            return relay_fail(st, "poll failed");
        }
        if ((gp || p[0].revents) && pump_up(g, u, m, st) < 0)
            return -1;
        if (up || p[1].revents) {
            int r = pump_down(g, u, st);
            if (r != 0)
                return r > 0 ? 0 : -1;
        }
    }
}

int secrets_relay(int guest_fd, const void *pre, size_t pre_len, int upstream_fd, const char *host,
                  bool tls, const secrets *s, relay_stats *st)
{
    *st = (relay_stats){.cleartext = !tls};
    end g = {.fd = guest_fd}, u = {.fd = upstream_fd};
    /* Whole records and heads go out as they are written (fails harmlessly off TCP). */
    int one = 1;
    setsockopt(guest_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(upstream_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pre_bio pb = {.fd = guest_fd, .pre = pre, .left = pre_len};
    subst m;
    subst_init(&m, s, host);
    int r = -1;
    if (!host || !host_ok(host)) {
        relay_fail(st, "not a host name the broker can vouch for");
    } else if (tls && !s->broker) {
        relay_fail(st, "no TLS broker (the sandbox has no secrets)");
    } else if (tls && accept_guest(s->broker, &g, &pb, host, st) < 0) {
        /* st->error says why */
    } else if (tls && connect_upstream(s->broker, &u, host, st) < 0) {
        tell_guest(&g, st->error);
    } else {
        r = 0;
        /* A value leaves only inside TLS whose chain and name were verified just above. */
        if (tls || weaken_cleartext())
            subst_release_values(&m);
        if (!tls && pre_len) { /* the start of the first request */
            strbuf out = {0};
            st->up += pre_len;
            r = subst_feed(&m, pre, pre_len, &out);
            st->refused |= r < 0;
            if (r < 0)
                relay_fail(st, m.error);
            else if (out.len && end_write(&u, out.s, out.len) < 0)
                r = relay_fail(st, "writing to the host failed");
            if (out.s)
                explicit_bzero(out.s, out.cap);
            free(out.s);
        }
        if (r == 0)
            r = relay_loop(&g, &u, &m, st);
    }
    st->requests = m.requests;
    st->substituted = m.substituted;
    st->held = m.held;
    st->leaks = m.scan.leaks;
    if (g.ssl && !u.truncated)
        SSL_shutdown(g.ssl);
    SSL_free(g.ssl);
    SSL_free(u.ssl);
    subst_clear(&m);
    ERR_clear_error();
    return r;
}
