/* Snapshot files, labels and references, and where /data operations run. */
#include "snapshots.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/home.h"
#include "util/fs.h"
#include "util/strv.h"
#include "util/xalloc.h"

static const char *const suffixes[] = {".tar.gz", ".tar.zst", ".tar"};

static const char *suffix_of(const char *file)
{
    size_t len = strlen(file);
    for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
        size_t sl = strlen(suffixes[i]);
        if (len > sl && streq(file + len - sl, suffixes[i]))
            return suffixes[i];
    }
    return NULL;
}

static int by_time(const void *a, const void *b)
{
    const snapshot_info *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* snapshots/<name>: its path, an fd and its entries. 1; 0 when there is none; -1 on error. */
static int open_snapshots(const sandbox *sb, char **ret_dir, int *ret_fd, strv *ret_names,
                          bb_error **err)
{
    _cleanup_free_ char *dir = xstrdup(sb->snapshots);
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "cannot read %s", dir);
    if (list_dir_at(dfd, ret_names, err) < 0)
        return -1;
    *ret_dir = steal_pointer(&dir);
    *ret_fd = steal_fd(&dfd);
    return 1;
}

int snapshots_list(const sandbox *sb, snapshot_list *ret, bb_error **err)
{
    *ret = (snapshot_list){0};
    _cleanup_free_ char *dir = NULL;
    _cleanup_close_ int dfd = -1;
    _cleanup_strv_ strv names = {0};
    int r = open_snapshots(sb, &dir, &dfd, &names, err);
    if (r <= 0)
        return r;
    for (size_t i = 0; i < names.n; i++) {
        const char *suffix = suffix_of(names.v[i]);
        struct stat st;
        if (!suffix || fstatat(dfd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode))
            continue;
        ret->v = xreallocarray(ret->v, ret->n + 1, sizeof *ret->v);
        ret->v[ret->n++] = (snapshot_info){
            .label = xstrndup(names.v[i], strlen(names.v[i]) - strlen(suffix)),
            .path = path_join(dir, names.v[i]),
            .size = (uint64_t)st.st_size,
            .mtime = st.st_mtim,
        };
    }
    if (ret->n)
        qsort(ret->v, ret->n, sizeof *ret->v, by_time);
    return 0;
}

void snapshots_free(snapshot_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].label);
        free(l->v[i].path);
    }
    free(l->v);
    *l = (snapshot_list){0};
}

static int regular_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int snapshot_resolve(const sandbox *sb, const char *ref, char **ret_path, bb_error **err)
{
    const char *name = sb->name;
    if (ref && strchr(ref, '/')) {
        if (!regular_file(ref))
            return bb_fail(err, ENOENT, "no archive at %s", ref);
        *ret_path = xstrdup(ref);
        return 0;
    }
    _cleanup_snapshots_ snapshot_list l = {0};
    if (snapshots_list(sb, &l, err) < 0)
        return -1;
    if (!ref || !*ref) {
        if (!l.n)
            return bb_fail(err, ENOENT,
                           "no snapshots for \"%s\"; take one with: bluebox snapshot %s", name,
                           name);
        *ret_path = xstrdup(l.v[l.n - 1].path);
        return 0;
    }
    /* A label (newest first when one label has several suffixes), then a file name. */
    for (size_t i = l.n; i-- > 0;)
        if (streq(l.v[i].label, ref)) {
            *ret_path = xstrdup(l.v[i].path);
            return 0;
        }
    _cleanup_free_ char *file = path_join(sb->snapshots, ref);
    if (name_valid(ref) && regular_file(file)) {
        *ret_path = steal_pointer(&file);
        return 0;
    }
    return bb_fail(err, ENOENT, "no snapshot \"%s\" for %s; list them with: bluebox snapshot %s -l",
                   ref, name, name);
}

int snapshot_label(const char *typed, char **ret, bb_error **err)
{
    if (!typed) {
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
        *ret = xstrdup(stamp);
        return 0;
    }
    const char *suffix = suffix_of(typed);
    _cleanup_free_ char *label =
        suffix ? xstrndup(typed, strlen(typed) - strlen(suffix)) : xstrdup(typed);
    if (name_check(label, "label", err) < 0)
        return -1;
    *ret = steal_pointer(&label);
    return 0;
}

int snapshots_cleanup(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *dir = NULL;
    _cleanup_close_ int dfd = -1;
    _cleanup_strv_ strv names = {0};
    int r = open_snapshots(sb, &dir, &dfd, &names, err);
    if (r <= 0)
        return r;
    for (size_t i = 0; i < names.n; i++) {
        size_t len = strlen(names.v[i]);
        if (len > 8 && streq(names.v[i] + len - 8, ".partial") &&
            unlinkat(dfd, names.v[i], 0) < 0 && errno != ENOENT)
            return bb_fail_errno(err, errno, "cannot remove %s/%s", dir, names.v[i]);
    }
    return 0;
}
