/* `bluebox serve`: the v1 API (api.h) over HTTP/1.1 on an owner-only Unix socket, with
 * libevent's evhttp. */
#pragma once

#include <stdint.h>

#include "util/err.h"

typedef struct api_serve_opts {
    const char *root;   /* BLUEBOX_HOME */
    const char *socket; /* NULL: api_socket_path() */
    int64_t idle_ms;    /* exit after this long without a request; 0: never */
} api_serve_opts;

/* Serve until SIGINT/SIGTERM, --idle, or this executable changing on disk. Prints one line
 * to stderr when it listens ("serving on PATH") and on refusals. */
int api_serve(const api_serve_opts *o, bb_error **err);
