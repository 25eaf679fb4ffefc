/* libFuzzer target: the /data file server's FUSE side (src/fsd), the guest's whole word on
 * uml. An input is a session: requests of [u16 little-endian length][bytes] (each a FUSE
 * request with its header, as a hostile guest kernel may send), served in order after an
 * INIT over a scratch export. Checks: every reply fits the buffer, its header says its own
 * length and the request's unique, its error is 0 or a negative errno, and nothing reaches
 * outside the export (ASan/UBSan catch the rest). The export is wiped between inputs; file
 * sizes are capped with RLIMIT_FSIZE so FALLOCATE and WRITE cannot fill the disk. A small
 * reply buffer is allocated at its exact size, and every descriptor the server took is given
 * back by fsd_free(). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fsd/fsd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static char dir[64];
static uint8_t *big;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    if (f->level > 0)
        remove(path);
    return 0;
}

static void setup(void)
{
    if (big)
        return;
    strcpy(dir, "/tmp/bluebox-fuzz-fsd-XXXXXX");
    CHECK(mkdtemp(dir));
    big = malloc(FSD_BUF_MAX);
    struct rlimit rl = {1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &rl);
    signal(SIGXFSZ, SIG_IGN);
}

/* Descriptors open now: a session must give back every one it took. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    CHECK(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void serve(fsd *fs, const uint8_t *in, size_t len, size_t cap)
{
    /* A small reply buffer of exactly its size, so ASan sees any byte read or written
     * past it. */
    uint8_t *small = cap < FSD_BUF_MAX ? malloc(cap ? cap : 1) : NULL;
    uint8_t *out = small ? small : big;
    size_t r = fsd_handle(fs, in, len, out, cap);
    if (r == 0) {
        free(small);
        return;
    }
    if (r == 0)
        return;
    struct fuse_out_header oh;
    CHECK(r >= sizeof(oh) && r <= cap);
    memcpy(&oh, out, sizeof(oh));
    CHECK(oh.len == r);
    CHECK(oh.error <= 0 && oh.error > -4096);
    CHECK(oh.error == 0 || r == sizeof(oh));
    if (len >= sizeof(struct fuse_in_header)) {
        struct fuse_in_header h;
        memcpy(&h, in, sizeof(h));
        if (h.len >= sizeof(h) && h.len <= len)
            CHECK(oh.unique == h.unique);
    }
    free(small);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    int fds = open_fds();
    int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(root >= 0);
    fsd *fs;
    fsd_options opt = {.max_fds = 256};
    CHECK(fsd_new(&fs, root, &opt, NULL) == 0);
    close(root);
    struct {
        struct fuse_in_header h;
        struct fuse_init_in i;
    } init = {{.len = sizeof(init), .opcode = FUSE_INIT, .unique = 1},
              {.major = 7, .minor = 36, .flags = ~0u}};
    serve(fs, (const uint8_t *)&init, sizeof(init), FSD_BUF_MAX);
    /* The reply buffer's size varies with the first byte: small buffers must be honoured. */
    size_t cap = FSD_BUF_MAX;
    if (size && data[0] < 16) {
        cap = (size_t)data[0] * 8;
        data++;
        size--;
    }
    while (size >= 2) {
        size_t n = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        size -= 2;
        if (n > size)
            n = size;
        /* A copy, so ASan sees reads past the request's end. */
        uint8_t *req = malloc(n ? n : 1);
        memcpy(req, data, n);
        serve(fs, req, n, cap);
        free(req);
        data += n;
        size -= n;
    }
    fsd_free(fs);
    CHECK(open_fds() == fds);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
