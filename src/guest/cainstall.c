/* The sandbox CA in the guest's trust store. See cainstall.h. */
#include "cainstall.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/xalloc.h"

/* The images' CA bundles, the file every distribution's tools read first. */
static const char *const bundles[] = {
    "/etc/ssl/certs/ca-certificates.crt",                /* Debian, Ubuntu, Alpine, Arch */
    "/etc/pki/tls/certs/ca-bundle.crt",                  /* Fedora, RHEL */
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", /* Fedora, RHEL (the real file) */
    "/etc/ssl/ca-bundle.pem",                            /* openSUSE */
    "/etc/ssl/cert.pem",                                 /* Alpine, BSD heritage */
};
#define DEFAULT_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BUNDLE_MAX     (16u << 20)

static void set_env(strv *env, const char *name, const char *value)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < env->n; i++)
        if (strncmp(env->v[i], name, n) == 0 && env->v[i][n] == '=')
            return; /* the workload's own choice */
    strv_push(env, xasprintf("%s=%s", name, value));
}

static void set_all(strv *env, const char *bundle)
{
    static const char *const vars[] = CA_ENV_VARS;
    for (size_t i = 0; i < ELEMENTSOF(vars); i++)
        set_env(env, vars[i], bundle);
}

/* pem ends in a newline; a bundle may not: one goes before it then. */
static int append(int fd, const struct stat *st, const char *pem, const char *path, bb_error **err)
{
    char last = '\n';
    if (st->st_size > 0 && pread(fd, &last, 1, st->st_size - 1) != 1)
        last = '\n';
    if (last != '\n' && write_full(fd, "\n", 1, path, err) < 0)
        return -1;
    return write_full(fd, pem, strlen(pem), path, err);
}

/* Never written through an image's symlink: bluebox's paths, the kernel's, and the mounts
 * the guest shares with the host (/data, the Bluefile's). */
static bool off_limits(const char *path, const strv *shared)
{
    static const char *const ours[] = {"/.bluebox", "/proc", "/sys", "/dev"};
    for (size_t i = 0; i < ELEMENTSOF(ours); i++)
        if (path_within(path, ours[i]))
            return true;
    for (size_t i = 0; shared && i < shared->n; i++)
        if (path_within(path, shared->v[i]))
            return true;
    return false;
}

typedef struct seen {
    dev_t dev[8];
    ino_t ino[8];
    size_t n;
} seen;

/* Append to one bundle if it resolves to a regular file of the guest's own root that has not
 * had it yet. 1 when appended, 0 when skipped. Runs before any workload: nothing can move the
 * files between the lookup and the open. */
static int try_bundle(const char *root, const char *rel, const strv *shared, seen *sn,
                      const char *pem, bb_error **err)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, rel);
    _cleanup_free_ char *real = realpath(path, NULL);
    size_t rn = strlen(root);
    if (!real || strncmp(real, root, rn) != 0 || real[rn] != '/' || off_limits(real + rn, shared))
        return 0;
    _cleanup_close_ int fd =
        open(real, O_RDWR | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return errno == EROFS || errno == ENOENT
                   ? 0
                   : bb_fail_errno(err, errno, "cannot add the sandbox CA to %s", rel);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    for (size_t i = 0; i < sn->n; i++)
        if (sn->dev[i] == st.st_dev && sn->ino[i] == st.st_ino)
            return 0;
    if (sn->n < ELEMENTSOF(sn->ino)) {
        sn->dev[sn->n] = st.st_dev;
        sn->ino[sn->n++] = st.st_ino;
    }
    return append(fd, &st, pem, rel, err) < 0 ? -1 : 1;
}

static int write_new(const char *path, const char *a, size_t alen, const char *pem, bb_error **err)
{
    _cleanup_close_ int fd =
        open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot write %s", path);
    if (alen && (write_full(fd, a, alen, path, err) < 0 ||
                 (a[alen - 1] != '\n' && write_full(fd, "\n", 1, path, err) < 0)))
        return -1;
    return write_full(fd, pem, strlen(pem), path, err);
}

/* A read-only root: the image's first bundle and ours, in a file on a tmpfs of the guest. */
static int readonly_bundle(const char *root, const char *pem, strv *env, bb_error **err)
{
    _cleanup_free_ char *image = NULL;
    size_t len = 0;
    for (size_t i = 0; i < ELEMENTSOF(bundles) && !image; i++) {
        _cleanup_free_ char *p = xasprintf("%s%s", root, bundles[i]);
        if (read_file(p, BUNDLE_MAX, &image, &len, NULL) < 0)
            image = NULL;
    }
    static const char *const dirs[] = {"/run", "/tmp"};
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        _cleanup_free_ char *dir = xasprintf("%s%s", root, dirs[i]);
        struct stat st;
        if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) < 0)
            continue;
        _cleanup_free_ char *path = xasprintf("%s/bluebox-ca-bundle.pem", dir);
        if (write_new(path, image, image ? len : 0, pem, err) < 0)
            return -1;
        _cleanup_free_ char *inside = xasprintf("%s/bluebox-ca-bundle.pem", dirs[i]);
        set_all(env, inside);
        return 0;
    }
    return bb_fail(err, EROFS,
                   "cannot install the sandbox CA: the root is read-only and it has "
                   "no /run or /tmp");
}

int ca_install(const char *root, const char *pem, bool readonly, const strv *shared, strv *env,
               bb_error **err)
{
    if (readonly)
        return readonly_bundle(root, pem, env, err);
    seen sn = {0};
    const char *first = NULL;
    for (size_t i = 0; i < ELEMENTSOF(bundles); i++) {
        int r = try_bundle(root, bundles[i], shared, &sn, pem, err);
        if (r < 0)
            return -1;
        if (r > 0 && !first)
            first = bundles[i];
    }
    if (!first) { /* an image without a CA bundle: ours is its only one */
        _cleanup_free_ char *etc = xasprintf("%s/etc", root);
        _cleanup_free_ char *ssl = xasprintf("%s/etc/ssl", root);
        _cleanup_free_ char *certs = xasprintf("%s/etc/ssl/certs", root);
        _cleanup_free_ char *p = xasprintf("%s" DEFAULT_BUNDLE, root);
        (void)mkdir(etc, 0755);
        (void)mkdir(ssl, 0755);
        (void)mkdir(certs, 0755);
        if (write_new(p, NULL, 0, pem, err) < 0)
            return -1;
        first = DEFAULT_BUNDLE;
    }
    set_all(env, first);
    return 0;
}
