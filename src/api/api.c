/* The v1 API's routes (api.h, docs/API.md): parse and check the request, do the work in a
 * child process (job.h) through the operations the CLI calls too (ops/ops.h), answer JSON. */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "b64.h"
#include "core/home.h"
#include "core/sandbox.h"
#include "data/snapshots.h"
#include "job.h"
#include "ops/ops.h"
#include "backends/backend.h"
#include "runtime/pool.h"
#include "runtime/up.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/time.h"

#define MAX_TIMEOUT (7 * 24 * 3600)

void api_reply_clear(api_reply *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

/* ---- replies ----------------------------------------------------------------------------- */

static const struct {
    const char *code;
    int status;
} CODES[] = {
    {"no_sandbox", 404}, {"not_up", 409},      {"is_up", 409},     {"not_built", 409},
    {"bad_name", 400},   {"bad_request", 400}, {"too_large", 413}, {"not_found", 404},
    {"method", 405},     {"internal", 500},    {"refused", 409},
};

/* The error code of an operation's failure (ops.h). */
static const char *ops_why_code(ops_why why)
{
    static const char *const codes[] = {
        [OPS_FAILED] = "internal", [OPS_NOT_UP] = "not_up",   [OPS_NOT_BUILT] = "not_built",
        [OPS_IS_UP] = "is_up",     [OPS_REFUSED] = "refused", [OPS_NOT_FOUND] = "not_found",
        [OPS_BAD] = "bad_request", [OPS_LOST] = "internal",
    };
    return (size_t)why < ELEMENTSOF(codes) && codes[why] ? codes[why] : "internal";
}

static int code_status(const char *code)
{
    for (size_t i = 0; i < ELEMENTSOF(CODES); i++)
        if (streq(CODES[i].code, code))
            return CODES[i].status;
    return 500;
}

static int reply_json(api_reply *out, int status, json_t *j)
{
    out->status = status;
    out->body = json_dumps(j, JSON_COMPACT);
    if (!out->body)
        out->body = xstrdup("{\"error\":\"cannot encode the reply\",\"code\":\"internal\"}");
    out->len = strlen(out->body);
    json_decref(j);
    return status;
}

static json_t *error_obj(const char *code, const char *msg)
{
    return json_pack("{s:s, s:s}", "error", msg, "code", code);
}

_printf_(3, 4) static int fail(api_reply *out, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    return reply_json(out, code_status(code), error_obj(code, msg));
}

/* A job's result that is {"error","code"}: answered as that error. */
static int fail_result(api_reply *out, json_t *res)
{
    const char *code = json_string_value(json_object_get(res, "code"));
    const char *msg = json_string_value(json_object_get(res, "error"));
    return fail(out, code ? code : "internal", "%s", msg ? msg : "failed");
}

static bool is_error(json_t *res)
{
    return json_is_object(res) && json_object_get(res, "error");
}

/* In a child: a bb_error as {"error","code"}. */
static json_t *child_error(bb_error *e, const char *code)
{
    json_t *j = error_obj(code, bb_error_message(e));
    bb_error_free(e);
    return j;
}

/* ---- requests ---------------------------------------------------------------------------- */

typedef struct req {
    api_ctx *c;
    const char *name; /* valid, existing */
    json_t *body;     /* an object */
} req;

/* Every key of o is one of `allowed` (NULL-terminated). */
static int only_keys(json_t *o, const char *const *allowed, api_reply *out)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = streq(allowed[i], k);
        if (!ok)
            return fail(out, "bad_request", "unknown field \"%s\"", k), -1;
    }
    return 0;
}

static int want_string(json_t *o, const char *key, bool required, const char **ret, api_reply *out)
{
    json_t *v = json_object_get(o, key);
    *ret = NULL;
    if (!v)
        return required ? (fail(out, "bad_request", "\"%s\" is required", key), -1) : 0;
    if (!json_is_string(v))
        return fail(out, "bad_request", "\"%s\" must be a string", key), -1;
    *ret = json_string_value(v);
    return 0;
}

static int want_b64(json_t *o, const char *key, unsigned char **ret, size_t *ret_len,
                    api_reply *out)
{
    const char *s;
    *ret = NULL;
    *ret_len = 0;
    if (want_string(o, key, false, &s, out) < 0)
        return -1;
    if (s && !b64_decode(s, strlen(s), ret, ret_len))
        return fail(out, "bad_request", "\"%s\" must be base64", key), -1;
    return 0;
}

/* A guest path: absolute, no NUL (jansson refuses NUL in strings already). */
static int want_path(json_t *o, const char *key, bool required, const char **ret, api_reply *out)
{
    if (want_string(o, key, required, ret, out) < 0)
        return -1;
    if (*ret && (*ret)[0] != '/')
        return fail(out, "bad_request", "\"%s\" must be an absolute path", key), -1;
    return 0;
}

/* ---- commands (exec, run, files) ----------------------------------------------------------- */

typedef struct command {
    api_ctx *c;
    const char *name;
    bool run;
    strv argv;
    strv env; /* K=V */
    const char *cwd;
    int timeout; /* 0: the Bluefile's */
    unsigned char *in;
    size_t in_len;
    bool has_in;
} command;

static void command_clear(command *k)
{
    strv_clear(&k->argv);
    strv_clear(&k->env);
    free(k->in);
}

static bool env_key_ok(const char *k)
{
    if (!*k || (*k >= '0' && *k <= '9'))
        return false;
    for (; *k; k++)
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') ||
              *k == '_'))
            return false;
    return true;
}

static int parse_argv(json_t *o, command *k, api_reply *out)
{
    json_t *argv = json_object_get(o, "argv");
    const char *cmd;
    if (want_string(o, "command", false, &cmd, out) < 0)
        return -1;
    if (!argv == !cmd)
        return fail(out, "bad_request", "give exactly one of \"argv\" and \"command\""), -1;
    if (cmd) {
        if (!*cmd)
            return fail(out, "bad_request", "\"command\" is empty"), -1;
        strv_add(&k->argv, "sh");
        strv_add(&k->argv, "-c");
        strv_add(&k->argv, cmd);
        return 0;
    }
    if (!json_is_array(argv) || json_array_size(argv) == 0)
        return fail(out, "bad_request", "\"argv\" must be a non-empty array of strings"), -1;
    size_t i;
    json_t *v;
    json_array_foreach(argv, i, v)
    {
        if (!json_is_string(v))
            return fail(out, "bad_request", "\"argv\" must be a non-empty array of strings"), -1;
        strv_add(&k->argv, json_string_value(v));
    }
    if (!k->argv.n || !*k->argv.v[0])
        return fail(out, "bad_request", "\"argv\"[0] is empty"), -1;
    return 0;
}

static int parse_command(json_t *o, command *k, api_reply *out)
{
    static const char *const keys[] = {"argv", "command",         "stdin", "env",
                                       "cwd",  "timeout_seconds", NULL};
    if (only_keys(o, keys, out) < 0 || parse_argv(o, k, out) < 0)
        return -1;
    if (want_b64(o, "stdin", &k->in, &k->in_len, out) < 0)
        return -1;
    k->has_in = json_object_get(o, "stdin") != NULL;
    json_t *env = json_object_get(o, "env");
    if (env && !json_is_object(env))
        return fail(out, "bad_request", "\"env\" must be an object of strings"), -1;
    const char *key;
    json_t *v;
    json_object_foreach(env, key, v)
    {
        if (!env_key_ok(key))
            return fail(out, "bad_request", "env name \"%s\" is not [A-Za-z_][A-Za-z0-9_]*", key),
                   -1;
        if (!json_is_string(v))
            return fail(out, "bad_request", "env \"%s\" must be a string", key), -1;
        strv_push(&k->env, xasprintf("%s=%s", key, json_string_value(v)));
    }
    if (want_path(o, "cwd", false, &k->cwd, out) < 0)
        return -1;
    json_t *t = json_object_get(o, "timeout_seconds");
    if (t) {
        if (!json_is_number(t) || !(json_number_value(t) > 0) || json_number_value(t) > MAX_TIMEOUT)
            return fail(out, "bad_request", "\"timeout_seconds\" must be a number in (0, %d]",
                        MAX_TIMEOUT),
                   -1;
        k->timeout = (int)ceil(json_number_value(t));
    }
    return 0;
}

static const char *runlog_what(const command *k)
{
    bool mcp = k->c->via && streq(k->c->via, "mcp");
    return k->run ? (mcp ? "run (mcp)" : "run (api)") : (mcp ? "exec (mcp)" : "exec (api)");
}

/* In the child: what a boot says (podman, a build's notes) goes nowhere until the command
 * starts; only the command's own output reaches the pipes. */
typedef struct muted {
    int out, err; /* the pipes, while 1 and 2 are /dev/null; -1 when not muted */
} muted;

static void mute(muted *m)
{
    m->out = dup(1);
    m->err = dup(2);
    _cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (m->out < 0 || m->err < 0 || null < 0)
        return;
    dup2(null, 1);
    dup2(null, 2);
}

static void unmute(muted *m)
{
    if (m->out >= 0 && m->err >= 0) {
        dup2(m->out, 1);
        dup2(m->err, 2);
    }
    if (m->out >= 0)
        close(m->out);
    if (m->err >= 0)
        close(m->err);
    m->out = m->err = -1;
}

static void on_starting(void *opaque, const struct boot *b)
{
    (void)b;
    unmute(opaque);
}

/* In the child: run or exec through ops/, as the CLI's commands do (run: the warm pool
 * first). */
static json_t *command_child(void *arg)
{
    command *k = arg;
    bb_error *e = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(k->c->root, k->name, &sb, &e) < 0)
        return child_error(e, "no_sandbox");
    muted m = {-1, -1};
    mute(&m);
    ops_command c = {.argv = k->argv.v,
                     .env = k->env.n ? k->env.v : NULL,
                     .cwd = k->cwd,
                     .timeout_seconds = k->timeout,
                     .forward_stdin = k->has_in,
                     .log_as = runlog_what(k),
                     .ev = {.starting = on_starting, .opaque = &m}};
    ops_run_result r;
    int rc = k->run ? ops_run(sb, &c, &r, &e) : ops_exec(sb, &c, &r, &e);
    unmute(&m);
    if (rc < 0) {
        ops_run_result_clear(&r);
        return child_error(e, ops_why_code(r.why));
    }
    if (r.agent_err) {
        _cleanup_free_ char *line = xasprintf("bluebox: %s\n", r.agent_err);
        (void)!write(2, line, strlen(line));
    }
    ops_run_result_clear(&r);
    return json_pack("{s:i, s:b}", "exit_code", r.code, "timed_out", r.timed_out);
}

static int need_up(req *r, api_reply *out)
{
    _cleanup_upstate_ up_state s = {0};
    _cleanup_error_ bb_error *e = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(r->c->root, r->name, &sb, &e) < 0)
        return fail(out, "no_sandbox", "%s", bb_error_message(e)), -1;
    int up = upstate_load(sb, &s, &e);
    if (up < 0)
        return fail(out, "internal", "%s", bb_error_message(e)), -1;
    if (up == 0)
        return fail(out, "not_up", "%s is not up; start it: POST /v1/sandboxes/%s/up", r->name,
                    r->name),
               -1;
    return 0;
}

/* Run the command and collect it: a Result. */
static int command_result(command *k, api_reply *out, api_job_out *jo)
{
    double start = now_mono_s();
    api_job_io io = {.stdin_data = k->has_in ? (k->in ? k->in : (unsigned char *)"") : NULL,
                     .stdin_len = k->in_len};
    if (api_job_run(command_child, k, &io, jo) < 0)
        return fail(out, "internal", "cannot start the command: %s", strerror(errno));
    if (!jo->result)
        return fail(out, "internal", "the command's worker died");
    if (is_error(jo->result))
        return fail_result(out, jo->result);
    (void)start;
    return 200;
}

static json_t *result_json(const api_job_out *jo, int64_t ms)
{
    size_t n;
    json_t *j = json_object();
    json_object_set(j, "exit_code", json_object_get(jo->result, "exit_code"));
    char *o = b64_encode(jo->out.s ? jo->out.s : "", jo->out.len, &n);
    json_object_set_new(j, "stdout", json_stringn(o, n));
    free(o);
    o = b64_encode(jo->err.s ? jo->err.s : "", jo->err.len, &n);
    json_object_set_new(j, "stderr", json_stringn(o, n));
    free(o);
    json_object_set_new(j, "duration_ms", json_integer(ms));
    json_object_set(j, "timed_out", json_object_get(jo->result, "timed_out"));
    json_object_set_new(j, "truncated", json_boolean(jo->truncated));
    return j;
}

static int do_command(req *r, bool run, api_chunk_fn on_line, void *opaque, api_reply *out)
{
    command k = {.c = r->c, .name = r->name, .run = run};
    int st = parse_command(r->body, &k, out);
    if (st == 0 && !run)
        st = need_up(r, out);
    if (st < 0) {
        command_clear(&k);
        return out->status;
    }
    int64_t start = now_mono_ms();
    api_job_out jo = {0};
    api_job_io io = {.stdin_data = k.has_in ? (k.in ? k.in : (unsigned char *)"") : NULL,
                     .stdin_len = k.in_len,
                     .on_line = on_line,
                     .opaque = opaque};
    if (!on_line) {
        int s = command_result(&k, out, &jo);
        if (s == 200)
            reply_json(out, 200, result_json(&jo, mono_ms_since(start)));
        api_job_out_clear(&jo);
        command_clear(&k);
        return out->status;
    }
    int jr = api_job_run(command_child, &k, &io, &jo);
    json_t *last;
    if (jr < 0 || !jo.result)
        last = error_obj("internal", jr < 0 ? "cannot start the command" : "the worker died");
    else if (is_error(jo.result))
        last = json_incref(jo.result);
    else
        last = json_pack("{s:O, s:I, s:O}", "exit_code", json_object_get(jo.result, "exit_code"),
                         "duration_ms", (json_int_t)mono_ms_since(start), "timed_out",
                         json_object_get(jo.result, "timed_out"));
    if (!jo.cancelled) {
        _cleanup_free_ char *s = json_dumps(last, JSON_COMPACT);
        if (s)
            on_line(opaque, s, strlen(s));
    }
    json_decref(last);
    api_job_out_clear(&jo);
    command_clear(&k);
    out->status = 200;
    return 200;
}

/* ---- files: a fixed sh script run in the guest, the path its argument -------------------- */

static const char WRITE_SH[] =
    "d=$(dirname -- \"$1\"); [ -d \"$d\" ] || { echo \"no such directory: $d\" >&2; exit 2; }; "
    "cat > \"$1\" || exit 3; chmod \"$2\" \"$1\" || exit 3";
static const char READ_SH[] =
    "[ -d \"$1\" ] && { echo \"$1 is a directory\" >&2; exit 3; }; "
    "[ -e \"$1\" ] || { echo \"no such file: $1\" >&2; exit 2; }; exec cat -- \"$1\"";
static const char LIST_SH[] =
    "[ -d \"$1\" ] || { [ -e \"$1\" ] && { echo \"$1 is not a directory\" >&2; exit 3; }; "
    "echo \"no such directory: $1\" >&2; exit 2; }; cd -- \"$1\" || exit 3; "
    "for f in .* *; do case $f in .|..) continue;; esac; "
    "[ -e \"$f\" ] || [ -L \"$f\" ] || continue; "
    "stat -c '%f %s' -- \"$f\" || exit 3; printf '%s\\0' \"$f\"; done";

/* Run a script in the guest; 200 with the output in *jo, or an error reply. */
static int guest_script(req *r, const char *script, const char *path, const char *arg2,
                        const unsigned char *in, size_t in_len, api_reply *out, api_job_out *jo)
{
    if (need_up(r, out) < 0)
        return out->status;
    command k = {.c = r->c, .name = r->name, .has_in = in != NULL, .in_len = in_len};
    strv_add(&k.argv, "sh");
    strv_add(&k.argv, "-c");
    strv_add(&k.argv, script);
    strv_add(&k.argv, "sh");
    strv_add(&k.argv, path);
    if (arg2)
        strv_add(&k.argv, arg2);
    k.in = in ? xmalloc(in_len + 1) : NULL;
    if (in)
        memcpy(k.in, in, in_len);
    int st = command_result(&k, out, jo);
    command_clear(&k);
    if (st != 200)
        return st;
    json_int_t code = json_integer_value(json_object_get(jo->result, "exit_code"));
    if (code == 0)
        return 200;
    _cleanup_free_ char *msg = xstrndup(jo->err.s ? jo->err.s : "", jo->err.len);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = 0;
    return fail(out, code == 2 ? "not_found" : "bad_request", "%s",
                *msg ? msg : "the guest command failed");
}

static bool mode_ok(const char *m)
{
    size_t n = strlen(m);
    if (n < 3 || n > 4)
        return false;
    for (const char *p = m; *p; p++)
        if (*p < '0' || *p > '7')
            return false;
    return true;
}

static int do_write(req *r, api_reply *out)
{
    static const char *const keys[] = {"path", "content", "mode", NULL};
    const char *path, *mode;
    _cleanup_free_ unsigned char *data = NULL;
    size_t len;
    if (only_keys(r->body, keys, out) < 0 || want_path(r->body, "path", true, &path, out) < 0 ||
        want_string(r->body, "mode", false, &mode, out) < 0)
        return out->status;
    if (!json_object_get(r->body, "content"))
        return fail(out, "bad_request", "\"content\" is required");
    if (want_b64(r->body, "content", &data, &len, out) < 0)
        return out->status;
    if (mode && !mode_ok(mode))
        return fail(out, "bad_request", "\"mode\" must be octal, like \"0644\"");
    api_job_out jo = {0};
    int st = guest_script(r, WRITE_SH, path, mode ? mode : "0644",
                          data ? data : (const unsigned char *)"", len, out, &jo);
    api_job_out_clear(&jo);
    if (st != 200)
        return st;
    return reply_json(out, 200, json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)len));
}

static int do_read(req *r, api_reply *out)
{
    static const char *const keys[] = {"path", NULL};
    const char *path;
    if (only_keys(r->body, keys, out) < 0 || want_path(r->body, "path", true, &path, out) < 0)
        return out->status;
    api_job_out jo = {0};
    int st = guest_script(r, READ_SH, path, NULL, NULL, 0, out, &jo);
    if (st == 200 && jo.truncated)
        st = fail(out, "too_large", "%s is larger than %u bytes", path, API_OUTPUT_CAP);
    if (st == 200) {
        size_t n;
        _cleanup_free_ char *b = b64_encode(jo.out.s ? jo.out.s : "", jo.out.len, &n);
        reply_json(out, 200, json_pack("{s:s, s:s%}", "path", path, "content", b, n));
    }
    api_job_out_clear(&jo);
    return out->status;
}

static const char *type_of(unsigned long mode)
{
    switch (mode & 0170000) {
    case 0100000:
        return "file";
    case 0040000:
        return "dir";
    case 0120000:
        return "link";
    default:
        return "other";
    }
}

static json_t *parse_listing(const char *s, size_t len)
{
    json_t *a = json_array();
    for (size_t off = 0; off < len;) {
        const char *rec = s + off, *end = memchr(rec, 0, len - off);
        if (!end)
            break;
        off = (size_t)(end - s) + 1;
        const char *nl = memchr(rec, '\n', (size_t)(end - rec));
        if (!nl)
            continue;
        unsigned long mode = strtoul(rec, NULL, 16);
        const char *sp = memchr(rec, ' ', (size_t)(nl - rec));
        long long size = sp ? strtoll(sp + 1, NULL, 10) : 0;
        char m[8];
        snprintf(m, sizeof m, "%04lo", mode & 07777);
        json_array_append_new(a, json_pack("{s:s%, s:s, s:I, s:s}", "name", nl + 1,
                                           (size_t)(end - nl - 1), "type", type_of(mode), "size",
                                           (json_int_t)size, "mode", m));
    }
    return a;
}

static int do_list(req *r, api_reply *out)
{
    static const char *const keys[] = {"path", NULL};
    const char *path;
    if (only_keys(r->body, keys, out) < 0 || want_path(r->body, "path", true, &path, out) < 0)
        return out->status;
    api_job_out jo = {0};
    int st = guest_script(r, LIST_SH, path, NULL, NULL, 0, out, &jo);
    if (st == 200)
        reply_json(out, 200,
                   json_pack("{s:s, s:o}", "path", path, "entries",
                             parse_listing(jo.out.s ? jo.out.s : "", jo.out.len)));
    api_job_out_clear(&jo);
    return out->status;
}

/* ---- up, down, list -------------------------------------------------------------------- */

static json_t *up_child(void *arg)
{
    req *r = arg;
    bb_error *e = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(r->c->root, r->name, &sb, &e) < 0)
        return child_error(e, "no_sandbox");
    _cleanup_(ops_up_result_clear) ops_up_result u = {0};
    if (ops_up(sb, NULL, &u, &e) < 0)
        return child_error(e, ops_why_code(u.why));
    if (u.already)
        return json_pack("{s:b, s:b}", "up", 1, "already", 1);
    return json_pack("{s:b, s:I}", "up", 1, "ready_ms", (json_int_t)(u.seconds * 1000));
}

static json_t *down_child(void *arg)
{
    req *r = arg;
    bb_error *e = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(r->c->root, r->name, &sb, &e) < 0)
        return child_error(e, "no_sandbox");
    if (ops_down(sb, NULL, &e) < 0)
        return child_error(e, "internal");
    return json_pack("{s:b}", "up", 0);
}

static json_t *list_child(void *arg)
{
    api_ctx *c = arg;
    bb_error *e = NULL;
    _cleanup_strv_ strv names = {0};
    if (home_list(c->root, &names, &e) < 0)
        return child_error(e, "internal");
    json_t *a = json_array();
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_sandbox_ sandbox *sb = NULL;
        if (sandbox_open(c->root, names.v[i], &sb, &e) < 0) {
            bb_error_clear(&e);
            continue;
        }
        _cleanup_upstate_ up_state s = {0};
        bool up = upstate_load(sb, &s, NULL) > 0 && up_alive(sb, &s);
        int waiting, total;
        pool_count(sb, &waiting, &total); /* warm: pool VMs waiting now */
        json_t *o = json_pack("{s:s, s:b, s:i}", "name", sb->name, "up", up, "warm", waiting);
        if (sandbox_bluefile(sb, &e) < 0) {
            json_object_set_new(o, "error", json_string(bb_error_message(e)));
            bb_error_clear(&e);
        } else {
            const char *be = backend_env();
            json_object_set_new(o, "warm_target", json_integer(sb->bf->warm));
            json_object_set_new(o, "network", json_string(bf_network_name(sb->bf->network)));
            json_object_set_new(o, "backend",
                                json_string(be ? be : bf_backend_name(sb->bf->backend)));
            json_object_set_new(o, "base", json_string(sb->bf->base ? sb->bf->base : ""));
        }
        json_array_append_new(a, o);
    }
    return a;
}

/* A job whose output does not matter: its result is the reply. */
static int quiet_job(api_job_fn fn, void *arg, api_reply *out)
{
    api_job_io io = {0};
    api_job_out jo = {0};
    if (api_job_run(fn, arg, &io, &jo) < 0)
        return fail(out, "internal", "cannot start a worker: %s", strerror(errno));
    int st;
    if (!jo.result)
        st = fail(out, "internal", "the worker died");
    else if (is_error(jo.result))
        st = fail_result(out, jo.result);
    else
        st = reply_json(out, 200, json_incref(jo.result));
    api_job_out_clear(&jo);
    return st;
}

static int empty_body(req *r, api_reply *out)
{
    static const char *const none[] = {NULL};
    return only_keys(r->body, none, out);
}

static int do_up(req *r, api_reply *out)
{
    return empty_body(r, out) < 0 ? out->status : quiet_job(up_child, r, out);
}

static int do_down(req *r, api_reply *out)
{
    return empty_body(r, out) < 0 ? out->status : quiet_job(down_child, r, out);
}

/* ---- snapshots ------------------------------------------------------------------------- */

static int do_snapshots(req *r, api_reply *out)
{
    _cleanup_sandbox_ sandbox *sb = NULL;
    _cleanup_error_ bb_error *e = NULL;
    if (sandbox_open(r->c->root, r->name, &sb, &e) < 0)
        return fail(out, "no_sandbox", "%s", bb_error_message(e));
    _cleanup_snapshots_ snapshot_list l = {0};
    if (snapshots_list(sb, &l, &e) < 0)
        return fail(out, "internal", "%s", bb_error_message(e));
    json_t *a = json_array();
    for (size_t i = 0; i < l.n; i++) {
        char when[32];
        struct tm tm;
        gmtime_r(&l.v[i].mtime.tv_sec, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "name", l.v[i].label, "created", when,
                                           "bytes", (json_int_t)l.v[i].size));
    }
    return reply_json(out, 200, a);
}

typedef struct data_req {
    req *r;
    const char *label; /* snapshot: the label to write; restore: the one to read */
    bool restore;
} data_req;

/* In the child: snapshot or restore through ops/, with the CLI's guards and locks. */
static json_t *data_child(void *arg)
{
    data_req *d = arg;
    bb_error *e = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(d->r->c->root, d->r->name, &sb, &e) < 0)
        return child_error(e, "no_sandbox");
    _cleanup_(ops_data_result_clear) ops_data_result res = {0};
    if (!d->restore) {
        ops_snapshot_opts o = {.label = d->label, .compress = COMPRESS_GZIP};
        if (ops_snapshot(sb, &o, &res, &e) < 0)
            return child_error(e, ops_why_code(res.why));
        return json_pack("{s:s}", "snapshot", d->label);
    }
    /* as the CLI: an up or busy sandbox is refused before its snapshot is looked up */
    if (ops_data_precheck(sb, "restore", &res.why, &e) < 0)
        return child_error(e, ops_why_code(res.why));
    _cleanup_free_ char *archive = NULL;
    if (snapshot_resolve(sb, d->label, &archive, &e) < 0)
        return child_error(e, "not_found");
    ops_restore_opts o = {.archive = archive};
    if (ops_restore(sb, &o, &res, &e) < 0)
        return child_error(e, ops_why_code(res.why));
    return json_pack("{s:s}", "restored", d->label);
}

static int do_snapshot(req *r, api_reply *out)
{
    static const char *const keys[] = {"name", NULL};
    const char *label;
    if (only_keys(r->body, keys, out) < 0 || want_string(r->body, "name", false, &label, out) < 0)
        return out->status;
    _cleanup_error_ bb_error *e = NULL;
    _cleanup_free_ char *l = NULL;
    if (snapshot_label(label, &l, &e) < 0)
        return fail(out, "bad_name", "%s", bb_error_message(e));
    data_req d = {.r = r, .label = l};
    return quiet_job(data_child, &d, out);
}

static int do_restore(req *r, api_reply *out)
{
    static const char *const keys[] = {"snapshot", NULL};
    const char *label;
    if (only_keys(r->body, keys, out) < 0 ||
        want_string(r->body, "snapshot", true, &label, out) < 0)
        return out->status;
    _cleanup_error_ bb_error *e = NULL;
    /* a label only: snapshot_resolve would take a path with a '/' */
    if (name_check(label, "snapshot name", &e) < 0)
        return fail(out, "bad_name", "%s", bb_error_message(e));
    data_req d = {.r = r, .label = label, .restore = true};
    return quiet_job(data_child, &d, out);
}

/* ---- forks ----------------------------------------------------------------------------- */

typedef struct fork_req {
    req *r;
    const char *fork;                                            /* fork: the new sandbox's name */
    int (*op)(sandbox *f, ops_fork_result *ret, bb_error **err); /* diff, apply, discard */
} fork_req;

/* fork_diff's lines ("A path") as [{"change": "A", "path": "path"}]. */
static json_t *changes_json(const char *text)
{
    json_t *a = json_array();
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
        if (end - line > 2 && line[1] == ' ')
            json_array_append_new(a, json_pack("{s:s%, s:s%}", "change", line, (size_t)1, "path",
                                               line + 2, (size_t)(end - line - 2)));
        line = nl ? nl + 1 : end;
    }
    return a;
}

static json_t *fork_child(void *arg)
{
    fork_req *d = arg;
    bb_error *e = NULL;
    _cleanup_sandbox_ sandbox *sb = NULL;
    if (sandbox_open(d->r->c->root, d->r->name, &sb, &e) < 0)
        return child_error(e, "no_sandbox");
    _cleanup_(ops_fork_result_clear) ops_fork_result res = {0};
    if (d->fork) {
        ops_fork_opts o = {.fork = d->fork};
        if (ops_fork(sb, &o, &res, NULL, &e) < 0)
            return child_error(e, ops_why_code(res.why));
        return json_pack("{s:s, s:s}", "fork", d->fork, "parent", sb->name);
    }
    if (d->op(sb, &res, &e) < 0)
        return child_error(e, ops_why_code(res.why));
    json_t *j = json_pack("{s:s, s:I, s:o}", "parent", sb->parent, "count", (json_int_t)res.n,
                          "changes", changes_json(res.changes ? res.changes : ""));
    json_object_set_new(j, "skipped", json_integer((json_int_t)tally_skipped(&res.tally)));
    return j;
}

static int do_fork(req *r, api_reply *out)
{
    static const char *const keys[] = {"fork", NULL};
    const char *fork;
    if (only_keys(r->body, keys, out) < 0 || want_string(r->body, "fork", true, &fork, out) < 0)
        return out->status;
    if (!name_valid(fork))
        return fail(out, "bad_name",
                    "invalid fork name: use letters, digits, '.', '_' or '-' "
                    "(max 64, starting with a letter or digit)");
    fork_req d = {.r = r, .fork = fork};
    return quiet_job(fork_child, &d, out);
}

static int fork_op(req *r, int (*op)(sandbox *, ops_fork_result *, bb_error **), api_reply *out)
{
    if (empty_body(r, out) < 0)
        return out->status;
    fork_req d = {.r = r, .op = op};
    return quiet_job(fork_child, &d, out);
}

static int do_diff(req *r, api_reply *out)
{
    return fork_op(r, ops_diff, out);
}

static int do_apply(req *r, api_reply *out)
{
    return fork_op(r, ops_apply, out);
}

static int do_discard(req *r, api_reply *out)
{
    return fork_op(r, ops_discard, out);
}

/* ---- routing --------------------------------------------------------------------------- */

typedef struct route {
    const char *method;
    const char *action; /* after /v1/sandboxes/<name>/ */
    int (*fn)(req *r, api_reply *out);
    int stream; /* 0: no; 1: exec/stream; 2: run/stream */
} route;

static int do_exec(req *r, api_reply *out)
{
    return do_command(r, false, NULL, NULL, out);
}

static int do_run(req *r, api_reply *out)
{
    return do_command(r, true, NULL, NULL, out);
}

static const route ROUTES[] = {
    {"POST", "up", do_up, 0},
    {"POST", "down", do_down, 0},
    {"POST", "exec", do_exec, 0},
    {"POST", "run", do_run, 0},
    {"POST", "exec/stream", NULL, 1},
    {"POST", "run/stream", NULL, 2},
    {"POST", "files/write", do_write, 0},
    {"POST", "files/read", do_read, 0},
    {"POST", "files/list", do_list, 0},
    {"GET", "snapshots", do_snapshots, 0},
    {"POST", "snapshots", do_snapshot, 0},
    {"POST", "restore", do_restore, 0},
    {"POST", "fork", do_fork, 0},
    {"POST", "diff", do_diff, 0},
    {"POST", "apply", do_apply, 0},
    {"POST", "discard", do_discard, 0},
};

#define PREFIX "/v1/sandboxes/"

/* The route of a path under PREFIX; *ret_name is the name part (malloc'd). NULL: none;
 * *ret_method_only: the action exists with another method. */
static const route *find_route(const char *method, const char *path, char **ret_name,
                               bool *ret_other_method)
{
    *ret_name = NULL;
    *ret_other_method = false;
    if (strncmp(path, PREFIX, strlen(PREFIX)) != 0)
        return NULL;
    const char *name = path + strlen(PREFIX), *slash = strchr(name, '/');
    if (!slash)
        return NULL;
    const route *hit = NULL;
    for (size_t i = 0; i < ELEMENTSOF(ROUTES); i++) {
        if (!streq(ROUTES[i].action, slash + 1))
            continue;
        if (streq(ROUTES[i].method, method))
            hit = &ROUTES[i];
        else
            *ret_other_method = true;
    }
    *ret_name = xstrndup(name, (size_t)(slash - name));
    return hit;
}

bool api_is_stream(const char *method, const char *path)
{
    _cleanup_free_ char *name = NULL;
    bool other;
    const route *rt = find_route(method, path, &name, &other);
    return rt && rt->stream;
}

static int parse_body(const char *body, size_t len, json_t **ret, api_reply *out)
{
    *ret = NULL;
    size_t i = 0;
    while (i < len && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t'))
        i++;
    if (i == len) {
        *ret = json_object();
        return 0;
    }
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return fail(out, "bad_request", "invalid JSON: %s", je.text), -1;
    if (!json_is_object(j)) {
        json_decref(j);
        return fail(out, "bad_request", "the body must be a JSON object"), -1;
    }
    *ret = j;
    return 0;
}

static int handle(api_ctx *c, const char *method, const char *path, const char *body, size_t len,
                  api_chunk_fn on_line, void *opaque, api_reply *out)
{
    *out = (api_reply){0};
    if (streq(path, "/v1/version"))
        return streq(method, "GET")
                   ? reply_json(out, 200,
                                json_pack("{s:s, s:s}", "version", BLUEBOX_VERSION, "api", "v1"))
                   : fail(out, "method", "%s takes GET", path);
    if (streq(path, "/v1/sandboxes"))
        return streq(method, "GET") ? quiet_job(list_child, c, out)
                                    : fail(out, "method", "%s takes GET", path);
    _cleanup_free_ char *name = NULL;
    bool other;
    const route *rt = find_route(method, path, &name, &other);
    if (!rt && other)
        return fail(out, "method", "%s does not take %s", path, method);
    if (!rt)
        return fail(out, "not_found", "no such route: %s %s", method, path);
    if (!name_valid(name))
        return fail(out, "bad_name",
                    "invalid sandbox name: use letters, digits, '.', '_' or '-' (max 64, starting "
                    "with a letter or digit)");
    _cleanup_error_ bb_error *e = NULL;
    if (home_require(c->root, name, &e) < 0)
        return fail(out, "no_sandbox", "%s", bb_error_message(e));
    _cleanup_json_ json_t *j = NULL;
    if (parse_body(body ? body : "", len, &j, out) < 0)
        return out->status;
    req r = {.c = c, .name = name, .body = j};
    if (rt->stream && !on_line)
        return fail(out, "bad_request", "%s streams: use api_handle_stream", path);
    if (rt->stream)
        return do_command(&r, rt->stream == 2, on_line, opaque, out);
    return rt->fn(&r, out);
}

int api_handle(api_ctx *c, const char *method, const char *path, const char *body, size_t len,
               api_reply *out)
{
    return handle(c, method, path, body, len, NULL, NULL, out);
}

int api_handle_stream(api_ctx *c, const char *method, const char *path, const char *body,
                      size_t len, api_chunk_fn on_line, void *opaque, api_reply *out)
{
    return handle(c, method, path, body, len, on_line, opaque, out);
}
