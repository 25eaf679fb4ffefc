/* `bluebox mcp`: a Model Context Protocol server (JSON-RPC 2.0, one message per line) whose
 * tools are requests to the v1 API (docs/API.md), answered in-process by the same handler
 * `bluebox serve` uses, so a tool passes every check an SDK call does. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define MCP_PROTOCOL_VERSION "2025-06-18"
/* The longest message line read; a longer one is answered with a parse error and skipped. */
#define MCP_MAX_LINE (16u << 20)
/* exec/run show at most this much of stdout and of stderr. */
#define MCP_OUTPUT_CLIP (64u << 10)
/* read_file shows at most this much of a file. */
#define MCP_FILE_CLIP (1u << 20)

/* JSON-RPC 2.0 error codes. */
enum {
    MCP_PARSE_ERROR = -32700,
    MCP_INVALID_REQUEST = -32600,
    MCP_METHOD_NOT_FOUND = -32601,
    MCP_INVALID_PARAMS = -32602,
    MCP_INTERNAL_ERROR = -32603,
};

/* An API reply: the HTTP status and the JSON body (malloc'd, may be NULL when empty). */
typedef struct {
    int status;
    char *body;
    size_t len;
} mcp_api_reply;

/* One API request (method "GET"/"POST", path "/v1/…", a JSON body or NULL). Fills *reply
 * and returns 0; returns -1 only when no answer could be had at all (err filled). */
typedef int (*mcp_api_fn)(void *ctx, const char *method, const char *path, const char *body,
                          size_t len, mcp_api_reply *reply, bb_error **err);

typedef struct {
    mcp_api_fn api;
    void *api_ctx;
    bool allow_restore; /* list and accept the restore tool */
} mcp_server;

/* Handle one message (a line without its newline). Returns the reply line to write (malloc'd,
 * no newline), or NULL when a message needs none (a notification, a client's response). */
char *mcp_handle(const mcp_server *s, const char *line, size_t len);

/* Read messages from in_fd until end of file and write each reply as one line to out_fd.
 * Returns 0 at end of input or when the reader has gone (out_fd closed), -1 on a read or
 * write error. */
int mcp_serve(const mcp_server *s, int in_fd, int out_fd, bb_error **err);
