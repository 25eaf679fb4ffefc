/* The egress engine's connection log: one JSON line per decision, in shares. See
 * egress_engine.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/time.h"
#include "util/xalloc.h"
#include "net/egress_state.h"

/* ---- the log ---------------------------------------------------------------------------- */

void json_str(char *buf, size_t cap, size_t *off, const char *key, const char *v)
{
    if (!v || *off >= cap)
        return;
    *off += (size_t)snprintf(buf + *off, cap - *off, ",\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)v; *p && *off + 8 < cap; p++) {
        if (*p == '"' || *p == '\\')
            *off += (size_t)snprintf(buf + *off, cap - *off, "\\%c", *p);
        else if (*p < 0x20 || *p > 0x7e)
            *off += (size_t)snprintf(buf + *off, cap - *off, "\\u%04x", *p);
        else
            buf[(*off)++] = (char)*p;
    }
    if (*off + 1 < cap)
        buf[(*off)++] = '"';
}

/* "N dns and M frame lines not written", on the tcp share (while it has room). */
void log_unwritten(egress_engine *e)
{
    char why[160];
    snprintf(why, sizeof why,
             "%llu dns and %llu frame lines not written: their share of this boot's log is full",
             (unsigned long long)__atomic_load_n(&e->shared->unwritten_dns, __ATOMIC_SEQ_CST),
             (unsigned long long)__atomic_load_n(&e->shared->unwritten_frame, __ATOMIC_SEQ_CST));
    elog(e, &(logrec){.kind = "log", .port = -1, .decision = "not written", .reason = why});
}

/* Shares of EGRESS_LOG_CAP: dns lines EGRESS_LOG_DNS_CAP, frame lines EGRESS_LOG_FRAME_CAP,
 * tcp lines (what the guest's connections did) and the log's own the rest, so denials the
 * guest can make by the thousand cannot push its connections out of the log. Past its share
 * a dns or frame line is counted, and every EGRESS_LOG_UNWRITTEN_EVERY of them a summary
 * line goes to the tcp share. */
static void log_write(egress_engine *e, const char *kind, const char *line, size_t len)
{
    bool dns = streq(kind, "dns"), frame = streq(kind, "frame");
    if (dns || frame) {
        uint64_t *used = dns ? &e->shared->logged_dns : &e->shared->logged_frame;
        uint64_t cap = dns ? EGRESS_LOG_DNS_CAP : EGRESS_LOG_FRAME_CAP;
        if (__atomic_add_fetch(used, len, __ATOMIC_SEQ_CST) > cap) {
            __atomic_fetch_sub(used, len, __ATOMIC_SEQ_CST); /* a shorter line may still fit */
            __atomic_add_fetch(dns ? &e->shared->unwritten_dns : &e->shared->unwritten_frame, 1,
                               __ATOMIC_SEQ_CST);
            uint64_t all = __atomic_load_n(&e->shared->unwritten_dns, __ATOMIC_SEQ_CST) +
                           __atomic_load_n(&e->shared->unwritten_frame, __ATOMIC_SEQ_CST);
            if (all % EGRESS_LOG_UNWRITTEN_EVERY == 0)
                log_unwritten(e);
            return;
        }
        ssize_t w;
        do
            w = write(e->log_fd, line, len);
        while (w < 0 && errno == EINTR);
        return;
    }
    const uint64_t tcp_cap = EGRESS_LOG_CAP - EGRESS_LOG_DNS_CAP - EGRESS_LOG_FRAME_CAP;
    uint64_t before = __atomic_fetch_add(&e->shared->logged, len, __ATOMIC_SEQ_CST);
    if (before + len <= tcp_cap) {
        ssize_t w;
        do
            w = write(e->log_fd, line, len);
        while (w < 0 && errno == EINTR);
        return;
    }
    if (before <= tcp_cap) { /* the line that crossed the cap says so, once */
        static const char full[] = "{\"kind\":\"log\",\"decision\":\"log full\",\"reason\":\"the "
                                   "connection log reached its size for this boot\"}\n";
        ssize_t w = write(e->log_fd, full, sizeof full - 1);
        (void)w;
    }
}

void elog(egress_engine *e, const logrec *r)
{
    if (e->log_fd < 0)
        return;
    char buf[LOG_LINE_MAX], ts[32] = "";
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    size_t off =
        (size_t)snprintf(buf, sizeof buf, "{\"time\":\"%s.%03ldZ\"", ts, now.tv_nsec / 1000000);
    json_str(buf, sizeof buf - 200, &off, "sandbox", e->sandbox);
    json_str(buf, sizeof buf - 200, &off, "kind", r->kind);
    json_str(buf, sizeof buf - 200, &off, "name", r->name);
    if (r->port >= 0)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ",\"port\":%d", r->port);
    json_str(buf, sizeof buf - 200, &off, "decision", r->decision);
    json_str(buf, sizeof buf - 200, &off, "rule", r->rule);
    json_str(buf, sizeof buf - 200, &off, "reason", r->reason);
    json_str(buf, sizeof buf - 200, &off, "seen", r->seen);
    json_str(buf, sizeof buf - 200, &off, "addr", r->addr);
    if (r->stats)
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ",\"bytes_up\":%llu,\"bytes_down\":%llu,\"duration_ms\":%lld",
                                (unsigned long long)r->st.up, (unsigned long long)r->st.down,
                                (long long)r->ms);
    if (r->brokered && !r->st.cleartext)
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ",\"brokered\":true,\"requests\":%llu,\"substituted\":%llu",
                                (unsigned long long)r->st.requests,
                                (unsigned long long)r->st.substituted);
    if (r->brokered && r->st.cleartext)
        off += (size_t)snprintf(buf + off, sizeof buf - off,
                                ",\"refused\":\"cleartext\",\"requests\":%llu,\"held\":%llu",
                                (unsigned long long)r->st.requests, (unsigned long long)r->st.held);
    if (r->st.leaks)
        off += (size_t)snprintf(buf + off, sizeof buf - off, ",\"leaks\":%llu",
                                (unsigned long long)r->st.leaks);
    off += (size_t)snprintf(buf + off, sizeof buf - off, "}\n");
    log_write(e, r->kind ? r->kind : "", buf, off < sizeof buf ? off : sizeof buf - 1);
}
