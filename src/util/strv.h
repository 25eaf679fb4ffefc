/* NULL-terminated string vectors. Nothing here fails: out of memory aborts (xalloc). */
#pragma once

#include <stddef.h>

#include "macro.h"

typedef struct strv {
    char **v; /* NULL-terminated; NULL when empty */
    size_t n;
} strv;

void strv_push(strv *s, char *owned);
void strv_add(strv *s, const char *str);
void strv_sort(strv *s);
void strv_clear(strv *s);
static inline void strv_clearp(strv *s)
{
    strv_clear(s);
}
#define _cleanup_strv_ _cleanup_(strv_clearp)
