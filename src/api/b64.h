/* Base64 (RFC 4648, with padding) for the API's byte fields: stdin, stdout, file content. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Encode n bytes; the result is NUL-terminated (malloc'd). */
char *b64_encode(const void *data, size_t n, size_t *ret_len);
/* Decode; false on anything that is not canonical padded base64. *ret is malloc'd. */
bool b64_decode(const char *s, size_t n, unsigned char **ret, size_t *ret_len);
