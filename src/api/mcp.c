/* `bluebox mcp`'s JSON-RPC 2.0 layer (mcp.h): one message per line in, one reply per line
 * out; initialize, ping, tools/list and tools/call; notifications and the client's own
 * responses get no reply. The tools themselves are in mcp_tools.c. */
#include "api/mcp.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "api/mcp_tools.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/xalloc.h"

#define MCP_INSTRUCTIONS                                                                           \
    "bluebox runs commands in sandboxes: throwaway machines with their own kernel, built from "    \
    "an OCI image, for code that should not touch the host. The user makes and builds "            \
    "sandboxes with the bluebox CLI; these tools cannot create them, so start with "               \
    "list_sandboxes. run starts a fresh VM for one command and throws it away (only /data "        \
    "keeps what it writes). up boots a long-lived VM: exec, write_file and read_file then work "   \
    "in it, and files, processes and /tmp carry over between calls until down. Commands run "      \
    "as sh -c in /data, with the sandbox's network and timeout; a non-zero exit code is a "        \
    "normal result (isError is false), and stdout and stderr are clipped at 64 KiB each. "         \
    "fork makes a sandbox whose /data is a copy-on-write layer over another's; diff lists "        \
    "its changes, apply merges them into the parent's /data, discard drops them. "                 \
    "snapshot archives /data"

static char *reply_line(json_t *reply)
{
    /* Compact: jansson escapes every control character in strings, so the line holds no
     * newline but its end. */
    char *line = json_dumps(reply, JSON_COMPACT);
    if (!line)
        abort(); /* only out of memory: every string in a reply is valid UTF-8 */
    return line;
}

static char *error_reply(json_t *id, int code, const char *fmt, ...) _printf_(3, 4);

static char *result_reply(json_t *id, json_t *result)
{
    /* json_pack steals result, also when it fails (a NULL result: a text that was not UTF-8,
     * which mcp_text keeps from happening) */
    _cleanup_json_ json_t *r =
        json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", result);
    if (!r)
        return error_reply(id, MCP_INTERNAL_ERROR,
                           "internal error: the result could not be "
                           "encoded");
    return reply_line(r);
}

static char *error_reply(json_t *id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    _cleanup_json_ json_t *r =
        json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error",
                  "code", code, "message", msg);
    if (!r) /* a message with bytes that are not UTF-8: say so without them */
        r = json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                      "error", "code", code, "message", "error (the message was not UTF-8)");
    return reply_line(r);
}

/* ---------------------------------------------------------------- methods */

static char *m_initialize(const mcp_server *s, json_t *id, json_t *params)
{
    /* A client asking for another version gets ours; it decides whether it can speak it. */
    return result_reply(id, json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}", "protocolVersion",
                                      MCP_PROTOCOL_VERSION, "capabilities", "tools", "listChanged",
                                      0, "serverInfo", "name", "bluebox", "title", "bluebox",
                                      "version", BLUEBOX_VERSION, "instructions",
                                      s->allow_restore ? MCP_INSTRUCTIONS
                                          " and restore brings a snapshot back (the "
                                          "sandbox must be down)."
                                                       : MCP_INSTRUCTIONS "."));
}

static char *m_ping(const mcp_server *s, json_t *id, json_t *params)
{
    return result_reply(id, json_object());
}

static char *m_tools_list(const mcp_server *s, json_t *id, json_t *params)
{
    return result_reply(id, json_pack("{s:o}", "tools", mcp_tools_list(s)));
}

static char *m_tools_call(const mcp_server *s, json_t *id, json_t *params)
{
    json_t *name = json_object_get(params, "name");
    if (!json_is_string(name))
        return error_reply(id, MCP_INVALID_PARAMS, "invalid params: tools/call needs a tool name");
    const char *key;
    json_t *v;
    json_object_foreach(params, key, v)
    {
        if (!streq(key, "name") && !streq(key, "arguments") && !streq(key, "_meta"))
            return error_reply(id, MCP_INVALID_PARAMS,
                               "invalid params: tools/call takes name, arguments and _meta, not "
                               "\"%s\"",
                               key);
    }
    _cleanup_free_ char *why = NULL;
    json_t *result =
        mcp_tools_call(s, json_string_value(name), json_object_get(params, "arguments"), &why);
    if (!result)
        return error_reply(id, MCP_INVALID_PARAMS, "%s", why);
    return result_reply(id, result);
}

static const struct {
    const char *name;
    char *(*run)(const mcp_server *s, json_t *id, json_t *params);
} methods[] = {
    {"initialize", m_initialize},
    {"ping", m_ping},
    {"tools/list", m_tools_list},
    {"tools/call", m_tools_call},
};

/* ---------------------------------------------------------------- one message */

char *mcp_handle(const mcp_server *s, const char *line, size_t len)
{
    json_error_t e;
    _cleanup_json_ json_t *msg =
        json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!msg)
        return error_reply(NULL, MCP_PARSE_ERROR, "parse error: %s (at byte %zu)", e.text,
                           (size_t)e.position);
    if (!json_is_object(msg))
        return error_reply(NULL, MCP_INVALID_REQUEST, "invalid request: %s",
                           json_is_array(msg) ? "batches are not part of MCP 2025-06-18"
                                              : "a message is a JSON object");
    json_t *id = json_object_get(msg, "id");
    json_t *method = json_object_get(msg, "method");
    if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error")))
        return NULL; /* a response to a request this server never sends */
    if (id && !json_is_string(id) && !json_is_number(id))
        return error_reply(NULL, MCP_INVALID_REQUEST,
                           "invalid request: id must be a string or a number");
    if (!streq(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0"))
        return error_reply(id, MCP_INVALID_REQUEST, "invalid request: jsonrpc must be \"2.0\"");
    if (!json_is_string(method))
        return error_reply(id, MCP_INVALID_REQUEST, "invalid request: method must be a string");
    if (!id)
        return NULL; /* a notification (initialized, cancelled, …): nothing to answer */
    json_t *params = json_object_get(msg, "params");
    if (params && !json_is_object(params))
        return error_reply(id, MCP_INVALID_PARAMS, "invalid params: params must be an object");
    const char *name = json_string_value(method);
    for (size_t i = 0; i < ELEMENTSOF(methods); i++)
        if (streq(methods[i].name, name))
            return methods[i].run(s, id, params);
    return error_reply(id, MCP_METHOD_NOT_FOUND, "method not found: %s", name);
}

/* ---------------------------------------------------------------- the stdio loop */

/* Write one reply line. Returns 1 when the reader has gone, 0 when written, -1 on error. */
static int send_line(int fd, char *reply, bb_error **err)
{
    _cleanup_free_ char *line = reply;
    if (!line)
        return 0;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps's NUL becomes the line's end, written with it */
    _cleanup_error_ bb_error *e = NULL;
    if (write_full(fd, line, n + 1, "MCP output", &e) < 0) {
        if (e->status == EPIPE)
            return 1;
        *err = steal_pointer(&e);
        return -1;
    }
    return 0;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return false;
    return true;
}

/* Answer one complete line (its newline taken off). Returns send_line's value. */
static int answer(const mcp_server *s, int out_fd, const char *line, size_t n, bb_error **err)
{
    if (n > 0 && line[n - 1] == '\r')
        n--;
    if (blank(line, n))
        return 0;
    return send_line(out_fd, mcp_handle(s, line, n), err);
}

int mcp_serve(const mcp_server *s, int in_fd, int out_fd, bb_error **err)
{
    enum { CHUNK = 1 << 16 };
    _cleanup_free_ char *buf = xmalloc(MCP_MAX_LINE + CHUNK);
    size_t len = 0;        /* bytes of the current line kept in buf */
    bool skipping = false; /* inside a line that is too long: dropped until its newline */
    for (;;) {
        ssize_t r = read(in_fd, buf + len, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return bb_fail_errno(err, errno, "cannot read MCP input");
        if (r == 0) /* end of input: a last line without its newline still counts */
            return skipping || len == 0 ? 0 : answer(s, out_fd, buf, len, err) < 0 ? -1 : 0;
        size_t end = len + (size_t)r, start = 0;
        for (size_t i = len; i < end; i++) {
            if (buf[i] != '\n')
                continue;
            int sent = skipping ? 0 : answer(s, out_fd, buf + start, i - start, err);
            if (sent != 0)
                return sent < 0 ? -1 : 0;
            skipping = false;
            start = i + 1;
        }
        len = end - start;
        memmove(buf, buf + start, len);
        if (skipping) {
            len = 0;
        } else if (len > MCP_MAX_LINE) {
            int sent = send_line(out_fd,
                                 error_reply(NULL, MCP_PARSE_ERROR,
                                             "parse error: a message line is longer than %u MiB; "
                                             "it was skipped",
                                             MCP_MAX_LINE >> 20),
                                 err);
            if (sent != 0)
                return sent < 0 ? -1 : 0;
            skipping = true;
            len = 0;
        }
    }
}
