/* The connection log as a table. Field names are read leniently (the VMM's, and the
 * spellings a later VMM may use), and a value of the wrong type shows as "?". */
#include "netlog.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/json.h"
#include "util/tty.h"
#include "util/xalloc.h"

enum { COL_TIME, COL_DEST, COL_DECISION, COL_RULE, COL_BYTES, COL_MS, N_COLS };
static const char *const heads[N_COLS] = {"TIME", "DESTINATION",   "DECISION",
                                          "RULE", "BYTES UP/DOWN", "MS"};
/* Long fields are cut: a hostile name must not push the table off the screen. */
#define FIELD_MAX 64

typedef struct {
    char *col[N_COLS];
} row;

static json_t *first_of(json_t *o, const char *const *names)
{
    for (; *names; names++) {
        json_t *v = json_object_get(o, *names);
        if (v && !json_is_null(v))
            return v;
    }
    return NULL;
}

/* Text for the table: escaped (control bytes, bad UTF-8) and cut at FIELD_MAX. */
static char *shown(const char *s, size_t len)
{
    _cleanup_sb_ strbuf b = {0};
    sb_puts(&b, "");
    bool cut = len > FIELD_MAX;
    tty_escape(&b, s, cut ? FIELD_MAX : len, 0);
    if (cut)
        sb_puts(&b, "…");
    return sb_steal(&b);
}

static char *text_of(json_t *v)
{
    if (!v)
        return xstrdup("-");
    if (json_is_string(v))
        return shown(json_string_value(v), json_string_length(v));
    if (json_is_integer(v))
        return xasprintf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v) && json_real_value(v) > -1e15 && json_real_value(v) < 1e15)
        return xasprintf("%.0f", json_real_value(v));
    if (json_is_boolean(v))
        return xstrdup(json_is_true(v) ? "true" : "false");
    return xstrdup("?");
}

/* A time: text as it is, or seconds (or milliseconds) since the epoch as UTC. */
static char *time_of(json_t *v)
{
    if (!v || !json_is_number(v))
        return text_of(v);
    double t = json_number_value(v);
    if (t > 1e12)
        t /= 1000; /* milliseconds */
    if (!(t >= 0 && t < 1e11))
        return xstrdup("?");
    time_t s = (time_t)t;
    struct tm tm;
    char buf[32];
    if (!gmtime_r(&s, &tm) || !strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm))
        return xstrdup("?");
    return xstrdup(buf);
}

static char *dest_of(json_t *o)
{
    static const char *const names[] = {"name", "host", "sni", "dst", "addr", NULL};
    _cleanup_free_ char *name = text_of(first_of(o, names));
    json_t *port = json_object_get(o, "port");
    if (!port || json_is_null(port))
        return steal_pointer(&name);
    _cleanup_free_ char *p = text_of(port);
    return xasprintf("%s:%s", name, p);
}

static char *rule_of(json_t *o)
{
    static const char *const rules[] = {"rule", NULL}, *const reasons[] = {"reason", "why", NULL};
    json_t *rule = first_of(o, rules), *reason = first_of(o, reasons);
    _cleanup_free_ char *r = text_of(rule), *why = text_of(reason);
    if (!reason || (rule && json_equal(rule, reason)))
        return steal_pointer(&r);
    if (!rule)
        return steal_pointer(&why);
    return xasprintf("%s (%s)", r, why);
}

static char *bytes_of(json_t *o)
{
    static const char *const ups[] = {"bytes_up", "up_bytes", "up",   "bytes_out",
                                      "out",      "tx",       "sent", NULL};
    static const char *const downs[] = {"bytes_down", "down_bytes", "down",     "bytes_in",
                                        "in",         "rx",         "received", NULL};
    json_t *bytes = json_object_get(o, "bytes");
    json_t *in = json_is_object(bytes) ? bytes : o;
    _cleanup_free_ char *up = text_of(first_of(in, ups)), *down = text_of(first_of(in, downs));
    return xasprintf("%s/%s", up, down);
}

static bool row_of(const char *line, size_t len, row *r)
{
    json_error_t je;
    _cleanup_json_ json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(o))
        return false;
    static const char *const times[] = {"time", "ts", "at", NULL},
                             *const decisions[] = {"decision", "verdict", "action", NULL},
                             *const mss[] = {"ms", "duration_ms", "dur_ms", "duration", NULL};
    r->col[COL_TIME] = time_of(first_of(o, times));
    r->col[COL_DEST] = dest_of(o);
    r->col[COL_DECISION] = text_of(first_of(o, decisions));
    r->col[COL_RULE] = rule_of(o);
    r->col[COL_BYTES] = bytes_of(o);
    r->col[COL_MS] = text_of(first_of(o, mss));
    return true;
}

static void row_free(row *r)
{
    for (int c = 0; c < N_COLS; c++)
        free(r->col[c]);
}

static void put_row(strbuf *b, const char *const *cols, const size_t *w)
{
    for (int c = 0; c < N_COLS; c++) {
        if (c == N_COLS - 1)
            sb_printf(b, "%s\n", cols[c]);
        else
            sb_printf(b, "%-*s  ", (int)w[c], cols[c]);
    }
}

char *netlog_render(const char *text, size_t len, size_t max_lines, size_t *ret_bad)
{
    size_t n = 0, cap = 0, bad = 0, first = 0;
    row *rows = NULL;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t l = nl ? (size_t)(nl - (text + at)) : len - at;
        if (l > 0) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                rows = xreallocarray(rows, cap, sizeof *rows);
            }
            rows[n] = (row){{0}};
            if (row_of(text + at, l, &rows[n]))
                n++;
            else
                bad++;
        }
        at += l + 1;
    }
    if (n > max_lines)
        first = n - max_lines;
    size_t w[N_COLS];
    for (int c = 0; c < N_COLS; c++) {
        w[c] = strlen(heads[c]);
        for (size_t i = first; i < n; i++)
            if (strlen(rows[i].col[c]) > w[c])
                w[c] = strlen(rows[i].col[c]);
    }
    _cleanup_sb_ strbuf b = {0};
    sb_puts(&b, "");
    put_row(&b, heads, w);
    for (size_t i = first; i < n; i++)
        put_row(&b, (const char *const *)rows[i].col, w);
    for (size_t i = 0; i < n; i++)
        row_free(&rows[i]);
    free(rows);
    *ret_bad = bad;
    return sb_steal(&b);
}
