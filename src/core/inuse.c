/* The in-use lock of a sandbox's /data; see inuse.h. */
#include "inuse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "home.h"
#include "util/fs.h"
#include "util/xalloc.h"

static int open_use(const char *root, const char *name, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(root, "locks");
    if (mkdir_p(dir, 0700, err) < 0)
        return -1;
    _cleanup_free_ char *path = xasprintf("%s/%s.use", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    return fd;
}

static char *notes_dir(const char *root, const char *name)
{
    return xasprintf("%s/locks/%s.users", root, name);
}

static bool alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Notes of holders that died without releasing (SIGKILL), while others may hold the lock:
 * without this, every killed run would leave its note until the next reset. */
static void sweep_notes(const char *dir)
{
    _cleanup_closedir_ DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char *end = NULL;
        long pid = strtol(de->d_name, &end, 10);
        if (*de->d_name && !*end && pid > 0 && pid != getpid() && !alive((pid_t)pid))
            (void)unlinkat(dirfd(d), de->d_name, 0);
    }
}

int inuse_hold(const sandbox *sb, const char *what, inuse *ret, bb_error **err)
{
    const char *root = sb->root, *name = sb->name;
    *ret = (inuse){.fd = -1};
    _cleanup_close_ int fd = open_use(root, name, err);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_SH) < 0)
        if (errno != EINTR)
            return bb_fail_errno(err, errno, "cannot lock %s's /data for this %s", name, what);
    /* The note only names the holder in a refusal; the lock is what counts, so it is not
     * worth an fsync on every run. */
    _cleanup_free_ char *dir = notes_dir(root, name);
    if (mkdir_p(dir, 0700, NULL) == 0) {
        sweep_notes(dir);
        _cleanup_free_ char *note = xasprintf("%s/%d", dir, (int)getpid());
        _cleanup_close_ int nfd =
            open(note, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t len = strlen(what);
        if (nfd >= 0 && write(nfd, what, len) == (ssize_t)len && write(nfd, "\n", 1) == 1)
            ret->note = steal_pointer(&note);
        else if (nfd >= 0)
            (void)unlink(note);
    }
    ret->fd = steal_fd(&fd);
    ret->held = true;
    return 0;
}

void inuse_release(inuse *u)
{
    if (!u->held)
        return;
    if (u->note)
        (void)unlink(u->note);
    free(u->note);
    close(u->fd);
    *u = (inuse){.fd = -1};
}

/* "bluebox run (pid 1234), bluebox shell (pid 99)" from the notes of live processes. */
static char *holders(const char *root, const char *name, size_t *ret_n)
{
    _cleanup_free_ char *dir = notes_dir(root, name);
    _cleanup_sb_ strbuf b = {0};
    *ret_n = 0;
    _cleanup_closedir_ DIR *d = opendir(dir);
    if (!d)
        return NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end = NULL;
        long pid = strtol(de->d_name, &end, 10);
        if (!*de->d_name || *end || pid <= 0 || !alive((pid_t)pid))
            continue;
        _cleanup_free_ char *path = path_join(dir, de->d_name);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (read_file(path, 64, &text, &len, NULL) < 0)
            continue;
        text[strcspn(text, "\n")] = '\0';
        if (!streq(text, "run") && !streq(text, "shell") && !streq(text, "up"))
            continue;
        sb_printf(&b, "%sbluebox %s (pid %ld)", *ret_n ? ", " : "", text, pid);
        (*ret_n)++;
    }
    return sb_steal(&b);
}

/* Notes left by processes that died without releasing (SIGKILL): nobody holds the lock. */
static void clear_notes(const char *root, const char *name)
{
    _cleanup_free_ char *dir = notes_dir(root, name);
    (void)rm_rf(dir, NULL);
}

int inuse_refuse(const sandbox *sb, bb_error **err)
{
    const char *root = sb->root, *name = sb->name;
    _cleanup_close_ int fd = open_use(root, name, err);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK)
            return bb_fail_errno(err, errno, "cannot lock %s's /data", name);
        size_t n = 0;
        _cleanup_free_ char *who = holders(root, name, &n);
        return bb_fail(err, EBUSY, "%s is in use by %s; wait for %s to end or stop %s first", name,
                       who ? who : "a bluebox run or shell", n > 1 ? "them" : "it",
                       n > 1 ? "them" : "it");
    }
    clear_notes(root, name);
    return steal_fd(&fd);
}
