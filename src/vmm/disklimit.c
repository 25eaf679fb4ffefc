/* The /data disk (Bluefile data_limit) on the VMM's side. The guest kernel may be hostile
 * (guest root loads modules into it), and then it is host code in the UML process with the
 * image open read-write: pwrite past the end, ftruncate, fallocate, or a hostfs open of the
 * image's path would all grow the host file. The host kernel's RLIMIT_FSIZE stops all of
 * them at the image's size; see disklimit.h for when it is set and why then. */
#include "vmm/disklimit.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/xalloc.h"

bool disk_limit_init(disk_limit *d, const char **why)
{
    *d = (disk_limit){0};
    const char *p = getenv(ABI_ENV_DATA_DISK);
    if (!p || !*p)
        return true;
    struct stat st;
    if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        *why = "the /data disk image is missing or not a regular file";
        return false;
    }
    d->path = p;
    d->bytes = (unsigned long long)st.st_size;
    signal(SIGXFSZ, SIG_IGN);
    return true;
}

void disk_limit_kernel_args(const disk_limit *d, strv *a)
{
    if (d->path)
        strv_push(a, xasprintf("ubd0d=%s", d->path));
}

static int cap(pid_t pid, rlim_t bytes)
{
    const struct rlimit rl = {.rlim_cur = bytes, .rlim_max = bytes};
    if (prlimit(pid, RLIMIT_FSIZE, &rl, NULL) < 0 && errno != ESRCH)
        return -1;
    return 0;
}

int disk_limit_apply(const disk_limit *d, pid_t uml)
{
    if (!d->path)
        return 0;
    if (cap(uml, (rlim_t)d->bytes) < 0)
        return -1;
    _cleanup_closedir_ DIR *dir = opendir("/proc");
    if (!dir)
        return -1;
    pid_t self = getpid();
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(dir))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == self || pid == uml)
            continue;
        r = cap((pid_t)pid, (rlim_t)d->bytes);
    }
    return r;
}
