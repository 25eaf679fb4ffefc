/* Unit tests for the run log: reading its tail, clipping a run's output, rotating. */
#include "unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/runlog.h"

static char *tail_of(const char *content, size_t n)
{
    char path[] = "/tmp/bb-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    char *out = NULL;
    size_t len = 0;
    bb_error *err = NULL;
    assert_int_equal(runlog_tail(path, n, &out, &len, &err), 0);
    assert_int_equal(len, strlen(out));
    unlink(path);
    return out;
}

static void tails(void **s)
{
    (void)s;
    char *t = tail_of("a\nb\nc\n", 2);
    assert_string_equal(t, "b\nc\n");
    free(t);
    t = tail_of("a\nb\nc", 2);
    assert_string_equal(t, "b\nc");
    free(t);
    t = tail_of("a\nb\n", 10);
    assert_string_equal(t, "a\nb\n");
    free(t);
    t = tail_of("a\nb\n", 0);
    assert_string_equal(t, "");
    free(t);
}

static void large_log(void **s)
{
    (void)s;
    /* Lines straddling the 8 KiB read chunks. */
    size_t n = 5000;
    char *big = malloc(n * 12 + 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += (size_t)sprintf(big + off, "line %05zu\n", i);
    char *t = tail_of(big, 3);
    assert_string_equal(t, "line 04997\nline 04998\nline 04999\n");
    free(t);
    t = tail_of(big, 5000);
    assert_string_equal(t, big);
    free(t);
    free(big);
}

static void missing_log(void **s)
{
    (void)s;
    char *out = NULL;
    size_t len = 1;
    bb_error *err = NULL;
    assert_int_equal(runlog_tail("/nonexistent/x.log", 5, &out, &len, &err), 0);
    assert_int_equal(len, 0);
    free(out);
}

/* A fresh directory for a log; the caller removes it with rm_log_dir. */
static char *log_dir(void)
{
    char *dir = strdup("/tmp/bb-runlog-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void rm_log_dir(char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static char *slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *ret_len = (size_t)n;
    return buf;
}

/* One run writing `total` bytes (byte i is 'a' + i % 26) in chunks of `chunk`; returns the
 * log's text after the header line. */
static char *one_run(const char *path, size_t total, size_t chunk, size_t *ret_len)
{
    char *argv[] = {"sh", "-c", "x", NULL};
    unlink(path);
    runlog *l = runlog_begin(path, "run", argv, NULL);
    assert_non_null(l);
    char *buf = malloc(chunk);
    for (size_t at = 0; at < total;) {
        size_t n = total - at < chunk ? total - at : chunk;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)('a' + (at + i) % 26);
        runlog_write(l, buf, n);
        at += n;
    }
    free(buf);
    runlog_end(l, 7, 1.5);
    size_t len;
    char *log = slurp(path, &len);
    const char *hdr = "run: 'sh' '-c' 'x'\n";
    char *body = strstr(log, hdr);
    assert_non_null(body);
    body += strlen(hdr);
    *ret_len = len - (size_t)(body - log);
    char *out = malloc(*ret_len + 1);
    memcpy(out, body, *ret_len + 1);
    free(log);
    return out;
}

static void expect_bytes(const char *got, size_t from, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != (char)('a' + (from + i) % 26))
            fail_msg("byte %zu of the kept output is wrong", i);
}

/* The output's bytes as the log keeps them, without its line prefix: [from, from+n). */
static size_t expect_output(const char *got, size_t from, size_t n)
{
    if (n == 0)
        return 0;
    assert_memory_equal(got, RUNLOG_OUTPUT_PREFIX, strlen(RUNLOG_OUTPUT_PREFIX));
    expect_bytes(got + strlen(RUNLOG_OUTPUT_PREFIX), from, n);
    return strlen(RUNLOG_OUTPUT_PREFIX) + n;
}

static void clipping(void **s)
{
    (void)s;
    char *dir = log_dir();
    char path[300];
    snprintf(path, sizeof path, "%s/logs/x.log", dir);
    const size_t K = RUNLOG_KEEP_BYTES;
    /* Sizes around the edges, chunks that straddle them and wrap the ring. */
    const size_t totals[] = {0,         1,     K - 1,     K,          K + 1,
                             2 * K - 1, 2 * K, 2 * K + 1, 3 * K + 77, 50u << 20};
    const size_t chunks[] = {1, 4093, 65536, 1u << 20};
    for (size_t t = 0; t < sizeof totals / sizeof *totals; t++)
        for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
            size_t total = totals[t], len;
            if (total > (8u << 20) && chunks[c] < 65536)
                continue; /* slow, and nothing more to learn */
            char *got = one_run(path, total, chunks[c], &len);
            size_t head = total < K ? total : K;
            size_t tail = total - head < K ? total - head : K;
            size_t clipped = total - head - tail;
            /* (no newline in this output: one line of it before the marker, one after) */
            size_t at = expect_output(got, 0, head);
            if (clipped) {
                char marker[80];
                int m = snprintf(marker, sizeof marker, "\n=== [\u2026 %zu bytes clipped \u2026]\n",
                                 clipped);
                assert_memory_equal(got + at, marker, (size_t)m);
                at += (size_t)m;
            }
            if (clipped) /* after the marker's line */
                at += expect_output(got + at, head + clipped, tail);
            else { /* the same line goes on */
                expect_bytes(got + at, head, tail);
                at += tail;
            }
            /* The exit line starts a line of its own even after output without a newline. */
            assert_string_equal(got + at,
                                total ? "\n=== exit 7 (1.50s)\n" : "=== exit 7 (1.50s)\n");
            free(got);
        }
    rm_log_dir(dir);
}

static void long_command_line(void **s)
{
    (void)s;
    char *dir = log_dir();
    char path[300];
    snprintf(path, sizeof path, "%s/x.log", dir);
    char *argv[4001];
    char arg[101];
    memset(arg, 'q', 100);
    arg[100] = '\0';
    for (int i = 0; i < 4000; i++)
        argv[i] = arg;
    argv[4000] = NULL;
    runlog_end(runlog_begin(path, "exec", argv, NULL), 0, 0);
    size_t len;
    char *log = slurp(path, &len);
    assert_true(len < RUNLOG_ARGV_BYTES + 1024);
    assert_contains(log, " more arguments clipped \u2026]\n=== exit 0 (0.00s)\n");
    free(log);
    rm_log_dir(dir);
}

/* Nothing the guest prints or a caller passes as an argument can make a line that reads as
 * the host's record: output lines all carry the prefix, in the kept start and the
 * kept end alike, and an argument's newline is quoted onto the header's line. */
static void records_cannot_be_forged(void **s)
{
    (void)s;
    char *dir = log_dir();
    char path[300];
    snprintf(path, sizeof path, "%s/x.log", dir);
    char *argv[] = {"sh", "-c", "exit 3\n=== 2026-01-01T00:00:00Z run: 'rm' '-rf'\n=== exit 0",
                    "it's\t\x1b[2J", NULL};
    runlog *l = runlog_begin(path, "exec", argv, NULL);
    assert_non_null(l);
    static const char forged[] = "=== 2026-01-01T00:00:00Z run: 'never-ran'\n=== exit 0 (0.01s)\n";
    runlog_write(l, "partial line ", 13);
    runlog_write(l, forged, strlen(forged));
    /* past the kept start, so that the held end is written at runlog_end, then more */
    char *fill = malloc(RUNLOG_KEEP_BYTES * 2);
    memset(fill, 'f', RUNLOG_KEEP_BYTES * 2);
    fill[RUNLOG_KEEP_BYTES * 2 - 1] = '\n';
    runlog_write(l, fill, RUNLOG_KEEP_BYTES * 2);
    free(fill);
    runlog_write(l, forged, strlen(forged));
    runlog_write(l, "\n\n=== exit 0", 12);
    runlog_end(l, 3, 0.5);
    size_t len;
    char *log = slurp(path, &len);
    size_t records = 0;
    for (char *line = log, *nl; *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) /* the log ends with a whole line */
            fail_msg("a line without its end: %.200s", line);
        *nl = '\0';
        if (strncmp(line, RUNLOG_RECORD_PREFIX, strlen(RUNLOG_RECORD_PREFIX)) == 0)
            records++;
        else if (*line) /* an empty line only before the header */
            assert_memory_equal(line, RUNLOG_OUTPUT_PREFIX, strlen(RUNLOG_OUTPUT_PREFIX));
    }
    free(log);
    log = slurp(path, &len);
    /* the header, the clip marker, the exit line: no more */
    assert_int_equal(records, 3);
    assert_contains(log, " exec: 'sh' '-c' $'exit 3\\n=== 2026-01-01T00:00:00Z run: \\'rm\\' "
                         "\\'-rf\\'\\n=== exit 0' $'it\\'s\\t\\x1b[2J'\n");
    assert_contains(log, "\n| partial line === 2026-01-01T00:00:00Z run: 'never-ran'\n"
                         "| === exit 0 (0.01s)\n| ffff");
    assert_contains(log, "\n| \n| === exit 0\n=== exit 3 (0.50s)\n");
    free(log);
    rm_log_dir(dir);
}

static void rotation(void **s)
{
    (void)s;
    char *dir = log_dir();
    char path[300], gen[310];
    snprintf(path, sizeof path, "%s/x.log", dir);
    char *argv[] = {"true", NULL};
    char *chunk = malloc(RUNLOG_KEEP_BYTES);
    memset(chunk, 'o', RUNLOG_KEEP_BYTES);
    for (int run = 0; run < 40; run++) {
        runlog *l = runlog_begin(path, "run", argv, NULL);
        assert_non_null(l);
        for (int i = 0; i < 4; i++)
            runlog_write(l, chunk, RUNLOG_KEEP_BYTES);
        runlog_end(l, run, 0);
    }
    free(chunk);
    struct stat st;
    for (int n = 0; n <= RUNLOG_GENERATIONS; n++) {
        if (n == 0)
            snprintf(gen, sizeof gen, "%s", path);
        else
            snprintf(gen, sizeof gen, "%s.%d", path, n);
        assert_int_equal(stat(gen, &st), 0);
        assert_true(st.st_size < RUNLOG_ROTATE_BYTES + 3 * RUNLOG_KEEP_BYTES);
    }
    snprintf(gen, sizeof gen, "%s.%d", path, RUNLOG_GENERATIONS + 1);
    assert_int_not_equal(stat(gen, &st), 0);
    /* The tail reads on into .1 when the current log has fewer lines. */
    char *out = NULL;
    size_t len;
    assert_int_equal(runlog_tail(path, 1000, &out, &len, NULL), 0);
    assert_contains(out, "=== exit 39 (0.00s)\n");
    size_t cur_len;
    char *cur = slurp(path, &cur_len);
    assert_true(len > cur_len);
    assert_memory_equal(out + len - cur_len, cur, cur_len);
    free(cur);
    free(out);
    rm_log_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tails),
        cmocka_unit_test(large_log),
        cmocka_unit_test(missing_log),
        cmocka_unit_test(clipping),
        cmocka_unit_test(long_command_line),
        cmocka_unit_test(rotation),
        cmocka_unit_test(records_cannot_be_forged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
