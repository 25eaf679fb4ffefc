/* The allowlist of `network: bridge` with `allow:` (ABI_ENV_NET_ALLOW): names, "*.suffix"
 * wildcards and CIDRs, each with an optional port. Names default to ports 80 and 443, CIDRs to
 * any port. Pure: parsed once, then asked which ports a name may use. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct allow_entry {
    char *text;    /* the entry as written, for logs ("rule") */
    char *host;    /* lower-case name, the suffix of a wildcard (without "*."), or the CIDR */
    bool wildcard; /* "*.suffix": names below suffix, not suffix itself */
    bool cidr;
    uint16_t port; /* 0: the default (80 and 443 for names, any for CIDRs) */
} allow_entry;

typedef struct allowlist {
    allow_entry *v;
    size_t n;
} allowlist;

/* Parse the comma-separated list s into ret (empty s = nothing allowed). -1 on a malformed
 * entry, with *ret_bad (may be NULL) pointing into s at it; ret is then empty. */
int allowlist_parse(const char *s, allowlist *ret, const char **ret_bad);
void allowlist_clear(allowlist *a);
/* The entry that lets name (lower-case, valid) reach port, NULL when none does. */
const allow_entry *allowlist_match(const allowlist *a, const char *name, uint16_t port);
/* The first entry that names name at all (any port), NULL when none does. */
const allow_entry *allowlist_name_entry(const allowlist *a, const char *name);
/* The ports name may reach, in *ports (at most max, each once); their number. */
size_t allowlist_ports(const allowlist *a, const char *name, uint16_t *ports, size_t max);
