/* Confirmation before anything that deletes data. */
#pragma once

#include <stdbool.h>

#include "util/err.h"

/* With `yes` set, succeed at once. Otherwise ask "<question> [y/N] " on stderr and read an
 * answer from stdin; only y/Y confirms. Refuses without a terminal. Returns 0 when
 * confirmed, -1 with *err ("cancelled", or the refusal) otherwise. */
int prompt_confirm(bool yes, const char *question, bb_error **err);
/* Read one line from stdin into *ret (without the newline); 0 at EOF. */
int prompt_read_line(char **ret);
