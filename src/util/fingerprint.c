/* FNV-1a over stat data. It detects change, not tampering: whoever can rewrite podman or
 * the kernel on the host is already past every boundary bluebox draws. */
#include "fingerprint.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

static void mix(fingerprint *f, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        /* Bytes of initialized values; the analyzer cannot split a symbolic uint64_t. */
        f->h ^= c[i]; // NOLINT(clang-analyzer-core.uninitialized.Assign)
        f->h *= 0x100000001b3ULL;
        f->part ^= c[i];
        f->part *= 0x100000001b3ULL;
    }
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

void fp_init(fingerprint *f)
{
    *f = (fingerprint){.h = FNV_OFFSET};
}

void fp_done(fingerprint *f)
{
    sb_freep(&f->parts);
}

static void part_begin(fingerprint *f)
{
    f->part = FNV_OFFSET;
}

/* Labels are paths or our own words: one line each, whatever a path holds. */
static void part_end(fingerprint *f, const char *label)
{
    sb_printf(&f->parts, "%016llx ", (unsigned long long)f->part);
    for (const char *c = label; *c; c++)
        sb_putc(&f->parts, *c == '\n' ? '?' : *c);
    sb_putc(&f->parts, '\n');
}

void fp_str(fingerprint *f, const char *label, const char *s)
{
    part_begin(f);
    mix(f, s, strlen(s) + 1);
    part_end(f, label);
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

static void file_data(fingerprint *f, const char *path)
{
    struct stat st;
    mix(f, path, strlen(path) + 1);
    if (lstat(path, &st) < 0) {
        mix(f, "missing", sizeof "missing");
        return;
    }
    mix_stat(f, &st);
    if (!S_ISLNK(st.st_mode))
        return;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n >= 0) {
        target[n] = '\0';
        mix(f, target, strlen(target) + 1);
    }
    if (stat(path, &st) < 0)
        mix(f, "dangling", sizeof "dangling");
    else
        mix_stat(f, &st);
}

void fp_file_as(fingerprint *f, const char *label, const char *path)
{
    part_begin(f);
    file_data(f, path);
    part_end(f, label);
}

void fp_file(fingerprint *f, const char *path)
{
    fp_file_as(f, path, path);
}

/* The hash of the part labelled `label` in a part list, or NULL. */
static const char *part_hash(const char *parts, const char *label, size_t label_len)
{
    for (const char *line = parts; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n == 17 + label_len && line[16] == ' ' && memcmp(line + 17, label, label_len) == 0)
            return line;
        line = end ? end + 1 : NULL;
    }
    return NULL;
}

/* Append the labels of `a`'s parts that `b` lacks or hashes differently. */
static void diff_into(strbuf *out, const char *a, const char *b, bool only_missing)
{
    for (const char *line = a; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (n > 17) {
            const char *other = part_hash(b, line + 17, n - 17);
            bool changed = only_missing ? !other : !other || memcmp(other, line, 16) != 0;
            if (changed)
                sb_printf(out, "%s%.*s", out->len ? ", " : "", (int)(n - 17), line + 17);
        }
        line = end ? end + 1 : NULL;
    }
}

char *fp_parts_changed(const char *was, const char *now)
{
    _cleanup_sb_ strbuf out = {0};
    diff_into(&out, now, was, false);
    diff_into(&out, was, now, true);
    return out.len ? sb_steal(&out) : NULL;
}

char *fp_hex(const fingerprint *f)
{
    return xasprintf("%016llx", (unsigned long long)f->h);
}
