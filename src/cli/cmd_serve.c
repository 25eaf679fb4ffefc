/* bluebox serve: the local API (src/api, docs/API.md) on an owner-only Unix socket. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/server.h"
#include "cli.h"

/* "15m", "30s", "2h", "1d", a bare number of seconds; 0 = never. -1 on anything else. */
static int64_t parse_duration(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0 || v > 365LL * 24 * 3600)
        return -1;
    int64_t unit = 1000;
    if (streq(end, "ms"))
        unit = 1;
    else if (streq(end, "m"))
        unit = 60 * 1000;
    else if (streq(end, "h"))
        unit = 3600 * 1000;
    else if (streq(end, "d"))
        unit = 24 * 3600 * 1000;
    else if (*end && !streq(end, "s"))
        return -1;
    return (int64_t)v * unit;
}

int cmd_serve(cli_args *a, bb_error **err)
{
    api_serve_opts o = {.root = a->root, .socket = cli_value(a, "socket")};
    const char *idle = cli_value(a, "idle");
    if (idle) {
        o.idle_ms = parse_duration(idle);
        if (o.idle_ms < 0)
            return bb_fail_usage(err,
                                 "--idle takes a duration like 15m, 30s, 2h or 0 (never), "
                                 "not \"%s\"",
                                 idle);
    }
    if (o.socket && o.socket[0] != '/')
        return bb_fail_usage(err, "--socket takes an absolute path, not \"%s\"", o.socket);
    return api_serve(&o, err);
}
