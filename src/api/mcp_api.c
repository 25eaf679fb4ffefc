/* `bluebox mcp`'s requests, answered by the v1 API's handler in this process (mcp_api.h). */
#include "api/mcp_api.h"

#include "api/api.h"
#include "util/macro.h"

int mcp_api_inprocess(void *ctx, const char *method, const char *path, const char *body, size_t len,
                      mcp_api_reply *reply, bb_error **err)
{
    api_ctx c = {.root = ctx, .via = "mcp"};
    api_reply r = {0};
    reply->status = api_handle(&c, method, path, body, len, &r);
    reply->body = steal_pointer(&r.body);
    reply->len = r.len;
    api_reply_clear(&r);
    return 0;
}
