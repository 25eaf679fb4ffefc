/* Reading a tar archive a guest may have shaped, all or nothing: every entry is checked
 * before it is written, and written only beneath the destination directory, through
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), so the destination holds nothing but what
 * passed. The destination is a private staging directory; the caller swaps it in only when
 * the whole archive was read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tally.h"
#include "util/err.h"

struct archive;

typedef struct {
    bool chown; /* give every entry to uid:gid (strict /data) */
    uid_t uid;
    gid_t gid;
    /* What the destination may take: bytes of disk (pages written, zero pages left as
     * holes, 4 KiB per directory) and entries, 0 = no limit. An archive that needs more is
     * refused before it fills the disk (a tar bomb), with what it needs. */
    uint64_t max_bytes, max_entries;
    /* For that refusal: the disk's free bytes and the part of them kept free, and why. */
    uint64_t free_bytes, keep_free;
    const char *keep_free_why;
    /* How far the process's data segment may grow while the archive is read (RLIMIT_DATA,
     * lifted again after), 0 = no cap: libarchive reads a GNU sparse map whole before it
     * hands over the entry, and a few hundred KiB of gzip make a map of gigabytes. */
    uint64_t max_memory;
} safetar_opts;

/* A reader for .tar, .tar.gz and .tar.zst (no other format or filter). */
int safetar_open_fd(int fd, struct archive **ret, bb_error **err);
int safetar_open_memory(const void *buf, size_t len, struct archive **ret, bb_error **err);
void safetar_close(struct archive *a);

/* Extract every entry into dest_fd (an empty directory), or refuse with the entry and the
 * reason ("entry "a/../b": escapes the archive root"); what was written is then the
 * caller's to remove. Keeps modes without setuid/setgid/sticky, mtimes, symlinks (never
 * followed) and hard links to earlier entries, and the user.bluebox.* attributes of files
 * and directories (no other xattr: those are counted in t->xattrs_ignored); refuses
 * devices, fifos and sockets. Files
 * come out sparse: holes of sparse entries and zero pages of any entry are not written.
 * Sparse maps must be in order, inside the entry's size and at most DATA_MAX_SEGMENTS. */
int safetar_extract(struct archive *a, int dest_fd, const safetar_opts *o, data_tally *t,
                    bb_error **err);
