/* The tools of `bluebox mcp`: their table (names, strict input schemas), checking a call's
 * arguments against the schema, and turning a call into v1 API requests and the result into
 * text. Used by mcp.c only. */
#pragma once

#include <jansson.h>

#include "api/mcp_types.h"

/* The tools this server offers, as tools/list's "tools" array (a new reference). */
json_t *mcp_tools_list(const mcp_server *s);

/* tools/call of `name` with `args` (an object, or NULL for none). Returns the call's result
 * ({content, isError}), or NULL with *ret_error (malloc'd) set when the call is refused
 * before it starts: an unknown tool or arguments that do not match the tool's schema, which
 * the caller answers with JSON-RPC's invalid params. */
json_t *mcp_tools_call(const mcp_server *s, const char *name, json_t *args, char **ret_error);
