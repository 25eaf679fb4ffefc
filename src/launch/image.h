/* The sandbox's podman image, localhost/bluebox/<name>:<home id>, and the other podman
 * objects a sandbox leaves: each carries the home's id, and only this home's are touched. */
#pragma once

#include <stdbool.h>

#include "imageref.h"
#include "util/err.h"

/* Whether podman has the image of the sandbox of the home with this id (one podman call);
 * true without podman, whose absence is said elsewhere. */
bool image_present(const char *home_id, const char *name);
/* Remove the sandbox's stray containers (this home's only), then its tag: the image goes
 * when no other home tagged it too. 0 when there is nothing to do. */
int image_remove(const sandbox *sb, bb_error **err);
/* Remove the image `id` (an ID, never a tag) if no tag names it, then its parents the same
 * way: the build layers only this image used. Stops at a tagged image, one a container uses
 * or one another image builds on (another home's build that shares the layers). Quiet. */
void image_prune(const char *id);
/* Tag the old image with the new name and drop the old tag; 0 when there is no image. `old`
 * is the handle the sandbox had before sandbox_rename() moved it to `new`. */
int image_rename(const sandbox *old, const char *new, bb_error **err);
/* Put this home's tag on the image its last build recorded (sandboxes/<name>/image-id),
 * for an image built under the old naming (localhost/bluebox/<name>:latest, a tag left in
 * place for any other home that shares the image) or before the home moved. Cheap when
 * sandboxes/<name>/image-ref says it is done; a failure when the recorded image is gone from
 * podman. Call under the lock. */
int image_adopt(const sandbox *sb, bb_error **err);
/* Note in sandboxes/<name>/image-ref that the current tag is in place. */
void image_record_ref(const sandbox *sb);
