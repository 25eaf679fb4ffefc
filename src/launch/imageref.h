/* What a launch needs of a sandbox's image: its tag, localhost/bluebox/<name>:<home id>, the
 * ID its last build recorded and its USER. The rest of its housekeeping is image.h. */
#pragma once

#include "core/sandbox.h"
#include "util/err.h"

/* This home's tag of the sandbox's image. */
char *image_ref(const sandbox *sb);
/* The same from the home's id (home_id()), for a caller that holds it. */
char *image_ref_of(const char *home_id, const char *name);
/* The image ID this home's last build of `name` recorded (sandboxes/<name>/image-id), NULL
 * when none. */
char *image_recorded_id(const sandbox *sb);
/* The same from a sandbox directory (sandboxes/<name>), for one without a handle (rename's
 * new name). */
char *image_recorded_id_in(const char *sandbox_dir);
/* The image's USER (podman's Config.User; "" when it has none), for backends that start
 * their VMM as the container's root and the workload as this user in the guest. Read from
 * sandboxes/<name>/image-user, which build records beside image-id; a sandbox built before
 * that file existed asks podman once and records the answer. `image` (not NULL) names
 * another image than the sandbox's own, and is asked every time. */
int image_user(const sandbox *sb, const char *image, char **ret, bb_error **err);
/* Write the USER of the image `ref` into <dir>/image-user (build, in its staging dir). */
int image_user_record(const char *dir, const char *ref, bb_error **err);
