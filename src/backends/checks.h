/* What bluebox doctor's checks find: each says ok, warn or fail, what it saw, and how to fix
 * it. The runtime's checks (runtime/doctor.h) and each backend's own doctor hook add theirs. */
#pragma once

#include <stddef.h>

typedef enum { CHECK_OK, CHECK_WARN, CHECK_FAIL } check_level;

typedef struct {
    const char *name;
    check_level level;
    char *detail;
    char *fix; /* NULL when ok */
} check_result;

/* The checks so far; a backend's doctor hook (backend.h) adds its own with doctor_add. */
typedef struct doctor_report {
    check_result *v;
    size_t n;
} doctor_report;
/* Add a result; detail and fix (NULL when ok) are taken over. */
void doctor_add(doctor_report *r, const char *name, check_level level, char *detail, char *fix);
