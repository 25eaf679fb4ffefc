/* `bluebox env`: a sandbox's effective settings as shell assignments. */
#pragma once

#include <stdbool.h>

#include "bluefile.h"

/* The backend that boots the sandbox: the Bluefile's, or BLUEBOX_BACKEND's (from_env). */
typedef struct {
    const char *name;
    bool from_env;
    int guest_cpus;      /* what the backend gives the guest of the Bluefile's cpus */
    const char *network; /* the network in the posture line's words */
} envout_backend;

/* Lines `BLUEBOX_X='value'`, every value single-quoted, the Bluefile's env as
 * BLUEBOX_ENV_<KEY>, so eval of the output can only assign BLUEBOX_* variables. BLUEBOX_BACKEND
 * is the effective backend, followed by a shell comment saying where it came from;
 * BLUEBOX_GUEST_CPUS the CPUs the guest really gets from it (BLUEBOX_CPUS is the Bluefile's). */
char *envout_render(const char *name, const char *image, const char *data_dir, const bluefile *bf,
                    const envout_backend *be);
/* Append s to b in POSIX single quotes. */
struct strbuf;
void shell_quote(struct strbuf *b, const char *s);
