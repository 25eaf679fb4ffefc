/* libFuzzer target: the agent's JSON payloads. The host decodes the guest's challenge, ready
 * and exit frames and the agent decodes the host's hello, window size and signal frames; the
 * first input byte picks the decoder, the rest is the payload. Checks: a decoded value is within
 * its shape (exit code 0-255, printable kernel, absolute dir, env entries NAME=value), and a
 * decoded hello re-encodes to something that decodes to the same request. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi/chain.h"
#include "abi/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static void hello_roundtrip(const agent_hello *h)
{
    CHECK(h->proof && strlen(h->proof) == 64);
    CHECK(!h->next_head || strlen(h->next_head) == 64);
    CHECK(!h->dir || h->dir[0] == '/');
    for (size_t i = 0; i < h->env.n; i++)
        CHECK(h->env.v[i][0] != '=' && strchr(h->env.v[i], '='));
    size_t len;
    char *again = hello_encode(h, &len);
    agent_hello h2;
    CHECK(hello_decode(again, len, &h2, NULL) == 0);
    CHECK(strcmp(h->proof, h2.proof) == 0 && h->argv.n == h2.argv.n && h->env.n == h2.env.n);
    CHECK(!h->next_head == !h2.next_head);
    CHECK(h->tty == h2.tty && h->timeout_seconds == h2.timeout_seconds);
    for (size_t i = 0; i < h->argv.n; i++)
        CHECK(strcmp(h->argv.v[i], h2.argv.v[i]) == 0);
    hello_clear(&h2);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 6) {
    case 5: {
        agent_challenge c;
        if (challenge_decode(p, n, &c, NULL) == 0)
            CHECK(c.index >= 1 && c.index < CHAIN_LEN && c.epoch <= CHAIN_EPOCH_MAX);
        break;
    }
    case 0: {
        agent_hello h;
        if (hello_decode(p, n, &h, NULL) == 0)
            hello_roundtrip(&h);
        hello_clear(&h);
        break;
    }
    case 1: {
        agent_exit x;
        if (exit_decode(p, n, &x, NULL) == 0)
            CHECK(x.code >= 0 && x.code <= 255);
        free(x.err);
        break;
    }
    case 2: {
        char *k = NULL;
        if (ready_decode(p, n, &k, NULL) == 0)
            CHECK(k && *k && strlen(k) <= 64);
        free(k);
        break;
    }
    case 3: {
        unsigned r, c;
        if (winsize_decode(p, n, &r, &c, NULL) == 0)
            CHECK(r <= 65535 && c <= 65535);
        break;
    }
    default: {
        int sig;
        if (signal_decode(p, n, &sig, NULL) == 0)
            CHECK(sig == SIGINT || sig == SIGQUIT || sig == SIGTERM || sig == SIGHUP);
        break;
    }
    }
    return 0;
}
