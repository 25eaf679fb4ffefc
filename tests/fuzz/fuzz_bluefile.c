/* libFuzzer target: the Bluefile loader must refuse or accept any bytes without crashing,
 * leaking or allocating beyond the input's own size. */
#include <stddef.h>
#include <stdint.h>

#include "core/bluefile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/fuzz/Bluefile", (const char *)data, size, "/home/fuzz", &bf, &err) == 0)
        bluefile_free(bf);
    bb_error_free(err);
    return 0;
}
