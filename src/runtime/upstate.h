/* The state of an up sandbox: ~/.bluebox/run/<name>.json (0600, run/ 0700) =
 * {container, addr, token, kernel, started}. It holds the agent's token, so it is written
 * owner-only and never printed. */
#pragma once

#include "core/sandbox.h"
#include "util/err.h"

typedef struct up_state {
    char *container;
    char *addr; /* "127.0.0.1:<port>" */
    char *token;
    char *kernel; /* the guest kernel the agent reported; "" until it answered */
    long long started;
} up_state;

/* 1 with *ret filled when the sandbox is up, 0 when it is not, -1 on a damaged file. */
int upstate_load(const sandbox *sb, up_state *ret, bb_error **err);
int upstate_save(const sandbox *sb, const up_state *s, bb_error **err);
/* Delete the state; a missing file is fine. */
int upstate_remove(const sandbox *sb, bb_error **err);
void upstate_clear(up_state *s);
static inline void upstate_clearp(up_state *s)
{
    upstate_clear(s);
}
#define _cleanup_upstate_ _cleanup_(upstate_clearp)
