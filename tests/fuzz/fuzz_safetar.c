/* libFuzzer target: the restore path's archive validator and extractor over hostile bytes
 * (plain, gzip or zstd tar), extracting into dest/ inside a fresh temporary directory.
 * Checks: an error always comes with a message; nothing appears beside dest/ (no escape);
 * dest/ holds only directories, regular files and symlinks, none setuid or setgid, and
 * every directory is reachable by its owner (at least 0700); no entry has an extended
 * attribute but user.bluebox.*, and a symlink has none; the entry limit holds; and the
 * disk dest/ takes stays within the byte budget (sparse entries and zero runs stay holes,
 * so a terabyte-sized entry costs only its data). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "data/safetar.h"
#include "data/xattrs.h"
#include "util/fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

#define MAX_ENTRIES 1000
#define MAX_BYTES   (64u << 20)

static unsigned long long allocated; /* st_blocks of everything under dest/, in bytes */

/* Only user.bluebox.* names, and none on a symlink. */
static void check_xattrs(int dfd, const char *name, bool link)
{
    char path[64 + 256], names[16384];
    snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dfd, name);
    ssize_t n = llistxattr(path, names, sizeof names);
    CHECK(n >= 0 || errno == ENOTSUP);
    CHECK(!link || n <= 0);
    for (char *p = names; n > 0 && p < names + n; p += strlen(p) + 1)
        CHECK(xattr_carried(p));
}

static unsigned check_tree(int dfd)
{
    unsigned n = 0;
    DIR *d = fdopendir(dup(dfd));
    CHECK(d != NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        n++;
        struct stat st;
        CHECK(fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
        allocated += (unsigned long long)st.st_blocks * 512;
        CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode));
        CHECK((st.st_mode & (S_ISUID | S_ISGID)) == 0);
        check_xattrs(dfd, de->d_name, S_ISLNK(st.st_mode));
        if (S_ISDIR(st.st_mode)) {
            CHECK((st.st_mode & 0700) == 0700);
            int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            CHECK(sub >= 0);
            n += check_tree(sub);
            close(sub);
        }
    }
    closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char top[] = "/tmp/fuzz-safetar-XXXXXX";
    CHECK(mkdtemp(top) != NULL);
    int topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(topfd >= 0 && mkdirat(topfd, "dest", 0700) == 0);
    int dest = openat(topfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    CHECK(dest >= 0);

    struct archive *a = NULL;
    bb_error *err = NULL;
    data_tally t = {0};
    safetar_opts o = {.max_bytes = MAX_BYTES, .max_entries = MAX_ENTRIES};
    if (safetar_open_memory(data, size, &a, &err) == 0) {
        int r = safetar_extract(a, dest, &o, &t, &err);
        CHECK((r < 0) == (err != NULL));
        CHECK(!err || (err->msg && *err->msg));
        safetar_close(a);
    } else {
        CHECK(err && err->msg);
    }
    bb_error_free(err);
    CHECK(t.entries <= MAX_ENTRIES);

    /* Only dest/ beside it, and dest/ holds only safe things. */
    DIR *d = fdopendir(dup(topfd));
    CHECK(d != NULL);
    struct dirent *de;
    while ((de = readdir(d)))
        CHECK(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
              strcmp(de->d_name, "dest") == 0);
    closedir(d);
    allocated = 0;
    CHECK(check_tree(dest) <= MAX_ENTRIES + 64);
    /* The budget counts 4 KiB pages; a filesystem may round a file up a little more. */
    CHECK(allocated <= MAX_BYTES + (MAX_ENTRIES + 64) * 8192ull);

    close(dest);
    CHECK(rm_rf_at(topfd, "dest", NULL) == 0);
    close(topfd);
    CHECK(rmdir(top) == 0);
    return 0;
}
