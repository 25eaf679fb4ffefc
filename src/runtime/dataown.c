/* /data ownership. Under strict the guest's root is a subordinate UID: root podman's
 * `--uidmap 0:1:65536` puts it at host UID 1, rootless podman at the user's first
 * subordinate UID. Rootless bluebox cannot chown to that UID itself, so it re-runs itself
 * inside `podman unshare`, where container UID 0 is the user and 1 is the subordinate one. */
#include "dataown.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/home.h"
#include "util/selfpath.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

/* The user's name from /etc/passwd (not NSS: this binary is static), or NULL. */
static char *user_name(uid_t uid)
{
    _cleanup_fclose_ FILE *f = fopen("/etc/passwd", "re");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        char *save = NULL, *name = strtok_r(line, ":", &save);
        (void)strtok_r(NULL, ":", &save);
        char *id = strtok_r(NULL, ":", &save);
        if (name && id && strtoul(id, NULL, 10) == uid)
            return xstrdup(name);
    }
    return NULL;
}

/* The first subordinate id of the user in /etc/subuid or /etc/subgid (by name or uid). */
static int subid_start(const char *file, unsigned long *ret, bb_error **err)
{
    _cleanup_free_ char *user = user_name(getuid());
    char uid[32];
    snprintf(uid, sizeof uid, "%u", (unsigned)getuid());
    _cleanup_fclose_ FILE *f = fopen(file, "re");
    if (!f)
        return bb_fail_errno(
            err, errno, "isolation: strict needs subordinate ids, and %s cannot be read", file);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *who = strtok_r(line, ":\n", &save),
             *start = strtok_r(NULL, ":\n", &save), *count = strtok_r(NULL, ":\n", &save);
        if (!who || !start || !count)
            continue;
        if (!streq(who, uid) && !(user && streq(who, user)))
            continue;
        char *end;
        errno = 0;
        unsigned long v = strtoul(start, &end, 10), n = strtoul(count, NULL, 10);
        if (errno || *end || n < 2)
            continue;
        *ret = v;
        return 0;
    }
    return bb_fail(err, ENOENT,
                   "isolation: strict needs subordinate ids for %s in %s: usermod "
                   "--add-subuids 100000-165535 --add-subgids 100000-165535 %s",
                   user ? user : uid, file, user ? user : uid);
}

/* The guest's root as bluebox reaches it, the one place that maps it: UID/GID 1 under strict
 * (host UID 1 as root, under root podman's `--uidmap 0:1:65536`; the user's first subordinate
 * UID inside rootless `podman unshare`), 0 under standard (you: root as root, the user inside
 * `podman unshare`). */
static unsigned guest_root_id(bf_isolation iso)
{
    return iso == ISO_STRICT ? 1 : 0;
}

int data_owner(bf_isolation iso, uid_t *ret_uid, gid_t *ret_gid, bb_error **err)
{
    if (iso == ISO_STANDARD) {
        *ret_uid = getuid();
        *ret_gid = getgid();
        return 0;
    }
    if (getuid() == 0) {
        *ret_uid = guest_root_id(iso);
        *ret_gid = guest_root_id(iso);
        return 0;
    }
    unsigned long u, g;
    if (subid_start("/etc/subuid", &u, err) < 0 || subid_start("/etc/subgid", &g, err) < 0)
        return -1;
    *ret_uid = (uid_t)u;
    *ret_gid = (gid_t)g;
    return 0;
}

int data_place_of(sandbox *sb, data_place *ret, bb_error **err)
{
    *ret = (data_place){0};
    if (sandbox_bluefile(sb, err) < 0)
        return -1;
    if (sb->bf->isolation == ISO_STANDARD)
        return 0;
    ret->chown = true;
    ret->uid = guest_root_id(sb->bf->isolation);
    ret->gid = guest_root_id(sb->bf->isolation);
    if (getuid() == 0)
        return 0;
    ret->unshare = true;
    ret->self = guest_binary(err);
    return ret->self ? 0 : -1;
}

void data_place_done(data_place *p)
{
    free(p->self);
    p->self = NULL;
}

int data_hand_over(const char *path, const bluefile *bf, const char *self, bb_error **err)
{
    uid_t uid;
    gid_t gid;
    if (data_owner(bf->isolation, &uid, &gid, err) < 0)
        return -1;
    struct stat st;
    if (lstat(path, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", path);
    if (st.st_uid == uid && st.st_gid == gid)
        return 0;
    if (getuid() == 0) {
        if (chown_tree(path, uid, gid, err) < 0)
            return bb_prefix(err, "cannot hand %s to the sandbox", path);
        return 0;
    }
    char id[16];
    snprintf(id, sizeof id, "%u", guest_root_id(bf->isolation));
    char *argv[] = {"podman", "unshare", (char *)self, "__reown", id, id, (char *)path, NULL};
    _cleanup_free_ char *errout = NULL;
    int r = spawn_capture(argv, NULL, &errout, err);
    if (r < 0)
        return -1;
    if (r != 0)
        return bb_fail(err, EPERM, "cannot hand %s to the sandbox: %s", path, errout);
    return 0;
}
