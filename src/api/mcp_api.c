/* `bluebox mcp`'s requests, answered by the v1 API's handler in this process (mcp_api.h). */
#include "api/mcp_api.h"

#include <string.h>

#include "util/xalloc.h"

int mcp_api_inprocess(void *ctx, const char *method, const char *path, const char *body, size_t len,
                      mcp_api_reply *reply, bb_error **err)
{
    static const char unwired[] =
        "{\"error\":\"this build of bluebox has no API handler\",\"code\":\"internal\"}";
    reply->status = 500;
    reply->body = xstrdup(unwired);
    reply->len = strlen(unwired);
    return 0;
}
