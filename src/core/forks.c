/* Forks in the home layout (forks.h). */
#include "forks.h"

#include <errno.h>
#include <string.h>

#include "home.h"
#include "util/fs.h"
#include "util/xalloc.h"

/* The forks of `name`, sorted (none: an empty list). */
static int forks_of(const char *root, const char *name, strv *ret, bb_error **err)
{
    *ret = (strv){0};
    _cleanup_strv_ strv all = {0};
    if (home_list(root, &all, err) < 0)
        return -1;
    for (size_t i = 0; i < all.n; i++) {
        _cleanup_free_ char *p = home_fork_parent(root, all.v[i]);
        if (p && streq(p, name))
            strv_add(ret, all.v[i]);
    }
    strv_sort(ret);
    return 0;
}

int forks_refuse_parent(const sandbox *sb, const char *doing, bb_error **err)
{
    const char *name = sb->name;
    _cleanup_strv_ strv forks = {0};
    if (forks_of(sb->root, name, &forks, err) < 0)
        return -1;
    if (!forks.n)
        return 0;
    _cleanup_sb_ strbuf b = {0};
    for (size_t i = 0; i < forks.n; i++)
        sb_printf(&b, "%s%s", i ? ", " : "", forks.v[i]);
    return bb_fail(err, EBUSY,
                   "%s has forks (%s); apply or discard them and destroy them before you %s it",
                   name, b.s, doing);
}

int forks_refuse_fork(const sandbox *sb, const char *what_to_do, bb_error **err)
{
    if (!sb->parent)
        return 0;
    return bb_fail(err, EINVAL, "%s is a fork of %s; %s", sb->name, sb->parent, what_to_do);
}

int forks_refuse_interrupted(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *path = path_join(sb->dir, FORK_APPLYING_FILE);
    if (!path_exists(path))
        return 0;
    return bb_fail(err, EBUSY,
                   "an apply of %s into %s was interrupted; finish it first: bluebox apply %s",
                   sb->name, sb->parent ? sb->parent : "its parent", sb->name);
}
