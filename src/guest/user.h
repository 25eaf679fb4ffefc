/* The image's USER, resolved in the uml guest as podman (runc) resolves it in a container:
 * `name`, `uid`, `name:group`, `uid:gid`, names looked up in the image's /etc/passwd and
 * /etc/group. The VMM runs as the container's root, so that every file the guest writes on
 * the host is owned by the sandbox's own identity; the workload still runs as this user. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "abi/spec.h"
#include "util/err.h"

/* Far above any real /etc/passwd or /etc/group; a bigger one is refused, not read. */
#define USER_DB_MAX (16u << 20)
/* The kernel's NGROUPS_MAX: setgroups refuses more. */
#define USER_GROUPS_MAX 65536u

typedef struct guest_user {
    uid_t uid;
    gid_t gid;
    gid_t *groups; /* the primary group first, then the user's other groups, no repeats */
    size_t n_groups;
    char *home; /* from the passwd entry; "/" when the user has none (as runc) */
} guest_user;

/* Resolve `user` against the passwd and group files given as bytes (either may be empty):
 * without a group part the primary group is the passwd entry's (0 when a numeric uid has no
 * entry) and the supplementary groups are those that list the user's name; with one, the
 * group alone. An unknown name, a malformed USER or too many groups is an error. */
int user_resolve(const char *user, const char *passwd, size_t passwd_len, const char *group,
                 size_t group_len, guest_user *ret, bb_error **err);
void user_clear(guest_user *u);

/* In the guest: resolve spec->user (when set) through the root's /etc/passwd and /etc/group
 * and put the ids into the spec; HOME follows the user unless the image set one of its own. */
int user_apply(launch_spec *spec, bb_error **err);

/* `bluebox shell`'s shell for `uid` in the guest: the user's login shell from the image's
 * /etc/passwd, with bash in place of a plain /bin/sh (or of a missing, non-executable or
 * nologin shell) where the image has bash; /bin/sh when nothing else will do. */
#define LOGIN_SHELL_BASH "/bin/bash"
#define LOGIN_SHELL_SH   "/bin/sh"
char *user_login_shell(uid_t uid);
/* The shell field of uid's entry in a passwd file given as bytes; NULL when there is none. */
char *user_shell_entry(const char *passwd, size_t len, uid_t uid);
