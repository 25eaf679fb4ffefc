/* The tools of `bluebox mcp` (mcp_tools.h). Each tool is one row of a table: its name, its
 * strict input schema (the one tools/list shows and the one arguments are checked against,
 * so the two cannot disagree) and a function that makes v1 API requests through the server's
 * in-process handler and words the answer for a model. */
#include "api/mcp_tools.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "api/b64.h"
#include "api/mcp_text.h"
#include "util/json.h"
#include "util/xalloc.h"

typedef json_t *(*tool_fn)(const mcp_server *s, json_t *args);

typedef struct {
    const char *name;
    const char *title;
    const char *description;
    const char *properties; /* JSON object members of the input schema's "properties" */
    const char *required;   /* JSON array members */
    const char *annotations;
    bool restore_only; /* offered only with --allow-restore */
    tool_fn call;
} mcp_tool;

/* ---------------------------------------------------------------- results */

static json_t *text_result(const char *text, bool is_error)
{
    return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError",
                     is_error);
}

static json_t *error_result(const char *text)
{
    return text_result(text, true);
}

/* ---------------------------------------------------------------- API requests */

/* "/v1/sandboxes/<name>/<rest>", the name percent-encoded: it is one path segment whatever
 * it holds, and the handler judges it (bad_name). */
static char *sandbox_path(const char *name, const char *rest)
{
    _cleanup_sb_ strbuf b = {0};
    sb_puts(&b, "/v1/sandboxes/");
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.')
            sb_putc(&b, (char)*p);
        else
            sb_printf(&b, "%%%02X", *p);
    }
    if (rest)
        sb_printf(&b, "/%s", rest);
    return sb_steal(&b);
}

/* Make one API request. Returns the reply's JSON on a 2xx answer; otherwise NULL with
 * *ret_result set to the tool's error result, worded from the API's {"error","code"}. */
static json_t *ask(const mcp_server *s, const char *method, const char *path, json_t *body,
                   json_t **ret_result)
{
    _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    mcp_api_reply reply = {0};
    _cleanup_error_ bb_error *err = NULL;
    if (s->api(s->api_ctx, method, path, text, text ? strlen(text) : 0, &reply, &err) < 0) {
        _cleanup_free_ char *m = xasprintf("bluebox could not answer: %s", bb_error_message(err));
        *ret_result = error_result(m);
        return NULL;
    }
    _cleanup_free_ char *raw = reply.body;
    _cleanup_json_ json_t *j = raw ? json_loadb(raw, reply.len, 0, NULL) : NULL;
    if (reply.status >= 200 && reply.status < 300 && j)
        return steal_pointer(&j);
    json_t *msg = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(j, "code"));
    _cleanup_sb_ strbuf m = {0};
    if (json_is_string(msg)) {
        /* it may quote the guest (a file that cannot be read): clipped like output */
        size_t rest = text_append_clipped(&m, json_string_value(msg), json_string_length(msg),
                                          MCP_OUTPUT_CLIP);
        if (rest)
            sb_printf(&m, " [... %zu more bytes not shown]", rest);
        sb_printf(&m, " (%s)", code ? code : "error");
    } else {
        sb_printf(&m, "bluebox answered %s %s with HTTP %d and no error message", method, path,
                  reply.status);
    }
    *ret_result = error_result(m.s);
    return NULL;
}

/* ---------------------------------------------------------------- argument access */

/* The bytes of a base64 string member of the API's answer (malloc'd), or NULL. */
static char *b64_member(json_t *r, const char *key, size_t *ret_len)
{
    json_t *v = json_object_get(r, key);
    unsigned char *bytes = NULL;
    if (!json_is_string(v) ||
        !b64_decode(json_string_value(v), json_string_length(v), &bytes, ret_len))
        return NULL;
    return (char *)bytes;
}

static const char *arg_str(json_t *args, const char *key)
{
    return json_string_value(json_object_get(args, key));
}

/* ---------------------------------------------------------------- the tools */

static json_t *tool_list_sandboxes(const mcp_server *s, json_t *args)
{
    json_t *result = NULL;
    _cleanup_json_ json_t *list = ask(s, "GET", "/v1/sandboxes", NULL, &result);
    if (!list)
        return result;
    _cleanup_free_ char *text = json_dumps(list, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (json_array_size(list) == 0) {
        _cleanup_free_ char *t = xasprintf(
            "%s\nThere are no sandboxes yet. They are made by the user with the bluebox CLI "
            "(bluebox new NAME, then bluebox build NAME); these tools cannot create them.",
            text);
        return text_result(t, false);
    }
    return text_result(text, false);
}

static json_t *tool_up(const mcp_server *s, json_t *args)
{
    const char *name = arg_str(args, "sandbox");
    _cleanup_free_ char *path = sandbox_path(name, "up");
    _cleanup_json_ json_t *body = json_object();
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    _cleanup_free_ char *t =
        json_is_true(json_object_get(r, "already"))
            ? xasprintf("%s was already up", name)
            : xasprintf("%s is up (ready in %lld ms); exec, write_file and read_file work in "
                        "it until down",
                        name, (long long)json_integer_value(json_object_get(r, "ready_ms")));
    return text_result(t, false);
}

static json_t *tool_down(const mcp_server *s, json_t *args)
{
    const char *name = arg_str(args, "sandbox");
    _cleanup_free_ char *path = sandbox_path(name, "down");
    _cleanup_json_ json_t *body = json_object();
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    _cleanup_free_ char *t = xasprintf("%s is down", name);
    return text_result(t, false);
}

/* One output section: "<label>:\n<text>\n", clipped, with what was left out said. */
static void output_section(strbuf *b, const char *label, json_t *r)
{
    sb_printf(b, "%s:\n", label);
    size_t len = 0;
    _cleanup_free_ char *bytes = b64_member(r, label, &len);
    if (!bytes) {
        sb_puts(b, "[not given]\n");
        return;
    }
    size_t before = b->len;
    size_t rest = text_append_clipped(b, bytes, len, MCP_OUTPUT_CLIP);
    if (b->len > before && b->s[b->len - 1] != '\n')
        sb_putc(b, '\n');
    if (rest)
        sb_printf(b, "[... %zu more bytes not shown]\n", rest);
}

/* The text of an exec/run result: "exit code X in Y ms[ (timed out)]" then the sections. */
static char *command_text(json_t *r)
{
    _cleanup_sb_ strbuf b = {0};
    sb_printf(&b, "exit code %lld in %lld ms%s\n",
              (long long)json_integer_value(json_object_get(r, "exit_code")),
              (long long)json_integer_value(json_object_get(r, "duration_ms")),
              json_is_true(json_object_get(r, "timed_out")) ? " (timed out)" : "");
    if (json_is_true(json_object_get(r, "truncated")))
        sb_puts(&b, "(the output went past bluebox's cap; the rest was dropped)\n");
    output_section(&b, "stdout", r);
    output_section(&b, "stderr", r);
    return sb_steal(&b);
}

static json_t *command(const mcp_server *s, json_t *args, const char *route)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), route);
    _cleanup_json_ json_t *body = json_pack("{s:O}", "command", json_object_get(args, "command"));
    json_t *stdin_text = json_object_get(args, "stdin");
    if (stdin_text) {
        _cleanup_free_ char *b64 =
            b64_encode(json_string_value(stdin_text), json_string_length(stdin_text), NULL);
        json_object_set_new(body, "stdin", json_string(b64));
    }
    json_t *timeout = json_object_get(args, "timeout_seconds");
    if (timeout)
        json_object_set(body, "timeout_seconds", timeout);
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    _cleanup_free_ char *t = command_text(r);
    /* A command that ran and failed is an answer, not a tool error. */
    return text_result(t, false);
}

static json_t *tool_exec(const mcp_server *s, json_t *args)
{
    return command(s, args, "exec");
}

static json_t *tool_run(const mcp_server *s, json_t *args)
{
    return command(s, args, "run");
}

static json_t *tool_write_file(const mcp_server *s, json_t *args)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), "files/write");
    json_t *content = json_object_get(args, "content");
    _cleanup_free_ char *b64 =
        b64_encode(json_string_value(content), json_string_length(content), NULL);
    _cleanup_json_ json_t *body =
        json_pack("{s:O,s:s}", "path", json_object_get(args, "path"), "content", b64);
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    _cleanup_free_ char *t =
        xasprintf("wrote %zu bytes to %s", json_string_length(content), arg_str(args, "path"));
    return text_result(t, false);
}

static json_t *tool_read_file(const mcp_server *s, json_t *args)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), "files/read");
    _cleanup_json_ json_t *body = json_pack("{s:O}", "path", json_object_get(args, "path"));
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    size_t len = 0;
    _cleanup_free_ char *bytes = b64_member(r, "content", &len);
    if (!bytes)
        return error_result("bluebox's answer held no readable content (internal)");
    _cleanup_sb_ strbuf b = {0};
    size_t rest = text_append_clipped(&b, bytes, len, MCP_FILE_CLIP);
    if (rest)
        sb_printf(&b, "\n[... %zu more bytes not shown]", rest);
    return text_result(b.s ? b.s : "", false);
}

static json_t *tool_snapshot(const mcp_server *s, json_t *args)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), "snapshots");
    _cleanup_json_ json_t *body = json_object();
    if (json_object_get(args, "name"))
        json_object_set(body, "name", json_object_get(args, "name"));
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    const char *snap = json_string_value(json_object_get(r, "snapshot"));
    _cleanup_free_ char *t =
        xasprintf("snapshot %s of %s's /data written", snap ? snap : "?", arg_str(args, "sandbox"));
    return text_result(t, false);
}

static json_t *tool_restore(const mcp_server *s, json_t *args)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), "restore");
    _cleanup_json_ json_t *body = json_pack("{s:O}", "snapshot", json_object_get(args, "snapshot"));
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    _cleanup_free_ char *t = xasprintf("%s's /data is now snapshot %s", arg_str(args, "sandbox"),
                                       arg_str(args, "snapshot"));
    return text_result(t, false);
}

static json_t *tool_fork(const mcp_server *s, json_t *args)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), "fork");
    _cleanup_json_ json_t *body = json_pack("{s:O}", "fork", json_object_get(args, "fork"));
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    _cleanup_free_ char *t =
        xasprintf("%s is now a fork of %s: its /data starts as %s's, and "
                  "diff, apply or discard take its changes",
                  arg_str(args, "fork"), arg_str(args, "sandbox"), arg_str(args, "sandbox"));
    return text_result(t, false);
}

/* diff, apply and discard: the fork's changes, one "A|M|D path" line each. */
static json_t *fork_changes(const mcp_server *s, json_t *args, const char *route, const char *done)
{
    _cleanup_free_ char *path = sandbox_path(arg_str(args, "sandbox"), route);
    _cleanup_json_ json_t *body = json_object();
    json_t *result = NULL;
    _cleanup_json_ json_t *r = ask(s, "POST", path, body, &result);
    if (!r)
        return result;
    json_t *changes = json_object_get(r, "changes");
    size_t n = json_array_size(changes);
    _cleanup_sb_ strbuf b = {0};
    const char *parent = json_string_value(json_object_get(r, "parent"));
    sb_printf(&b, "%s %zu change%s (parent: %s)", done, n, n == 1 ? "" : "s",
              parent ? parent : "?");
    size_t i;
    json_t *c;
    json_array_foreach(changes, i, c)
    {
        const char *kind = json_string_value(json_object_get(c, "change"));
        const char *p = json_string_value(json_object_get(c, "path"));
        sb_printf(&b, "\n%s %s", kind ? kind : "?", p ? p : "?");
    }
    return text_result(b.s ? b.s : "", false);
}

static json_t *tool_diff(const mcp_server *s, json_t *args)
{
    return fork_changes(s, args, "diff", "the fork has");
}

static json_t *tool_apply(const mcp_server *s, json_t *args)
{
    return fork_changes(s, args, "apply", "applied");
}

static json_t *tool_discard(const mcp_server *s, json_t *args)
{
    return fork_changes(s, args, "discard", "discarded");
}

/* ---------------------------------------------------------------- the table */

#define P_SANDBOX                                                                                  \
    "\"sandbox\":{\"type\":\"string\",\"minLength\":1,"                                            \
    "\"description\":\"The sandbox's name, as list_sandboxes shows it.\"}"
#define P_COMMAND                                                                                  \
    "\"command\":{\"type\":\"string\",\"minLength\":1,"                                            \
    "\"description\":\"A shell command line; it runs as sh -c COMMAND in /data.\"}"
#define P_TIMEOUT                                                                                  \
    "\"timeout_seconds\":{\"type\":\"number\",\"exclusiveMinimum\":0,"                             \
    "\"description\":\"Kill the command after this many seconds (exit code 124); the "             \
    "default is the sandbox's timeout_seconds.\"}"
#define P_PATH                                                                                     \
    "\"path\":{\"type\":\"string\",\"minLength\":1,"                                               \
    "\"description\":\"An absolute path inside the sandbox, such as /data/notes.txt.\"}"

static const mcp_tool tools[] = {
    {"list_sandboxes", "List sandboxes",
     "List the sandboxes the user has made, with whether each is up (a long-lived VM that exec, "
     "write_file and read_file work in), its network and its backend. Returns JSON.",
     "", "", "{\"readOnlyHint\":true,\"openWorldHint\":false}", false, tool_list_sandboxes},
    {"up", "Boot a sandbox",
     "Boot a long-lived VM for the sandbox, so exec, write_file and read_file can work in it; "
     "files, processes and /tmp carry over between calls until down. Already up is not an "
     "error.",
     P_SANDBOX, "\"sandbox\"", "{\"idempotentHint\":true,\"openWorldHint\":false}", false, tool_up},
    {"down", "Stop a sandbox",
     "Stop the sandbox's long-lived VM. Files outside /data are lost; /data stays. Not being up "
     "is not an error.",
     P_SANDBOX, "\"sandbox\"",
     "{\"destructiveHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}", false,
     tool_down},
    {"exec", "Run a command in an up sandbox",
     "Run a shell command in the sandbox's up VM (see up) and return its exit code, how long it "
     "took, and its stdout and stderr (each clipped at 64 KiB). A non-zero exit code is a normal "
     "result.",
     P_SANDBOX "," P_COMMAND ","
               "\"stdin\":{\"type\":\"string\",\"description\":\"Text given to the command "
               "on its standard input.\"}," P_TIMEOUT,
     "\"sandbox\",\"command\"", "{\"openWorldHint\":false}", false, tool_exec},
    {"run", "Run a command in a fresh VM",
     "Run a shell command in a fresh VM of the sandbox (one its warm pool booted ahead, when "
     "it has one) that is thrown away afterwards (only /data keeps what it writes), and return its "
     "exit code, duration, stdout and stderr (each "
     "clipped at 64 KiB). The sandbox need not be up.",
     P_SANDBOX "," P_COMMAND "," P_TIMEOUT, "\"sandbox\",\"command\"", "{\"openWorldHint\":false}",
     false, tool_run},
    {"write_file", "Write a file in an up sandbox",
     "Write text to a file inside the sandbox's up VM, replacing what is there (mode 0644). The "
     "write happens in the guest, never on the host.",
     P_SANDBOX "," P_PATH ","
               "\"content\":{\"type\":\"string\",\"description\":\"The file's new content.\"}",
     "\"sandbox\",\"path\",\"content\"",
     "{\"destructiveHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}", false,
     tool_write_file},
    {"read_file", "Read a file in an up sandbox",
     "Read a file inside the sandbox's up VM and return it as text (bytes that are not UTF-8 "
     "show as U+FFFD; at most 1 MiB is shown).",
     P_SANDBOX "," P_PATH, "\"sandbox\",\"path\"",
     "{\"readOnlyHint\":true,\"openWorldHint\":false}", false, tool_read_file},
    {"snapshot", "Snapshot /data",
     "Archive the sandbox's /data as a snapshot that restore can bring back. The name defaults "
     "to the UTC time (YYYYMMDDTHHMMSSZ).",
     P_SANDBOX ",\"name\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The "
               "snapshot's name (letters, digits, '.', '_', '-').\"}",
     "\"sandbox\"", "{\"openWorldHint\":false}", false, tool_snapshot},
    {"fork", "Fork a sandbox",
     "Make a new sandbox whose /data is a copy-on-write layer over this one's: work in the fork "
     "(run, up and exec on it), then diff, apply or discard its changes. Refused for a fork.",
     P_SANDBOX ",\"fork\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The "
               "new fork's name (letters, digits, '.', '_', '-').\"}",
     "\"sandbox\",\"fork\"", "{\"openWorldHint\":false}", false, tool_fork},
    {"diff", "List a fork's changes",
     "List what the fork changed in /data over its parent's: one line per path, A (added), M "
     "(modified) or D (deleted).",
     P_SANDBOX, "\"sandbox\"", "{\"readOnlyHint\":true,\"openWorldHint\":false}", false, tool_diff},
    {"apply", "Apply a fork's changes",
     "Merge the fork's changes into its parent's /data, all or nothing, and empty the fork. "
     "Refused while the fork or its parent is up or in use. Call diff first to see them.",
     P_SANDBOX, "\"sandbox\"", "{\"destructiveHint\":true,\"openWorldHint\":false}", false,
     tool_apply},
    {"discard", "Discard a fork's changes",
     "Drop the fork's changes: its /data is its parent's again. Refused while the fork is in use.",
     P_SANDBOX, "\"sandbox\"",
     "{\"destructiveHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}", false,
     tool_discard},
    {"restore", "Restore /data from a snapshot",
     "Replace the sandbox's /data with a snapshot's content. Refused while the sandbox is up "
     "(bring it down first). What /data held before is lost unless it was snapshotted.",
     P_SANDBOX ",\"snapshot\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The "
               "snapshot's name, as snapshot returned it.\"}",
     "\"sandbox\",\"snapshot\"", "{\"destructiveHint\":true,\"openWorldHint\":false}", true,
     tool_restore},
};

static bool offered(const mcp_server *s, const mcp_tool *t)
{
    return !t->restore_only || s->allow_restore;
}

static const mcp_tool *tool_named(const mcp_server *s, const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(tools); i++)
        if (streq(tools[i].name, name) && offered(s, &tools[i]))
            return &tools[i];
    return NULL;
}

/* The tool's input schema, built from its table row. The table is ours: a mistake in it is a
 * bug that the tests catch, so a failure to parse aborts. */
static json_t *input_schema(const mcp_tool *t)
{
    _cleanup_free_ char *text = xasprintf("{\"type\":\"object\",\"properties\":{%s},"
                                          "\"required\":[%s],\"additionalProperties\":false}",
                                          t->properties, t->required);
    json_error_t e;
    json_t *schema = json_loads(text, JSON_REJECT_DUPLICATES, &e);
    if (!schema) {
        fprintf(stderr, "bluebox: mcp: the schema of tool %s does not parse: %s\n", t->name,
                e.text);
        abort();
    }
    return schema;
}

json_t *mcp_tools_list(const mcp_server *s)
{
    json_t *list = json_array();
    for (size_t i = 0; i < ELEMENTSOF(tools); i++) {
        const mcp_tool *t = &tools[i];
        if (!offered(s, t))
            continue;
        json_t *annotations = json_loads(t->annotations, 0, NULL);
        json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:o,s:o}", "name", t->name, "title",
                                              t->title, "description", t->description,
                                              "inputSchema", input_schema(t), "annotations",
                                              annotations ? annotations : json_object()));
    }
    return list;
}

/* ---------------------------------------------------------------- argument checks */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

/* Check one argument against its property schema; NULL when it matches, else why not. */
static char *check_value(const char *tool, const char *key, json_t *prop, json_t *v)
{
    const char *type = json_string_value(json_object_get(prop, "type"));
    if (streq(type, "string")) {
        if (!json_is_string(v))
            return xasprintf("%s: %s must be a string, not %s", tool, key, json_type_name(v));
        json_t *min = json_object_get(prop, "minLength");
        if (min && json_string_length(v) < (size_t)json_integer_value(min))
            return xasprintf("%s: %s must not be empty", tool, key);
        /* Names, paths and command lines end at a NUL on their way to the guest: refuse one
         * rather than act on a shorter string than the caller sent. Content and stdin are
         * bytes and keep theirs. */
        if (!streq(key, "content") && !streq(key, "stdin") &&
            strlen(json_string_value(v)) != json_string_length(v))
            return xasprintf("%s: %s must not contain a NUL character", tool, key);
        return NULL;
    }
    if (streq(type, "number")) {
        if (!json_is_number(v))
            return xasprintf("%s: %s must be a number, not %s", tool, key, json_type_name(v));
        json_t *min = json_object_get(prop, "exclusiveMinimum");
        if (min && !(json_number_value(v) > json_number_value(min)))
            return xasprintf("%s: %s must be more than %g", tool, key, json_number_value(min));
        if (!isfinite(json_number_value(v)))
            return xasprintf("%s: %s must be a finite number", tool, key);
        return NULL;
    }
    return xasprintf("%s: %s has a type this server cannot check", tool, key);
}

/* Check a call's arguments against the tool's schema: every key a known property of the
 * right type, every required one there. NULL when they match, else the reason. */
static char *check_args(const mcp_tool *t, json_t *schema, json_t *args)
{
    json_t *props = json_object_get(schema, "properties");
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v)
    {
        json_t *prop = json_object_get(props, key);
        if (!prop) {
            _cleanup_sb_ strbuf known = {0};
            const char *k;
            json_t *p;
            json_object_foreach(props, k, p)
            {
                sb_printf(&known, "%s%s", known.len ? ", " : "", k);
            }
            return known.len
                       ? xasprintf("%s: unknown argument \"%s\" (it takes %s)", t->name, key,
                                   known.s)
                       : xasprintf("%s: unknown argument \"%s\" (it takes none)", t->name, key);
        }
        char *why = check_value(t->name, key, prop, v);
        if (why)
            return why;
    }
    size_t i;
    json_array_foreach(json_object_get(schema, "required"), i, v)
    {
        if (!json_object_get(args, json_string_value(v)))
            return xasprintf("%s: missing required argument \"%s\"", t->name, json_string_value(v));
    }
    return NULL;
}

json_t *mcp_tools_call(const mcp_server *s, const char *name, json_t *args, char **ret_error)
{
    const mcp_tool *t = tool_named(s, name);
    if (!t) {
        *ret_error =
            streq(name, "restore")
                ? xstrdup("unknown tool: restore (bluebox mcp offers it only with --allow-restore)")
                : xasprintf("unknown tool: %s", name);
        return NULL;
    }
    _cleanup_json_ json_t *owned = args ? json_incref(args) : json_object();
    args = owned;
    if (!json_is_object(args)) {
        *ret_error = xasprintf("invalid params: %s's arguments must be an object", name);
        return NULL;
    }
    _cleanup_json_ json_t *schema = input_schema(t);
    char *why = check_args(t, schema, args);
    if (why) {
        *ret_error = xasprintf("invalid params: %s", why);
        free(why);
        return NULL;
    }
    return t->call(s, args);
}
