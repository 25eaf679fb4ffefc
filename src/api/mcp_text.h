/* Text helpers of `bluebox mcp`: base64 for the API's byte fields, and turning bytes a guest
 * wrote into the valid UTF-8 that a JSON string (and so an MCP text block) must hold. Nothing
 * here fails except decoding, which refuses what is not base64. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/xalloc.h"

/* Standard base64 with padding, NUL-terminated. */
char *b64_encode(const char *data, size_t len);
/* Decode standard base64 (padding optional, no whitespace). Returns NULL on anything else;
 * *ret_len is the number of bytes (a NUL follows them). */
char *b64_decode(const char *s, size_t len, size_t *ret_len);

/* Append at most `max` bytes of data to b as UTF-8: a sequence that is not valid UTF-8
 * becomes U+FFFD, NUL bytes too (an MCP client shows text, not bytes), and a character is
 * never cut in half. Returns how many bytes of data were left out (0 when all fit). */
size_t text_append_clipped(strbuf *b, const char *data, size_t len, size_t max);
