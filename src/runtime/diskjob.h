/* /data commands for a sandbox whose /data is a disk image (data_limit), run through the
 * guest: the host never reads that file system. */
#pragma once

#include "core/sandbox.h"
#include "util/err.h"

/* Boot the sandbox once with /.bluebox/bluebox __data <args…> as the guest's root, its stdin from
 * in_fd (-1: none) and its stdout into out_fd, at most twice data_limit plus 64 MiB of it.
 * Fails when the command does or sends more. */
int diskjob_run(sandbox *sb, char *const *args, int in_fd, int out_fd, bb_error **err);
