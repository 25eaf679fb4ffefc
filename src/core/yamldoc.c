/* YAML → ynode tree on libyaml's event API, refusing everything a data file does not need. */
#include "yamldoc.h"

#include <errno.h>
#include <string.h>
#include <yaml.h>

#include "util/xalloc.h"

typedef struct {
    const char *name;
    const char *buf;
    size_t len;
    yaml_parser_t parser;
    bb_error **err;
} ctx;

static int fail_at(ctx *c, const yaml_mark_t *m, const char *fmt, const char *what)
{
    return bb_fail(c->err, EINVAL, "%s:%zu:%zu: %s%s", c->name, m->line + 1, m->column + 1, fmt,
                   what ? what : "");
}

/* Reader errors (bad bytes) carry only an offset; count lines and columns up to it. */
static yaml_mark_t offset_mark(const ctx *c, size_t offset)
{
    yaml_mark_t m = {0};
    for (size_t i = 0; i < offset && i < c->len; i++) {
        if (c->buf[i] == '\n') {
            m.line++;
            m.column = 0;
        } else if (((unsigned char)c->buf[i] & 0xc0) != 0x80) {
            m.column++;
        }
    }
    return m;
}

static int next(ctx *c, yaml_event_t *ev)
{
    if (yaml_parser_parse(&c->parser, ev))
        return 0;
    yaml_parser_t *p = &c->parser;
    yaml_mark_t m = p->error == YAML_READER_ERROR ? offset_mark(c, p->problem_offset)
                    : p->problem_mark.line || p->problem_mark.column ? p->problem_mark
                                                                     : p->context_mark;
    _cleanup_free_ char *what =
        xasprintf("%s%s%s", p->context ? p->context : "", p->context ? ": " : "",
                  p->problem ? p->problem : "unreadable YAML");
    return fail_at(c, &m, "YAML syntax error: ", what);
}

void ynode_free(ynode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nitems; i++)
        ynode_free(n->items[i]);
    free(n->items);
    free(n->value);
    free(n);
}

static ynode *node_new(ynode_kind kind, const yaml_mark_t *m)
{
    ynode *n = xcalloc(1, sizeof *n);
    n->kind = kind;
    n->line = (int)m->line + 1;
    n->col = (int)m->column + 1;
    return n;
}

static void node_add(ynode *parent, ynode *child, size_t *cap)
{
    if (parent->nitems + 1 > *cap) {
        *cap = *cap ? *cap * 2 : 4;
        parent->items = xreallocarray(parent->items, *cap, sizeof *parent->items);
    }
    parent->items[parent->nitems++] = child;
}

static int check_plain_event(ctx *c, const yaml_event_t *ev, const yaml_char_t *anchor,
                             const yaml_char_t *tag, int implicit)
{
    if (ev->type == YAML_ALIAS_EVENT)
        return fail_at(c, &ev->start_mark, "aliases are not allowed in a Bluefile", NULL);
    if (anchor)
        return fail_at(c, &ev->start_mark, "anchors are not allowed in a Bluefile", NULL);
    if (tag && !implicit)
        return fail_at(c, &ev->start_mark,
                       "tags are not allowed in a Bluefile: ", (const char *)tag);
    return 0;
}

static int parse_node(ctx *c, yaml_event_t *ev, int depth, ynode **ret);

static int parse_children(ctx *c, ynode *n, yaml_event_type_t end, int depth)
{
    size_t cap = 0;
    for (;;) {
        yaml_event_t ev;
        if (next(c, &ev) < 0)
            return -1;
        if (ev.type == end) {
            yaml_event_delete(&ev);
            break;
        }
        ynode *child = NULL;
        int r = parse_node(c, &ev, depth + 1, &child);
        yaml_event_delete(&ev);
        if (r < 0)
            return -1;
        node_add(n, child, &cap);
        if (n->kind == YNODE_MAP && n->nitems % 2 == 1) {
            /* parse_node set child (it returned 0); the analyzer stops following the
             * recursion before it sees that. */
            if (child->kind != YNODE_SCALAR) // NOLINT(clang-analyzer-core.NullDereference)
                return bb_fail(c->err, EINVAL, "%s:%d:%d: mapping keys must be plain strings",
                               c->name, child->line, child->col);
            for (size_t i = 0; i + 1 < n->nitems; i += 2)
                if (streq(n->items[i]->value, child->value))
                    return bb_fail(c->err, EINVAL, "%s:%d:%d: %s is given twice (first at line %d)",
                                   c->name, child->line, child->col, child->value,
                                   n->items[i]->line);
        }
    }
    n->n = n->kind == YNODE_MAP ? n->nitems / 2 : n->nitems;
    return 0;
}

static int parse_node(ctx *c, yaml_event_t *ev, int depth, ynode **ret)
{
    if (depth > YAMLDOC_MAX_DEPTH)
        return fail_at(c, &ev->start_mark, "nested too deeply", NULL);
    _cleanup_ynode_ ynode *n = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        const __typeof__(ev->data.scalar) *s = &ev->data.scalar;
        if (check_plain_event(c, ev, s->anchor, s->tag, s->plain_implicit || s->quoted_implicit) <
            0)
            return -1;
        if (memchr(s->value, '\0', s->length))
            return fail_at(c, &ev->start_mark, "a value contains a NUL byte", NULL);
        n = node_new(YNODE_SCALAR, &ev->start_mark);
        n->value = xstrndup((const char *)s->value, s->length);
        n->plain = s->style == YAML_PLAIN_SCALAR_STYLE;
        break;
    }
    case YAML_SEQUENCE_START_EVENT:
        if (check_plain_event(c, ev, ev->data.sequence_start.anchor, ev->data.sequence_start.tag,
                              ev->data.sequence_start.implicit) < 0)
            return -1;
        n = node_new(YNODE_SEQ, &ev->start_mark);
        if (parse_children(c, n, YAML_SEQUENCE_END_EVENT, depth) < 0)
            return -1;
        break;
    case YAML_MAPPING_START_EVENT:
        if (check_plain_event(c, ev, ev->data.mapping_start.anchor, ev->data.mapping_start.tag,
                              ev->data.mapping_start.implicit) < 0)
            return -1;
        n = node_new(YNODE_MAP, &ev->start_mark);
        if (parse_children(c, n, YAML_MAPPING_END_EVENT, depth) < 0)
            return -1;
        break;
    default:
        return check_plain_event(c, ev, NULL, NULL, 1) < 0
                   ? -1
                   : fail_at(c, &ev->start_mark, "unexpected YAML structure", NULL);
    }
    *ret = steal_pointer(&n);
    return 0;
}

static int expect(ctx *c, yaml_event_type_t type, yaml_event_t *ev)
{
    if (next(c, ev) < 0)
        return -1;
    if (ev->type != type) {
        int r = fail_at(c, &ev->start_mark, "a Bluefile holds exactly one YAML document", NULL);
        yaml_event_delete(ev);
        return r;
    }
    return 0;
}

static int parse_stream(ctx *c, ynode **ret)
{
    yaml_event_t ev;
    if (expect(c, YAML_STREAM_START_EVENT, &ev) < 0)
        return -1;
    yaml_event_delete(&ev);
    if (next(c, &ev) < 0)
        return -1;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        *ret = NULL;
        return 0;
    }
    if (ev.type != YAML_DOCUMENT_START_EVENT) {
        yaml_event_delete(&ev);
        return bb_fail(c->err, EINVAL, "%s: unexpected YAML structure", c->name);
    }
    yaml_event_delete(&ev);
    if (next(c, &ev) < 0)
        return -1;
    _cleanup_ynode_ ynode *root = NULL;
    int r = parse_node(c, &ev, 0, &root);
    yaml_event_delete(&ev);
    if (r < 0)
        return -1;
    if (expect(c, YAML_DOCUMENT_END_EVENT, &ev) < 0)
        return -1;
    yaml_event_delete(&ev);
    if (expect(c, YAML_STREAM_END_EVENT, &ev) < 0)
        return -1;
    yaml_event_delete(&ev);
    *ret = steal_pointer(&root);
    return 0;
}

int yamldoc_parse(const char *name, const char *buf, size_t len, ynode **ret, bb_error **err)
{
    ctx c = {.name = name, .buf = buf, .len = len, .err = err};
    if (!yaml_parser_initialize(&c.parser))
        return bb_fail(err, ENOMEM, "%s: cannot start the YAML parser", name);
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)buf, len);
    ynode *root = NULL;
    int r = parse_stream(&c, &root);
    yaml_parser_delete(&c.parser);
    if (r < 0)
        return -1;
    /* A document that is just a null scalar ("~", or "---" alone) is empty too. */
    if (root && ynode_is_null(root)) {
        ynode_free(root);
        root = NULL;
    }
    *ret = root;
    return 0;
}

bool ynode_is_null(const ynode *n)
{
    return n->kind == YNODE_SCALAR && n->plain &&
           (n->value[0] == '\0' || streq(n->value, "~") || streq(n->value, "null") ||
            streq(n->value, "Null") || streq(n->value, "NULL"));
}

const char *ynode_kind_name(const ynode *n)
{
    switch (n->kind) {
    case YNODE_SCALAR:
        return ynode_is_null(n) ? "nothing" : "a value";
    case YNODE_SEQ:
        return "a list";
    case YNODE_MAP:
        return "a mapping";
    }
    return "?";
}
