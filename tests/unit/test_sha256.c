/* Unit tests for SHA-256 against the FIPS 180-4 examples (NIST's "SHA256.pdf" and the
 * one-million-'a' message of FIPS 180-2 appendix B.3), fed whole and at every split. */
#include "unit.h"

#include <stdlib.h>

#include "abi/chain.h"
#include "util/macro.h"
#include "util/sha256.h"

typedef struct vector {
    const char *msg;
    const char *digest;
} vector;

static const vector vectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnop"
     "qrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
};

static void check(const uint8_t d[SHA256_LEN], const char *want)
{
    char hex[2 * SHA256_LEN + 1];
    hex_encode(d, SHA256_LEN, hex);
    assert_string_equal(hex, want);
}

static void fips_vectors(void **s)
{
    (void)s;
    for (size_t i = 0; i < ELEMENTSOF(vectors); i++) {
        uint8_t d[SHA256_LEN];
        sha256(vectors[i].msg, strlen(vectors[i].msg), d);
        check(d, vectors[i].digest);
    }
}

/* Every split of every vector: the block buffering must not change the digest. */
static void split_updates(void **s)
{
    (void)s;
    for (size_t i = 0; i < ELEMENTSOF(vectors); i++) {
        size_t n = strlen(vectors[i].msg);
        for (size_t a = 0; a <= n; a++) {
            sha256_ctx c;
            uint8_t d[SHA256_LEN];
            sha256_init(&c);
            sha256_update(&c, vectors[i].msg, a);
            sha256_update(&c, vectors[i].msg + a, 0);
            sha256_update(&c, vectors[i].msg + a, n - a);
            sha256_final(&c, d);
            check(d, vectors[i].digest);
        }
    }
}

static void million_a(void **s)
{
    (void)s;
    char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    sha256_ctx c;
    sha256_init(&c);
    for (int i = 0; i < 1000; i++)
        sha256_update(&c, chunk, sizeof chunk);
    uint8_t d[SHA256_LEN];
    sha256_final(&c, d);
    check(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths around the padding boundary (55, 56, 63, 64 bytes), against one-shot hashing
 * of the same bytes fed one at a time. */
static void padding_boundaries(void **s)
{
    (void)s;
    uint8_t msg[130];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i * 7 + 1);
    for (size_t n = 0; n <= sizeof msg; n++) {
        uint8_t a[SHA256_LEN], b[SHA256_LEN];
        sha256(msg, n, a);
        sha256_ctx c;
        sha256_init(&c);
        for (size_t i = 0; i < n; i++)
            sha256_update(&c, msg + i, 1);
        sha256_final(&c, b);
        assert_memory_equal(a, b, SHA256_LEN);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fips_vectors),
        cmocka_unit_test(split_updates),
        cmocka_unit_test(million_a),
        cmocka_unit_test(padding_boundaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
