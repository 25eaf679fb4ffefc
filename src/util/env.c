/* The process environment. */
#include "env.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

char *env_take_secret(const char *name)
{
    extern char **environ;
    size_t n = strlen(name);
    char *value = NULL;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
            if (!value)
                value = xstrdup(*e + n + 1);
            /* The strings of the initial environment are what /proc/<pid>/environ shows. */
            explicit_bzero(*e + n + 1, strlen(*e + n + 1));
        }
    unsetenv(name);
    return value;
}
