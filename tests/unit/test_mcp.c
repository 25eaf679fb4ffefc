/* Unit tests for `bluebox mcp` above the API seam: the requests a tool makes (route, name
 * encoding, body) and how the API's answers are worded (exit code line, sections, clipping,
 * bytes that are not UTF-8, errors as isError), with a fake API in place of the handler. */
#include "unit.h"

#include <jansson.h>
#include <stdlib.h>

#include "api/mcp.h"
#include "api/b64.h"
#include "api/mcp_text.h"
#include "util/json.h"
#include "util/xalloc.h"

/* ---------------------------------------------------------------- a fake API */

static struct {
    char *method, *path, *body;
    int status;
    const char *answer;
} fake;

static int fake_api(void *ctx, const char *method, const char *path, const char *body, size_t len,
                    mcp_api_reply *reply, bb_error **err)
{
    (void)ctx;
    (void)err;
    free(fake.method);
    free(fake.path);
    free(fake.body);
    fake.method = xstrdup(method);
    fake.path = xstrdup(path);
    fake.body = body ? xstrndup(body, len) : NULL;
    reply->status = fake.status;
    reply->body = xstrdup(fake.answer);
    reply->len = strlen(fake.answer);
    return 0;
}

static const mcp_server server = {.api = fake_api};

static void answer(int status, const char *json)
{
    fake.status = status;
    fake.answer = json;
}

/* tools/call of `tool` with `args` (JSON text); returns the result object. */
static json_t *call(const char *tool, const char *args)
{
    _cleanup_free_ char *line = xasprintf(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
        "\"arguments\":%s}}",
        tool, args);
    _cleanup_free_ char *reply = mcp_handle(&server, line, strlen(line));
    assert_non_null(reply);
    json_t *j = json_loads(reply, 0, NULL);
    assert_non_null(j);
    json_t *result = json_incref(json_object_get(j, "result"));
    json_decref(j);
    if (!result)
        fail_msg("no result: %s", reply);
    return result;
}

static const char *text_of(json_t *result, bool want_error)
{
    assert_int_equal(json_is_true(json_object_get(result, "isError")), want_error);
    json_t *content = json_object_get(result, "content");
    assert_int_equal(json_array_size(content), 1);
    return json_string_value(json_object_get(json_array_get(content, 0), "text"));
}

static json_t *sent_body(void)
{
    json_t *j = json_loads(fake.body, 0, NULL);
    assert_non_null(j);
    return j;
}

/* ---------------------------------------------------------------- text helpers */

static void utf8_clean_up(void **s)
{
    (void)s;
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"plain", 5, "plain"},
        {"caf\xc3\xa9 \xe2\x9c\x93", 9, "caf\xc3\xa9 \xe2\x9c\x93"},
        {"a\xff"
         "b",
         3,
         "a\xef\xbf\xbd"
         "b"},
        {"nul\0x", 5, "nul\xef\xbf\xbdx"},
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"cut \xe2\x9c", 6, "cut \xef\xbf\xbd\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        _cleanup_sb_ strbuf b = {0};
        assert_int_equal(text_append_clipped(&b, cases[i].in, cases[i].len, 100), 0);
        assert_string_equal(b.s, cases[i].out);
    }
    /* the clip never cuts a character: "é" (2 bytes) at a limit of 4 stays out whole */
    _cleanup_sb_ strbuf b = {0};
    assert_int_equal(text_append_clipped(&b, "abc\xc3\xa9z", 6, 4), 3);
    assert_string_equal(b.s, "abc");
}

/* ---------------------------------------------------------------- tools */

static void exec_request_and_result(void **s)
{
    (void)s;
    answer(200, "{\"exit_code\":3,\"stdout\":\"aGVsbG8K\",\"stderr\":\"b29wcw==\","
                "\"duration_ms\":12,\"timed_out\":false,\"truncated\":false}");
    _cleanup_json_ json_t *r =
        call("exec", "{\"sandbox\":\"box\",\"command\":\"echo hi\",\"stdin\":\"a\\u0000b\","
                     "\"timeout_seconds\":2.5}");
    assert_string_equal(text_of(r, false), "exit code 3 in 12 ms\nstdout:\nhello\nstderr:\noops\n");
    assert_string_equal(fake.method, "POST");
    assert_string_equal(fake.path, "/v1/sandboxes/box/exec");
    _cleanup_json_ json_t *body = sent_body();
    assert_string_equal(json_string_value(json_object_get(body, "command")), "echo hi");
    assert_string_equal(json_string_value(json_object_get(body, "stdin")), "YQBi"); /* a\0b */
    assert_true(json_number_value(json_object_get(body, "timeout_seconds")) == 2.5);
    assert_int_equal(json_object_size(body), 3);
}

static void run_timed_out_and_truncated(void **s)
{
    (void)s;
    answer(200, "{\"exit_code\":124,\"stdout\":\"\",\"stderr\":\"\",\"duration_ms\":1001,"
                "\"timed_out\":true,\"truncated\":true}");
    _cleanup_json_ json_t *r = call("run", "{\"sandbox\":\"box\",\"command\":\"sleep 9\"}");
    const char *t = text_of(r, false);
    assert_string_equal(fake.path, "/v1/sandboxes/box/run");
    assert_true(strncmp(t, "exit code 124 in 1001 ms (timed out)\n", 37) == 0);
    assert_contains(t, "the rest was dropped");
    assert_contains(t, "stdout:\nstderr:\n");
}

static void output_is_clipped(void **s)
{
    (void)s;
    size_t n = MCP_OUTPUT_CLIP + 1000;
    char *raw = xmalloc(n);
    memset(raw, 'a', n);
    _cleanup_free_ char *b64 = b64_encode(raw, n, NULL);
    free(raw);
    _cleanup_free_ char *json = xasprintf("{\"exit_code\":0,\"stdout\":\"%s\",\"stderr\":\"\","
                                          "\"duration_ms\":1,\"timed_out\":false}",
                                          b64);
    answer(200, json);
    _cleanup_json_ json_t *r = call("exec", "{\"sandbox\":\"box\",\"command\":\"x\"}");
    const char *t = text_of(r, false);
    assert_contains(t, "a\n[... 1000 more bytes not shown]\nstderr:\n");
    assert_int_equal(strlen(t), strlen("exit code 0 in 1 ms\nstdout:\n") + MCP_OUTPUT_CLIP +
                                    strlen("\n[... 1000 more bytes not shown]\nstderr:\n"));
}

static void api_errors_are_tool_errors(void **s)
{
    (void)s;
    answer(409,
           "{\"error\":\"box is not up; start it first: bluebox up box\",\"code\":\"not_up\"}");
    _cleanup_json_ json_t *r = call("exec", "{\"sandbox\":\"box\",\"command\":\"true\"}");
    assert_string_equal(text_of(r, true), "box is not up; start it first: bluebox up box (not_up)");
    answer(500, "not json");
    _cleanup_json_ json_t *r2 = call("down", "{\"sandbox\":\"box\"}");
    assert_contains(text_of(r2, true), "HTTP 500");
    /* a message that quotes a chatty guest is clipped like output */
    size_t n = MCP_OUTPUT_CLIP + 10;
    _cleanup_free_ char *long_msg = xmalloc(n + 1);
    memset(long_msg, 'e', n);
    long_msg[n] = '\0';
    _cleanup_free_ char *json = xasprintf("{\"error\":\"%s\",\"code\":\"not_found\"}", long_msg);
    answer(404, json);
    _cleanup_json_ json_t *r3 = call("read_file", "{\"sandbox\":\"box\",\"path\":\"/x\"}");
    const char *t = text_of(r3, true);
    assert_int_equal(strlen(t),
                     MCP_OUTPUT_CLIP + strlen(" [... 10 more bytes not shown] (not_found)"));
    assert_contains(t, "e [... 10 more bytes not shown] (not_found)");
}

static void fork_tools_go_through_the_fork_routes(void **s)
{
    (void)s;
    answer(200, "{\"fork\":\"f\",\"parent\":\"box\"}");
    _cleanup_json_ json_t *r = call("fork", "{\"sandbox\":\"box\",\"fork\":\"f\"}");
    assert_contains(text_of(r, false), "f is now a fork of box");
    assert_string_equal(fake.path, "/v1/sandboxes/box/fork");
    _cleanup_json_ json_t *b = sent_body();
    assert_string_equal(json_string_value(json_object_get(b, "fork")), "f");
    answer(200, "{\"parent\":\"box\",\"count\":2,\"skipped\":0,\"changes\":[{\"change\":"
                "\"A\",\"path\":\"/n\"},{\"change\":\"D\",\"path\":\"/o\"}]}");
    _cleanup_json_ json_t *d = call("apply", "{\"sandbox\":\"f\"}");
    assert_string_equal(text_of(d, false), "applied 2 changes (parent: box)\nA /n\nD /o");
    assert_string_equal(fake.path, "/v1/sandboxes/f/apply");
    /* a guard's refusal is the model's to read, as an error result */
    answer(409, "{\"error\":\"box is not a fork; make one with: bluebox fork box <fork>\","
                "\"code\":\"refused\"}");
    _cleanup_json_ json_t *e = call("diff", "{\"sandbox\":\"box\"}");
    assert_contains(text_of(e, true), "box is not a fork");
    assert_contains(text_of(e, true), "(refused)");
}

static void names_are_one_path_segment(void **s)
{
    (void)s;
    answer(400, "{\"error\":\"bad name\",\"code\":\"bad_name\"}");
    _cleanup_json_ json_t *r = call("up", "{\"sandbox\":\"../x/y?z#%\"}");
    text_of(r, true);
    assert_string_equal(fake.path, "/v1/sandboxes/..%2Fx%2Fy%3Fz%23%25/up");
}

static void files_go_through_the_files_routes(void **s)
{
    (void)s;
    answer(200, "{\"path\":\"/data/a\",\"bytes\":3}");
    _cleanup_json_ json_t *w =
        call("write_file", "{\"sandbox\":\"b\",\"path\":\"/data/a\",\"content\":\"x\\u0000y\"}");
    assert_string_equal(text_of(w, false), "wrote 3 bytes to /data/a");
    assert_string_equal(fake.path, "/v1/sandboxes/b/files/write");
    _cleanup_json_ json_t *body = sent_body();
    assert_string_equal(json_string_value(json_object_get(body, "content")), "eAB5");
    assert_null(json_object_get(body, "mode"));

    answer(200, "{\"path\":\"/data/a\",\"content\":\"aGkg/w==\"}"); /* "hi \xff" */
    _cleanup_json_ json_t *rd = call("read_file", "{\"sandbox\":\"b\",\"path\":\"/data/a\"}");
    assert_string_equal(text_of(rd, false), "hi \xef\xbf\xbd");
    assert_string_equal(fake.path, "/v1/sandboxes/b/files/read");
}

static void list_snapshot_and_up(void **s)
{
    (void)s;
    answer(200, "[]");
    _cleanup_json_ json_t *l = call("list_sandboxes", "{}");
    assert_string_equal(fake.method, "GET");
    assert_string_equal(fake.path, "/v1/sandboxes");
    assert_contains(text_of(l, false), "bluebox new");

    answer(200, "{\"snapshot\":\"s1\"}");
    _cleanup_json_ json_t *sn = call("snapshot", "{\"sandbox\":\"b\",\"name\":\"s1\"}");
    assert_string_equal(text_of(sn, false), "snapshot s1 of b's /data written");
    assert_string_equal(fake.body, "{\"name\":\"s1\"}");

    answer(200, "{\"up\":true,\"ready_ms\":812}");
    _cleanup_json_ json_t *u = call("up", "{\"sandbox\":\"b\"}");
    assert_contains(text_of(u, false), "b is up (ready in 812 ms)");
    assert_string_equal(fake.body, "{}");
}

static void restore_needs_the_flag(void **s)
{
    (void)s;
    const char *line =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
        "\"name\":\"restore\",\"arguments\":{\"sandbox\":\"b\",\"snapshot\":\"s\"}}}";
    _cleanup_free_ char *refused = mcp_handle(&server, line, strlen(line));
    assert_contains(refused, "\"code\":-32602");
    mcp_server allowed = server;
    allowed.allow_restore = true;
    answer(200, "{\"restored\":\"s\"}");
    _cleanup_free_ char *ok = mcp_handle(&allowed, line, strlen(line));
    assert_contains(ok, "\"isError\":false");
    assert_string_equal(fake.path, "/v1/sandboxes/b/restore");
    assert_string_equal(fake.body, "{\"snapshot\":\"s\"}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_clean_up),
        cmocka_unit_test(exec_request_and_result),
        cmocka_unit_test(run_timed_out_and_truncated),
        cmocka_unit_test(output_is_clipped),
        cmocka_unit_test(api_errors_are_tool_errors),
        cmocka_unit_test(names_are_one_path_segment),
        cmocka_unit_test(files_go_through_the_files_routes),
        cmocka_unit_test(fork_tools_go_through_the_fork_routes),
        cmocka_unit_test(list_snapshot_and_up),
        cmocka_unit_test(restore_needs_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
