/* Unit tests for the agent's hash chain: the derivation (pinned, since host and guest of
 * different builds must agree), and the agent's bookkeeping: a proof is good once, for the
 * index it was asked for; indices are spent or handed out again; rotation. */
#include "unit.h"

#include <stdlib.h>

#include "abi/chain.h"

#define TOKEN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void hex_is(const uint8_t v[SHA256_LEN], const char *want)
{
    char hex[2 * SHA256_LEN + 1];
    hex_encode(v, SHA256_LEN, hex);
    assert_string_equal(hex, want);
}

static void derivation(void **s)
{
    (void)s;
    uint8_t v[SHA256_LEN];
    /* sha256(TOKEN || "bluebox-agent" || be32(e)), then hashed `index` times */
    chain_value(TOKEN, 0, 0, v);
    hex_is(v, "65843e505524ab4e6bbc0f24918ed7ee2f1c3dcdf63520ba0126116cee4a452a");
    chain_value(TOKEN, 0, CHAIN_LEN, v);
    hex_is(v, "2a570a3349835453600f7493d3908961e583585ff884bfdca0e9f9f90467e156");
    chain_value(TOKEN, 1, 1, v);
    hex_is(v, "c0950dfb185550877de3f0cb0316d3cee777385cac7e92f0e2da2787e1aaffd3");
    uint8_t w[SHA256_LEN];
    chain_value(TOKEN, 0, 100, w);
    chain_walk(w, CHAIN_LEN - 100);
    chain_value(TOKEN, 0, CHAIN_LEN, v);
    assert_memory_equal(v, w, SHA256_LEN);
}

static void hex(void **s)
{
    (void)s;
    uint8_t b[2];
    assert_int_equal(hex_decode("0aFf", b, 2), 0);
    assert_int_equal(b[0], 0x0a);
    assert_int_equal(b[1], 0xff);
    assert_int_equal(hex_decode("0aF", b, 2), -1);
    assert_int_equal(hex_decode("0aFf0", b, 2), -1);
    assert_int_equal(hex_decode("0g00", b, 2), -1);
    assert_int_equal(b[0], 0);
    assert_int_equal(hex_decode(NULL, b, 2), -1);
}

static void init_state(chain_state *st)
{
    uint8_t head[SHA256_LEN];
    chain_value(TOKEN, 0, CHAIN_LEN, head);
    chain_state_init(st, head);
}

static bool prove(chain_state *st, uint32_t e, uint32_t j)
{
    uint8_t p[SHA256_LEN];
    chain_value(TOKEN, e, j, p);
    return chain_verify(st, e, j, p);
}

static void once_and_in_place(void **s)
{
    (void)s;
    chain_state st;
    init_state(&st);
    uint32_t e, j, k;
    assert_true(chain_reserve(&st, &e, &j));
    assert_int_equal(e, 0);
    assert_int_equal(j, CHAIN_LEN - 1);
    uint8_t p[SHA256_LEN];
    chain_value(TOKEN, 0, j, p);
    /* a proof of another index, a wrong epoch, the head itself: refused */
    assert_false(chain_verify(&st, 0, j - 1, p));
    assert_false(chain_verify(&st, 1, j, p));
    uint8_t head[SHA256_LEN];
    chain_value(TOKEN, 0, CHAIN_LEN, head);
    assert_false(chain_verify(&st, 0, CHAIN_LEN, head));
    assert_false(chain_verify(&st, 0, 0, p));
    assert_true(chain_verify(&st, 0, j, p));
    /* replayed: for the same index (spent) or the next one it is worthless */
    assert_false(chain_verify(&st, 0, j, p));
    assert_true(chain_reserve(&st, &e, &k));
    assert_int_equal(k, j - 1);
    assert_false(chain_verify(&st, 0, k, p));
    /* a wrong proof does not spend the index: it goes back and is asked again */
    chain_release(&st, e, k);
    uint32_t k2;
    assert_true(chain_reserve(&st, &e, &k2));
    assert_int_equal(k2, k);
    assert_true(prove(&st, 0, k2));
    assert_true(chain_reserve(&st, &e, &k));
    assert_int_equal(k, j - 2);
}

static void out_of_order(void **s)
{
    (void)s;
    chain_state st;
    init_state(&st);
    uint32_t e, a, b, c;
    chain_reserve(&st, &e, &a);
    chain_reserve(&st, &e, &b);
    chain_reserve(&st, &e, &c);
    assert_true(prove(&st, 0, c)); /* the anchor moves below a and b */
    assert_true(prove(&st, 0, a)); /* above the anchor: checked against the head */
    assert_true(prove(&st, 0, b));
    assert_false(prove(&st, 0, b));
}

/* An index given back after a lower one was proven is never handed out again: its value
 * follows from that proof, which guest root may have seen on its own network. */
static void no_spare_above_a_proven_index(void **s)
{
    (void)s;
    chain_state st;
    init_state(&st);
    uint32_t e, hi, lo, k;
    chain_reserve(&st, &e, &hi);
    chain_reserve(&st, &e, &lo);
    chain_release(&st, 0, hi);      /* its connection went away before the hello */
    assert_true(prove(&st, 0, lo)); /* seen by the guest */
    assert_true(chain_reserve(&st, &e, &k));
    assert_true(k < lo);
    assert_false(prove(&st, 0, hi)); /* v_hi = SHA256(v_lo): worth nothing now */
    /* one below the anchor still comes back */
    assert_true(chain_reserve(&st, &e, &k));
    chain_release(&st, 0, k);
    uint32_t again;
    assert_true(chain_reserve(&st, &e, &again));
    assert_int_equal(again, k);
}

/* Connections that leave unproven in the order they came give their indices back highest
 * last; the highest still goes out first, so the owner's next proof wastes none of them. */
static void highest_spare_first(void **s)
{
    (void)s;
    chain_state st;
    init_state(&st);
    uint32_t e, a, b, c, k;
    chain_reserve(&st, &e, &a);
    chain_reserve(&st, &e, &b);
    chain_reserve(&st, &e, &c);
    chain_release(&st, 0, a);
    chain_release(&st, 0, b);
    chain_release(&st, 0, c);
    assert_true(chain_reserve(&st, &e, &k));
    assert_int_equal(k, a);
    assert_true(prove(&st, 0, k));
    assert_true(chain_reserve(&st, &e, &k));
    assert_int_equal(k, b);
}

static void rotation(void **s)
{
    (void)s;
    chain_state st;
    init_state(&st);
    uint32_t e, j, pending = 0;
    uint8_t next[SHA256_LEN];
    chain_value(TOKEN, 1, CHAIN_LEN, next);
    assert_false(chain_wants_rotation(&st));
    assert_false(chain_rotate(&st, 0, next)); /* not due yet */
    while (!chain_wants_rotation(&st)) {
        assert_true(chain_reserve(&st, &e, &j));
        assert_true(prove(&st, 0, j));
    }
    assert_true(chain_reserve(&st, &e, &pending)); /* asked before the rotation */
    assert_true(chain_reserve(&st, &e, &j));
    assert_true(prove(&st, 0, j));
    assert_false(chain_rotate(&st, 1, next)); /* not the current epoch */
    assert_true(chain_rotate(&st, 0, next));
    assert_false(chain_rotate(&st, 0, next)); /* a second client with the same news */
    assert_false(chain_wants_rotation(&st));
    assert_true(chain_reserve(&st, &e, &j));
    assert_int_equal(e, 1);
    assert_int_equal(j, CHAIN_LEN - 1);
    assert_false(prove(&st, 0, j));
    assert_true(prove(&st, 1, j));
    assert_true(prove(&st, 0, pending)); /* the old epoch's open challenge still counts */
    chain_release(&st, 0, pending);      /* and an old index is not handed out again */
    assert_true(chain_reserve(&st, &e, &j));
    assert_int_equal(e, 1);
    assert_int_equal(j, CHAIN_LEN - 2);
}

static void exhaustion(void **s)
{
    (void)s;
    chain_state st;
    init_state(&st);
    uint32_t e, j;
    st.next = 1;
    assert_true(chain_reserve(&st, &e, &j));
    assert_int_equal(j, 1);
    assert_false(chain_reserve(&st, &e, &j));
    chain_release(&st, 0, 1);
    assert_true(chain_reserve(&st, &e, &j));
    assert_int_equal(j, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(derivation),
        cmocka_unit_test(hex),
        cmocka_unit_test(once_and_in_place),
        cmocka_unit_test(out_of_order),
        cmocka_unit_test(rotation),
        cmocka_unit_test(exhaustion),
        cmocka_unit_test(no_spare_above_a_proven_index),
        cmocka_unit_test(highest_spare_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
