/* /data belongs to the sandbox's root: you under standard isolation, the first subordinate
 * UID under strict. Checked before every boot, re-owned once when the mode changes. */
#pragma once

#include <sys/types.h>

#include "core/bluefile.h"
#include "util/err.h"

/* The host uid/gid of the guest's root for this isolation mode. */
int data_owner(bf_isolation iso, uid_t *ret_uid, gid_t *ret_gid, bb_error **err);
/* Make sure the sandbox's /data exists and is owned for bf's isolation; `self` is the bluebox
 * that re-owns it inside rootless podman's user namespace. */
int data_prepare(const char *root, const char *name, const bluefile *bf, const char *self,
                 bb_error **err);
/* Give path (a /data directory or disk image) to the sandbox's root for bf's isolation. */
int data_hand_over(const char *path, const bluefile *bf, const char *self, bb_error **err);
