/* network: bridge on the direct launch path: the run's own network namespace and its
 * slirp4netns (see direct_net.h for why this and not podman's bridge or a shared one). */
#include "direct_net.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/xalloc.h"

#define HELPER "slirp4netns"
/* In the run directory: the helper's path (the run wants a link), the namespace's mount
 * point, the helper's own words (shown when it fails). */
#define NET_MARK   "net"
#define NETNS_FILE "netns"
#define NET_LOG    "net.log"
/* In the run directory: runc passes the secrets' memfd on. */
#define FDS_MARK "fds"
/* A secret's placeholder in the template (its index in the Bluefile). */
#define SECRET_STANDIN "__bluebox_secret_%zu__"
/* The largest slirp4netns takes: the VMM's libslirp sends TCP in segments this big. */
#define MTU_ARG "--mtu=65520"
/* slirp4netns is up in ~40 ms; a loaded machine gets far more, a broken one no longer. */
#define READY_TIMEOUT_MS 10000
/* The helper's fds, as its --exit-fd and --ready-fd name them. */
#define EXIT_FD  3
#define READY_FD 4

bool direct_net_ok(const bluefile *bf)
{
    if (bf->network == NET_NONE)
        return true;
    return bf->network == NET_BRIDGE && program_on_path(HELPER);
}

static json_t *network_ns(json_t *cfg)
{
    size_t i;
    json_t *ns;
    json_array_foreach(json_object_get(json_object_get(cfg, "linux"), "namespaces"), i, ns)
    {
        const char *type = json_string_value(json_object_get(ns, "type"));
        if (type && streq(type, "network"))
            return ns;
    }
    return NULL;
}

char *direct_net_template_arg(const launch *l, const char *arg)
{
    if (startswith(arg, "--preserve-fds=")) /* the run's own: direct_net_preserve_fds */
        return NULL;
    const egress *e = l->egress;
    for (size_t i = 0; e && strncmp(arg, "--env=", 6) == 0 && i < e->env.n; i++) {
        const char *v = e->env.v[i], *eq = strchr(v, '=');
        if (eq && streq(arg + 6, v))
            return xasprintf("--env=%.*s=" SECRET_STANDIN, (int)(eq - v), v, i);
    }
    return xstrdup(arg);
}

/* The run's placeholders where the template has its stand-ins. */
static int secrets_bundle(json_t *cfg, const launch *l, const char *dir, bb_error **err)
{
    const egress *e = l->egress;
    if (!launch_gets_secrets(l))
        return 0;
    json_t *env = json_object_get(json_object_get(cfg, "process"), "env");
    size_t done = 0;
    for (size_t i = 0; i < e->env.n; i++) {
        const char *v = e->env.v[i], *eq = strchr(v, '=');
        _cleanup_free_ char *standin =
            xasprintf("%.*s=" SECRET_STANDIN, (int)(eq ? eq - v : 0), v, i);
        size_t k;
        json_t *x;
        json_array_foreach(env, k, x)
        {
            const char *s = json_string_value(x);
            if (s && streq(s, standin)) {
                json_array_set_new(env, k, json_string(v));
                done++;
                break;
            }
        }
    }
    if (done != e->env.n)
        return bb_fail(err, EINVAL, "podman's config.json lacks the secrets' placeholders");
    _cleanup_free_ char *mark = path_join(dir, FDS_MARK);
    return write_file_atomic(mark, "1", 1, 0600, err);
}

const char *direct_net_preserve_fds(const char *dir)
{
    /* every direct launch has a lifeline (launch_has_lifeline), after the secrets' memfd */
    _cleanup_free_ char *mark = path_join(dir, FDS_MARK);
    return path_exists(mark) ? "2" : "1";
}

int direct_net_bundle(json_t *cfg, const launch *l, const char *dir, bb_error **err)
{
    if (secrets_bundle(cfg, l, dir, err) < 0)
        return -1;
    if (l->bf->network != NET_BRIDGE)
        return 0;
    /* podman's path is the template container's namespace, gone with it */
    json_t *ns = network_ns(cfg);
    if (!ns)
        return bb_fail(err, EINVAL, "podman's config.json has no network namespace");
    _cleanup_free_ char *netns = path_join(dir, NETNS_FILE);
    json_object_set_new(ns, "path", json_string(netns));
    _cleanup_free_ char *helper = program_find(HELPER);
    if (!helper)
        return bb_fail(err, ENOENT,
                       "network: bridge needs " HELPER " for the direct launch; "
                       "install it or use BLUEBOX_LAUNCH=podman");
    _cleanup_free_ char *mark = path_join(dir, NET_MARK);
    return write_file_atomic(mark, helper, strlen(helper), 0600, err);
}

/* A fresh network namespace for this process, mounted on `path` for runc to join. */
static int netns_new(const char *path, bb_error **err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot create %s", path);
    close(fd);
    if (unshare(CLONE_NEWNET) < 0)
        return bb_fail_errno(err, errno, "cannot make a network namespace");
    if (mount("/proc/self/ns/net", path, NULL, MS_BIND, NULL) < 0)
        return bb_fail_errno(err, errno, "cannot mount the network namespace on %s", path);
    return 0;
}

/* The child: back in the host's namespace, slirp4netns for `target`'s. Only async-signal-safe
 * calls between fork and exec. */
static _noreturn_ void helper_exec(const char *helper, int host_ns, int exit_fd, int ready_fd,
                                   int log_fd, pid_t target, const sigset_t *mask)
{
    char pid[24], exit_arg[24], ready_arg[24];
    snprintf(pid, sizeof pid, "%d", (int)target);
    snprintf(exit_arg, sizeof exit_arg, "--exit-fd=%d", EXIT_FD);
    snprintf(ready_arg, sizeof ready_arg, "--ready-fd=%d", READY_FD);
    char *argv[] = {(char *)HELPER,
                    "--configure",
                    MTU_ARG,
                    "--disable-host-loopback",
                    "--enable-sandbox",
                    "--enable-seccomp",
                    exit_arg,
                    ready_arg,
                    pid,
                    "tap0",
                    NULL};
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    /* Above the fds they go to first: a dup2 onto itself would keep O_CLOEXEC, and one onto
     * the other's number would close it. Whatever else sits at 3 (the secrets' memfd, for
     * runc) is replaced, so slirp4netns never holds it. */
    exit_fd = fcntl(exit_fd, F_DUPFD_CLOEXEC, READY_FD + 1);
    ready_fd = fcntl(ready_fd, F_DUPFD_CLOEXEC, READY_FD + 1);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != target ||
        setns(host_ns, CLONE_NEWNET) < 0 || devnull < 0 || exit_fd < 0 || ready_fd < 0 ||
        dup2(devnull, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
        dup2(log_fd, STDERR_FILENO) < 0 || dup2(exit_fd, EXIT_FD) < 0 ||
        dup2(ready_fd, READY_FD) < 0)
        _exit(127);
    sigprocmask(SIG_SETMASK, mask, NULL);
    execv(helper, argv);
    _exit(127);
}

/* Wait for slirp4netns's ready byte; false when it died or took too long. */
static bool helper_ready(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&p, 1, READY_TIMEOUT_MS);
        if (r < 0 && errno == EINTR)
            continue;
        char c;
        return r == 1 && read(fd, &c, 1) == 1;
    }
}

static int helper_failed(const char *dir, bb_error **err)
{
    _cleanup_free_ char *log = path_join(dir, NET_LOG), *text = NULL;
    size_t n = 0;
    (void)read_file(log, 1 << 16, &text, &n, NULL);
    while (text && n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    const char *last = text ? strrchr(text, '\n') : NULL;
    last = last ? last + 1 : text;
    return bb_fail(err, EIO, HELPER " could not give the sandbox its network%s%s",
                   last && *last ? ": " : "", last && *last ? last : "");
}

int direct_net_up(const char *dir, const sigset_t *child_mask, direct_net *ret, bb_error **err)
{
    _cleanup_free_ char *mark = path_join(dir, NET_MARK), *helper = NULL;
    if (!path_exists(mark))
        return 0;
    if (read_file(mark, 4096, &helper, NULL, err) < 0)
        return -1;
    _cleanup_close_ int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (host_ns < 0)
        return bb_fail_errno(err, errno, "cannot open the host's network namespace");
    ret->netns = path_join(dir, NETNS_FILE);
    if (netns_new(ret->netns, err) < 0)
        return -1;
    _cleanup_free_ char *log = path_join(dir, NET_LOG);
    _cleanup_close_ int log_fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int exit_p[2], ready_p[2];
    if (log_fd < 0 || pipe2(exit_p, O_CLOEXEC) < 0)
        return bb_fail_errno(err, errno, "cannot start " HELPER);
    if (pipe2(ready_p, O_CLOEXEC) < 0) {
        int e = errno;
        close(exit_p[0]), close(exit_p[1]);
        return bb_fail_errno(err, e, "cannot start " HELPER);
    }
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid == 0)
        helper_exec(helper, host_ns, exit_p[0], ready_p[1], log_fd, self, child_mask);
    int e = errno;
    close(exit_p[0]), close(ready_p[1]);
    ret->exit_fd = exit_p[1];
    if (pid < 0) {
        close(ready_p[0]);
        return bb_fail_errno(err, e, "cannot start " HELPER);
    }
    ret->pid = pid;
    bool ok = helper_ready(ready_p[0]);
    close(ready_p[0]);
    return ok ? 0 : helper_failed(dir, err);
}

void direct_net_down(direct_net *n)
{
    if (n->exit_fd >= 0)
        close(n->exit_fd);
    n->exit_fd = -1;
    if (n->pid > 0) { /* it has nothing to save: its namespace goes with the run */
        kill(n->pid, SIGKILL);
        while (waitpid(n->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    n->pid = 0;
    if (n->netns)
        (void)umount2(n->netns, MNT_DETACH);
    free(n->netns);
    n->netns = NULL;
}
