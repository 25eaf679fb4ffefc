/* Replacing a sandbox's /data as one step: fill a staging directory beside it
 * (data/.<name>.restore-XXXXXX/new), then exchange the two with one rename. An interruption
 * at any point leaves either the old /data or the new one, plus staging that the next
 * replace removes. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "util/err.h"

typedef int (*replace_fill)(int new_fd, void *ud, bb_error **err);

/* Replace the directory data_path with what fill writes into the new directory (nothing
 * when fill is NULL: an empty /data). With chown, the new directory goes to uid:gid. When
 * fill fails, data_path is untouched and the staging is removed. */
int data_replace(const char *data_path, bool chown, uid_t uid, gid_t gid, replace_fill fill,
                 void *ud, bb_error **err);
