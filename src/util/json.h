/* jansson with a cleanup attribute: a json_t * that is dropped (json_decref) when it goes
 * out of scope. Kept apart from macro.h so only the files that use JSON include jansson. */
#pragma once

#include <jansson.h>

#include "macro.h"

#define _cleanup_json_ _cleanup_(json_decrefp)
