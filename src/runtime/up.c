/* bluebox up and down. The token is made here and kept in run/<name>.json for exec; the
 * guest gets only the head of the hash chain derived from it (abi/chain.h), through
 * podman's own environment (never argv). */
#include "up.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "abi/chain.h"
#include "agent_client.h"
#include "core/home.h"
#include "launch/lifeline.h"
#include "launch/session.h"
#include "util/env.h"
#include "util/spawn.h"
#include "util/time.h"
#include "util/xalloc.h"

#define READY_MS 30000
#define POLL_MS  20
/* Until the guest listens, slirp accepts our connection and then retries its SYN into the
 * guest with exponential backoff (seconds). A short handshake and a fresh connection find
 * the agent as soon as it listens; later attempts wait longer, for a loaded host. */
#define PING_FAST_MS 250
#define PING_SLOW_MS 2000
#define FAST_FOR_MS  10000
/* How often the wait also asks podman whether the VM is still there. */
#define ALIVE_EVERY_MS 1000
/* A VM is made at most this long before up writes its state (podman run -d returning). */
#define CREATED_SLACK_S 60

static int make_token(char **ret, bb_error **err)
{
    unsigned char raw[32];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return bb_fail_errno(err, errno, "cannot read random bytes for the agent token");
    char *hex = xmalloc(sizeof raw * 2 + 1);
    hex_encode(raw, sizeof raw, hex);
    explicit_bzero(raw, sizeof raw);
    *ret = hex;
    return 0;
}

/* podman run -d, with the chain's head in podman's environment for `--env
 * BLUEBOX_AGENT_HEAD`. The head authenticates no one; the token stays on the host. */
static int start_vm(char *const *argv, const char *token, int fd3, int lifeline_fd, bb_error **err)
{
    uint8_t head[SHA256_LEN];
    char hex[2 * SHA256_LEN + 1];
    chain_value(token, 0, CHAIN_LEN, head);
    hex_encode(head, sizeof head, hex);
    setenv(ABI_ENV_AGENT_HEAD, hex, 1);
    _cleanup_free_ char *out = NULL, *errout = NULL;
    /* in launch_argv's order: the secrets' memfd, then the lifeline */
    int fds[2], n = 0;
    if (fd3 >= 0)
        fds[n++] = fd3;
    if (lifeline_fd >= 0)
        fds[n++] = lifeline_fd;
    int rc = spawn_capture_fds(argv, fds, (size_t)n, &out, &errout, err);
    free(env_take_secret(ABI_ENV_AGENT_HEAD)); /* not inherited by anything we start later */
    if (rc < 0)
        return -1;
    if (rc != 0) {
        errout[strcspn(errout, "\n")] = '\0';
        return bb_fail(err, EIO, "podman could not start the VM: %s", errout);
    }
    return 0;
}

/* "127.0.0.1:<port>" that podman published for the agent. */
static int published_addr(const char *container, char **ret, bb_error **err)
{
    char port[] = ABI_AGENT_PORT_STR "/tcp";
    char *argv[] = {"podman", "port", (char *)container, port, NULL};
    _cleanup_free_ char *out = NULL, *errout = NULL;
    int rc = spawn_capture(argv, &out, &errout, err);
    if (rc < 0)
        return -1;
    char *line = strstr(out, "127.0.0.1:");
    if (rc != 0 || !line)
        return bb_fail(err, EIO, "podman did not publish the agent's port (%s)",
                       rc ? errout : "no 127.0.0.1 address");
    line[strcspn(line, "\r\n")] = '\0';
    *ret = xstrdup(line);
    return 0;
}

static bool vm_running(const char *container)
{
    char *argv[] = {"podman",          "container", "inspect", "--format", "{{.State.Running}}",
                    (char *)container, NULL};
    _cleanup_free_ char *out = NULL;
    return spawn_capture(argv, &out, NULL, NULL) == 0 && strncmp(out, "true", 4) == 0;
}

/* The end of the VM's log (bluebox-vmm's messages and the guest's), for a failed up. */
static char *vm_log(const char *container)
{
    char *argv[] = {"podman", "logs", "--tail", "20", (char *)container, NULL};
    _cleanup_free_ char *out = NULL, *errout = NULL;
    if (spawn_capture(argv, &out, &errout, NULL) < 0)
        return xstrdup("");
    return xasprintf("%s%s", out, errout);
}

static int wait_ready(const up_state *s, char **ret_kernel, bb_error **err)
{
    double start = now_mono_s(), last_alive = start;
    _cleanup_error_ bb_error *last = NULL;
    for (;;) {
        bb_error_free(last);
        last = NULL;
        int ms = (now_mono_s() - start) * 1000 < FAST_FOR_MS ? PING_FAST_MS : PING_SLOW_MS;
        if (agent_ping(s->addr, s->token, ms, ret_kernel, &last) == 0)
            return 0;
        if (last->status == EPERM) /* the kernel gate: no point in waiting */
            return bb_fail(err, EPERM, "%s", last->msg);
        double t = now_mono_s();
        if (t - start > READY_MS / 1000.0)
            return bb_fail(err, ETIMEDOUT, "the agent did not answer within %ds: %s",
                           READY_MS / 1000, last->msg);
        if ((t - last_alive) * 1000 >= ALIVE_EVERY_MS) {
            last_alive = t;
            if (!vm_running(s->container))
                return bb_fail(err, ECHILD, "the VM stopped before its agent answered");
        }
        usleep(POLL_MS * 1000);
    }
}

/* What podman says about a container: its ID, whether it runs, and its two labels. */
typedef struct {
    char *id;
    bool running;
    char *sandbox, *home;
    long long created;
} vm_facts;

static void vm_facts_done(vm_facts *f)
{
    free(f->id);
    free(f->sandbox);
    free(f->home);
    *f = (vm_facts){0};
}

/* 0 with *ret filled, -1 when podman knows no such container. */
static int vm_inspect(const char *container, vm_facts *ret)
{
    *ret = (vm_facts){0};
    static const char format[] =
        "{{.Id}}|{{.State.Running}}|{{index .Config.Labels \"bluebox.sandbox\"}}|"
        "{{index .Config.Labels \"bluebox.home\"}}|{{.Created.Unix}}";
    char *argv[] = {"podman",       "container",       "inspect", "--format",
                    (char *)format, (char *)container, NULL};
    _cleanup_free_ char *out = NULL;
    if (!program_on_path("podman") || spawn_capture(argv, &out, NULL, NULL) != 0)
        return -1;
    out[strcspn(out, "\r\n")] = '\0';
    char *rest = out, *f[5];
    for (int i = 0; i < 5; i++) {
        f[i] = strsep(&rest, "|");
        if (!f[i])
            return -1;
        if (streq(f[i], "<no value>"))
            f[i][0] = '\0';
    }
    if (!*f[0])
        return -1;
    *ret = (vm_facts){.id = xstrdup(f[0]),
                      .running = streq(f[1], "true"),
                      .sandbox = xstrdup(f[2]),
                      .home = xstrdup(f[3]),
                      .created = strtoll(f[4], NULL, 10)};
    return 0;
}

/* Whether the container is this home's VM of `name`: its labels say so, or, for a VM of the
 * old naming (no bluebox.home label) or of a home that has since moved, this home's state
 * names it and its agent's port is the one the state recorded — or, stopped, it has no
 * port, and it was made in the minute before the state was written. */
static bool vm_ours(const sandbox *sb, const char *container, const vm_facts *f,
                    const up_state *s)
{
    if (!streq(f->sandbox, sb->name))
        return false;
    if (streq(f->home, sb->home_id))
        return true;
    if (!s || !s->addr || !s->container || !streq(s->container, container))
        return false;
    if (!f->running)
        return f->created <= s->started && s->started - f->created < CREATED_SLACK_S;
    _cleanup_free_ char *addr = NULL;
    return published_addr(container, &addr, NULL) == 0 && streq(addr, s->addr);
}

/* Remove the container of name's VM when it is this home's (its bluebox.home label, or
 * the state `s` names it and its agent's port matches); a missing container is fine, one
 * that is another home's is left alone and is an error. */
static int up_remove_vm(const sandbox *sb, const char *container,
                        const up_state *s, bb_error **err)
{
    _cleanup_(vm_facts_done) vm_facts f = {0};
    if (vm_inspect(container, &f) < 0)
        return 0;
    if (!vm_ours(sb, container, &f, s))
        return bb_fail(err, EEXIST,
                       "a container named %s exists and is not this home's VM of %s; it is left "
                       "alone (remove it yourself if it is stale: podman rm -f %s)",
                       container, sb->name, container);
    session_remove(f.id);
    return 0;
}

bool up_alive(const sandbox *sb, const up_state *s)
{
    _cleanup_(vm_facts_done) vm_facts f = {0};
    return vm_inspect(s->container, &f) == 0 && f.running &&
           vm_ours(sb, s->container, &f, s);
}

int up_boot(boot *b, const char *container, up_state *ret, lifeline *ret_life,
            int (*started)(const up_state *, void *, bb_error **), void *ctx, char **ret_log,
            bb_error **err)
{
    *ret = (up_state){0};
    *ret_life = LIFELINE_NONE;
    if (ret_log)
        *ret_log = NULL;
    _cleanup_upstate_ up_state s = {.container = xstrdup(container)};
    if (make_token(&s.token, err) < 0)
        return -1;
    static char *agent_cmd[] = {"__agent", NULL};
    b->l.mode = LAUNCH_AGENT;
    b->l.container = s.container;
    b->l.cmd = agent_cmd;
    _cleanup_strv_ strv argv = {0};
    if (launch_argv(b->b, &b->l, &argv, err) < 0)
        return -1;
    /* Ours until the caller's file names the VM: a boot killed half way leaves none. */
    _cleanup_(lifeline_close) lifeline life = LIFELINE_NONE;
    if (launch_has_lifeline(b->b, &b->l) && lifeline_open(&life, err) < 0)
        return -1;
    int started_vm =
        start_vm(argv.v, s.token, launch_gets_secrets(&b->l) ? b->eg.secrets_fd : -1, life.vm, err);
    lifeline_passed(&life);
    if (started_vm < 0)
        return -1;
    s.started = (long long)time(NULL);
    s.kernel = xstrdup("");
    int r = published_addr(s.container, &s.addr, err);
    if (r == 0 && started)
        r = started(&s, ctx, err);
    _cleanup_free_ char *kernel = NULL;
    if (r == 0)
        r = wait_ready(&s, &kernel, err);
    if (r < 0) {
        if (ret_log)
            *ret_log = vm_log(s.container);
        return -1;
    }
    free(s.kernel);
    s.kernel = steal_pointer(&kernel);
    *ret = s;
    s = (up_state){0};
    *ret_life = life;
    life = LIFELINE_NONE;
    return 0;
}

static int save_started(const up_state *s, void *ctx, bb_error **err)
{
    const boot *b = ctx;
    return upstate_save(b->l.sb, s, err);
}

int up_start(boot *b, up_state *ret, double *ret_seconds, char **ret_log, bb_error **err)
{
    *ret = (up_state){0};
    *ret_log = NULL;
    double start = now_mono_s();
    _cleanup_free_ char *container = up_container_name(b->l.sb);
    /* a VM left by a crash before its state was written */
    if (up_remove_vm(b->l.sb, container, NULL, err) < 0)
        return -1;
    _cleanup_upstate_ up_state s = {0};
    _cleanup_(lifeline_close) lifeline life = LIFELINE_NONE;
    if (up_boot(b, container, &s, &life, save_started, b, ret_log, err) < 0) {
        (void)up_remove_vm(b->l.sb, container, NULL, NULL);
        upstate_remove(b->l.sb, NULL);
        return bb_prefix(err, "%s did not come up", b->l.sb->name);
    }
    if (upstate_save(b->l.sb, &s, err) < 0)
        return -1;
    /* The state owns the VM from here until down (lifeline.h). */
    lifeline_release(&life);
    *ret_seconds = now_mono_s() - start;
    *ret = s;
    s = (up_state){0};
    return 0;
}

int up_down(const sandbox *sb, bool force, bool *ret_was_up, bb_error **err)
{
    _cleanup_upstate_ up_state s = {0};
    _cleanup_error_ bb_error *lerr = NULL;
    int up = upstate_load(sb, &s, &lerr); /* a damaged state still comes down */
    bool was = up != 0;
    if (ret_was_up)
        *ret_was_up = was;
    if (was || force) {
        _cleanup_free_ char *c = s.container ? xstrdup(s.container) : up_container_name(sb);
        /* A container of that name that is another home's stays; this home's state goes. */
        (void)up_remove_vm(sb, c, up > 0 ? &s : NULL, NULL);
    }
    return upstate_remove(sb, err);
}
