/* The container limits that fit this host (hostlimits.h). */
#include "hostlimits.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/xalloc.h"

#define CAP_SYS_RESOURCE_BIT 24

static unsigned long long min_ull(unsigned long long a, unsigned long long b)
{
    return a < b ? a : b;
}

void hostlimits_decide(const host_limits *h, ulimit_plan *ret)
{
    /* What podman can hold itself, and so give a container: past the hard limits only with
     * CAP_SYS_RESOURCE, and for nofile only when the kernel allows podman's 1048576 (else
     * podman falls back to the hard limit). */
    bool nofile_raise = h->can_raise && (!h->nr_open || h->nr_open >= PODMAN_RLIMIT_DEFAULT);
    unsigned long long nofile_max = nofile_raise ? HOSTLIMIT_NONE : h->nofile_hard;
    unsigned long long nproc_max = h->can_raise ? HOSTLIMIT_NONE : h->nproc_hard;
    /* podman sets its own nproc to pid_max when it can, and that is its default then. */
    unsigned long long nproc_default = h->pid_max ? h->pid_max : PODMAN_RLIMIT_DEFAULT;
    *ret = (ulimit_plan){
        .nofile = min_ull(PODMAN_RLIMIT_DEFAULT, nofile_max),
        .nproc = min_ull(nproc_default, nproc_max),
        .nofile_fits = PODMAN_RLIMIT_DEFAULT <= nofile_max,
        .nproc_fits = h->pid_max && h->pid_max <= nproc_max,
    };
    /* Rootless podman takes the current limits itself; a containers.conf's list is the
     * user's, and --ulimit would replace all of it. */
    ret->pass = !h->rootless && !h->conf_ulimits && !(ret->nofile_fits && ret->nproc_fits);
}

/* ---- this host ---- */

/* Whether a TOML file assigns default_ulimits (outside a comment). */
static bool conf_sets_ulimits(const char *path)
{
    _cleanup_free_ char *text = NULL;
    if (read_file(path, 1 << 20, &text, NULL, NULL) < 0)
        return false;
    static const char key[] = "default_ulimits";
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        line += strspn(line, " \t");
        if (strncmp(line, key, sizeof key - 1) != 0)
            continue;
        const char *p = line + sizeof key - 1;
        if (p[strspn(p, " \t")] == '=')
            return true;
    }
    return false;
}

static char *dir_sets_ulimits(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char *found = NULL;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".conf") != 0)
            continue;
        _cleanup_free_ char *p = path_join(dir, e->d_name);
        if (conf_sets_ulimits(p))
            found = steal_pointer(&p);
    }
    closedir(d);
    return found;
}

/* The containers.conf podman reads that sets default_ulimits. CONTAINERS_CONF, when set, is
 * the only file podman reads; the distribution's /usr/share one is not the user's choice. */
static char *conf_with_ulimits(void)
{
    const char *env = getenv("CONTAINERS_CONF_OVERRIDE");
    if (env && *env && conf_sets_ulimits(env))
        return xstrdup(env);
    env = getenv("CONTAINERS_CONF");
    if (env && *env)
        return conf_sets_ulimits(env) ? xstrdup(env) : NULL;
    if (conf_sets_ulimits("/etc/containers/containers.conf"))
        return xstrdup("/etc/containers/containers.conf");
    return dir_sets_ulimits("/etc/containers/containers.conf.d");
}

static unsigned long long hard_limit(__rlimit_resource_t resource)
{
    struct rlimit r;
    if (getrlimit(resource, &r) < 0 || r.rlim_max == RLIM_INFINITY)
        return HOSTLIMIT_NONE;
    return (unsigned long long)r.rlim_max;
}

/* A number in a /proc/sys file; 0 when unreadable. */
static unsigned long long read_sysctl(const char *path)
{
    _cleanup_free_ char *text = NULL;
    if (read_file(path, 64, &text, NULL, NULL) < 0)
        return 0;
    return strtoull(text, NULL, 10);
}

static bool has_cap_sys_resource(void)
{
    _cleanup_free_ char *text = NULL;
    if (read_file("/proc/self/status", 1 << 16, &text, NULL, NULL) < 0)
        return false;
    const char *p = strstr(text, "\nCapEff:");
    if (!p)
        return false;
    unsigned long long caps = strtoull(p + strlen("\nCapEff:"), NULL, 16);
    return caps & (1ULL << CAP_SYS_RESOURCE_BIT);
}

static host_limits this_host;
static const host_limits *used;
static ulimit_plan plan;

void hostlimits_use(const host_limits *h)
{
    used = h;
    if (h)
        hostlimits_decide(h, &plan);
}

const host_limits *hostlimits_host(void)
{
    if (!used) {
        free(this_host.conf_ulimits);
        this_host = (host_limits){
            .nofile_hard = hard_limit(RLIMIT_NOFILE),
            .nproc_hard = hard_limit(RLIMIT_NPROC),
            .pid_max = read_sysctl("/proc/sys/kernel/pid_max"),
            .nr_open = read_sysctl("/proc/sys/fs/nr_open"),
            .can_raise = has_cap_sys_resource(),
            .rootless = geteuid() != 0,
            .conf_ulimits = conf_with_ulimits(),
        };
        hostlimits_use(&this_host);
    }
    return used;
}

const ulimit_plan *hostlimits_plan(void)
{
    hostlimits_host();
    return &plan;
}

void hostlimits_argv(strv *argv)
{
    const ulimit_plan *p = hostlimits_plan();
    if (!p->pass)
        return;
    strv_push(argv, xasprintf("--ulimit=nofile=%llu:%llu", p->nofile, p->nofile));
    strv_push(argv, xasprintf("--ulimit=nproc=%llu:%llu", p->nproc, p->nproc));
}

void hostlimits_build_argv(strv *argv, unsigned long long build_nproc)
{
    const ulimit_plan *p = hostlimits_plan();
    unsigned long long n = min_ull(build_nproc, p->nproc);
    strv_push(argv, xasprintf("--ulimit=nproc=%llu:%llu", n, n));
    if (p->pass)
        strv_push(argv, xasprintf("--ulimit=nofile=%llu:%llu", p->nofile, p->nofile));
}

char *hostlimits_conf_line(void)
{
    const ulimit_plan *p = hostlimits_plan();
    return xasprintf("default_ulimits = [\"nofile=%llu:%llu\", \"nproc=%llu:%llu\"]", p->nofile,
                     p->nofile, p->nproc, p->nproc);
}
