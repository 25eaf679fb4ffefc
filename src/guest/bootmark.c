/* The guest init's boot profile marks (bench/boot_profile.py). */
#include "bootmark.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/macro.h"

void guest_boot_mark(const char *step)
{
    static int on = -1, kmsg = -1;
    if (on < 0) {
        const char *e = getenv("BLUEBOX_BOOT_PROFILE");
        on = e && streq(e, "1");
    }
    if (!on)
        return;
    if (kmsg < 0)
        kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    char line[128];
    int n = snprintf(line, sizeof line, "bluebox-init: %s at %.1f ms\n", step,
                     (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6);
    if (kmsg >= 0 && n > 0)
        (void)!write(kmsg, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
