/* What bluebox doctor's checks find. */
#include "checks.h"

#include "util/xalloc.h"

void doctor_add(doctor_report *r, const char *name, check_level level, char *detail, char *fix)
{
    r->v = xrealloc(r->v, (r->n + 1) * sizeof *r->v);
    r->v[r->n++] = (check_result){name, level, detail, fix};
}
