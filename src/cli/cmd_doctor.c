/* doctor: every host check, with a fix for each that is not ok. */
#include <stdio.h>

#include "cli.h"
#include "runtime/doctor.h"

int cmd_doctor(cli_args *a, bb_error **err)
{
    static const char *const tag[] = {"  ok  ", "  warn", "  FAIL"};
    check_result *r = NULL;
    size_t n = 0, broken = 0;
    doctor_run(a->root, &r, &n);
    for (size_t i = 0; i < n; i++) {
        /* Details quote what podman and a probe guest reported. */
        cli_showf(stdout, "%s  %-17s %s\n", tag[r[i].level], r[i].name, r[i].detail);
        if (r[i].fix)
            cli_showf(stdout, "          fix: %s\n", r[i].fix);
        broken += r[i].level == CHECK_FAIL;
    }
    doctor_free(r, n);
    if (broken == 0)
        return 0;
    fflush(stdout);
    return bb_fail(err, 0, "%zu check%s broken", broken, broken == 1 ? "" : "s");
}
