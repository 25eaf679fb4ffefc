/* Terminal facts. */
#pragma once

#include <stdbool.h>

/* stdin is a character device (a terminal or /dev/tty-like), so a person can answer. */
bool stdin_is_interactive(void);
