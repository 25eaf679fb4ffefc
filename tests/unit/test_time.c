/* Unit tests for the monotonic clock helpers: the units agree with each other and with
 * clock_gettime, and poll timeouts follow their deadline (none, passed, left, capped). */
#include "unit.h"

#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "util/time.h"

static int64_t clock_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void units_agree(void **s)
{
    (void)s;
    int64_t before = clock_ns();
    int64_t ns = now_mono_ns();
    int64_t ms = now_mono_ms();
    double sec = now_mono_s();
    int64_t after = clock_ns();
    assert_true(before <= ns && ns <= after);
    assert_true(before / 1000000 <= ms && ms <= after / 1000000);
    assert_true((double)before / 1e9 <= sec && sec <= (double)after / 1e9);
}

static void ms_since_counts_up(void **s)
{
    (void)s;
    int64_t start = now_mono_ms();
    assert_true(mono_ms_since(start) >= 0);
    usleep(20000);
    int64_t d = mono_ms_since(start);
    assert_true(d >= 20);
    assert_true(d < 10000);
    /* a start in the future (a deadline) gives a negative value, not a wrap */
    assert_true(mono_ms_since(now_mono_ms() + 5000) < 0);
}

static void poll_timeouts(void **s)
{
    (void)s;
    assert_int_equal(poll_timeout_until(-1, 1000), -1);
    assert_int_equal(poll_timeout_until(-5000, 0), -1);
    assert_int_equal(poll_timeout_until(1000, 1000), 0);
    assert_int_equal(poll_timeout_until(999, 1000), 0);
    assert_int_equal(poll_timeout_until(0, 1000), 0);
    assert_int_equal(poll_timeout_until(1250, 1000), 250);
    /* a far deadline (timeout_seconds up to 10^9) is capped, never truncated to garbage */
    assert_int_equal(poll_timeout_until(1000000000000LL, 0), INT_MAX);
    assert_int_equal(poll_timeout_until((int64_t)INT_MAX + 10, 10), INT_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(units_agree),
        cmocka_unit_test(ms_since_counts_up),
        cmocka_unit_test(poll_timeouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
