/* The sandbox's podman image, localhost/bluebox/<name>:latest. */
#pragma once

#include "util/err.h"

char *image_ref(const char *name);
/* Remove the sandbox's stray containers, then the image if podman is here and it exists.
 * 0 when there is nothing to do. */
int image_remove(const char *name, bb_error **err);
/* Tag the old image with the new name and drop the old tag; 0 when there is no image. */
int image_rename(const char *old, const char *new, bb_error **err);
