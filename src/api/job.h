/* One operation of the API run in a child process: its stdout and stderr come back through
 * pipes (kept, capped, or streamed as NDJSON lines) and its result as one JSON object
 * through a third pipe. The caller's own stdio is never touched, so `bluebox mcp`, whose
 * stdout is the protocol, can use it too; and the server can kill a client's command by
 * killing the child. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/xalloc.h"

#define API_OUTPUT_CAP (16u << 20) /* of stdout and of stderr, in a Result */

/* One NDJSON line (without its '\n'), as it happens. Return < 0 to stop: the command is
 * killed (a client that went away). */
typedef int (*api_chunk_fn)(void *opaque, const char *line, size_t len);

/* What runs in the child: fd 0 is the request's stdin (or /dev/null), 1 and 2 the pipes.
 * Returns the result object (or {"error","code"}); NULL is an internal error. */
typedef json_t *(*api_job_fn)(void *arg);

typedef struct api_job_io {
    const unsigned char *stdin_data; /* NULL: /dev/null */
    size_t stdin_len;
    api_chunk_fn on_line; /* NULL: keep the output (capped) in out/err */
    void *opaque;
} api_job_io;

typedef struct api_job_out {
    strbuf out, err;
    bool truncated;
    bool cancelled; /* on_line asked to stop: the child was killed */
    json_t *result; /* NULL when the child died without one */
} api_job_out;

void api_job_out_clear(api_job_out *o);
/* Fork, run fn(arg) in the child, relay until it is done, reap it. 0, or -1 when it could
 * not start (out->result stays NULL). */
int api_job_run(api_job_fn fn, void *arg, const api_job_io *io, api_job_out *out);
