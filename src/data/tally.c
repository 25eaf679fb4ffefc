/* Counting what a /data operation wrote and skipped. */
#include "tally.h"

#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "util/xalloc.h"

static const char *const kind_names[SKIP_N][2] = {
    [SKIP_DEVICE] = {"device", "devices"},
    [SKIP_FIFO] = {"fifo", "fifos"},
    [SKIP_SOCKET] = {"socket", "sockets"},
    [SKIP_CHANGED] = {"changed while reading", "changed while reading"},
    [SKIP_CONFLICT] = {"of another type than what is there", "of another type than what is there"},
    [SKIP_DEEP] = {"nested too deeply", "nested too deeply"},
};

uint64_t tally_skipped(const data_tally *t)
{
    uint64_t n = 0;
    for (int k = 0; k < SKIP_N; k++)
        n += t->skipped[k];
    return n;
}

char *tally_describe(const data_tally *t)
{
    _cleanup_sb_ strbuf b = {0};
    sb_puts(&b, "");
    for (int k = 0; k < SKIP_N; k++)
        if (t->skipped[k])
            sb_printf(&b, "%s%" PRIu64 " %s", b.len ? ", " : "", t->skipped[k],
                      kind_names[k][t->skipped[k] != 1]);
    return sb_steal(&b);
}

char *tally_format(const data_tally *t)
{
    _cleanup_sb_ strbuf b = {0};
    sb_printf(&b, "ok %" PRIu64 " %" PRIu64, t->entries, t->bytes);
    for (int k = 0; k < SKIP_N; k++)
        sb_printf(&b, " %" PRIu64, t->skipped[k]);
    sb_printf(&b, " %" PRIu64 " %" PRIu64, t->xattrs_ignored, t->xattrs_lost);
    return sb_steal(&b);
}

int tally_parse(const char *s, data_tally *ret)
{
    data_tally t = {0};
    int used = 0;
    if (sscanf(s, "ok %" SCNu64 " %" SCNu64 "%n", &t.entries, &t.bytes, &used) != 2)
        return -1;
    s += used;
    for (int k = 0; k < SKIP_N; k++) {
        if (sscanf(s, " %" SCNu64 "%n", &t.skipped[k], &used) != 1)
            return -1;
        s += used;
    }
    /* Absent from a bluebox that carried no extended attributes. */
    if (sscanf(s, " %" SCNu64 " %" SCNu64, &t.xattrs_ignored, &t.xattrs_lost) != 2)
        t.xattrs_ignored = t.xattrs_lost = 0;
    *ret = t;
    return 0;
}

skip_kind skip_kind_of(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
        return SKIP_N;
    case S_IFIFO:
        return SKIP_FIFO;
    case S_IFSOCK:
        return SKIP_SOCKET;
    default:
        return SKIP_DEVICE;
    }
}
