/* run/<name>.json: read strictly, written atomically and owner-only. */
#include "upstate.h"

#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/home.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/xalloc.h"

#define STATE_MAX 65536

/* jansson copies every string it parses or packs (and its lexer and dumper buffer them):
 * have whatever it frees wiped, so no copy of the token is left in the heap. Process-wide,
 * and harmless for everything else jansson holds. */
static void wiping_free(void *p)
{
    if (p)
        explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

static void wipe_json_frees(void)
{
    json_set_alloc_funcs(malloc, wiping_free);
}

static char *str_field(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

int upstate_load(const sandbox *sb, up_state *ret, bb_error **err)
{
    *ret = (up_state){0};
    wipe_json_frees();
    const char *path = sb->run;
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    _cleanup_error_ bb_error *rerr = NULL;
    if (read_file(path, STATE_MAX, &data, &len, &rerr) < 0) {
        if (rerr->status == ENOENT)
            return 0;
        return bb_fail(err, rerr->status, "%s", rerr->msg);
    }
    json_error_t jerr;
    _cleanup_json_ json_t *o = json_loadb(data, len, 0, &jerr);
    explicit_bzero(data, len);
    ret->container = str_field(o, "container");
    ret->addr = str_field(o, "addr");
    ret->token = str_field(o, "token");
    ret->kernel = str_field(o, "kernel");
    json_t *st = json_object_get(o, "started");
    ret->started = json_is_integer(st) ? json_integer_value(st) : 0;
    if (!ret->container || !ret->addr || !ret->token || !ret->kernel) {
        upstate_clear(ret);
        return bb_fail(err, EINVAL, "%s is damaged; clean it up: bluebox down %s", path, sb->name);
    }
    return 1;
}

int upstate_save(const sandbox *sb, const up_state *s, bb_error **err)
{
    _cleanup_free_ char *dir = path_join(sb->root, "run");
    if (mkdir_p(dir, 0700, err) < 0)
        return -1;
    if (chmod(dir, 0700) < 0)
        return bb_fail_errno(err, errno, "cannot make %s owner-only", dir);
    wipe_json_frees();
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I}", "container", s->container, "addr", s->addr,
                          "token", s->token, "kernel", s->kernel ? s->kernel : "", "started",
                          (json_int_t)s->started);
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!text)
        abort();
    const char *path = sb->run;
    int r = write_file_atomic(path, text, strlen(text), 0600, err);
    explicit_bzero(text, strlen(text));
    free(text);
    return r;
}

int upstate_remove(const sandbox *sb, bb_error **err)
{
    const char *path = sb->run;
    if (unlink(path) < 0 && errno != ENOENT)
        return bb_fail_errno(err, errno, "cannot remove %s", path);
    return 0;
}

void upstate_clear(up_state *s)
{
    free(s->container);
    free(s->addr);
    if (s->token)
        explicit_bzero(s->token, strlen(s->token));
    free(s->token);
    free(s->kernel);
    *s = (up_state){0};
}
