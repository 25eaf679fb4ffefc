/* `bluebox mcp`: a Model Context Protocol server (JSON-RPC 2.0, one message per line) whose
 * tools are requests to the v1 API (docs/API.md), answered in-process by the same handler
 * `bluebox serve` uses, so a tool passes every check an SDK call does. */
#pragma once

#include <stddef.h>

#include "api/mcp_types.h"
#include "util/err.h"

/* Handle one message (a line without its newline). Returns the reply line to write (malloc'd,
 * no newline), or NULL when a message needs none (a notification, a client's response). */
char *mcp_handle(const mcp_server *s, const char *line, size_t len);

/* Read messages from in_fd until end of file and write each reply as one line to out_fd.
 * Returns 0 at end of input or when the reader has gone (out_fd closed), -1 on a read or
 * write error. */
int mcp_serve(const mcp_server *s, int in_fd, int out_fd, bb_error **err);
