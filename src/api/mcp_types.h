/* What `bluebox mcp`'s server and its tools share: the protocol's limits and error codes, the
 * API seam (an API request answered in-process) and the server's settings. */
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
