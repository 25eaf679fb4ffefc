/* Who is using a sandbox's /data. Every run and shell holds locks/<name>.use shared for its
 * whole life and leaves a note, locks/<name>.users/<pid>, naming its command; reset,
 * restore and destroy take the lock exclusive without waiting and refuse while anyone holds
 * it. A flock dies with its process, so a bluebox killed with SIGKILL blocks nothing for
 * long, and neither does its VM, which stops with its owner (launch/lifeline.h); one that
 * still runs (krun, or a direct container whose supervisor is gone) is caught by
 * image_refuse_running and direct_refuse. */
#pragma once

#include <stdbool.h>

#include "sandbox.h"
#include "util/err.h"

typedef struct {
    bool held;
    int fd;
    char *note; /* the note's path, removed on release */
} inuse;

/* Mark `name` in use by `what` ("run", "shell"; "up" while it boots, until its state
 * file takes over) until inuse_release. Take it under the
 * sandbox's lock (home_lock), which every refusal below also holds. */
int inuse_hold(const sandbox *sb, const char *what, inuse *ret, bb_error **err);
void inuse_release(inuse *u);
/* The exclusive side: returns an fd to close when done, or fails with EBUSY naming the
 * commands that hold the sandbox, e.g. `box is in use by bluebox run (pid 1234); …`. */
int inuse_refuse(const sandbox *sb, bb_error **err);
