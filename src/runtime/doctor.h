/* Host checks for `bluebox doctor`: each says ok, warn or fail, what it saw, and how to fix
 * it. The CLI prints them. */
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
typedef struct doctor_report doctor_report;
/* Add a result; detail and fix (NULL when ok) are taken over. */
void doctor_add(doctor_report *r, const char *name, check_level level, char *detail, char *fix);

/* Run every check. *ret is an array of *ret_n results; free with doctor_free. */
void doctor_run(const char *root, check_result **ret, size_t *ret_n);
void doctor_free(check_result *r, size_t n);
