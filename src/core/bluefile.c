/* Bluefile parsing: a key table maps each top-level key to a parser that checks its type and
 * its rules; cross-key rules run once every key is read. Every error names the file, the
 * line and column of the offending node, and the key. */
#include "bluefile.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <sys/stat.h>

#include "abi/abi.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "yamldoc.h"

typedef struct {
    bluefile *bf;
    const char *home;
    bb_error **err;
    const ynode *warm_node, *packages_node, *users_node, *allow_node, *secrets_node, *env_node;
} ctx;

static int fail_at(ctx *c, const ynode *n, const char *fmt, ...) _printf_(3, 4);
static int fail_at(ctx *c, const ynode *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    return bb_fail(c->err, EINVAL, "%s:%d:%d: %s", c->bf->path, n->line, n->col, msg);
}
#ifdef __clang_analyzer__
/* The analyzer does not follow variadic calls: say what this one returns (as err.h). */
#define fail_at(...) (fail_at(__VA_ARGS__), -1)
#endif

/* ---- typed readers ---------------------------------------------------------------- */

static int want_scalar(ctx *c, const char *key, const ynode *v, const char *what)
{
    if (v->kind != YNODE_SCALAR)
        return fail_at(c, v, "%s must be %s, got %s", key, what, ynode_kind_name(v));
    return 0;
}

static int read_string(ctx *c, const char *key, const ynode *v, const char **ret)
{
    if (want_scalar(c, key, v, "a string") < 0)
        return -1;
    *ret = v->value;
    return 0;
}

static int read_int(ctx *c, const char *key, const ynode *v, long long lo, long long hi,
                    const char *range_msg, int *ret)
{
    if (want_scalar(c, key, v, "a whole number") < 0)
        return -1;
    const char *s = v->value;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    bool digits = *s && (isdigit((unsigned char)*s) || ((*s == '-' || *s == '+') && s[1]));
    if (!v->plain || !digits || *end || errno == ERANGE)
        return fail_at(c, v, "%s must be a whole number, got \"%s\"", key, s);
    if (x < lo || x > hi)
        return fail_at(c, v, "%s %s, got %s", key, range_msg, s);
    *ret = (int)x;
    return 0;
}

static int read_bool(ctx *c, const char *key, const ynode *v, bool *ret)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};
    if (want_scalar(c, key, v, "true or false") < 0)
        return -1;
    for (size_t i = 0; v->plain && i < ELEMENTSOF(yes); i++) {
        if (streq(v->value, yes[i]) || streq(v->value, no[i])) {
            *ret = streq(v->value, yes[i]);
            return 0;
        }
    }
    return fail_at(c, v, "%s must be true or false, got \"%s\"", key, v->value);
}

/* Read one of `names` (NULL-terminated); the index is returned in *ret. */
static int read_choice(ctx *c, const char *key, const ynode *v, const char *const *names,
                       const char *choices_msg, bool nocase, int *ret)
{
    if (want_scalar(c, key, v, choices_msg) < 0)
        return -1;
    for (int i = 0; names[i]; i++) {
        if (nocase ? strcasecmp(v->value, names[i]) == 0 : streq(v->value, names[i])) {
            *ret = i;
            return 0;
        }
    }
    return fail_at(c, v, "%s must be %s, got \"%s\"", key, choices_msg, v->value);
}

typedef int (*item_check_fn)(ctx *c, const char *what, const ynode *item, char **text);

static int read_list(ctx *c, const char *key, const ynode *v, item_check_fn check, strv *out)
{
    if (v->kind != YNODE_SEQ)
        return fail_at(c, v, "%s must be a list, got %s", key, ynode_kind_name(v));
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->items[i];
        _cleanup_free_ char *what = xasprintf("%s[%zu]", key, i);
        if (want_scalar(c, what, it, "a string") < 0)
            return -1;
        char *text = xstrdup(it->value);
        if (check(c, what, it, &text) < 0) {
            free(text);
            return -1;
        }
        strv_push(out, text);
    }
    return 0;
}

static bool has_any(const char *s, const char *set)
{
    return s[strcspn(s, set)] != '\0';
}

static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* An absolute path of plain components: [A-Za-z0-9._-], no empty, "." or ".." parts. */
static bool plain_abs_path(const char *p)
{
    if (p[0] != '/' || p[1] == '\0')
        return false;
    const char *s = p + 1;
    for (;;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
                return false;
        if (!s[n])
            return true;
        s += n + 1;
    }
}

/* ---- item checks -------------------------------------------------------------------- */

static int check_nonempty_line(ctx *c, const char *what, const ynode *it, char **text)
{
    const char *s = *text;
    while (*s && isspace((unsigned char)*s))
        s++;
    if (!*s)
        return fail_at(c, it, "%s is empty", what);
    return 0;
}

/* A Containerfile RUN line: a trailing newline (from a `|` block) is dropped; one inside
 * would start a new Containerfile instruction, so it is refused. */
static int check_run_line(ctx *c, const char *what, const ynode *it, char **text)
{
    char *s = *text;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    if (check_nonempty_line(c, what, it, text) < 0)
        return -1;
    if (has_any(s, "\r\n"))
        return fail_at(c, it,
                       "%s spans several lines; give each step its own entry, or join them "
                       "with &&",
                       what);
    return 0;
}

static int check_package(ctx *c, const char *what, const ynode *it, char **text)
{
    const char *s = *text;
    if (!*s)
        return fail_at(c, it, "%s is empty", what);
    if (has_any(s, " \t\r\n;|&$`") || has_control(s))
        return fail_at(
            c, it, "%s must be a plain package name (no spaces or ; | & $ `), got \"%s\"", what, s);
    if (s[0] == '-')
        return fail_at(c, it, "%s must be a package name, not an option: \"%s\"", what, s);
    return 0;
}

/* ---- top-level keys ----------------------------------------------------------------- */

typedef int (*key_fn)(ctx *c, const char *key, const ynode *v);

static int key_base(ctx *c, const char *key, const ynode *v)
{
    const char *s;
    if (read_string(c, key, v, &s) < 0)
        return -1;
    if (!*s || has_any(s, " \t\r\n\v\f") || has_control(s))
        return fail_at(
            c, v, "%s must be an image reference without whitespace or control characters", key);
    free(c->bf->base);
    c->bf->base = xstrdup(s);
    return 0;
}

static int key_warmup(ctx *c, const char *key, const ynode *v)
{
    return read_list(c, key, v, check_nonempty_line, &c->bf->warmup);
}

/* `~` and `~/x` expand to the home directory; `~user` is not supported. */
static int expand_home(ctx *c, const char *key, const ynode *v, const char *s, char **ret)
{
    if (s[0] != '~') {
        *ret = xstrdup(s);
        return 0;
    }
    if (s[1] != '\0' && s[1] != '/')
        return fail_at(c, v, "%s: ~user is not supported; write the absolute path", key);
    if (!c->home || !*c->home)
        return fail_at(c, v, "%s: cannot expand ~ because HOME is not set", key);
    *ret = xasprintf("%s%s", c->home, s + 1);
    return 0;
}

/* A path as the Bluefile gives it: ~ expanded, and relative to the Bluefile's directory, so
 * that a sandbox carries its files along. */
static int anchored_path(ctx *c, const char *key, const ynode *v, const char *s, char **ret)
{
    _cleanup_free_ char *p = NULL;
    if (expand_home(c, key, v, s, &p) < 0)
        return -1;
    if (p[0] != '/') {
        _cleanup_free_ char *dir = xstrdup(c->bf->path);
        char *slash = strrchr(dir, '/');
        char *abs = slash ? xasprintf("%.*s/%s", (int)(slash - dir), dir, p) : xstrdup(p);
        free(p);
        p = abs;
    }
    *ret = steal_pointer(&p);
    return 0;
}

static int key_seccomp(ctx *c, const char *key, const ynode *v)
{
    const char *s;
    if (read_string(c, key, v, &s) < 0)
        return -1;
    if (!*s || has_control(s))
        return fail_at(c, v, "%s must be the path of a seccomp profile", key);
    _cleanup_free_ char *p = NULL;
    if (anchored_path(c, key, v, s, &p) < 0)
        return -1;
    struct stat st;
    if (stat(p, &st) < 0 || !S_ISREG(st.st_mode))
        return fail_at(c, v, "%s: profile %s does not exist or is not a file", key, p);
    free(c->bf->seccomp);
    c->bf->seccomp = steal_pointer(&p);
    return 0;
}

static int key_packages(ctx *c, const char *key, const ynode *v)
{
    c->packages_node = v;
    return read_list(c, key, v, check_package, &c->bf->packages);
}

static int key_run(ctx *c, const char *key, const ynode *v)
{
    return read_list(c, key, v, check_run_line, &c->bf->run);
}

static bool is_identifier(const char *s)
{
    if (!(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

static int env_cmp(const void *a, const void *b)
{
    return strcmp(((const bf_env *)a)->key, ((const bf_env *)b)->key);
}

static int key_env(ctx *c, const char *key, const ynode *v)
{
    if (v->kind != YNODE_MAP)
        return fail_at(c, v, "%s must be a mapping of NAME: value, got %s", key,
                       ynode_kind_name(v));
    c->env_node = v;
    bluefile *bf = c->bf;
    bf->env = xcalloc(v->n, sizeof *bf->env);
    for (size_t i = 0; i < v->n; i++) {
        const ynode *k = v->items[2 * i], *val = v->items[2 * i + 1];
        if (!is_identifier(k->value))
            return fail_at(c, k, "%s key \"%s\" must be an identifier (letters, digits, _)", key,
                           k->value);
        _cleanup_free_ char *what = xasprintf("%s.%s", key, k->value);
        const char *s = "";
        if (!ynode_is_null(val) && read_string(c, what, val, &s) < 0)
            return -1;
        if (has_any(s, "\r\n"))
            return fail_at(
                c, val, "%s cannot contain a newline; put multi-step builds in run instead", what);
        bf->env[bf->n_env].key = xstrdup(k->value);
        bf->env[bf->n_env].value = xstrdup(s);
        bf->n_env++;
    }
    qsort(bf->env, bf->n_env, sizeof *bf->env, env_cmp);
    return 0;
}

/* Check a sub-mapping's keys against the allowed ones. */
static int check_keys(ctx *c, const char *what, const ynode *m, const char *const *allowed)
{
    if (m->kind != YNODE_MAP)
        return fail_at(c, m, "%s must be a mapping, got %s", what, ynode_kind_name(m));
    for (size_t i = 0; i < m->n; i++) {
        const ynode *k = m->items[2 * i];
        bool ok = false;
        for (size_t j = 0; allowed[j]; j++)
            ok = ok || streq(k->value, allowed[j]);
        if (!ok)
            return fail_at(c, k, "%s: unknown key \"%s\"", what, k->value);
    }
    return 0;
}

/* The value of `name` in a mapping that passed check_keys, or NULL (also for null). */
static const ynode *field(const ynode *m, const char *name)
{
    for (size_t i = 0; i < m->n; i++)
        if (streq(m->items[2 * i]->value, name))
            return ynode_is_null(m->items[2 * i + 1]) ? NULL : m->items[2 * i + 1];
    return NULL;
}

/* Collapse "//", drop "." parts and a trailing "/"; refuse "..". */
static int normalize_host_path(ctx *c, const char *what, const ynode *v, char *p)
{
    if (strstr(p, "/../") || (strlen(p) >= 3 && streq(p + strlen(p) - 3, "/..")))
        return fail_at(c, v, "%s must not contain \"..\"; write the path it means", what);
    char *w = p;
    for (const char *r = p; *r;) {
        if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || r[2] == '\0')))) {
            r += r[1] == '/' ? 1 : 2;
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
    while (w - p > 1 && w[-1] == '/')
        *--w = '\0';
    if (!*p)
        strcpy(p, "/");
    return 0;
}

static int read_mount(ctx *c, size_t i, const ynode *m, bf_mount *out)
{
    static const char *const allowed[] = {"host", "guest", "mode", NULL};
    _cleanup_free_ char *what = xasprintf("mounts[%zu]", i);
    if (check_keys(c, what, m, allowed) < 0)
        return -1;
    const ynode *host = field(m, "host"), *guest = field(m, "guest"), *mode = field(m, "mode");
    if (!host || !guest)
        return fail_at(c, m, "%s needs both host and guest", what);
    _cleanup_free_ char *hw = xasprintf("%s.host", what), *gw = xasprintf("%s.guest", what);
    const char *hs, *gs;
    if (read_string(c, hw, host, &hs) < 0 || read_string(c, gw, guest, &gs) < 0)
        return -1;
    _cleanup_free_ char *hp = NULL;
    if (expand_home(c, hw, host, hs, &hp) < 0)
        return -1;
    if (hp[0] != '/')
        return fail_at(c, host, "%s must be an absolute path (~ is your home), got \"%s\"", hw, hs);
    if (strchr(hp, ':') || has_control(hp))
        return fail_at(c, host, "%s cannot contain ':' or control characters", hw);
    if (normalize_host_path(c, hw, host, hp) < 0)
        return -1;
    if (!plain_abs_path(gs))
        return fail_at(c, guest,
                       "%s must be an absolute path of letters, digits, '.', '_', '-' and '/', "
                       "got \"%s\"",
                       gw, gs);
    if (path_within(gs, "/data"))
        return fail_at(c, guest, "%s cannot be /data or inside it; /data is always shared", gw);
    if (path_within(gs, ABI_DIR))
        return fail_at(c, guest, "%s: " ABI_DIR " is reserved for bluebox itself", gw);
    static const char *const kernel_dirs[] = {"/proc", "/sys", "/dev"};
    for (size_t k = 0; k < ELEMENTSOF(kernel_dirs); k++)
        if (path_within(gs, kernel_dirs[k]))
            return fail_at(c, guest, "%s: %s belongs to the guest's kernel, not to mounts", gw,
                           kernel_dirs[k]);
    bool rw = false;
    if (mode) {
        static const char *const names[] = {"ro", "rw", NULL};
        int k;
        _cleanup_free_ char *mw = xasprintf("%s.mode", what);
        if (read_choice(c, mw, mode, names, "ro or rw", false, &k) < 0)
            return -1;
        rw = k == 1;
    }
    out->host = steal_pointer(&hp);
    out->guest = xstrdup(gs);
    out->rw = rw;
    return 0;
}

static int key_mounts(ctx *c, const char *key, const ynode *v)
{
    if (v->kind != YNODE_SEQ)
        return fail_at(c, v, "%s must be a list, got %s", key, ynode_kind_name(v));
    bluefile *bf = c->bf;
    bf->mounts = xcalloc(v->n, sizeof *bf->mounts);
    for (size_t i = 0; i < v->n; i++) {
        bf_mount *m = &bf->mounts[bf->n_mounts];
        if (read_mount(c, i, v->items[i], m) < 0)
            return -1;
        bf->n_mounts++;
        for (size_t j = 0; j < i; j++)
            if (streq(bf->mounts[j].guest, m->guest))
                return fail_at(c, v->items[i], "guest path \"%s\" is mounted more than once",
                               m->guest);
        if (m->rw && bf->isolation == ISO_STRICT)
            return fail_at(c, v->items[i],
                           "isolation: strict allows read-only mounts only; exchange files "
                           "through /data instead");
    }
    return 0;
}

static bool user_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 32 || !(islower((unsigned char)s[0]) || s[0] == '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

static int read_user(ctx *c, size_t i, const ynode *m, bf_user *out)
{
    static const char *const allowed[] = {"name", "shell", "sudo", NULL};
    _cleanup_free_ char *what = xasprintf("blueprint.users[%zu]", i);
    if (check_keys(c, what, m, allowed) < 0)
        return -1;
    const ynode *name = field(m, "name"), *shell = field(m, "shell"), *sudo = field(m, "sudo");
    _cleanup_free_ char *nw = xasprintf("%s.name", what), *sw = xasprintf("%s.shell", what),
                        *uw = xasprintf("%s.sudo", what);
    if (!name)
        return fail_at(c, m, "%s needs a name", what);
    const char *ns, *ss = "/bin/sh";
    if (read_string(c, nw, name, &ns) < 0)
        return -1;
    if (!user_name_ok(ns))
        return fail_at(c, name,
                       "%s must be a lowercase user name (a-z, 0-9, _, -; max 32, not starting "
                       "with a digit or -), got \"%s\"",
                       nw, ns);
    if (shell && read_string(c, sw, shell, &ss) < 0)
        return -1;
    if (!plain_abs_path(ss))
        return fail_at(c, shell, "%s must be an absolute path like /bin/bash, got \"%s\"", sw, ss);
    bool su = false;
    if (sudo && read_bool(c, uw, sudo, &su) < 0)
        return -1;
    out->name = xstrdup(ns);
    out->shell = xstrdup(ss);
    out->sudo = su;
    return 0;
}

static int read_users(ctx *c, const ynode *v)
{
    if (v->kind != YNODE_SEQ)
        return fail_at(c, v, "blueprint.users must be a list, got %s", ynode_kind_name(v));
    bluefile *bf = c->bf;
    c->users_node = v;
    bf->users = xcalloc(v->n, sizeof *bf->users);
    for (size_t i = 0; i < v->n; i++) {
        bf_user *u = &bf->users[bf->n_users];
        if (read_user(c, i, v->items[i], u) < 0)
            return -1;
        bf->n_users++;
        for (size_t j = 0; j < i; j++)
            if (streq(bf->users[j].name, u->name))
                return fail_at(c, v->items[i], "user \"%s\" is declared more than once", u->name);
    }
    return 0;
}

static bool mode_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 3 && n <= 4 && strspn(s, "01234567") == n;
}

static int read_file_entry(ctx *c, size_t i, const ynode *m, bf_file *out)
{
    static const char *const allowed[] = {"path", "content", "mode", NULL};
    _cleanup_free_ char *what = xasprintf("blueprint.write_files[%zu]", i);
    if (check_keys(c, what, m, allowed) < 0)
        return -1;
    const ynode *path = field(m, "path"), *content = field(m, "content"), *mode = field(m, "mode");
    _cleanup_free_ char *pw = xasprintf("%s.path", what), *cw = xasprintf("%s.content", what),
                        *mw = xasprintf("%s.mode", what);
    if (!path)
        return fail_at(c, m, "%s needs a path", what);
    const char *ps, *cs = "", *ms = NULL;
    if (read_string(c, pw, path, &ps) < 0)
        return -1;
    if (!plain_abs_path(ps))
        return fail_at(c, path,
                       "%s must be an absolute path of letters, digits, '.', '_', '-' and '/', "
                       "got \"%s\"",
                       pw, ps);
    if (content && read_string(c, cw, content, &cs) < 0)
        return -1;
    if (mode) {
        if (read_string(c, mw, mode, &ms) < 0)
            return -1;
        if (!mode_ok(ms))
            return fail_at(c, mode, "%s must be an octal mode like \"0644\", got \"%s\"", mw, ms);
    }
    out->path = xstrdup(ps);
    out->content = xstrdup(cs);
    out->mode = ms ? xstrdup(ms) : NULL;
    return 0;
}

static int read_files(ctx *c, const ynode *v)
{
    if (v->kind != YNODE_SEQ)
        return fail_at(c, v, "blueprint.write_files must be a list, got %s", ynode_kind_name(v));
    bluefile *bf = c->bf;
    bf->files = xcalloc(v->n, sizeof *bf->files);
    for (size_t i = 0; i < v->n; i++) {
        if (read_file_entry(c, i, v->items[i], &bf->files[bf->n_files]) < 0)
            return -1;
        bf->n_files++;
    }
    return 0;
}

static int key_blueprint(ctx *c, const char *key, const ynode *v)
{
    static const char *const allowed[] = {"users", "write_files", "runcmd", NULL};
    if (check_keys(c, key, v, allowed) < 0)
        return -1;
    const ynode *users = field(v, "users"), *files = field(v, "write_files"),
                *runcmd = field(v, "runcmd");
    if (users && read_users(c, users) < 0)
        return -1;
    if (files && read_files(c, files) < 0)
        return -1;
    if (runcmd && read_list(c, "blueprint.runcmd", runcmd, check_run_line, &c->bf->runcmd) < 0)
        return -1;
    return 0;
}

/* A size as data_limit takes it: a whole number with a unit M, G or T (MiB, GiB, TiB;
 * "MiB"/"GiB"/"TiB" and a trailing "B" are accepted too). 0 and -1 on anything else. */
static int size_parse(const char *s, unsigned long long *ret)
{
    static const struct {
        const char *unit;
        unsigned shift;
    } units[] = {{"M", 20},   {"MB", 20}, {"MiB", 20}, {"G", 30},  {"GB", 30},
                 {"GiB", 30}, {"T", 40},  {"TB", 40},  {"TiB", 40}};
    if (!isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    if (errno || n > (1ULL << 20))
        return -1;
    for (size_t i = 0; i < ELEMENTSOF(units); i++)
        if (streq(end, units[i].unit)) {
            *ret = n << units[i].shift;
            return 0;
        }
    return -1;
}

static int key_data_limit(ctx *c, const char *key, const ynode *v)
{
    const char *s;
    if (read_string(c, key, v, &s) < 0)
        return -1;
    unsigned long long n;
    if (size_parse(s, &n) < 0)
        return fail_at(c, v, "%s must be a size such as 512M, 10G or 1T, got \"%s\"", key, s);
    if (n < DATA_LIMIT_MIN || n > DATA_LIMIT_MAX)
        return fail_at(c, v, "%s must be 16M-16T, got %s", key, s);
    c->bf->data_limit = n;
    return 0;
}

/* ---- allow: and secrets: ------------------------------------------------------------ */

#define ALLOW_FORMS "a host name, \"*.domain\" or an IPv4 address or CIDR, with an optional :port"
/* A CIDR entry wider than this would open most of the address space, the host's and the
 * LAN's included (CIDR entries are the explicit way to reach those). */
#define ALLOW_MIN_PREFIX 8

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* A DNS name (lower case): labels of a-z, 0-9 and '-', 1-63 long, not starting or ending
 * with '-', 253 at most in all, and a last label that is not all digits (an address). */
static bool dns_name_ok(const char *s)
{
    if (!*s || strlen(s) > 253)
        return false;
    for (const char *label = s;;) {
        size_t l = strcspn(label, ".");
        if (l == 0 || l > 63 || label[0] == '-' || label[l - 1] == '-')
            return false;
        if (strspn(label, "abcdefghijklmnopqrstuvwxyz0123456789-") < l)
            return false;
        if (!label[l])
            return strspn(label, "0123456789") != l;
        label += l + 1;
    }
}

/* A name or "*.suffix" where the suffix has two labels at least (no "*.org"). */
static int check_name(ctx *c, const char *what, const ynode *it, const char *h)
{
    if (strncmp(h, "*.", 2) == 0) {
        if (strchr(h + 2, '*') || !dns_name_ok(h + 2))
            return fail_at(c, it, "%s: \"%s\" is not a valid name below \"*.\"", what, h);
        if (!strchr(h + 2, '.'))
            return fail_at(c, it,
                           "%s: \"%s\" would allow a whole top-level domain; name the domain, "
                           "like *.example.org",
                           what, h);
        return 0;
    }
    if (strchr(h, '*'))
        return fail_at(c, it,
                       "%s: a wildcard is allowed only as a leading \"*.\" (like *.example.org), "
                       "got \"%s\"",
                       what, h);
    if (!dns_name_ok(h))
        return fail_at(c, it,
                       "%s: \"%s\" is not a valid host name (letters, digits, '-' and '.'; "
                       "labels of 1-63)",
                       what, h);
    return 0;
}

/* An IPv4 address or CIDR, normalized to a.b.c.d/len. */
static int check_cidr(ctx *c, const char *what, const ynode *it, const char *h, char **ret)
{
    _cleanup_free_ char *addr = xstrdup(h);
    char *slash = strchr(addr, '/');
    long len = 32;
    if (slash) {
        *slash = '\0';
        char *end = NULL;
        errno = 0;
        len = strtol(slash + 1, &end, 10);
        if (!isdigit((unsigned char)slash[1]) || *end || errno || len < 0 || len > 32)
            return fail_at(c, it, "%s: \"%s\" has a bad prefix length (0-32 after the /)", what, h);
    }
    struct in_addr a;
    if (inet_pton(AF_INET, addr, &a) != 1)
        return fail_at(c, it, "%s: \"%s\" is not an IPv4 address or CIDR (like 192.0.2.0/24)", what,
                       h);
    if (len < ALLOW_MIN_PREFIX)
        return fail_at(c, it,
                       "%s: \"%s\" is wider than /%d; list the narrower ranges the sandbox needs",
                       what, h, ALLOW_MIN_PREFIX);
    uint32_t mask = len == 0 ? 0 : ~0u << (32 - len);
    if (ntohl(a.s_addr) & ~mask) {
        struct in_addr net = {.s_addr = htonl(ntohl(a.s_addr) & mask)};
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &net, buf, sizeof buf);
        return fail_at(c, it, "%s: \"%s\" has host bits set; did you mean %s/%ld?", what, h, buf,
                       len);
    }
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, buf, sizeof buf);
    *ret = xasprintf("%s/%ld", buf, len);
    return 0;
}

/* ":port": 1-65535 in plain decimal. */
static bool port_ok(const char *p, long *ret)
{
    if (!*p || p[0] == '0' || strspn(p, "0123456789") != strlen(p) || strlen(p) > 5)
        return false;
    *ret = strtol(p, NULL, 10);
    return *ret >= 1 && *ret <= 65535;
}

/* One `allow:` entry, normalized in place (see bluefile.h). */
static int check_allow(ctx *c, const char *what, const ynode *it, char **text)
{
    char *s = *text;
    lower(s);
    if (!*s)
        return fail_at(c, it, "%s is empty", what);
    if (has_any(s, " \t,\\\"'") || has_control(s))
        return fail_at(c, it, "%s must be %s, got \"%s\"", what, ALLOW_FORMS, s);
    char *colon = strchr(s, ':');
    if (colon && strchr(colon + 1, ':'))
        return fail_at(c, it,
                       "%s: IPv6 entries are not supported yet; name the host, or give an IPv4 "
                       "range",
                       what);
    long port = 0;
    if (colon) {
        *colon = '\0';
        if (!port_ok(colon + 1, &port))
            return fail_at(c, it, "%s: the port must be 1-65535, got \"%s\"", what, colon + 1);
    }
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '.' && s[n - 2] != '.')
        s[n - 1] = '\0'; /* a fully qualified name's root */
    _cleanup_free_ char *host = NULL;
    if (s[strspn(s, "0123456789./")] == '\0') {
        if (check_cidr(c, what, it, s, &host) < 0)
            return -1;
    } else {
        if (strchr(s, '/'))
            return fail_at(c, it, "%s must be %s, got \"%s\"", what, ALLOW_FORMS, it->value);
        if (check_name(c, what, it, s) < 0)
            return -1;
        host = xstrdup(s);
    }
    free(*text);
    *text = port ? xasprintf("%s:%ld", host, port) : steal_pointer(&host);
    return 0;
}

static int key_allow(ctx *c, const char *key, const ynode *v)
{
    bluefile *bf = c->bf;
    c->allow_node = v;
    if (v->kind == YNODE_SEQ && v->n > BLUEFILE_MAX_ALLOW)
        return fail_at(c, v, "%s has %zu entries; at most %d", key, v->n, BLUEFILE_MAX_ALLOW);
    if (read_list(c, key, v, check_allow, &bf->allow) < 0)
        return -1;
    for (size_t i = 0; i < bf->allow.n; i++)
        for (size_t j = 0; j < i; j++)
            if (streq(bf->allow.v[i], bf->allow.v[j]))
                return fail_at(c, v->items[i], "%s[%zu]: \"%s\" is listed twice (also %s[%zu])",
                               key, i, bf->allow.v[i], key, j);
    bf->has_allow = true;
    return 0;
}

bool bf_allow_covers(const char *entry, const char *host)
{
    size_t el = strcspn(entry, ":"), digits = strspn(entry, "0123456789./");
    if (digits == el)
        return false; /* a CIDR: secrets go by name */
    if (strlen(host) == el && strncmp(entry, host, el) == 0)
        return true;
    if (strncmp(entry, "*.", 2) != 0)
        return false;
    /* below ".suffix": "a.suffix", and "*.suffix" or "*.a.suffix" (h keeps their dot) */
    const char *sfx = entry + 1, *h = strncmp(host, "*.", 2) == 0 ? host + 1 : host;
    size_t sl = el - 1, hl = strlen(h);
    return (hl > sl || (hl == sl && h != host)) && strncmp(h + hl - sl, sfx, sl) == 0;
}

static int check_secret_host(ctx *c, const char *what, const ynode *it, char **text)
{
    lower(*text);
    if (!**text)
        return fail_at(c, it, "%s is empty", what);
    if (has_control(*text))
        return fail_at(c, it, "%s must be a host name", what);
    return check_name(c, what, it, *text);
}

/* A header name (an HTTP token) that is not one the proxy frames requests by. */
static int check_header_name(ctx *c, const char *what, const ynode *it, char **text)
{
    lower(*text);
    const char *h = *text;
    if (!*h || strlen(h) > 128 ||
        strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~") != strlen(h))
        return fail_at(c, it,
                       "%s must be an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~; "
                       "at most 128), got \"%s\"",
                       what, h);
    static const char *const framing[] = {"host",       "content-length", "transfer-encoding",
                                          "connection", "upgrade",        NULL};
    for (size_t k = 0; framing[k]; k++)
        if (streq(h, framing[k]))
            return fail_at(c, it, "%s: \"%s\" frames the request; a secret cannot go into it", what,
                           h);
    return 0;
}

static int read_secret(ctx *c, size_t i, const ynode *m, bf_secret *out)
{
    static const char *const allowed[] = {"name",  "from_env", "from_file",
                                          "hosts", "headers",  NULL};
    _cleanup_free_ char *what = xasprintf("secrets[%zu]", i);
    if (check_keys(c, what, m, allowed) < 0)
        return -1;
    const ynode *name = field(m, "name"), *fenv = field(m, "from_env"),
                *ffile = field(m, "from_file"), *hosts = field(m, "hosts");
    _cleanup_free_ char *nw = xasprintf("%s.name", what), *ew = xasprintf("%s.from_env", what),
                        *fw = xasprintf("%s.from_file", what), *hw = xasprintf("%s.hosts", what);
    const char *ns, *es, *fs;
    if (!name)
        return fail_at(c, m, "%s needs a name (the guest's environment variable)", what);
    if (read_string(c, nw, name, &ns) < 0)
        return -1;
    if (!is_identifier(ns))
        return fail_at(c, name,
                       "%s must be an environment variable name (letters, digits, _; not "
                       "starting with a digit), got \"%s\"",
                       nw, ns);
    if (strncmp(ns, "BLUEBOX_", 8) == 0)
        return fail_at(c, name, "%s: names starting with BLUEBOX_ are bluebox's own, got \"%s\"",
                       nw, ns);
    out->name = xstrdup(ns);
    if (!fenv == !ffile)
        return fail_at(c, m,
                       "%s needs exactly one of from_env (a variable of the environment you run "
                       "bluebox in) and from_file (a file only you can read)",
                       what);
    if (fenv) {
        if (read_string(c, ew, fenv, &es) < 0)
            return -1;
        if (!is_identifier(es))
            return fail_at(c, fenv, "%s must be an environment variable name, got \"%s\"", ew, es);
        out->from_env = xstrdup(es);
    } else {
        if (read_string(c, fw, ffile, &fs) < 0)
            return -1;
        if (!*fs || has_control(fs))
            return fail_at(c, ffile, "%s must be the path of a file", fw);
        if (anchored_path(c, fw, ffile, fs, &out->from_file) < 0)
            return -1;
    }
    if (!hosts)
        return fail_at(c, m, "%s needs hosts: the names its value may be sent to", what);
    if (read_list(c, hw, hosts, check_secret_host, &out->hosts) < 0)
        return -1;
    if (out->hosts.n == 0)
        return fail_at(c, hosts, "%s is empty; name the hosts the value may be sent to", hw);
    const ynode *headers = field(m, "headers");
    if (headers) {
        _cleanup_free_ char *hdw = xasprintf("%s.headers", what);
        if (read_list(c, hdw, headers, check_header_name, &out->headers) < 0)
            return -1;
        if (out->headers.n == 0)
            return fail_at(c, headers,
                           "%s is empty; leave it out for the default (" SECRET_HEADERS_DEFAULT
                           ") or name the headers the value goes into",
                           hdw);
        if (out->headers.n > 16)
            return fail_at(c, headers, "%s has %zu names; at most 16", hdw, out->headers.n);
    }
    return 0;
}

static int key_secrets(ctx *c, const char *key, const ynode *v)
{
    if (v->kind != YNODE_SEQ)
        return fail_at(c, v, "%s must be a list, got %s", key, ynode_kind_name(v));
    if (v->n > BLUEFILE_MAX_SECRETS)
        return fail_at(c, v, "%s has %zu entries; at most %d", key, v->n, BLUEFILE_MAX_SECRETS);
    bluefile *bf = c->bf;
    c->secrets_node = v;
    bf->secrets = xcalloc(v->n, sizeof *bf->secrets);
    for (size_t i = 0; i < v->n; i++) {
        bf_secret *sec = &bf->secrets[bf->n_secrets];
        bf->n_secrets++; /* freed with the rest even when half read */
        if (read_secret(c, i, v->items[i], sec) < 0)
            return -1;
        for (size_t j = 0; j < i; j++)
            if (streq(bf->secrets[j].name, sec->name))
                return fail_at(c, v->items[i], "secret %s is declared more than once", sec->name);
    }
    return 0;
}

/* The rules between allow:, secrets:, network: and env:. */
static int egress_checks(ctx *c)
{
    bluefile *bf = c->bf;
    if (bf->has_allow && bf->network != NET_BRIDGE)
        return fail_at(c, c->allow_node,
                       "allow needs network: bridge (it narrows what a bridge sandbox reaches; "
                       "network: none reaches nothing)");
    if (bf->n_secrets && !bf->has_allow)
        return fail_at(c, c->secrets_node,
                       "secrets need an allow: list that names their hosts (and network: bridge)");
    for (size_t i = 0; i < bf->n_secrets; i++) {
        const bf_secret *sec = &bf->secrets[i];
        const ynode *m = c->secrets_node->items[i];
        for (size_t k = 0; k < bf->n_env; k++)
            if (streq(bf->env[k].key, sec->name))
                return fail_at(c, field(m, "name"),
                               "secrets[%zu]: %s is also set in env:; a variable is either a "
                               "secret or a plain value",
                               i, sec->name);
        for (size_t j = 0; j < sec->hosts.n; j++) {
            bool covered = false;
            for (size_t k = 0; k < bf->allow.n && !covered; k++)
                covered = bf_allow_covers(bf->allow.v[k], sec->hosts.v[j]);
            if (!covered)
                return fail_at(c, field(m, "hosts")->items[j],
                               "secrets[%zu].hosts[%zu]: \"%s\" is not covered by allow:; add it "
                               "there (a secret is only sent where the sandbox may connect)",
                               i, j, sec->hosts.v[j]);
        }
    }
    return 0;
}

/* The key table: scalar keys are described by their type and rule and read generically;
 * structured keys have a reader of their own. Table order is the order keys are applied
 * (not the file's), so `isolation` comes before `mounts` and strict can refuse rw mounts
 * where they are read. */
typedef enum { K_INT, K_BOOL, K_CHOICE, K_FN } key_type;

typedef struct {
    const char *name;
    key_type type;
    size_t offset;        /* K_INT, K_BOOL, K_CHOICE: field in bluefile */
    long long lo, hi;     /* K_INT */
    const char *rule;     /* K_INT: range message; K_CHOICE: the choices, in words */
    const char *names[5]; /* K_CHOICE: accepted words, NULL-terminated */
    const int values[5];  /* K_CHOICE: the enum value of each word */
    bool nocase;          /* K_CHOICE */
    key_fn fn;            /* K_FN */
} key_spec;

#define FIELD(f) offsetof(bluefile, f)

static const key_spec keys[] = {
    {"base", K_FN, .fn = key_base},
    {"cpus", K_INT, FIELD(cpus), 1, BLUEFILE_MAX_CPUS, "must be 1-16 (krun's limit)"},
    {"ram_mib", K_INT, FIELD(ram_mib), 128, BLUEFILE_MAX_RAM_MIB, "must be 128-1048576 (MiB)"},
    {"network", K_CHOICE, FIELD(network), .rule = "bridge or none", .names = {"none", "bridge"},
     .values = {NET_NONE, NET_BRIDGE}},
    {"passt", K_BOOL, FIELD(passt)},
    {"readonly", K_BOOL, FIELD(readonly)},
    {"timeout_seconds", K_INT, FIELD(timeout_seconds), 0, INT_MAX, "must be 0 (no limit) or more"},
    {"warm", K_INT, FIELD(warm), 0, BLUEFILE_MAX_WARM, "must be 0-8"},
    {"warmup", K_FN, .fn = key_warmup},
    {"isolation", K_CHOICE, FIELD(isolation), .rule = "standard or strict",
     .names = {"standard", "strict"}, .values = {ISO_STANDARD, ISO_STRICT}},
    {"backend", K_CHOICE, FIELD(backend), .rule = "krun, uml or qemu (podman is an alias of krun)",
     .names = {"krun", "uml", "qemu", "podman"},
     .values = {BACKEND_KRUN, BACKEND_UML, BACKEND_QEMU, BACKEND_KRUN}},
    {"seccomp", K_FN, .fn = key_seccomp},
    {"data_limit", K_FN, .fn = key_data_limit},
    {"pkgmgr", K_CHOICE, FIELD(pkgmgr), .rule = "apk, apt or dnf", .names = {"apk", "apt", "dnf"},
     .values = {PKG_APK, PKG_APT, PKG_DNF}, .nocase = true},
    {"packages", K_FN, .fn = key_packages},
    {"run", K_FN, .fn = key_run},
    {"env", K_FN, .fn = key_env},
    {"mounts", K_FN, .fn = key_mounts},
    {"blueprint", K_FN, .fn = key_blueprint},
    {"allow", K_FN, .fn = key_allow},
    {"secrets", K_FN, .fn = key_secrets},
};

static int apply_key(ctx *c, const key_spec *k, const ynode *v)
{
    void *field = (char *)c->bf + k->offset;
    int i;
    switch (k->type) {
    case K_INT:
        if (streq(k->name, "warm"))
            c->warm_node = v;
        return read_int(c, k->name, v, k->lo, k->hi, k->rule, field);
    case K_BOOL:
        return read_bool(c, k->name, v, field);
    case K_CHOICE:
        if (read_choice(c, k->name, v, k->names, k->rule, k->nocase, &i) < 0)
            return -1;
        *(int *)field = k->values[i];
        return 0;
    case K_FN:
        return k->fn(c, k->name, v);
    }
    return -1;
}

/* Levenshtein distance, for "did you mean". Keys are short. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 99;
    size_t d[33][33];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

static int unknown_key(ctx *c, const ynode *k)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
        size_t d = distance(k->value, keys[i].name);
        if (d < best_d) {
            best_d = d;
            best = keys[i].name;
        }
    }
    if (best)
        return fail_at(c, k, "unknown key \"%s\" (did you mean \"%s\"?)", k->value, best);
    return fail_at(c, k, "unknown key \"%s\"", k->value);
}

static int apply_keys(ctx *c, const ynode *root)
{
    for (size_t i = 0; i < root->n; i++) {
        const ynode *k = root->items[2 * i];
        bool known = false;
        for (size_t j = 0; j < ELEMENTSOF(keys); j++)
            known = known || streq(k->value, keys[j].name);
        if (!known)
            return unknown_key(c, k);
    }
    for (size_t j = 0; j < ELEMENTSOF(keys); j++)
        for (size_t i = 0; i < root->n; i++) {
            const ynode *k = root->items[2 * i], *v = root->items[2 * i + 1];
            if (streq(k->value, keys[j].name) && !ynode_is_null(v) && apply_key(c, &keys[j], v) < 0)
                return -1;
        }
    return 0;
}

static int cross_checks(ctx *c)
{
    bluefile *bf = c->bf;
    /* The pool's VMs are all up at once; a /data disk image is attached to one VM at a time. */
    if (bf->warm > 0 && bf->data_limit)
        return fail_at(c, c->warm_node,
                       "warm needs /data as a directory, and data_limit makes it a disk image that "
                       "one VM at a time can attach; drop data_limit or set warm: 0");
    /* A pool VM is booted before its run, by a tender: secrets would be read from the wrong
     * process at the wrong time, and allow:'s connection log has no run to belong to. */
    if (bf->warm > 0 && (bf->has_allow || bf->n_secrets))
        return fail_at(c, c->warm_node,
                       "warm cannot be combined with allow: or secrets: yet (a pool VM is "
                       "booted before the run that uses it); set warm: 0");
    if (bf->pkgmgr == PKG_NONE)
        bf->pkgmgr = bf_pkgmgr_infer(bf->base);
    const ynode *needs = bf->packages.n ? c->packages_node : bf->n_users ? c->users_node : NULL;
    if (needs && bf->pkgmgr == PKG_NONE)
        return fail_at(c, needs,
                       "cannot infer a package manager for base \"%s\"; set pkgmgr to apk, apt "
                       "or dnf",
                       bf->base);
    return egress_checks(c);
}

int bluefile_parse(const char *path, const char *buf, size_t len, const char *home, bluefile **ret,
                   bb_error **err)
{
    _cleanup_bluefile_ bluefile *bf = xcalloc(1, sizeof *bf);
    bf->path = xstrdup(path);
    bf->base = xstrdup(BLUEFILE_DEFAULT_BASE);
    bf->cpus = 2;
    bf->ram_mib = 2048;
    bf->network = NET_NONE; /* deliberately not the original's bridge: nothing by default */
    ctx c = {.bf = bf, .home = home ? home : getenv("HOME"), .err = err};
    if (len > BLUEFILE_MAX_SIZE)
        return bb_fail(err, EFBIG, "%s: larger than %d bytes; a Bluefile is a short spec", path,
                       BLUEFILE_MAX_SIZE);
    _cleanup_ynode_ ynode *root = NULL;
    if (yamldoc_parse(path, buf, len, &root, err) < 0)
        return -1;
    if (root) {
        if (root->kind != YNODE_MAP)
            return fail_at(&c, root, "a Bluefile is a mapping of keys like \"cpus: 2\", got %s",
                           ynode_kind_name(root));
        if (apply_keys(&c, root) < 0)
            return -1;
    }
    if (cross_checks(&c) < 0)
        return -1;
    *ret = steal_pointer(&bf);
    return 0;
}

int bluefile_load(const char *path, bluefile **ret, bb_error **err)
{
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    if (read_file(path, BLUEFILE_MAX_SIZE, &buf, &len, err) < 0)
        return -1;
    return bluefile_parse(path, buf, len, NULL, ret, err);
}

void bluefile_free(bluefile *bf)
{
    if (!bf)
        return;
    free(bf->path);
    free(bf->base);
    free(bf->seccomp);
    strv_clear(&bf->warmup);
    strv_clear(&bf->packages);
    strv_clear(&bf->run);
    strv_clear(&bf->runcmd);
    for (size_t i = 0; i < bf->n_env; i++) {
        free(bf->env[i].key);
        free(bf->env[i].value);
    }
    free(bf->env);
    for (size_t i = 0; i < bf->n_mounts; i++) {
        free(bf->mounts[i].host);
        free(bf->mounts[i].guest);
    }
    free(bf->mounts);
    for (size_t i = 0; i < bf->n_users; i++) {
        free(bf->users[i].name);
        free(bf->users[i].shell);
    }
    free(bf->users);
    for (size_t i = 0; i < bf->n_files; i++) {
        free(bf->files[i].path);
        free(bf->files[i].content);
        free(bf->files[i].mode);
    }
    free(bf->files);
    strv_clear(&bf->allow);
    for (size_t i = 0; i < bf->n_secrets; i++) {
        free(bf->secrets[i].name);
        free(bf->secrets[i].from_env);
        free(bf->secrets[i].from_file);
        strv_clear(&bf->secrets[i].hosts);
        strv_clear(&bf->secrets[i].headers);
    }
    free(bf->secrets);
    free(bf);
}

const char *bf_network_name(bf_network n)
{
    return n == NET_BRIDGE ? "bridge" : "none";
}

const char *bf_isolation_name(bf_isolation i)
{
    return i == ISO_STRICT ? "strict" : "standard";
}

const char *bf_backend_name(bf_backend b)
{
    return b == BACKEND_UML ? "uml" : b == BACKEND_QEMU ? "qemu" : "krun";
}

bf_pkgmgr bf_pkgmgr_infer(const char *base)
{
    static const struct {
        const char *word;
        bf_pkgmgr pm;
    } table[] = {
        {"alpine", PKG_APK},     {"debian", PKG_APT},    {"ubuntu", PKG_APT}, {"fedora", PKG_DNF},
        {"rockylinux", PKG_DNF}, {"almalinux", PKG_DNF}, {"centos", PKG_DNF},
    };
    for (size_t i = 0; i < ELEMENTSOF(table); i++)
        if (strcasestr(base, table[i].word))
            return table[i].pm;
    return PKG_NONE;
}
