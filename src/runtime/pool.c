/* The warm pool's files, its claim and drain, and the tender (see pool.h). */
#include "pool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/chain.h"
#include "agent_client.h"
#include "boot.h"
#include "core/home.h"
#include "core/runlog.h"
#include "util/fingerprint.h"
#include "util/selfpath.h"
#include "launch/session.h"
#include "up.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/spawn.h"
#include "util/time.h"
#include "util/xalloc.h"

#define ID_BYTES     6
#define ID_LEN       (2 * ID_BYTES)
#define ENTRY_MAX    65536
#define GEN_FILE     "generation"
#define WARMUP_LIMIT 300 /* seconds per warmup line when the Bluefile sets no timeout */
#define PRIME_RUNS   2   /* no-op commands run in each new VM before it waits (warmup()) */
#define PRIME_LIMIT  10  /* seconds */
#define TENDER_WAIT  60  /* seconds a drain waits for a tender's boot in flight to end */

/* The tenders whose boot a drain found in flight. */
typedef struct {
    pid_t v[8];
    size_t n;
} tenders;

char *pool_dir(const sandbox *sb)
{
    return xasprintf("%s/pool/%s", sb->root, sb->name);
}

char *pool_container_name(const sandbox *sb, const char *id)
{
    return xasprintf("bluebox-pool-%s-%s-%s", sb->name, sb->home_id, id);
}

bool pool_container(const char *container)
{
    return strncmp(container, "bluebox-pool-", 13) == 0;
}

static long long read_gen(const char *dir)
{
    _cleanup_free_ char *path = path_join(dir, GEN_FILE), *data = NULL;
    size_t len = 0;
    if (read_file(path, 64, &data, &len, NULL) < 0)
        return 0;
    return strtoll(data, NULL, 10);
}

char *pool_fingerprint(sandbox *sb, bb_error **err)
{
    if (sandbox_resolve_backend(sb, err) < 0)
        return NULL;
    _cleanup_free_ char *bytes = NULL, *image = NULL, *self = guest_binary(err);
    if (!self)
        return NULL;
    size_t len = 0;
    if (read_file(sb->bluefile_path, BLUEFILE_MAX_SIZE, &bytes, &len, err) < 0)
        return NULL;
    if (read_file(sb->image_id, 4096, &image, &len, NULL) < 0)
        image = xstrdup("none");
    _cleanup_free_ char *dir = pool_dir(sb);
    _cleanup_free_ char *gen = xasprintf("%lld", read_gen(dir));
    fingerprint f;
    fp_init(&f);
    fp_str(&f, "Bluefile", bytes);
    fp_str(&f, "image", image);
    fp_str(&f, "backend", sb->backend->name);
    fp_file_as(&f, "bluebox", self);
    fp_str(&f, "generation", gen);
    char *hex = fp_hex(&f);
    fp_done(&f);
    return hex;
}

/* ---- entries ------------------------------------------------------------------------- */

static bool pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static bool id_valid(const char *s, size_t n)
{
    if (n != ID_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return false;
    return true;
}

/* "<id>.<state>[-<pid>]" into its parts; false for anything else (.lock, temp files). */
static bool parse_name(const char *name, char **ret_id, char **ret_state, pid_t *ret_pid)
{
    const char *dot = strchr(name, '.');
    if (!dot || !id_valid(name, (size_t)(dot - name)))
        return false;
    const char *st = dot + 1, *dash = strchr(st, '-');
    size_t n = dash ? (size_t)(dash - st) : strlen(st);
    static const char *const states[] = {"booting", "waiting", "claimed", "stale"};
    bool known = false, with_pid = false;
    for (size_t i = 0; i < ELEMENTSOF(states); i++)
        if (strlen(states[i]) == n && strncmp(st, states[i], n) == 0)
            known = true, with_pid = i == 0 || i == 2;
    if (!known || with_pid != (dash != NULL) || strstr(st, ".tmp-"))
        return false;
    pid_t pid = 0;
    if (dash) {
        char *end;
        long v = strtol(dash + 1, &end, 10);
        if (*end || v <= 0)
            return false;
        pid = (pid_t)v;
    }
    *ret_id = xstrndup(name, (size_t)(dot - name));
    *ret_state = xstrndup(st, n);
    *ret_pid = pid;
    return true;
}

static int read_entry(const char *path, up_state *ret, char **ret_fp)
{
    *ret = (up_state){0};
    *ret_fp = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if (read_file(path, ENTRY_MAX, &data, &len, NULL) < 0)
        return -1;
    _cleanup_json_ json_t *o = json_loadb(data, len, 0, NULL);
    explicit_bzero(data, len);
    const char *c = json_string_value(json_object_get(o, "container"));
    const char *a = json_string_value(json_object_get(o, "addr"));
    const char *t = json_string_value(json_object_get(o, "token"));
    const char *k = json_string_value(json_object_get(o, "kernel"));
    const char *f = json_string_value(json_object_get(o, "fp"));
    if (!c || !a || !t || !f)
        return -1;
    *ret = (up_state){.container = xstrdup(c),
                      .addr = xstrdup(a),
                      .token = xstrdup(t),
                      .kernel = xstrdup(k ? k : ""),
                      .started = json_integer_value(json_object_get(o, "started"))};
    *ret_fp = xstrdup(f);
    return 0;
}

static char *entry_json(const up_state *s, const char *fp)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "container", s->container, "addr",
                          s->addr ? s->addr : "", "token", s->token ? s->token : "", "kernel",
                          s->kernel ? s->kernel : "", "started", (json_int_t)s->started, "fp", fp);
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!text)
        abort();
    return text;
}

static char *entry_path(const char *dir, const char *id, const char *state, pid_t pid)
{
    return pid ? xasprintf("%s/%s.%s-%d", dir, id, state, (int)pid)
               : xasprintf("%s/%s.%s", dir, id, state);
}

static bool has(const strv *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (streq(s->v[i], x))
            return true;
    return false;
}

static void remove_containers(strv *names)
{
    if (!names->n || !program_on_path("podman"))
        return;
    _cleanup_strv_ strv argv = {0};
    const char *head[] = {"podman", "rm", "-f", "-t", "0", "--ignore"};
    for (size_t i = 0; i < ELEMENTSOF(head); i++)
        strv_add(&argv, head[i]);
    for (size_t i = 0; i < names->n; i++)
        strv_add(&argv, names->v[i]);
    (void)spawn_quiet(argv.v, NULL);
}

/* The pool's containers podman knows, whatever their files say. */
static void podman_pool_vms(const sandbox *sb, strv *ret)
{
    _cleanup_free_ char *prefix = pool_container_name(sb, "");
    _cleanup_free_ char *filter = xasprintf("name=^%s", prefix);
    char *argv[] = {"podman", "ps", "-a", "--filter", filter, "--format", "{{.Names}}", NULL};
    _cleanup_free_ char *out = NULL;
    if (!program_on_path("podman") || spawn_capture(argv, &out, NULL, NULL) != 0)
        return;
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (strncmp(l, prefix, strlen(prefix)) == 0 &&
            id_valid(l + strlen(prefix), strlen(l + strlen(prefix))))
            strv_add(ret, l);
}

/* ---- claim --------------------------------------------------------------------------- */

int pool_claim_vm(const sandbox *sb, const char *fp, pool_claim *ret,
                  bb_error **err)
{
    (void)err;
    *ret = (pool_claim){0};
    _cleanup_free_ char *dir = pool_dir(sb);
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(dfd, &names, NULL) < 0)
        return 0;
    pid_t me = getpid();
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_free_ char *id = NULL, *state = NULL;
        pid_t pid;
        if (!parse_name(names.v[i], &id, &state, &pid) || !streq(state, "waiting"))
            continue;
        _cleanup_free_ char *claimed = entry_path(dir, id, "claimed", me);
        if (renameat(dfd, names.v[i], dfd, claimed) < 0)
            continue; /* another run took it */
        up_state vm;
        _cleanup_free_ char *efp = NULL;
        if (read_entry(claimed, &vm, &efp) == 0 && streq(efp, fp)) {
            *ret = (pool_claim){.dir = steal_pointer(&dir), .id = steal_pointer(&id), .vm = vm};
            return 1;
        }
        upstate_clear(&vm);
        _cleanup_free_ char *stale = entry_path(dir, id, "stale", 0);
        (void)rename(claimed, stale);
    }
    return 0;
}

void pool_release(pool_claim *c)
{
    if (c->dir && c->id) {
        _cleanup_free_ char *claimed = entry_path(c->dir, c->id, "claimed", getpid());
        _cleanup_free_ char *stale = entry_path(c->dir, c->id, "stale", 0);
        (void)rename(claimed, stale);
    }
    free(c->dir);
    free(c->id);
    upstate_clear(&c->vm);
    *c = (pool_claim){0};
}

/* ---- kick ---------------------------------------------------------------------------- */

void pool_kick(const sandbox *sb)
{
    pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid == 0) {
        if (setsid() < 0 || fork() != 0)
            _exit(0);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        close_range(3, ~0U, 0);
        signal(SIGPIPE, SIG_DFL);
        setenv("BLUEBOX_HOME", sb->root, 1);
        char *argv[] = {"bluebox", "__tend", sb->name, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* ---- listing ------------------------------------------------------------------------- */

static int entry_cmp(const void *a, const void *b)
{
    const pool_entry *x = a, *y = b;
    if (x->age_seconds != y->age_seconds)
        return x->age_seconds < y->age_seconds ? 1 : -1;
    return strcmp(x->id, y->id);
}

int pool_list(const sandbox *sb, pool_list_result *ret, bb_error **err)
{
    *ret = (pool_list_result){0};
    _cleanup_free_ char *dir = pool_dir(sb);
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : bb_fail_errno(err, errno, "cannot open %s", dir);
    _cleanup_strv_ strv names = {0};
    if (list_dir_at(dfd, &names, err) < 0)
        return -1;
    time_t now = time(NULL);
    for (size_t i = 0; i < names.n; i++) {
        pool_entry e = {0};
        struct stat st;
        if (!parse_name(names.v[i], &e.id, &e.state, &e.pid))
            continue;
        if (fstatat(dfd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
            free(e.id);
            free(e.state);
            continue;
        }
        e.age_seconds = (long long)(now - st.st_mtim.tv_sec);
        ret->v = xrealloc(ret->v, (ret->n + 1) * sizeof *ret->v);
        ret->v[ret->n++] = e;
    }
    if (ret->n)
        qsort(ret->v, ret->n, sizeof *ret->v, entry_cmp);
    return 0;
}

void pool_list_free(pool_list_result *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].id);
        free(l->v[i].state);
    }
    free(l->v);
    *l = (pool_list_result){0};
}

void pool_count(const sandbox *sb, int *ret_waiting, int *ret_total)
{
    pool_list_result l;
    *ret_waiting = *ret_total = 0;
    if (pool_list(sb, &l, NULL) < 0)
        return;
    for (size_t i = 0; i < l.n; i++) {
        *ret_total += 1;
        *ret_waiting += streq(l.v[i].state, "waiting");
    }
    pool_list_free(&l);
}

/* ---- drain --------------------------------------------------------------------------- */

static int bump_gen(const char *dir, bb_error **err)
{
    _cleanup_free_ char *path = path_join(dir, GEN_FILE);
    _cleanup_free_ char *text = xasprintf("%lld\n", read_gen(dir) + 1);
    return write_file_atomic(path, text, strlen(text), 0600, err);
}

/* Mark stale and remove every entry that no live process holds as claimed (`all`), or only
 * what crashes left and `keep_fp`'s mismatches (the tender's sweep, under .lock). A boot in
 * flight is marked too; its tender (added to `booting`, may be NULL) removes its VM when it
 * finds its entry gone. */
static void sweep(const sandbox *sb, const char *dir, bool all,
                  const char *keep_fp, int keep, int *ret_kept, tenders *booting)
{
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *ret_kept = 0;
    if (dfd < 0)
        return;
    _cleanup_strv_ strv names = {0}, doomed = {0}, live = {0}, vms = {0};
    if (list_dir_at(dfd, &names, NULL) < 0)
        return;
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_free_ char *id = NULL, *state = NULL;
        pid_t pid;
        if (!parse_name(names.v[i], &id, &state, &pid)) {
            if (strstr(names.v[i], ".tmp-") && !all) /* a tender killed mid-write */
                (void)unlinkat(dfd, names.v[i], 0);
            continue;
        }
        _cleanup_free_ char *container = pool_container_name(sb, id);
        bool held = streq(state, "claimed") && pid_alive(pid);
        bool drop = !held;
        if (booting && streq(state, "booting") && pid_alive(pid) &&
            booting->n < ELEMENTSOF(booting->v))
            booting->v[booting->n++] = pid;
        if (streq(state, "waiting") && !all) {
            up_state vm;
            _cleanup_free_ char *efp = NULL, *path = path_join(dir, names.v[i]);
            bool ok = read_entry(path, &vm, &efp) == 0 && streq(efp, keep_fp) && *ret_kept < keep;
            bool running = ok && up_alive(sb, &vm);
            upstate_clear(&vm);
            drop = !running;
            if (!drop)
                *ret_kept += 1;
        }
        if (!drop) {
            strv_add(&live, container);
            continue;
        }
        _cleanup_free_ char *stale = xasprintf("%s.stale", id);
        if (!streq(names.v[i], stale) && renameat(dfd, names.v[i], dfd, stale) < 0) {
            strv_add(&live, container); /* a run claimed it first: it is that run's now */
            continue;
        }
        strv_add(&doomed, stale);
        strv_add(&vms, container);
    }
    /* VMs whose file was lost (a tender killed between podman run and its rename) */
    _cleanup_strv_ strv known = {0};
    podman_pool_vms(sb, &known);
    for (size_t i = 0; i < known.n; i++)
        if (!has(&live, known.v[i]) && !has(&vms, known.v[i]))
            strv_add(&vms, known.v[i]);
    remove_containers(&vms);
    for (size_t i = 0; i < doomed.n; i++)
        (void)unlinkat(dfd, doomed.v[i], 0);
}

/* After the boots: a `podman run` that a tender killed with -9 had started may have made its
 * container after the sweep looked; whatever VM no entry names now goes. */
static void sweep_strays(const sandbox *sb, const char *dir)
{
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_strv_ strv names = {0}, live = {0}, known = {0}, vms = {0};
    if (dfd < 0 || list_dir_at(dfd, &names, NULL) < 0)
        return;
    for (size_t i = 0; i < names.n; i++) {
        _cleanup_free_ char *id = NULL, *state = NULL;
        pid_t pid;
        if (parse_name(names.v[i], &id, &state, &pid) && !streq(state, "stale"))
            strv_push(&live, pool_container_name(sb, id));
    }
    podman_pool_vms(sb, &known);
    for (size_t i = 0; i < known.n; i++)
        if (!has(&live, known.v[i]))
            strv_add(&vms, known.v[i]);
    remove_containers(&vms);
}

/* Until the tenders whose boot was in flight have ended (each removes the VM it booted once
 * it finds its entry gone), so that nothing of the old pool runs after a drain; at most
 * TENDER_WAIT seconds. */
static void wait_tenders(const tenders *t)
{
    int64_t deadline = now_mono_ms() + TENDER_WAIT * 1000;
    for (size_t i = 0; i < t->n; i++)
        while (pid_alive(t->v[i]) && now_mono_ms() < deadline)
            usleep(50 * 1000);
}

int pool_drain(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *dir = pool_dir(sb);
    if (!is_dir(dir))
        return 0;
    if (bump_gen(dir, err) < 0)
        return -1;
    int kept;
    tenders booting = {0};
    sweep(sb, dir, true, NULL, 0, &kept, &booting);
    wait_tenders(&booting);
    return 1;
}

int pool_remove(const sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *dir = pool_dir(sb);
    if (!is_dir(dir))
        return 0;
    if (pool_drain(sb, err) < 0)
        return -1;
    return rm_rf(dir, err) < 0 ? -1 : 0;
}

/* ---- the tender ---------------------------------------------------------------------- */

/* .lock, or nothing when a tender holds it and another already waits for it (that one
 * will do what this one was started for). */
static int tender_lock(const char *dir)
{
    _cleanup_free_ char *lp = path_join(dir, ".lock"), *wp = path_join(dir, ".waiter");
    _cleanup_close_ int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return steal_fd(&fd);
    _cleanup_close_ int w = open(wp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (w < 0 || flock(w, LOCK_EX | LOCK_NB) < 0)
        return -1;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR)
            return -1;
    return steal_fd(&fd);
}

static void log_failure(sandbox *sb, const char *what, const char *msg)
{
    char *argv[] = {(char *)what, NULL};
    runlog *rl = runlog_begin(sb->log, "pool", argv, NULL);
    if (!rl)
        return;
    _cleanup_free_ char *line = xasprintf("bluebox: %s\n", msg);
    runlog_write(rl, line, strlen(line));
    runlog_end(rl, -1, 0);
}

/* One command in the new VM through its agent, its output to `rl` (may be NULL); the exit
 * code, or -1 with *err filled. */
static int vm_command(const up_state *vm, strv *argv, int limit, runlog *rl, bb_error **err)
{
    agent_hello h = {.timeout_seconds = limit, .argv = *argv};
    _cleanup_agent_conn_ agent_conn c = {.fd = -1};
    _cleanup_free_ char *kernel = NULL;
    agent_exit x = {0};
    int r = agent_open(vm->addr, vm->token, &h, &c, &kernel, err);
    if (r == 0) {
        agent_io io = {.log = rl, .timeout_seconds = limit};
        r = agent_session(&c, &io, &x, err);
    }
    free(x.err);
    return r < 0 ? -1 : x.code;
}

/* Each warmup line in the new VM, with a time limit; what goes wrong is logged, never
 * fatal (the VM is as good as a cold one without it). Before them, a no-op: the first
 * command a guest's agent starts pays for paging in its fork and exec path, and that is
 * better paid here than by the run this VM will serve. */
static void warmup(sandbox *sb, const up_state *vm)
{
    const bluefile *bf = sb->bf;
    int limit = bf->timeout_seconds > 0 ? bf->timeout_seconds : WARMUP_LIMIT;
    for (int i = 0; i < PRIME_RUNS; i++) {
        _cleanup_strv_ strv argv = {0};
        _cleanup_error_ bb_error *e = NULL;
        strv_add(&argv, "true");
        (void)vm_command(vm, &argv, PRIME_LIMIT, NULL, &e);
    }
    for (size_t i = 0; i < bf->warmup.n; i++) {
        _cleanup_strv_ strv argv = {0};
        _cleanup_error_ bb_error *e = NULL;
        strv_add(&argv, "/bin/sh");
        strv_add(&argv, "-c");
        strv_add(&argv, bf->warmup.v[i]);
        runlog *rl = runlog_begin(sb->log, "pool warmup", argv.v, NULL);
        double start = now_mono_s();
        int code = vm_command(vm, &argv, limit, rl, &e);
        if (code < 0 && rl) {
            _cleanup_free_ char *line = xasprintf("bluebox: warmup failed: %s\n", e->msg);
            runlog_write(rl, line, strlen(line));
        }
        runlog_end(rl, code, now_mono_s() - start);
    }
}

/* Boot one VM and publish it as waiting; false when it could not be booted, or the pool was
 * drained since generation `gen`. */
static bool boot_one(sandbox *sb, boot *b, const char *dir, const char *fp, long long gen)
{
    unsigned char raw[ID_BYTES];
    char id[ID_LEN + 1];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return false;
    hex_encode(raw, sizeof raw, id);
    _cleanup_free_ char *container = pool_container_name(sb, id);
    _cleanup_free_ char *booting = entry_path(dir, id, "booting", getpid());
    _cleanup_free_ char *waiting = entry_path(dir, id, "waiting", 0);
    up_state pending = {.container = container};
    _cleanup_free_ char *text = entry_json(&pending, fp);
    _cleanup_error_ bb_error *e = NULL;
    /* The entry goes in under the sandbox's lock, which a drain holds throughout: the drain
     * either comes first (a new generation, or no directory: nothing boots) or sees the entry
     * and waits for this boot to end. */
    if (sandbox_lock(sb, &e) < 0) {
        log_failure(sb, "boot", e->msg);
        return false;
    }
    bool current = is_dir(dir) && read_gen(dir) == gen;
    int w = current ? write_file_atomic(booting, text, strlen(text), 0600, &e) : -1;
    sandbox_unlock(sb);
    if (w < 0) {
        if (e)
            log_failure(sb, "boot", e->msg);
        return false;
    }
    _cleanup_upstate_ up_state vm = {0};
    _cleanup_free_ char *vmlog = NULL;
    /* The tender's until the entry is waiting: a tender killed before leaves no VM. */
    _cleanup_(lifeline_close) lifeline life = LIFELINE_NONE;
    if (up_boot(b, container, &vm, &life, NULL, NULL, &vmlog, &e) < 0) {
        _cleanup_free_ char *m = xasprintf("a pool VM did not come up: %s%s%s", e->msg,
                                           vmlog && *vmlog ? "\n" : "", vmlog ? vmlog : "");
        log_failure(sb, "boot", m);
        session_remove(container);
        unlink(booting);
        return false;
    }
    if (access(booting, F_OK) < 0) { /* drained while it booted: a drain waits for this */
        session_remove(container);
        return false;
    }
    warmup(sb, &vm);
    /* Publish: the full entry goes in under a temporary name and is swapped with the booting
     * file, which fails when a drain took it meanwhile; then the rename makes it waiting. */
    _cleanup_free_ char *full = entry_json(&vm, fp);
    _cleanup_free_ char *tmp = xasprintf("%s/%s.tmp-%d", dir, id, (int)getpid());
    int r = write_file_atomic(tmp, full, strlen(full), 0600, &e);
    explicit_bzero(full, strlen(full));
    if (r == 0)
        r = renameat2(AT_FDCWD, tmp, AT_FDCWD, booting, RENAME_EXCHANGE);
    if (r == 0)
        r = rename(booting, waiting);
    unlink(tmp);
    if (r < 0) {
        session_remove(container);
        unlink(booting);
        return false;
    }
    lifeline_release(&life); /* the waiting entry owns it now; a drain ends it */
    return true;
}

/* Whether the directory this tender locked is still the pool's: a destroy or rename while it
 * waited for the locks removed it. */
static bool still_here(const char *dir, int lock)
{
    _cleanup_free_ char *lp = path_join(dir, ".lock");
    struct stat a, b;
    return fstat(lock, &a) == 0 && stat(lp, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int pool_tend(sandbox *sb, bb_error **err)
{
    _cleanup_free_ char *dir = pool_dir(sb);
    if (mkdir_p(dir, 0700, err) < 0)
        return -1;
    _cleanup_close_ int lock = tender_lock(dir);
    if (lock < 0)
        return 0;
    /* The fingerprint and the boot's preparation under the sandbox's lock, so that a drain
     * (which holds it) comes wholly before or wholly after: a VM prepared before it carries
     * the old generation and is never served. */
    if (sandbox_lock(sb, err) < 0)
        return -1;
    bool gone = !is_dir(sb->dir); /* and this tender made the pool's directory again */
    if (gone)
        (void)rm_rf(dir, NULL);
    if (gone || !still_here(dir, lock)) {
        sandbox_unlock(sb);
        return 0;
    }
    _cleanup_error_ bb_error *perr = NULL;
    _cleanup_free_ char *fp = pool_fingerprint(sb, &perr);
    long long gen = read_gen(dir);
    int target = fp ? sb->bf->warm : 0;
    _cleanup_(boot_done) boot b = {0};
    if (target > 0 && boot_prepare(sb, BOOT_CACHED, NULL, &b, &perr) < 0)
        target = 0;
    sandbox_unlock(sb);
    if (perr)
        log_failure(sb, "prepare", perr->msg);
    int kept;
    sweep(sb, dir, false, fp ? fp : "", target, &kept, NULL);
    for (int n = kept; n < target; n++)
        if (!boot_one(sb, &b, dir, fp, gen))
            break;
    sweep_strays(sb, dir);
    return 0;
}
