/* Shipped examples: lookup and installation of their extra files into /data. */
#include "examples.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/xalloc.h"

void examples_names(strv *ret)
{
    for (const embedded_file *f = embedded_examples; f->group; f++)
        if (!ret->n || !streq(ret->v[ret->n - 1], f->group))
            strv_add(ret, f->group);
    strv_sort(ret);
}

const embedded_file *examples_bluefile(const char *name)
{
    for (const embedded_file *f = embedded_examples; f->group; f++)
        if (streq(f->group, name) && streq(f->path, "Bluefile"))
            return f;
    return NULL;
}

static int write_new(int dfd, const embedded_file *f, bb_error **err)
{
    /* Parent directories first, each made beneath data_dir through an fd, so a symlink a
     * guest left in /data is never followed. */
    _cleanup_free_ char *rel = xstrdup(f->path);
    for (char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        char *slash = strrchr(rel, '/');
        _cleanup_error_ bb_error *oerr = NULL;
        _cleanup_close_ int pfd =
            slash ? (*slash = '\0', openat_beneath(dfd, rel, O_PATH | O_DIRECTORY, 0, &oerr))
                  : fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (slash)
            *slash = '/';
        if (pfd < 0)
            return bb_fail_errno(err, oerr ? oerr->status : errno, "cannot create %s", rel);
        if (mkdirat(pfd, slash ? slash + 1 : rel, 0755) < 0 && errno != EEXIST)
            return bb_fail_errno(err, errno, "cannot create %s", rel);
        *s = '/';
    }
    _cleanup_error_ bb_error *oerr = NULL;
    _cleanup_close_ int fd = openat_beneath(dfd, f->path, O_WRONLY | O_CREAT | O_EXCL, 0644, &oerr);
    if (fd < 0)
        return oerr->status == EEXIST
                   ? 0
                   : bb_fail_errno(err, oerr->status, "cannot create %s", f->path);
    for (size_t off = 0; off < f->len;) {
        ssize_t n = write(fd, f->data + off, f->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bb_fail_errno(err, errno, "cannot write %s", f->path);
        off += (size_t)n;
    }
    return 1;
}

int examples_install_extras(const char *name, const char *data_dir, bb_error **err)
{
    _cleanup_close_ int dfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", data_dir);
    int count = 0;
    for (const embedded_file *f = embedded_examples; f->group; f++) {
        if (!streq(f->group, name) || streq(f->path, "Bluefile"))
            continue;
        int r = write_new(dfd, f, err);
        if (r < 0)
            return bb_prefix(err, "example %s", name);
        count += r;
    }
    return count;
}
