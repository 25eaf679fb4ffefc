/* The process environment. */
#pragma once

/* Take NAME's value out of the environment: copied, its bytes in the original environment
 * block overwritten (so /proc/<pid>/environ no longer shows it) and the variable unset.
 * NULL when it was not set. */
char *env_take_secret(const char *name);
