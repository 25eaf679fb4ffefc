/* Base64 (RFC 4648, with padding) for the API's byte fields: stdin, stdout, file content. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The length of n bytes' encoding. */
#define B64_LEN(n) (((n) + 2) / 3 * 4)

/* Encode n bytes into dst (room for B64_LEN(n), no NUL added); returns B64_LEN(n). */
size_t b64_encode_to(char *dst, const void *data, size_t n);
/* Encode n bytes; the result is NUL-terminated (malloc'd). */
char *b64_encode(const void *data, size_t n, size_t *ret_len);
/* Decode; false on anything that is not canonical padded base64. *ret is malloc'd. */
bool b64_decode(const char *s, size_t n, unsigned char **ret, size_t *ret_len);
