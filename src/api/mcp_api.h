/* The one seam between `bluebox mcp` and the v1 API: a request answered in-process by the
 * handler `bluebox serve` uses (docs/API.md), so every tool passes the same checks. */
#pragma once

#include "api/mcp.h"

/* An mcp_api_fn; ctx is the BLUEBOX_HOME root (const char *). */
int mcp_api_inprocess(void *ctx, const char *method, const char *path, const char *body, size_t len,
                      mcp_api_reply *reply, bb_error **err);
