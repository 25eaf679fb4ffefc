/* The monotonic clock (see time.h). */
#include "time.h"

#include <limits.h>
#include <time.h>

int64_t now_mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t now_mono_ms(void)
{
    return now_mono_ns() / 1000000;
}

double now_mono_s(void)
{
    return (double)now_mono_ns() / 1e9;
}

int64_t mono_ms_since(int64_t start_ms)
{
    return now_mono_ms() - start_ms;
}

int poll_timeout_until(int64_t deadline_ms, int64_t now_ms)
{
    if (deadline_ms < 0)
        return -1;
    if (deadline_ms <= now_ms)
        return 0;
    return deadline_ms - now_ms > INT_MAX ? INT_MAX : (int)(deadline_ms - now_ms);
}
