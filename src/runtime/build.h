/* Building a sandbox's image with podman. */
#pragma once

#include "core/bluefile.h"
#include "util/err.h"

/* Render the Containerfile into a fresh build context beside the sandbox, run podman build
 * (progress streams to the terminal), and only when it succeeds move the Containerfile,
 * .blueprint/ and image-id into place. A failed build leaves the previous image and
 * Containerfile as they were. */
int image_build(const char *root, const char *name, const bluefile *bf, bb_error **err);
