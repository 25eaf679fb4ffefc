/* Filesystem helpers. Anything that walks a tree a guest may have written uses fds and
 * never follows a symlink.
 *
 * Errors: every function here that can fail takes `bb_error **err` (NULL when the caller
 * only needs to know that it failed) and returns -1, or NULL for the pointer-returning
 * ones, with the errno in (*err)->status; callers never read errno after them. The
 * functions without `err` cannot fail (path_join aborts on out of memory) or answer a
 * question (path_exists, is_dir). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"
#include "strv.h"

/* Read a whole regular file (at most max bytes) into a NUL-terminated buffer. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len, bb_error **err);
/* write() all of data to fd, retrying on EINTR; `what` names the file in the error
 * ("cannot write <what>: <strerror>"). */
int write_full(int fd, const char *data, size_t len, const char *what, bb_error **err);
/* Write data to path atomically: a temp file beside it, fsync, rename. */
int write_file_atomic(const char *path, const char *data, size_t len, mode_t mode, bb_error **err);
/* mkdir -p with the given mode for directories it creates. */
int mkdir_p(const char *path, mode_t mode, bb_error **err);
/* Open path relative to dirfd beneath it: no symlinks, no escaping, no magic links. Returns
 * the fd (O_CLOEXEC) or -1 ("cannot open <path>: <strerror>"). */
int openat_beneath(int dirfd, const char *path, int flags, mode_t mode, bb_error **err);
/* Remove everything below and including name (relative to dirfd), never following
 * a symlink. ENOENT is success. */
int rm_rf_at(int dirfd, const char *name, bb_error **err);
int rm_rf(const char *path, bb_error **err);
/* Give path and everything below it to uid:gid, never following a symlink (links are
 * re-owned themselves). */
int chown_tree(const char *path, uid_t uid, gid_t gid, bb_error **err);
/* 1 when path is a directory with no entries (or does not exist), 0 when it has some. */
int dir_is_empty(const char *path, bb_error **err);
bool path_exists(const char *path);
/* Whether the host kernel can give a tmpfs transparent huge pages (its huge= mount option);
 * TMPFS_HUGE_OPTION asks for them only for pages inside a file's size, so small files on
 * the same tmpfs stay small. */
bool tmpfs_has_huge_pages(void);
#define TMPFS_HUGE_OPTION "huge=within_size"
bool is_dir(const char *path);
/* Join two path parts with one '/'. */
char *path_join(const char *a, const char *b);
/* Add the names in the directory dfd (not . and ..) to *ret, in directory order. */
int list_dir_at(int dfd, strv *ret, bb_error **err);
/* The target of the symlink name in dfd, or NULL ("cannot read the link <name>: ..."). */
char *readlink_at(int dfd, const char *name, bb_error **err);
