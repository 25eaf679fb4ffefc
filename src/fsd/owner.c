/* The mapped-ownership record (see owner.h). */
#include "fsd/owner.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define OWN_VERSION 1

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void fsd_own_encode(const fsd_own *o, uint8_t out[FSD_OWN_RECORD_LEN])
{
    memset(out, 0, FSD_OWN_RECORD_LEN);
    out[0] = OWN_VERSION;
    put32(out + 4, o->uid);
    put32(out + 8, o->gid);
    put32(out + 12, o->mode);
    put32(out + 16, (uint32_t)o->rdev);
    put32(out + 20, (uint32_t)(o->rdev >> 32));
}

static bool type_fits(uint32_t type, mode_t host_type)
{
    if (host_type == S_IFDIR)
        return type == S_IFDIR;
    if (host_type != S_IFREG)
        return false;
    return type == S_IFREG || type == S_IFCHR || type == S_IFBLK || type == S_IFIFO ||
           type == S_IFSOCK;
}

int fsd_own_decode(const uint8_t *in, size_t len, mode_t host_type, fsd_own *ret)
{
    if (len != FSD_OWN_RECORD_LEN || in[0] != OWN_VERSION || in[1] || in[2] || in[3])
        return -EINVAL;
    fsd_own o = {
        .uid = get32(in + 4),
        .gid = get32(in + 8),
        .mode = get32(in + 12),
        .rdev = (uint64_t)get32(in + 16) | (uint64_t)get32(in + 20) << 32,
    };
    if ((o.mode & ~(uint32_t)(S_IFMT | 07777)) || !type_fits(o.mode & S_IFMT, host_type))
        return -EINVAL;
    /* (uid_t)-1 means "no change" to chown: no file can be owned by it. */
    if (o.uid == UINT32_MAX || o.gid == UINT32_MAX)
        return -EINVAL;
    if ((o.mode & S_IFMT) != S_IFCHR && (o.mode & S_IFMT) != S_IFBLK && o.rdev)
        return -EINVAL;
    *ret = o;
    return 0;
}

fsd_own fsd_own_default(mode_t host_mode)
{
    return (fsd_own){.mode = (uint32_t)host_mode & ~(uint32_t)(S_ISUID | S_ISGID)};
}

bool fsd_own_is_default(const fsd_own *o, mode_t host_mode)
{
    fsd_own d = fsd_own_default(host_mode);
    return o->uid == 0 && o->gid == 0 && o->mode == d.mode && o->rdev == 0;
}

mode_t fsd_own_host_mode(uint32_t guest_mode)
{
    /* Never group- or world-writable on the host, whatever the guest sets: a hostile guest
     * must not leave a file in your rw mount that another local user may change before you
     * run it. The guest keeps its own view in the record. */
    mode_t perm = (mode_t)guest_mode & 0755;
    switch (guest_mode & S_IFMT) {
    case S_IFDIR:
        return S_IFDIR | perm | 0700;
    case S_IFREG:
        return S_IFREG | perm | 0600;
    default:
        return S_IFREG | 0600;
    }
}

void fsd_proc_path(char *buf, size_t size, int fd)
{
    snprintf(buf, size, "/proc/self/fd/%d", fd);
}

int fsd_own_read(int fd, mode_t host_type, fsd_own *ret)
{
    char path[32];
    uint8_t rec[FSD_OWN_RECORD_LEN + 1];
    fsd_proc_path(path, sizeof(path), fd);
    ssize_t n = getxattr(path, FSD_OWN_XATTR, rec, sizeof(rec));
    if (n < 0)
        return errno == ERANGE ? -ENODATA : -errno;
    if (fsd_own_decode(rec, (size_t)n, host_type, ret) < 0)
        return -ENODATA;
    return 0;
}

int fsd_own_write(int fd, const fsd_own *o)
{
    char path[32];
    uint8_t rec[FSD_OWN_RECORD_LEN];
    fsd_proc_path(path, sizeof(path), fd);
    fsd_own_encode(o, rec);
    return setxattr(path, FSD_OWN_XATTR, rec, sizeof(rec), 0) < 0 ? -errno : 0;
}
