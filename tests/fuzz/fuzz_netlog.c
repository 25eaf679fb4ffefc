/* libFuzzer target: `bluebox logs --net` renders any bytes (the VMM's lines, influenced by the
 * guest) without crashing or leaking, and its table holds no control byte but newlines. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/netlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t bad = 0;
    char *t = netlog_render((const char *)data, size, 50, &bad);
    for (const char *p = t; *p; p++)
        if ((unsigned char)*p < 0x20 && *p != '\n')
            abort();
    free(t);
    return 0;
}
