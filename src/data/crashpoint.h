/* Named crash points for the kill -9 tests. Only the bluebox-crashtest program (meson.build
 * compiles its sources again with -DBB_CRASH_POINTS) defines BB_CRASH_POINTS; in a release build
 * the macro is empty and neither the names nor the environment lookup exist in the binary. */
#pragma once

#ifdef BB_CRASH_POINTS
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Die by SIGKILL here when BLUEBOX_CRASH_AT names this point. */
#define CRASH_POINT(name)                                                                          \
    do {                                                                                           \
        const char *_at_ = getenv("BLUEBOX_CRASH_AT");                                             \
        if (_at_ && strcmp(_at_, (name)) == 0)                                                     \
            raise(SIGKILL);                                                                        \
    } while (0)
#else
#define CRASH_POINT(name)                                                                          \
    do {                                                                                           \
    } while (0)
#endif
