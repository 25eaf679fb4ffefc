/* libFuzzer target: `bluebox mcp`'s handling of one message (src/api/mcp.h), with a fake API.
 * The input is the client's message line, then optionally a NUL byte, a status byte and the
 * API's answer to every request the message makes (so the wording of results, base64 and
 * UTF-8 clean-up are fuzzed too). Checks: a reply is one line of JSON, a JSON-RPC 2.0 object
 * with exactly one of result and error, an error has an integer code and a message, and a
 * tool result is {content:[{type:"text",text}], isError}. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/mcp.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static const char *answer;
static size_t answer_len;
static int answer_status;

static int fake_api(void *ctx, const char *method, const char *path, const char *body, size_t len,
                    mcp_api_reply *reply, bb_error **err)
{
    (void)ctx;
    (void)err;
    CHECK(path[0] == '/' && (body == NULL) == (len == 0));
    /* a request's body is JSON the handler can read */
    if (body) {
        json_t *j = json_loadb(body, len, 0, NULL);
        CHECK(json_is_object(j));
        json_decref(j);
    }
    reply->status = answer_status;
    reply->body = xstrndup(answer, answer_len);
    reply->len = strlen(reply->body);
    return 0;
}

static void check_tool_result(json_t *result)
{
    json_t *content = json_object_get(result, "content");
    if (!content)
        return; /* initialize, ping, tools/list */
    CHECK(json_is_boolean(json_object_get(result, "isError")));
    CHECK(json_array_size(content) == 1);
    json_t *block = json_array_get(content, 0);
    CHECK(strcmp(json_string_value(json_object_get(block, "type")), "text") == 0);
    CHECK(json_is_string(json_object_get(block, "text")));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *msg = (const char *)data;
    const char *nul = memchr(data, 0, size);
    size_t msg_len = nul ? (size_t)(nul - msg) : size;
    answer = "{}";
    answer_len = 2;
    answer_status = 200;
    if (nul && (size_t)(nul - msg) + 2 <= size) {
        answer_status = nul[1] & 1 ? 409 : 200;
        answer = nul + 2;
        answer_len = size - msg_len - 2;
    }
    mcp_server s = {.api = fake_api, .allow_restore = size % 2 == 0};
    char *reply = mcp_handle(&s, msg, msg_len);
    if (!reply)
        return 0;
    CHECK(!strchr(reply, '\n'));
    json_error_t e;
    json_t *j = json_loads(reply, 0, &e);
    CHECK(json_is_object(j));
    CHECK(strcmp(json_string_value(json_object_get(j, "jsonrpc")), "2.0") == 0);
    json_t *result = json_object_get(j, "result"), *error = json_object_get(j, "error");
    CHECK(!result != !error);
    if (error) {
        CHECK(json_is_integer(json_object_get(error, "code")));
        CHECK(json_is_string(json_object_get(error, "message")));
    } else {
        check_tool_result(result);
    }
    json_decref(j);
    free(reply);
    return 0;
}
