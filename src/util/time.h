/* The monotonic clock: the one source for timeouts, deadlines and durations. Readings are
 * only compared with each other; they never mean a time of day. */
#pragma once

#include <stdint.h>

int64_t now_mono_ns(void);
int64_t now_mono_ms(void);
/* In seconds, for durations shown to people and kept in logs. */
double now_mono_s(void);

/* Milliseconds since start_ms, an earlier now_mono_ms() reading. */
int64_t mono_ms_since(int64_t start_ms);

/* A poll() timeout that ends at deadline_ms, a now_mono_ms() value, as seen at now_ms: -1
 * (wait for ever) when deadline_ms is negative, 0 once it has passed, else the milliseconds
 * left, at most INT_MAX. */
int poll_timeout_until(int64_t deadline_ms, int64_t now_ms);
