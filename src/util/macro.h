/* Small macros every file uses: cleanup attributes, ownership transfer, array size. */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _noreturn_     __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_  __attribute__((warn_unused_result))
#define ELEMENTSOF(x)  (sizeof(x) / sizeof((x)[0]))

static inline void freep(void *p)
{
    free(*(void **)p);
}

static inline void closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

static inline void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}

#define _cleanup_free_     _cleanup_(freep)
#define _cleanup_close_    _cleanup_(closep)
#define _cleanup_fclose_   _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Hand ownership out of a cleanup-managed variable. */
#define steal_pointer(pp)                                                                          \
    ({                                                                                             \
        __typeof__(*(pp)) _ptr_ = *(pp);                                                           \
        *(pp) = NULL;                                                                              \
        _ptr_;                                                                                     \
    })

#define steal_fd(fdp)                                                                              \
    ({                                                                                             \
        int _fd_ = *(fdp);                                                                         \
        *(fdp) = -1;                                                                               \
        _fd_;                                                                                      \
    })

#define streq(a, b)           (strcmp((a), (b)) == 0)
#define startswith(s, prefix) (strncmp((s), (prefix), strlen(prefix)) == 0)

/* Whether an absolute path is dir or inside it ("/a" and "/a/b", not "/ab"); trailing
 * slashes of dir do not count, and everything is within "/". */
static inline bool path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 1 && dir[0] == '/')
        return path[0] == '/';
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}
