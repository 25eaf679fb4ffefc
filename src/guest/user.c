/* Resolving the image's USER in the guest (see user.h). The files come from the image, which
 * the workload's author wrote: every line is taken apart within its own bytes, a line that
 * does not parse (too few fields, an id that is not a number, a NUL) is skipped as glibc
 * skips it, and nothing is copied into a fixed-size buffer. */
#include "user.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/xalloc.h"

#define PASSWD_PATH "/etc/passwd"
#define GROUP_PATH  "/etc/group"
/* passwd: name:password:uid:gid:gecos:home:shell; group: name:password:gid:members */
#define PW_FIELDS 7
#define GR_FIELDS 4

typedef struct span {
    const char *p;
    size_t n;
} span;

static bool span_eq(span a, span b)
{
    return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

/* A decimal id, as podman reads one: digits only, and never (uid_t)-1 ("leave unchanged"). */
static bool id_of(span s, uint32_t *ret)
{
    if (s.n == 0 || s.n > 10)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s.p[i] - '0');
    }
    if (v >= UINT32_MAX)
        return false;
    *ret = (uint32_t)v;
    return true;
}

/* Split one line into at most max fields; the last takes the rest. Returns the count. */
static size_t fields_of(span line, span *f, size_t max)
{
    size_t k = 0;
    const char *p = line.p, *end = line.p + line.n;
    while (k + 1 < max) {
        const char *c = memchr(p, ':', (size_t)(end - p));
        if (!c)
            break;
        f[k++] = (span){p, (size_t)(c - p)};
        p = c + 1;
    }
    f[k++] = (span){p, (size_t)(end - p)};
    return k;
}

/* The next line of buf at *off (without its newline); false at the end. */
static bool next_line(const char *buf, size_t len, size_t *off, span *ret)
{
    if (*off >= len)
        return false;
    const char *p = buf + *off;
    const char *nl = memchr(p, '\n', len - *off);
    size_t n = nl ? (size_t)(nl - p) : len - *off;
    *off += n + (nl ? 1 : 0);
    *ret = (span){p, n};
    return true;
}

typedef struct pw_entry {
    span name, home, shell;
    uint32_t uid, gid;
} pw_entry;

/* The first passwd entry named `name`, or (when numeric) with that uid: runc's rule. */
static bool pw_find(const char *buf, size_t len, span want, bool numeric, uint32_t uid,
                    pw_entry *ret)
{
    size_t off = 0;
    span line, f[PW_FIELDS];
    while (next_line(buf, len, &off, &line)) {
        if (line.n == 0 || line.p[0] == '#' || memchr(line.p, '\0', line.n))
            continue;
        size_t k = fields_of(line, f, PW_FIELDS);
        pw_entry e = {.name = f[0],
                      .home = k > 5 ? f[5] : (span){"", 0},
                      .shell = k > 6 ? f[6] : (span){"", 0}};
        if (k < 4 || f[0].n == 0 || !id_of(f[2], &e.uid) || !id_of(f[3], &e.gid))
            continue;
        if (span_eq(e.name, want) || (numeric && e.uid == uid)) {
            *ret = e;
            return true;
        }
    }
    return false;
}

/* Whether a group's member list (comma-separated) names `user`. */
static bool has_member(span members, span user)
{
    size_t off = 0;
    while (off <= members.n) {
        const char *p = members.p + off;
        const char *c = memchr(p, ',', members.n - off);
        size_t n = c ? (size_t)(c - p) : members.n - off;
        if (span_eq((span){p, n}, user))
            return true;
        if (!c)
            break;
        off += n + 1;
    }
    return false;
}

/* One group line's name, gid and members; false for a line that does not parse. */
static bool gr_parse(span line, span *name, uint32_t *gid, span *members)
{
    span f[GR_FIELDS];
    if (line.n == 0 || line.p[0] == '#' || memchr(line.p, '\0', line.n))
        return false;
    size_t k = fields_of(line, f, GR_FIELDS);
    if (k < 3 || f[0].n == 0 || !id_of(f[2], gid))
        return false;
    *name = f[0];
    *members = k > 3 ? f[3] : (span){"", 0};
    return true;
}

/* The gid of the group `want` by name, or (when numeric) by gid. */
static bool gr_find(const char *buf, size_t len, span want, bool numeric, uint32_t gid,
                    uint32_t *ret)
{
    size_t off = 0;
    span line, name, members;
    uint32_t g;
    while (next_line(buf, len, &off, &line))
        if (gr_parse(line, &name, &g, &members) && (span_eq(name, want) || (numeric && g == gid))) {
            *ret = g;
            return true;
        }
    return false;
}

static int cmp_gid(const void *a, const void *b)
{
    gid_t x = *(const gid_t *)a, y = *(const gid_t *)b;
    return x < y ? -1 : x > y;
}

/* The primary group, then every group that lists `user`, sorted, without repeats. */
static int supplementary(const char *buf, size_t len, span user, guest_user *u, bb_error **err)
{
    size_t off = 0, cap = u->n_groups;
    span line, name, members;
    uint32_t g;
    while (next_line(buf, len, &off, &line)) {
        if (!gr_parse(line, &name, &g, &members) || g == u->gid || !has_member(members, user))
            continue;
        if (u->n_groups >= USER_GROUPS_MAX)
            return bb_fail(err, E2BIG,
                           "user %.*s is in more than %u groups in the image's " GROUP_PATH
                           "; the kernel allows no more",
                           (int)user.n, user.p, USER_GROUPS_MAX);
        if (u->n_groups == cap) {
            cap = cap * 2 + 16;
            u->groups = xreallocarray(u->groups, cap, sizeof *u->groups);
        }
        u->groups[u->n_groups++] = g;
    }
    if (u->n_groups > 2)
        qsort(u->groups + 1, u->n_groups - 1, sizeof *u->groups, cmp_gid);
    size_t j = 1; /* groups[0], the primary group, is not among the rest */
    for (size_t i = 1; i < u->n_groups; i++)
        if (j == 1 || u->groups[i] != u->groups[j - 1])
            u->groups[j++] = u->groups[i];
    u->n_groups = j;
    return 0;
}

static int bad_user(const char *user, bb_error **err)
{
    return bb_fail(err, EINVAL,
                   "the image's USER \"%s\" is not name, uid, name:group or uid:gid; fix USER "
                   "in the image (Containerfile or base image) and rebuild",
                   user);
}

int user_resolve(const char *user, const char *passwd, size_t passwd_len, const char *group,
                 size_t group_len, guest_user *ret, bb_error **err)
{
    *ret = (guest_user){0};
    const char *colon = strchr(user, ':');
    span uarg = {user, colon ? (size_t)(colon - user) : strlen(user)};
    span garg = {colon ? colon + 1 : "", colon ? strlen(colon + 1) : 0};
    if (uarg.n == 0 || (colon && garg.n == 0) || memchr(garg.p, ':', garg.n) ||
        strpbrk(user, "\n\r"))
        return bad_user(user, err);
    uint32_t uid = 0, gid = 0;
    bool unum = id_of(uarg, &uid);
    pw_entry pw;
    bool found = pw_find(passwd, passwd_len, uarg, unum, uid, &pw);
    if (!found && !unum)
        return bb_fail(err, ENOENT,
                       "the image's USER names \"%.*s\", who is not in the image's " PASSWD_PATH
                       "; add the user in the image or use a numeric uid",
                       (int)uarg.n, uarg.p);
    guest_user u = {.uid = found ? pw.uid : uid, .gid = found ? pw.gid : 0};
    u.home = found && pw.home.n ? xstrndup(pw.home.p, pw.home.n) : xstrdup("/");
    if (colon) {
        bool gnum = id_of(garg, &gid);
        if (!gr_find(group, group_len, garg, gnum, gid, &u.gid)) {
            if (!gnum) {
                user_clear(&u);
                return bb_fail(err, ENOENT,
                               "the image's USER names the group \"%.*s\", which is not in the "
                               "image's " GROUP_PATH "; add the group in the image or use a "
                               "numeric gid",
                               (int)garg.n, garg.p);
            }
            u.gid = gid; /* a numeric gid needs no entry */
        }
    }
    u.groups = xreallocarray(NULL, 1, sizeof *u.groups);
    u.groups[0] = u.gid;
    u.n_groups = 1;
    /* Supplementary groups only for a user that has a name, and only when USER gave no group
     * (runc: an explicit group replaces them). */
    if (!colon && found && supplementary(group, group_len, pw.name, &u, err) < 0) {
        user_clear(&u);
        return -1;
    }
    *ret = u;
    return 0;
}

void user_clear(guest_user *u)
{
    free(u->groups);
    free(u->home);
    *u = (guest_user){0};
}

/* A missing file is an empty one (a scratch image has neither). */
static int read_db(const char *path, char **ret, size_t *ret_len, bb_error **err)
{
    *ret = NULL;
    *ret_len = 0;
    if (access(path, F_OK) < 0 && errno == ENOENT)
        return 0;
    if (read_file(path, USER_DB_MAX, ret, ret_len, err) < 0)
        return bb_prefix(err, "cannot read the image's %s to find its USER", path);
    return 0;
}

int user_apply(launch_spec *spec, bb_error **err)
{
    if (!spec->user || !spec->user[0])
        return 0;
    _cleanup_free_ char *pw = NULL, *gr = NULL;
    size_t pw_len, gr_len;
    if (read_db(PASSWD_PATH, &pw, &pw_len, err) < 0 || read_db(GROUP_PATH, &gr, &gr_len, err) < 0)
        return -1;
    guest_user u, root;
    if (user_resolve(spec->user, pw ? pw : "", pw_len, gr ? gr : "", gr_len, &u, err) < 0)
        return -1;
    spec->uid = u.uid;
    spec->gid = u.gid;
    free(spec->groups);
    spec->groups = steal_pointer(&u.groups);
    spec->n_groups = u.n_groups;
    /* podman set HOME for the container's root (the VMM's user): root's home, or "/". Unless
     * the image chose another, it becomes the workload user's, as podman would have set it. */
    bool have_root = user_resolve("0", pw ? pw : "", pw_len, "", 0, &root, NULL) == 0;
    for (size_t i = 0; i < spec->env.n; i++) {
        char *e = spec->env.v[i];
        if (strncmp(e, "HOME=", 5) != 0 || !have_root || !streq(e + 5, root.home))
            continue;
        free(e);
        spec->env.v[i] = xasprintf("HOME=%s", u.home);
    }
    if (have_root)
        user_clear(&root);
    user_clear(&u);
    return 0;
}

char *user_shell_entry(const char *passwd, size_t len, uid_t uid)
{
    pw_entry pw;
    if (!pw_find(passwd, len, (span){"", 0}, true, uid, &pw) || pw.shell.n == 0)
        return NULL;
    return xstrndup(pw.shell.p, pw.shell.n);
}

/* A shell one can log in with: an absolute path to an executable, and not one of the
 * programs passwd names to refuse a login (nologin, false). */
static bool login_shell_ok(const char *path)
{
    if (!path || path[0] != '/' || access(path, X_OK) < 0)
        return false;
    const char *base = strrchr(path, '/') + 1;
    return !strstr(base, "nologin") && !streq(base, "false");
}

char *user_login_shell(uid_t uid)
{
    _cleanup_free_ char *pw = NULL, *mine = NULL;
    size_t pw_len = 0;
    if (read_db(PASSWD_PATH, &pw, &pw_len, NULL) == 0 && pw)
        mine = user_shell_entry(pw, pw_len, uid);
    bool ok = login_shell_ok(mine);
    /* A plain /bin/sh is often only useradd's default: bash, where the image has it. */
    if (ok && !streq(mine, "/bin/sh"))
        return steal_pointer(&mine);
    if (login_shell_ok(LOGIN_SHELL_BASH))
        return xstrdup(LOGIN_SHELL_BASH);
    return xstrdup(ok ? mine : LOGIN_SHELL_SH);
}
