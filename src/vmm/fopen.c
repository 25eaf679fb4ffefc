/* bluebox-vmm's fopen: no stream in this process follows a last-component symlink, blocks
 * on opening, or reads anything but a regular file.
 *
 * Why here and not at each call: libslirp opens /etc/resolv.conf by path, lazily, whenever
 * the guest asks the DNS forwarder and the file has changed (libslirp 4.7,
 * get_dns_addr_resolv_conf: fopen64 + fgets), in this process, outside UML's jail. With a
 * writable root a guest can put a symlink to /dev/zero there (fgets never ends: the VMM
 * spins) or a FIFO (fopen never returns: the VMM hangs). The executable's definition comes
 * first in symbol lookup, so libslirp's fopen64 is this one; so are our own fopen calls
 * (_FILE_OFFSET_BITS=64 makes fopen fopen64). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A regular file bigger than this is not a configuration file. */
#define FOPEN_MAX_SIZE ((off_t)1 << 20)

static int open_flags(const char *mode)
{
    int acc = strchr(mode, '+') ? O_RDWR : mode[0] == 'r' ? O_RDONLY : O_WRONLY;
    int flags = acc | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
    if (mode[0] == 'w')
        flags |= O_CREAT | O_TRUNC;
    else if (mode[0] == 'a')
        flags |= O_CREAT | O_APPEND;
    if (mode[0] != 'r' && strchr(mode, 'x'))
        flags |= O_EXCL;
    return flags;
}

FILE *fopen64(const char *restrict path, const char *restrict mode)
{
    if (mode[0] != 'r' && mode[0] != 'w' && mode[0] != 'a') {
        errno = EINVAL;
        return NULL;
    }
    int fd = open(path, open_flags(mode), 0600);
    if (fd < 0)
        return NULL; /* a symlink: ELOOP */
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > FOPEN_MAX_SIZE) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    /* fdopen's mode without 'x' (the file exists now) and with 'e' already applied. */
    char m[4] = {mode[0], strchr(mode, '+') ? '+' : '\0', '\0', '\0'};
    FILE *f = fdopen(fd, m);
    if (!f)
        close(fd);
    return f;
}
