/* Unit tests for the agent's JSON payloads: strict shapes, unknown fields ignored, the proof
 * kept for a hello that is refused later (so the agent can answer its owner's mistake). */
#include "unit.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "abi/msg.h"
#include "util/xalloc.h"

#define P64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define TOK "\"proof\":\"" P64 "\""

static int decode(const char *json, agent_hello *h)
{
    return hello_decode(json, strlen(json), h, NULL);
}

static void hello_roundtrip(void **s)
{
    (void)s;
    agent_hello h = {.proof = xstrdup(P64),
                     .next_head = xstrdup(P64),
                     .dir = xstrdup("/data"),
                     .timeout_seconds = 7,
                     .tty = true,
                     .rows = 24,
                     .cols = 80};
    strv_add(&h.argv, "sh");
    strv_add(&h.argv, "-c");
    strv_add(&h.argv, "echo \"$A\"");
    strv_add(&h.env, "A=x=y");
    size_t len;
    char *json = hello_encode(&h, &len);
    agent_hello d;
    assert_int_equal(hello_decode(json, len, &d, NULL), 0);
    assert_string_equal(d.proof, P64);
    assert_string_equal(d.next_head, P64);
    assert_int_equal(d.argv.n, 3);
    assert_string_equal(d.argv.v[2], "echo \"$A\"");
    assert_string_equal(d.env.v[0], "A=x=y");
    assert_string_equal(d.dir, "/data");
    assert_int_equal(d.timeout_seconds, 7);
    assert_true(d.tty);
    assert_int_equal(d.rows, 24);
    free(json);
    hello_clear(&d);
    hello_clear(&h);
}

static void hello_strict(void **s)
{
    (void)s;
    static const char *bad[] = {
        "[]",
        "{\"argv\":[]}",
        "{\"proof\":5,\"argv\":[]}",
        "{\"proof\":\"t\",\"argv\":[]}",
        "{\"proof\":\"" P64 "0\",\"argv\":[]}",
        "{\"proof\":\"" P64 "\",\"next_head\":\"zz\",\"argv\":[]}",
        "{\"token\":\"" P64 "\",\"argv\":[]}",
        "{" TOK "}",
        "{" TOK ",\"argv\":\"sh\"}",
        "{" TOK ",\"argv\":[1]}",
        "{" TOK ",\"argv\":[\"\"]}",
        "{" TOK ",\"argv\":[\"a\\u0000b\"]}",
        "{" TOK ",\"argv\":[],\"env\":{\"A=B\":\"1\"}}",
        "{" TOK ",\"argv\":[],\"env\":{\"A\":1}}",
        "{" TOK ",\"argv\":[],\"dir\":\"data\"}",
        "{" TOK ",\"argv\":[],\"tty\":1}",
        "{" TOK ",\"argv\":[],\"timeout_seconds\":-1}",
        "{" TOK ",\"argv\":[],\"rows\":70000}",
        "{" TOK "," TOK ",\"argv\":[]}",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        agent_hello h;
        assert_int_equal(decode(bad[i], &h), -1);
        hello_clear(&h);
    }
    agent_hello h;
    assert_int_equal(decode("{" TOK ",\"argv\":[],\"later\":{\"x\":[1]}}", &h), 0);
    assert_int_equal(h.argv.n, 0);
    hello_clear(&h);
    /* refused after the proof: the proof is there for the agent to check */
    assert_int_equal(decode("{" TOK ",\"argv\":[],\"tty\":\"yes\"}", &h), -1);
    assert_string_equal(h.proof, P64);
    hello_clear(&h);
}

static void exit_and_ready(void **s)
{
    (void)s;
    agent_exit x = {.code = 124, .timed_out = true};
    size_t len;
    char *json = exit_encode(&x, &len);
    agent_exit d;
    assert_int_equal(exit_decode(json, len, &d, NULL), 0);
    assert_int_equal(d.code, 124);
    assert_true(d.timed_out);
    assert_null(d.err);
    free(json);
    static const char *bad_exit[] = {"{}",
                                     "{\"code\":256}",
                                     "{\"code\":-1}",
                                     "{\"code\":\"0\"}",
                                     "{\"code\":0,\"err\":5}",
                                     "{\"code\":0,\"timed_out\":1}"};
    for (size_t i = 0; i < ELEMENTSOF(bad_exit); i++) {
        assert_int_equal(exit_decode(bad_exit[i], strlen(bad_exit[i]), &d, NULL), -1);
        free(d.err);
    }
    char *k = NULL;
    assert_int_equal(ready_decode("{\"kernel\":\"6.1.176\"}", 20, &k, NULL), 0);
    assert_string_equal(k, "6.1.176");
    free(k);
    static const char *bad_ready[] = {"{\"kernel\":\"\"}", "{\"kernel\":\"a b\"}",
                                      "{\"kernel\":\"\\u001b[2J\"}", "{\"kernel\":6}"};
    for (size_t i = 0; i < ELEMENTSOF(bad_ready); i++)
        assert_int_equal(ready_decode(bad_ready[i], strlen(bad_ready[i]), &k, NULL), -1);
}

static void challenge(void **s)
{
    (void)s;
    agent_challenge c = {.epoch = 3, .index = 1023, .rotate = true}, d;
    size_t len;
    char *json = challenge_encode(&c, &len);
    assert_int_equal(challenge_decode(json, len, &d, NULL), 0);
    assert_int_equal(d.epoch, 3);
    assert_int_equal(d.index, 1023);
    assert_true(d.rotate);
    free(json);
    assert_int_equal(challenge_decode("{\"epoch\":0,\"index\":1}", 21, &d, NULL), 0);
    assert_false(d.rotate);
    /* index 0 would be the seed itself, CHAIN_LEN the head: neither is ever asked for */
    static const char *bad[] = {"{}",
                                "{\"epoch\":0}",
                                "{\"index\":5}",
                                "{\"epoch\":0,\"index\":0}",
                                "{\"epoch\":0,\"index\":1024}",
                                "{\"epoch\":-1,\"index\":5}",
                                "{\"epoch\":2147483648,\"index\":5}",
                                "{\"epoch\":0,\"index\":\"5\"}",
                                "{\"epoch\":0,\"index\":5,\"rotate\":1}"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        assert_int_equal(challenge_decode(bad[i], strlen(bad[i]), &d, NULL), -1);
}

static void signals_and_winsize(void **s)
{
    (void)s;
    int sig;
    size_t len;
    char *json = signal_encode(SIGINT, &len);
    assert_int_equal(signal_decode(json, len, &sig, NULL), 0);
    assert_int_equal(sig, SIGINT);
    free(json);
    assert_int_equal(signal_decode("{\"signal\":9}", 12, &sig, NULL), -1);
    unsigned r, c;
    assert_int_equal(winsize_decode("{\"rows\":40,\"cols\":120}", 22, &r, &c, NULL), 0);
    assert_int_equal(r, 40);
    assert_int_equal(c, 120);
    assert_int_equal(winsize_decode("{\"rows\":40}", 11, &r, &c, NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hello_roundtrip),     cmocka_unit_test(hello_strict),
        cmocka_unit_test(exit_and_ready),      cmocka_unit_test(challenge),
        cmocka_unit_test(signals_and_winsize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
