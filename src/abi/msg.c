/* Agent JSON payloads: encoders and strict decoders (see msg.h). */
#include "msg.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "chain.h"
#include "util/json.h"
#include "util/xalloc.h"

#define KERNEL_MAX 64

static char *dump(json_t *o, size_t *ret_len)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        abort(); /* only on out of memory */
    *ret_len = strlen(s);
    return s;
}

static json_t *load(const char *data, size_t len, const char *what, bb_error **err)
{
    json_error_t jerr;
    _cleanup_json_ json_t *o = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!o || !json_is_object(o)) {
        bb_fail(err, EPROTO, "agent protocol error: the %s is not a JSON object", what);
        return NULL;
    }
    return steal_pointer(&o);
}

/* A JSON string with no NUL inside, copied. */
static char *plain_string(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v))
        return NULL;
    return xstrdup(s);
}

static int bad(bb_error **err, const char *what, const char *field)
{
    return bb_fail(err, EPROTO, "agent protocol error: %s field \"%s\" has the wrong type", what,
                   field);
}

/* An optional integer field in [lo, hi]; absent leaves *ret alone. */
static int int_field(json_t *o, const char *key, long long lo, long long hi, long long *ret,
                     const char *what, bb_error **err)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return bad(err, what, key);
    *ret = json_integer_value(v);
    return 0;
}

/* A chain value: exactly 64 hex digits. */
static char *hex_field(json_t *o, const char *key)
{
    _cleanup_free_ char *s = plain_string(json_object_get(o, key));
    uint8_t v[SHA256_LEN];
    if (!s || hex_decode(s, v, sizeof v) < 0)
        return NULL;
    explicit_bzero(v, sizeof v);
    return steal_pointer(&s);
}

char *hello_encode(const agent_hello *h, size_t *ret_len)
{
    json_t *o = json_object(), *argv = json_array(), *env = json_object();
    json_object_set_new(o, "proof", json_string(h->proof ? h->proof : ""));
    if (h->next_head)
        json_object_set_new(o, "next_head", json_string(h->next_head));
    for (size_t i = 0; i < h->argv.n; i++)
        json_array_append_new(argv, json_string(h->argv.v[i]));
    json_object_set_new(o, "argv", argv);
    for (size_t i = 0; i < h->env.n; i++) {
        const char *eq = strchr(h->env.v[i], '=');
        _cleanup_free_ char *k = xstrndup(h->env.v[i], (size_t)(eq - h->env.v[i]));
        json_object_set_new(env, k, json_string(eq + 1));
    }
    json_object_set_new(o, "env", env);
    if (h->dir)
        json_object_set_new(o, "dir", json_string(h->dir));
    json_object_set_new(o, "timeout_seconds", json_integer(h->timeout_seconds));
    json_object_set_new(o, "tty", json_boolean(h->tty));
    json_object_set_new(o, "rows", json_integer(h->rows));
    json_object_set_new(o, "cols", json_integer(h->cols));
    return dump(o, ret_len);
}

static int hello_argv(json_t *o, agent_hello *h, bb_error **err)
{
    json_t *argv = json_object_get(o, "argv");
    if (!json_is_array(argv))
        return bad(err, "hello", "argv");
    size_t i;
    json_t *v;
    json_array_foreach(argv, i, v)
    {
        char *s = plain_string(v);
        if (!s)
            return bad(err, "hello", "argv");
        strv_push(&h->argv, s);
    }
    if (h->argv.n && !h->argv.v[0][0])
        return bad(err, "hello", "argv");
    return 0;
}

static int hello_env(json_t *o, agent_hello *h, bb_error **err)
{
    json_t *env = json_object_get(o, "env");
    if (!env)
        return 0;
    if (!json_is_object(env))
        return bad(err, "hello", "env");
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        _cleanup_free_ char *s = plain_string(v);
        if (!s || !*k || strchr(k, '='))
            return bad(err, "hello", "env");
        strv_push(&h->env, xasprintf("%s=%s", k, s));
    }
    return 0;
}

int hello_decode(const char *data, size_t len, agent_hello *ret, bb_error **err)
{
    *ret = (agent_hello){0};
    _cleanup_json_ json_t *o = load(data, len, "hello", err);
    if (!o)
        return -1;
    ret->proof = hex_field(o, "proof");
    if (!ret->proof)
        return bad(err, "hello", "proof");
    json_t *next = json_object_get(o, "next_head");
    if (next && !json_is_null(next) && !(ret->next_head = hex_field(o, "next_head")))
        return bad(err, "hello", "next_head");
    if (hello_argv(o, ret, err) < 0 || hello_env(o, ret, err) < 0)
        return -1;
    json_t *dir = json_object_get(o, "dir");
    if (dir && !json_is_null(dir)) {
        ret->dir = plain_string(dir);
        if (!ret->dir || ret->dir[0] != '/')
            return bad(err, "hello", "dir");
    }
    json_t *tty = json_object_get(o, "tty");
    if (tty && !json_is_boolean(tty))
        return bad(err, "hello", "tty");
    ret->tty = json_is_true(tty);
    long long t = 0, rows = 0, cols = 0;
    if (int_field(o, "timeout_seconds", 0, 1000000000, &t, "hello", err) < 0 ||
        int_field(o, "rows", 0, 65535, &rows, "hello", err) < 0 ||
        int_field(o, "cols", 0, 65535, &cols, "hello", err) < 0)
        return -1;
    ret->timeout_seconds = (int)t;
    ret->rows = (unsigned)rows;
    ret->cols = (unsigned)cols;
    return 0;
}

void hello_clear(agent_hello *h)
{
    if (h->proof)
        explicit_bzero(h->proof, strlen(h->proof));
    free(h->proof);
    free(h->next_head);
    strv_clear(&h->argv);
    strv_clear(&h->env);
    free(h->dir);
    *h = (agent_hello){0};
}

char *challenge_encode(const agent_challenge *c, size_t *ret_len)
{
    json_t *o = json_object();
    json_object_set_new(o, "epoch", json_integer(c->epoch));
    json_object_set_new(o, "index", json_integer(c->index));
    if (c->rotate)
        json_object_set_new(o, "rotate", json_true());
    return dump(o, ret_len);
}

int challenge_decode(const char *data, size_t len, agent_challenge *ret, bb_error **err)
{
    *ret = (agent_challenge){0};
    _cleanup_json_ json_t *o = load(data, len, "challenge", err);
    if (!o)
        return -1;
    long long e = -1, i = -1;
    if (int_field(o, "epoch", 0, CHAIN_EPOCH_MAX, &e, "challenge", err) < 0 ||
        int_field(o, "index", 1, CHAIN_LEN - 1, &i, "challenge", err) < 0)
        return -1;
    if (e < 0 || i < 0)
        return bad(err, "challenge", e < 0 ? "epoch" : "index");
    json_t *r = json_object_get(o, "rotate");
    if (r && !json_is_boolean(r))
        return bad(err, "challenge", "rotate");
    ret->epoch = (uint32_t)e;
    ret->index = (uint32_t)i;
    ret->rotate = json_is_true(r);
    return 0;
}

char *exit_encode(const agent_exit *x, size_t *ret_len)
{
    json_t *o = json_object();
    json_object_set_new(o, "code", json_integer(x->code));
    if (x->timed_out)
        json_object_set_new(o, "timed_out", json_true());
    if (x->err)
        json_object_set_new(o, "err", json_string(x->err));
    return dump(o, ret_len);
}

int exit_decode(const char *data, size_t len, agent_exit *ret, bb_error **err)
{
    *ret = (agent_exit){0};
    _cleanup_json_ json_t *o = load(data, len, "exit frame", err);
    if (!o)
        return -1;
    long long code = -1;
    if (int_field(o, "code", 0, 255, &code, "exit frame", err) < 0)
        return -1;
    if (code < 0)
        return bad(err, "exit frame", "code");
    ret->code = (int)code;
    json_t *t = json_object_get(o, "timed_out");
    if (t && !json_is_boolean(t))
        return bad(err, "exit frame", "timed_out");
    ret->timed_out = json_is_true(t);
    json_t *e = json_object_get(o, "err");
    if (e && !json_is_null(e)) {
        ret->err = plain_string(e);
        if (!ret->err)
            return bad(err, "exit frame", "err");
    }
    return 0;
}

char *ready_encode(const char *kernel, size_t *ret_len)
{
    json_t *o = json_object();
    json_object_set_new(o, "kernel", json_string(kernel));
    return dump(o, ret_len);
}

int ready_decode(const char *data, size_t len, char **ret_kernel, bb_error **err)
{
    _cleanup_json_ json_t *o = load(data, len, "ready frame", err);
    if (!o)
        return -1;
    _cleanup_free_ char *k = plain_string(json_object_get(o, "kernel"));
    if (!k || !*k || strlen(k) > KERNEL_MAX)
        return bad(err, "ready frame", "kernel");
    for (const char *c = k; *c; c++)
        if (*c <= ' ' || *c > '~')
            return bad(err, "ready frame", "kernel");
    *ret_kernel = steal_pointer(&k);
    return 0;
}

char *winsize_encode(unsigned rows, unsigned cols, size_t *ret_len)
{
    json_t *o = json_object();
    json_object_set_new(o, "rows", json_integer(rows));
    json_object_set_new(o, "cols", json_integer(cols));
    return dump(o, ret_len);
}

int winsize_decode(const char *data, size_t len, unsigned *rows, unsigned *cols, bb_error **err)
{
    _cleanup_json_ json_t *o = load(data, len, "window size", err);
    if (!o)
        return -1;
    long long r = -1, c = -1;
    if (int_field(o, "rows", 0, 65535, &r, "window size", err) < 0 ||
        int_field(o, "cols", 0, 65535, &c, "window size", err) < 0)
        return -1;
    if (r < 0 || c < 0)
        return bad(err, "window size", r < 0 ? "rows" : "cols");
    *rows = (unsigned)r;
    *cols = (unsigned)c;
    return 0;
}

char *signal_encode(int sig, size_t *ret_len)
{
    json_t *o = json_object();
    json_object_set_new(o, "signal", json_integer(sig));
    return dump(o, ret_len);
}

int signal_decode(const char *data, size_t len, int *ret_sig, bb_error **err)
{
    _cleanup_json_ json_t *o = load(data, len, "signal frame", err);
    if (!o)
        return -1;
    long long s = -1;
    if (int_field(o, "signal", 1, 64, &s, "signal frame", err) < 0)
        return -1;
    if (s != SIGINT && s != SIGQUIT && s != SIGTERM && s != SIGHUP)
        return bad(err, "signal frame", "signal");
    *ret_sig = (int)s;
    return 0;
}
