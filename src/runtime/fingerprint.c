/* FNV-1a over stat data. It detects change, not tampering: whoever can rewrite podman or
 * the kernel on the host is already past every boundary bluebox draws. */
#include "fingerprint.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/xalloc.h"

static void mix(fingerprint *f, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        /* Bytes of initialized values; the analyzer cannot split a symbolic uint64_t. */
        f->h ^= c[i]; // NOLINT(clang-analyzer-core.uninitialized.Assign)
        f->h *= 0x100000001b3ULL;
    }
}

void fp_init(fingerprint *f)
{
    f->h = 0xcbf29ce484222325ULL;
}

void fp_str(fingerprint *f, const char *s)
{
    mix(f, s, strlen(s) + 1);
}

static void mix_stat(fingerprint *f, const struct stat *st)
{
    uint64_t v[] = {st->st_dev,
                    st->st_ino,
                    (uint64_t)st->st_mode,
                    (uint64_t)st->st_size,
                    (uint64_t)st->st_mtim.tv_sec,
                    (uint64_t)st->st_mtim.tv_nsec,
                    (uint64_t)st->st_ctim.tv_sec,
                    (uint64_t)st->st_ctim.tv_nsec};
    mix(f, v, sizeof v);
}

void fp_file(fingerprint *f, const char *path)
{
    struct stat st;
    fp_str(f, path);
    if (lstat(path, &st) < 0) {
        fp_str(f, "missing");
        return;
    }
    mix_stat(f, &st);
    if (!S_ISLNK(st.st_mode))
        return;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n >= 0) {
        target[n] = '\0';
        fp_str(f, target);
    }
    if (stat(path, &st) < 0)
        fp_str(f, "dangling");
    else
        mix_stat(f, &st);
}

char *fp_hex(const fingerprint *f)
{
    return xasprintf("%016llx", (unsigned long long)f->h);
}
