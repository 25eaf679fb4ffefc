/* Text helpers of `bluebox mcp`: turning bytes a guest wrote into the valid UTF-8 that a JSON
 * string (and so an MCP text block) must hold. Nothing here fails. (Base64 is api/b64.h.) */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/xalloc.h"

/* Append at most `max` bytes of data to b as UTF-8: a sequence that is not valid UTF-8
 * becomes U+FFFD, NUL bytes too (an MCP client shows text, not bytes), and a character is
 * never cut in half. Returns how many bytes of data were left out (0 when all fit). */
size_t text_append_clipped(strbuf *b, const char *data, size_t len, size_t max);
