/* Layout and names. */
#include "home.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/xalloc.h"

bool name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > NAME_MAX_LEN || !isalnum((unsigned char)s[0]) || (s[0] & 0x80))
        return false;
    for (size_t i = 1; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80 || !(isalnum(ch) || ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

int name_check(const char *name, const char *what, bb_error **err)
{
    if (name_valid(name))
        return 0;
    /* The name is untrusted text: show it only when it is printable. */
    bool printable = strlen(name) <= 200;
    for (const char *s = name; printable && *s; s++)
        printable = (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f;
    return bb_fail(err, EINVAL,
                   "invalid %s \"%s\": use letters, digits, '.', '_' or '-' (max 64, starting "
                   "with a letter or digit)",
                   what, printable ? name : "(unprintable)");
}

int home_root(char **ret, bb_error **err)
{
    const char *h = getenv("BLUEBOX_HOME");
    if (h && *h) {
        if (h[0] != '/')
            return bb_fail(err, EINVAL, "BLUEBOX_HOME must be an absolute path, got \"%s\"", h);
        *ret = xstrdup(h);
        return 0;
    }
    h = getenv("HOME");
    if (!h || h[0] != '/')
        return bb_fail(err, EINVAL, "HOME is not set; set HOME or BLUEBOX_HOME");
    *ret = path_join(h, ".bluebox");
    return 0;
}

char *home_read_record(const char *root, const char *name, const char *file, size_t max)
{
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    _cleanup_free_ char *path = path_join(dir, file);
    char *text = NULL;
    if (read_file(path, max, &text, NULL, NULL) < 0)
        return NULL;
    text[strcspn(text, "\r\n")] = '\0';
    return text;
}

char *home_fork_parent(const char *root, const char *name)
{
    _cleanup_free_ char *text = home_read_record(root, name, HOME_FORK_OF_FILE, 1024);
    if (!text || !name_valid(text) || streq(text, name))
        return NULL;
    return steal_pointer(&text);
}

char *home_path_of(const char *root, home_path which, const char *name)
{
    switch (which) {
    case HP_SANDBOX:
        return xasprintf("%s/sandboxes/%s", root, name);
    case HP_BLUEFILE:
        return xasprintf("%s/sandboxes/%s/Bluefile", root, name);
    case HP_CONTAINERFILE:
        return xasprintf("%s/sandboxes/%s/Containerfile", root, name);
    case HP_DATA:
        return xasprintf("%s/data/%s", root, name);
    case HP_DISK:
        return xasprintf("%s/disks/%s.img", root, name);
    case HP_SNAPSHOTS:
        return xasprintf("%s/snapshots/%s", root, name);
    case HP_LOG:
        return xasprintf("%s/logs/%s.log", root, name);
    case HP_BUILD_LOG: /* not logs/<name>.build.log: a sandbox may be called <name>.build */
        return xasprintf("%s/logs/build/%s.log", root, name);
    case HP_NET_LOG: /* as the build log: not logs/<name>.net.log, a sandbox may be x.net */
        return xasprintf("%s/logs/net/%s.log", root, name);
    case HP_RUN:
        return xasprintf("%s/run/%s.json", root, name);
    }
    abort();
}

/* Owner-only, if it is a directory of ours that is not sticky. */
static void tighten_one(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & S_ISVTX) &&
        (st.st_mode & 077))
        (void)fchmod(fd, st.st_mode & 07700);
    close(fd);
}

void home_tighten(const char *root)
{
    static const char *const subdirs[] = {"data", "snapshots", "logs", "run", "locks", "sandboxes"};
    tighten_one(root);
    for (size_t i = 0; i < ELEMENTSOF(subdirs); i++) {
        _cleanup_free_ char *p = path_join(root, subdirs[i]);
        tighten_one(p);
    }
}

int home_require(const char *root, const char *name, bb_error **err)
{
    if (name_check(name, "sandbox name", err) < 0)
        return -1;
    _cleanup_free_ char *dir = home_path_of(root, HP_SANDBOX, name);
    if (!is_dir(dir))
        return bb_fail(err, ENOENT, "no sandbox \"%s\"; create it: bluebox new %s", name, name);
    return 0;
}

int home_list(const char *root, strv *ret, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(root, "sandboxes");
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return bb_fail_errno(err, errno, "cannot read %s", dir);
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!name_valid(de->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            strv_add(ret, de->d_name);
    }
    strv_sort(ret);
    return 0;
}

int home_lock(const char *root, const char *name, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(root, "locks");
    if (mkdir_p(dir, HOME_DIR_MODE, err) < 0)
        return -1;
    _cleanup_free_ char *path = xasprintf("%s/%s.lock", dir, name);
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return bb_fail_errno(err, errno, "cannot open %s", path);
        while (flock(fd, LOCK_EX) < 0) {
            if (errno != EINTR) {
                int e = errno;
                close(fd);
                return bb_fail_errno(err, e, "cannot lock %s", path);
            }
        }
        /* destroy removes the lock file while it holds it: a waiter that got the removed
         * file's lock holds nothing, so it opens the path again. */
        struct stat held, now;
        if (fstat(fd, &held) == 0 && stat(path, &now) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino)
            return fd;
        close(fd);
    }
}

/* FNV-1a: it tells homes apart, it is not a secret. 48 of its bits make 12 hex digits. */
static void mix(uint64_t *h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= c[i];
        *h *= 0x100000001b3ULL;
    }
}

char *home_id(const char *root)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    _cleanup_free_ char *canon = realpath(root, NULL);
    const char *path = canon ? canon : root;
    mix(&h, path, strlen(path) + 1);
    struct stat st;
    if (stat(path, &st) == 0) {
        uint64_t v[] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
        mix(&h, v, sizeof v);
    }
    return xasprintf("%012llx", (unsigned long long)(h >> 16));
}
