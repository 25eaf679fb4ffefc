/* String vectors. */
#include "strv.h"

#include <string.h>

#include "xalloc.h"

void strv_push(strv *s, char *owned)
{
    s->v = xreallocarray(s->v, s->n + 2, sizeof *s->v);
    s->v[s->n++] = owned;
    s->v[s->n] = NULL;
}

void strv_add(strv *s, const char *str)
{
    strv_push(s, xstrdup(str));
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort(strv *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, cmp);
}

void strv_clear(strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
