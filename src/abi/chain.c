/* The agent's hash chain (see chain.h). */
#include "chain.h"

#include <string.h>

#define SEED_LABEL "bluebox-agent"

static void chain_seed(const char *token, uint32_t epoch, uint8_t out[SHA256_LEN])
{
    uint8_t be[4] = {(uint8_t)(epoch >> 24), (uint8_t)(epoch >> 16), (uint8_t)(epoch >> 8),
                     (uint8_t)epoch};
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, token, strlen(token));
    sha256_update(&c, SEED_LABEL, strlen(SEED_LABEL));
    sha256_update(&c, be, sizeof be);
    sha256_final(&c, out);
}

void chain_walk(uint8_t v[SHA256_LEN], uint32_t steps)
{
    while (steps--)
        sha256(v, SHA256_LEN, v);
}

void chain_value(const char *token, uint32_t epoch, uint32_t index, uint8_t out[SHA256_LEN])
{
    chain_seed(token, epoch, out);
    chain_walk(out, index);
}

void hex_encode(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int nibble(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hex_decode(const char *s, uint8_t *out, size_t n)
{
    if (!s || strlen(s) != 2 * n)
        goto bad;
    for (size_t i = 0; i < n; i++) {
        int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            goto bad;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
bad:
    memset(out, 0, n);
    return -1;
}

static void epoch_start(chain_epoch *e, uint32_t epoch, const uint8_t head[SHA256_LEN])
{
    *e = (chain_epoch){.valid = true, .epoch = epoch, .anchor_index = CHAIN_LEN};
    memcpy(e->head, head, SHA256_LEN);
    memcpy(e->anchor, head, SHA256_LEN);
}

void chain_state_init(chain_state *s, const uint8_t head[SHA256_LEN])
{
    *s = (chain_state){.next = CHAIN_LEN - 1};
    epoch_start(&s->cur, 0, head);
}

bool chain_reserve(chain_state *s, uint32_t *ret_epoch, uint32_t *ret_index)
{
    if (s->nout == CHAIN_OUT)
        return false;
    /* A spare above the anchor follows from a proof the guest has seen: it is dropped. Of
     * the rest the highest goes out first, whatever order their connections closed in: a
     * proof below a spare makes that spare worthless, so a low one first would waste it. */
    size_t best = CHAIN_OUT;
    for (size_t i = 0; i < s->nspare;) {
        if (s->spare[i] >= s->cur.anchor_index) {
            s->spare[i] = s->spare[--s->nspare];
            continue;
        }
        if (best == CHAIN_OUT || s->spare[i] > s->spare[best])
            best = i;
        i++;
    }
    if (best != CHAIN_OUT) {
        *ret_index = s->spare[best];
        s->spare[best] = s->spare[--s->nspare];
    } else if (s->next > 0)
        *ret_index = s->next--;
    else
        return false;
    *ret_epoch = s->cur.epoch;
    s->out[s->nout++] = (chain_ticket){.epoch = *ret_epoch, .index = *ret_index};
    return true;
}

/* Take the ticket off the list of those out; false when it is not there. */
static bool take_ticket(chain_state *s, uint32_t epoch, uint32_t index)
{
    for (size_t i = 0; i < s->nout; i++)
        if (s->out[i].epoch == epoch && s->out[i].index == index) {
            s->out[i] = s->out[--s->nout];
            return true;
        }
    return false;
}

void chain_release(chain_state *s, uint32_t epoch, uint32_t index)
{
    /* An index of an epoch gone by is dropped: that chain is never asked from again. */
    if (take_ticket(s, epoch, index) && epoch == s->cur.epoch && s->nspare < CHAIN_OUT)
        s->spare[s->nspare++] = index;
}

static bool equal32(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (size_t i = 0; i < SHA256_LEN; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}

bool chain_verify(chain_state *s, uint32_t epoch, uint32_t index, const uint8_t proof[SHA256_LEN])
{
    chain_epoch *e = s->cur.valid && s->cur.epoch == epoch     ? &s->cur
                     : s->prev.valid && s->prev.epoch == epoch ? &s->prev
                                                               : NULL;
    if (!e || index == 0 || index >= CHAIN_LEN || index == e->anchor_index ||
        !take_ticket(s, epoch, index))
        return false;
    /* Below the anchor: hash up to it (one step when connections prove in order). An index
     * above it was handed out again after a later one was proven: hash up to the head. */
    bool below = index < e->anchor_index;
    uint8_t v[SHA256_LEN];
    memcpy(v, proof, SHA256_LEN);
    chain_walk(v, below ? e->anchor_index - index : CHAIN_LEN - index);
    bool ok = equal32(v, below ? e->anchor : e->head);
    explicit_bzero(v, sizeof v);
    if (!ok) {
        s->out[s->nout++] = (chain_ticket){.epoch = epoch, .index = index};
        chain_release(s, epoch, index);
    } else if (below) {
        e->anchor_index = index;
        memcpy(e->anchor, proof, SHA256_LEN);
    }
    return ok;
}

bool chain_wants_rotation(const chain_state *s)
{
    return s->next < CHAIN_ROTATE_BELOW;
}

bool chain_rotate(chain_state *s, uint32_t from_epoch, const uint8_t next_head[SHA256_LEN])
{
    if (from_epoch != s->cur.epoch || !chain_wants_rotation(s) || s->cur.epoch >= CHAIN_EPOCH_MAX)
        return false;
    s->prev = s->cur;
    epoch_start(&s->cur, from_epoch + 1, next_head);
    s->next = CHAIN_LEN - 1;
    s->nspare = 0; /* tickets out for the old epoch stay out until proven or given back */
    return true;
}
