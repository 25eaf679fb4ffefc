/* `bluebox env`: a sandbox's effective settings as shell assignments. */
#pragma once

#include "bluefile.h"

/* Lines `BLUEBOX_X='value'`, every value single-quoted, the Bluefile's env as
 * BLUEBOX_ENV_<KEY>, so eval of the output can only assign BLUEBOX_* variables. guest_cpus:
 * the CPUs the guest really gets from its backend (BLUEBOX_GUEST_CPUS; BLUEBOX_CPUS is the
 * Bluefile's cpus). */
char *envout_render(const char *name, const char *image, const char *data_dir, const bluefile *bf,
                    int guest_cpus);
/* Append s to b in POSIX single quotes. */
struct strbuf;
void shell_quote(struct strbuf *b, const char *s);
