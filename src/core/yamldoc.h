/* A small YAML document tree built with libyaml, for data files like the Bluefile.
 * Anchors, aliases, explicit tags, multiple documents and duplicate mapping keys are
 * refused; depth and size are bounded, so no input can cost more than its own size. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

typedef enum { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP } ynode_kind;

typedef struct ynode ynode;
struct ynode {
    ynode_kind kind;
    int line, col; /* 1-based position of the node's start */
    bool plain;    /* scalar written without quotes or block style */
    char *value;   /* scalar text (NUL-free), NULL otherwise */
    size_t n;      /* children: items of a sequence, or key/value pairs of a map */
    ynode **items; /* SEQ: n items; MAP: keys at 2i, values at 2i+1 */
    size_t nitems; /* entries in items */
};

#define YAMLDOC_MAX_DEPTH 32

/* Parse buf. `name` prefixes every error ("name:line:col: ..."). An empty document
 * (or only comments) gives *ret = NULL and success. */
int yamldoc_parse(const char *name, const char *buf, size_t len, ynode **ret, bb_error **err);
void ynode_free(ynode *n);
static inline void ynode_freep(ynode **n)
{
    ynode_free(*n);
}
#define _cleanup_ynode_ _cleanup_(ynode_freep)

/* A scalar that YAML reads as null: empty plain, "~", "null". */
bool ynode_is_null(const ynode *n);
const char *ynode_kind_name(const ynode *n);
