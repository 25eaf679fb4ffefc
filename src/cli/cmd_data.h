/* What the /data commands (cmd_data.c) share with the fork commands (cmd_fork.c). */
#pragma once

#include "data/tally.h"

/* "bluebox: skipped N entries that cannot be <what> safely (kinds)", when there were any. */
void cli_warn_skipped(const data_tally *t, const char *what);
