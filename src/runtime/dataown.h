/* /data belongs to the sandbox's root: you under standard isolation, the first subordinate
 * UID under strict. Checked before every boot, re-owned once when the mode changes. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/bluefile.h"
#include "core/sandbox.h"
#include "util/err.h"

/* The host uid/gid of the guest's root for this isolation mode. */
int data_owner(bf_isolation iso, uid_t *ret_uid, gid_t *ret_gid, bb_error **err);

/* How the /data operations (data/dataop.h) reach a sandbox's /data: standard isolation as
 * you; strict as root by handing entries to UID 1, rootless inside `podman unshare` (where
 * the subordinate UID is 1). */
typedef struct {
    bool chown, unshare;
    uid_t uid;
    gid_t gid;
    char *self; /* this binary, for podman unshare */
} data_place;

int data_place_of(sandbox *sb, data_place *ret, bb_error **err);
void data_place_done(data_place *p);
/* Give path (a /data directory or disk image) to the sandbox's root for bf's isolation. */
int data_hand_over(const char *path, const bluefile *bf, const char *self, bb_error **err);
