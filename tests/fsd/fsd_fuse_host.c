/* Test-only: serve a directory through src/fsd over the host kernel's FUSE (/dev/fuse), the
 * same protocol UML's virtiofs speaks, so the server can be driven by real programs without
 * a guest. Never installed.
 *
 *   fsd_fuse_host [--ro] [--max-fds N] [--user UID:GID] EXPORT MOUNTPOINT
 *
 * --user: serve as that uid/gid (no capabilities) once mounted, as bluebox-vmm's server runs.
 * Mounts `fuse` on MOUNTPOINT with default_permissions,allow_other (as virtiofs mounts) and
 * serves until the mount goes away (umount) or SIGTERM/SIGINT (then it unmounts). Prints
 * "ready" on stdout once mounted. Needs root (mount). FSD_TRACE=1 logs each request's
 * opcode (and SETATTR/OPEN arguments) to stderr; FSD_RECORD=FILE appends each request (up to
 * 64 KiB) to FILE in the fuzz_fsd input format, for seeding its corpus. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fsd/fsd.h"
#include "util/err.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    fsd_options opt = {0};
    unsigned uid = 0, gid = 0;
    bool as_user = false;
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "--ro") == 0)
            opt.read_only = true;
        else if (strcmp(argv[a], "--max-fds") == 0 && a + 1 < argc)
            opt.max_fds = strtoull(argv[++a], NULL, 10);
        else if (strcmp(argv[a], "--user") == 0 && a + 1 < argc &&
                 sscanf(argv[++a], "%u:%u", &uid, &gid) == 2)
            as_user = true;
        else
            break;
    }
    if (argc - a != 2) {
        fprintf(stderr,
                "usage: fsd_fuse_host [--ro] [--max-fds N] [--user UID:GID] EXPORT MOUNTPOINT\n");
        return 2;
    }
    int root = open(argv[a], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        perror(argv[a]);
        return 1;
    }
    fsd *fs;
    bb_error *err = NULL;
    if (fsd_new(&fs, root, &opt, &err) < 0) {
        fprintf(stderr, "fsd_fuse_host: %s\n", bb_error_message(err));
        return 1;
    }
    close(root);
    int dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        perror("/dev/fuse");
        return 1;
    }
    char data[256];
    snprintf(data, sizeof(data),
             "fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other", dev);
    if (mount("bluebox-fsd", argv[a + 1], "fuse", MS_NOSUID | MS_NODEV, data) < 0) {
        perror("mount");
        return 1;
    }
    if (as_user &&
        (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)) {
        perror("dropping to --user");
        umount2(argv[a + 1], MNT_DETACH);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    bool trace = getenv("FSD_TRACE") != NULL;
    FILE *rec = getenv("FSD_RECORD") ? fopen(getenv("FSD_RECORD"), "ae") : NULL;
    char *in = malloc(FSD_BUF_MAX), *out = malloc(FSD_BUF_MAX);
    while (!stop) {
        ssize_t n = read(dev, in, FSD_BUF_MAX);
        if (n < 0) {
            if (errno == EINTR || errno == ENOENT || errno == EAGAIN)
                continue;
            if (errno != ENODEV)
                perror("read /dev/fuse");
            break;
        }
        if (trace && n >= 40) {
            struct fuse_in_header h;
            memcpy(&h, in, sizeof(h));
            fprintf(stderr, "op %u node %llu", h.opcode, (unsigned long long)h.nodeid);
            if (h.opcode == FUSE_SETATTR && n >= 48) {
                struct fuse_setattr_in si;
                memcpy(&si, in + 40, sizeof(si));
                fprintf(stderr, " valid %#x mode %o size %llu", si.valid, si.mode,
                        (unsigned long long)si.size);
            }
            if (h.opcode == FUSE_OPEN && n >= 48) {
                struct fuse_open_in oi;
                memcpy(&oi, in + 40, sizeof(oi));
                fprintf(stderr, " flags %#o", oi.flags);
            }
            fputc('\n', stderr);
        }
        if (rec && n <= 65535 && n >= 8 && (uint8_t)in[4] != FUSE_INIT) {
            uint8_t l[2] = {(uint8_t)n, (uint8_t)(n >> 8)};
            fwrite(l, 1, 2, rec);
            fwrite(in, 1, (size_t)n, rec);
            fflush(rec);
        }
        size_t r = fsd_handle(fs, in, (size_t)n, out, FSD_BUF_MAX);
        if (r && write(dev, out, r) < 0 && errno != ENOENT)
            perror("write /dev/fuse");
    }
    if (stop)
        umount2(argv[a + 1], MNT_DETACH);
    free(in);
    free(out);
    fsd_free(fs);
    return 0;
}
