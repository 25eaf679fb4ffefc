/* `bluebox env`: a sandbox's effective settings as shell assignments. */
#pragma once

#include "bluefile.h"

/* Lines `BLUEBOX_X='value'`, every value single-quoted, the Bluefile's env as
 * BLUEBOX_ENV_<KEY>, so eval of the output can only assign BLUEBOX_* variables. */
char *envout_render(const char *name, const char *image, const char *data_dir, const bluefile *bf);
/* Append s to b in POSIX single quotes. */
struct strbuf;
void shell_quote(struct strbuf *b, const char *s);
