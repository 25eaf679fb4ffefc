/* Files carried inside the binary: the examples/ tree and the completion scripts. */
#pragma once

#include <stddef.h>

typedef struct {
    const char *group; /* example name, or shell name for completions */
    const char *path;  /* path inside the example directory, or the script's file name */
    const char *data;
    size_t len;
} embedded_file;

/* Both arrays end with an all-zero entry. */
extern const embedded_file embedded_examples[];
extern const embedded_file embedded_completions[];
