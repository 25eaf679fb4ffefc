/* Forks in the home layout (forks.h). */
#include "forks.h"

#include <errno.h>
#include <string.h>

#include "home.h"
#include "util/fs.h"
#include "util/xalloc.h"

char *forks_parent(const char *root, const char *name)
{
    _cleanup_free_ char *text = home_read_record(root, name, FORK_OF_FILE, 1024);
    if (!text || !name_valid(text) || streq(text, name))
        return NULL;
    return steal_pointer(&text);
}

/* The forks of `name`, sorted (none: an empty list). */
static int forks_of(const char *root, const char *name, strv *ret, bb_error **err)
{
    *ret = (strv){0};
    _cleanup_strv_ strv all = {0};
    if (home_list(root, &all, err) < 0)
        return -1;
    for (size_t i = 0; i < all.n; i++) {
        _cleanup_free_ char *p = forks_parent(root, all.v[i]);
        if (p && streq(p, name))
            strv_add(ret, all.v[i]);
    }
    strv_sort(ret);
    return 0;
}

int forks_refuse_parent(const char *root, const char *name, const char *doing, bb_error **err)
{
    _cleanup_strv_ strv forks = {0};
    if (forks_of(root, name, &forks, err) < 0)
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

int forks_refuse_fork(const char *root, const char *name, const char *what_to_do, bb_error **err)
{
    _cleanup_free_ char *parent = forks_parent(root, name);
    if (!parent)
        return 0;
    return bb_fail(err, EINVAL, "%s is a fork of %s; %s", name, parent, what_to_do);
}

int forks_refuse_interrupted(const char *root, const char *name, const char *parent, bb_error **err)
{
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    _cleanup_free_ char *path = path_join(dir, FORK_APPLYING_FILE);
    if (!path_exists(path))
        return 0;
    return bb_fail(err, EBUSY,
                   "an apply of %s into %s was interrupted; finish it first: bluebox apply %s",
                   name, parent, name);
}
