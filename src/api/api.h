/* The v1 API (docs/API.md) without a transport: a request (method, path, JSON body) in, an
 * HTTP status and a JSON body out. `bluebox serve` puts it behind HTTP on a Unix socket;
 * `bluebox mcp` calls it in-process. Nothing here prints or exits.
 *
 * The calls block for as long as the operation takes (an up boots a VM, an exec waits for
 * the command). A command (exec, run, and the files routes, which are execs of a fixed sh
 * script in the guest) runs in a child process of the caller, in its own process group,
 * whose output comes back through pipes; the caller's own stdio is never touched.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "job.h"

typedef struct api_ctx {
    const char *root; /* BLUEBOX_HOME, as home_root() gives it */
    const char *via;  /* who asks, for logs/<name>.log: "api" (serve) or "mcp" */
} api_ctx;

typedef struct api_reply {
    int status; /* the HTTP status: 200, or an error's (docs/API.md, Errors) */
    char *body; /* JSON, NUL-terminated (malloc'd; api_reply_clear frees it) */
    size_t len; /* strlen(body) */
} api_reply;

void api_reply_clear(api_reply *r);

/* Handle one request. Returns out->status (also 4xx/5xx: then out->body is
 * {"error","code"}). `body` may be NULL when len is 0. A streaming route
 * (…/exec/stream, …/run/stream) given to api_handle answers 400 bad_request: use
 * api_handle_stream. */
int api_handle(api_ctx *c, const char *method, const char *path, const char *body, size_t len,
               api_reply *out);

/* Like api_handle, for any route. On a streaming route that starts, `on_line` is called
 * for each line ({"stdout":b64}, {"stderr":b64}, then one final {"exit_code",…} or
 * {"error","code"}), and it returns 200 with an empty out->body. An error before the
 * stream began is an ordinary status + {"error","code"} in *out, with no line sent. A
 * non-streaming route answers as api_handle does and never calls on_line. */
int api_handle_stream(api_ctx *c, const char *method, const char *path, const char *body,
                      size_t len, api_chunk_fn on_line, void *opaque, api_reply *out);

/* Whether (method, path) is a streaming route (Content-Type application/x-ndjson). */
bool api_is_stream(const char *method, const char *path);
