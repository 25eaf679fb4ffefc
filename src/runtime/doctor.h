/* Host checks for `bluebox doctor`: each says ok, warn or fail, what it saw, and how to fix
 * it. The CLI prints them. */
#pragma once

#include <stddef.h>

#include "backends/checks.h"

/* Run every check. *ret is an array of *ret_n results; free with doctor_free. */
void doctor_run(const char *root, check_result **ret, size_t *ret_n);
void doctor_free(check_result *r, size_t n);
