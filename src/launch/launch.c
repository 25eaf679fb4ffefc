/* The one podman argv builder. The confinement of the VMM (SECURITY.md, "Two layers") is
 * written here once: every launch — run, shell, probe, up — gets it from this function. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"
#include "core/home.h"
#include "egress.h"
#include "hostlimits.h"
#include "imageref.h"
#include "util/xalloc.h"

const char *const launch_caps[] = {
    "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "NET_BIND_SERVICE",
};
const size_t launch_n_caps = ELEMENTSOF(launch_caps);

/* The container's cap holds the guest's RAM and the VMM around it (SECURITY.md: "memory
 * ram_mib + 256 MiB"). */
#define MEMORY_OVERHEAD_MIB 256

int launch_memory_mib(const bluefile *bf)
{
    return bf->ram_mib + MEMORY_OVERHEAD_MIB;
}

static void add(strv *a, const char *s)
{
    strv_add(a, s);
}

static void addf(strv *a, const char *fmt, ...) _printf_(2, 3);
static void addf(strv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strv_push(a, xvasprintf(fmt, ap));
    va_end(ap);
}

static void add_caps(strv *a)
{
    _cleanup_sb_ strbuf s = {0};
    sb_puts(&s, "--cap-add=");
    for (size_t i = 0; i < launch_n_caps; i++)
        sb_printf(&s, "%s%s", i ? "," : "", launch_caps[i]);
    strv_push(a, sb_steal(&s));
}

char *container_name(const char *kind, const char *name)
{
    return xasprintf("bluebox-%s%s%s-%d-%04x", kind ? kind : "", kind ? "-" : "", name,
                     (int)getpid(), (unsigned)(arc4random() & 0xffff));
}

char *up_container_name(const sandbox *sb)
{
    return xasprintf("bluebox-up-%s-%s", sb->name, sb->home_id);
}

/* bluebox up: detached, the agent's port published on the host's loopback only, the token
 * named without a value (podman takes it from its own environment, so it is in no argv). The
 * container stays after the VM stops, so that its log can be read; down removes it. That log
 * holds whatever the guest writes on its console or control line for as long as it is up,
 * so it is a file of capped size whatever the host's default driver. The
 * container needs a network for the published port even with network: none, which
 * backend->agent_offline keeps offline inside (up refuses backends that cannot). */
static void agent_flags(strv *a)
{
    add(a, "-d");
    add(a, "--publish=127.0.0.1::" ABI_AGENT_PORT_STR);
    add(a, "--env=" ABI_ENV_AGENT_HEAD);
    add(a, "--log-driver=k8s-file");
    add(a, "--log-opt=max-size=1mb");
}

/* /data: the sandbox's directory, or with data_limit its disk image, which the VMM attaches
 * (named by BLUEBOX_DATA_DISK) and the guest mounts on /data (a small empty tmpfs is the
 * mount point, so that readonly images work too). */
static int data_flags(const backend *b, const launch *l, strv *a, bb_error **err)
{
    if (l->fork_lower && (l->bf->data_limit || !b->fork_data))
        return bb_fail(err, ENOTSUP,
                       l->bf->data_limit
                           ? "%s is a fork, whose /data cannot have a data_limit; remove "
                             "data_limit from its Bluefile: bluebox edit %s"
                           : "%s is a fork, and forks need backend: uml for now; set it in the "
                             "fork's Bluefile: bluebox edit %s",
                       l->sb->name, l->sb->name);
    if (!l->bf->data_limit) {
        add(a, "-v");
        addf(a, "%s:/data", l->sb->data);
        if (l->fork_lower) {
            add(a, "-v");
            addf(a, "%s:" ABI_FORK_LOWER ":ro", l->fork_lower);
        }
        return 0;
    }
    if (!b->data_disk)
        return bb_fail(err, ENOTSUP,
                       "data_limit needs backend: uml for now (the %s backend cannot attach the "
                       "/data disk image yet); set backend: uml or remove data_limit",
                       b->name);
    add(a, "-v");
    addf(a, "%s:" ABI_DATA_DISK ":rw", l->sb->disk);
    add(a, "--env=" ABI_ENV_DATA_DISK "=" ABI_DATA_DISK);
    add(a, "--tmpfs=/data:rw,nosuid,nodev,noexec,size=16k,mode=0755");
    return 0;
}

/* Longer than any terminfo name; TERM is passed on only when it looks like one. */
#define TERM_MAX 128

static bool term_name_ok(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > TERM_MAX)
        return false;
    return strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-_") == n;
}

const char *launch_term(const bluefile *bf)
{
    const char *t = getenv("TERM");
    if (!t || !term_name_ok(t))
        return NULL;
    for (size_t i = 0; i < bf->n_env; i++)
        if (streq(bf->env[i].key, "TERM"))
            return NULL;
    return t;
}

bool launch_gets_secrets(const launch *l)
{
    return egress_has_secrets(l->egress) &&
           (l->mode == LAUNCH_RUN || l->mode == LAUNCH_SHELL || l->mode == LAUNCH_AGENT);
}

/* allow: and secrets: (launch/egress.h). The VMM enforces the list and appends to the log
 * (bind-mounted: the VMM's only file of the host it may write besides /data); the secrets'
 * memfd reaches it as fd EGRESS_SECRETS_FD (--preserve-fds), so no value is in this argv,
 * podman's environment or the container's config. The guest's variables hold placeholders. */
static int egress_flags(const backend *b, const launch *l, strv *a, int *ret_fds, bb_error **err)
{
    const bluefile *bf = l->bf;
    if (!bf->has_allow)
        return 0;
    if (!b->egress) /* backend_for refused it already */
        return bb_fail(err, ENOTSUP, "the %s backend cannot enforce allow:", b->name);
    _cleanup_free_ char *allow = egress_allow_value(bf);
    addf(a, "--env=" ABI_ENV_NET_ALLOW "=%s", allow);
    addf(a, "--env=" ABI_ENV_SANDBOX "=%s", l->sb->name);
    const egress *e = l->egress;
    if (e && e->log) {
        add(a, "-v");
        addf(a, "%s:" ABI_NET_LOG ":rw", e->log);
        add(a, "--env=" ABI_ENV_NET_LOG "=" ABI_NET_LOG);
    }
    if (!e || !launch_gets_secrets(l))
        return 0;
    *ret_fds = 1;
    addf(a, "--env=" ABI_ENV_SECRETS_FD "=%d", EGRESS_SECRETS_FD);
    for (size_t i = 0; i < e->env.n; i++)
        addf(a, "--env=%s", e->env.v[i]);
    return 0;
}

/* bluebox-vmm, and so its VMM (the UML kernel, QEMU), runs as the container's root whatever the
 * image's USER: the kernel writes every guest file in /data and in rw mounts on the host through
 * hostfs, as its own host uid, so that uid must be the sandbox's own identity (root or the calling
 * user under standard isolation, the base of the subordinate range under strict), never a
 * uid the image names, which may be another user of this machine. The workload still runs
 * as the image's USER: the guest init resolves it in the image's /etc/passwd and /etc/group
 * (src/guest/user.c), as podman would have. Shared by the backends that run bluebox-vmm. */
/* The user of a bluebox-vmm launch: the container's root, the image's USER handed to the
 * guest init. */
static int vmm_user_flags(const launch *l, strv *argv, bb_error **err)
{
    if (l->guest_root)
        return 0; /* launch_argv gave --user=0:0 already, and the command runs as root */
    _cleanup_free_ char *user = NULL;
    if (image_user(l->sb, l->image, &user, err) < 0)
        return -1;
    strv_add(argv, "--user=0:0");
    if (*user)
        strv_push(argv, xasprintf("--env=" ABI_ENV_USER "=%s", user));
    return 0;
}

bool launch_has_lifeline(const backend *b, const launch *l)
{
    return b->vmm && (l->mode == LAUNCH_RUN || l->mode == LAUNCH_SHELL || l->mode == LAUNCH_AGENT);
}

static int launch_lifeline_fd(const launch *l)
{
    return EGRESS_SECRETS_FD + (launch_gets_secrets(l) ? 1 : 0);
}

/* The fds the VMM inherits, in this order from 3 (podman's --preserve-fds, the direct
 * supervisor's runc --preserve-fds): the secrets' memfd when there are secrets, then the
 * lifeline (lifeline.h), whose number the VMM is told. */
static void fd_flags(const backend *b, const launch *l, strv *a, int n)
{
    if (launch_has_lifeline(b, l)) {
        addf(a, "--env=" ABI_ENV_LIFELINE "=%d", launch_lifeline_fd(l));
        n++;
    }
    if (n)
        addf(a, "--preserve-fds=%d", n);
}

int launch_podman_argv(const backend *b, const launch *l, strv *ret, bb_error **err)
{
    const bluefile *bf = l->bf;
    _cleanup_strv_ strv a = {0};
    add(&a, "podman");
    add(&a, "run");
    if (l->mode != LAUNCH_AGENT)
        add(&a, "--rm");
    add(&a, "--pull=never");
    addf(&a, "--name=%s", l->container);
    addf(&a, "--label=bluebox.sandbox=%s", l->sb->name);
    addf(&a, "--label=bluebox.home=%s", l->sb->home_id);
    add(&a, "--security-opt=no-new-privileges");
    add(&a, "--cap-drop=all");
    add_caps(&a);
    addf(&a, "--pids-limit=%d", LAUNCH_PIDS_LIMIT);
    hostlimits_argv(&a); /* nofile and nproc within this host's hard limits (hostlimits.h) */
    addf(&a, "--memory=%dm", launch_memory_mib(bf));
    addf(&a, "--network=%s", l->mode == LAUNCH_AGENT ? "bridge" : bf_network_name(bf->network));
    if (data_flags(b, l, &a, err) < 0)
        return -1;
    for (size_t i = 0; i < bf->n_mounts; i++) {
        add(&a, "-v");
        addf(&a, "%s:%s:%s", bf->mounts[i].host, bf->mounts[i].guest,
             bf->mounts[i].rw ? "rw" : "ro");
    }
    if (l->mode == LAUNCH_PROBE || l->mode == LAUNCH_AGENT || b->guest_init) {
        if (!l->self)
            return bb_fail(err, EINVAL, "no bluebox binary to put in the guest");
        add(&a, "-v");
        addf(&a, "%s:" ABI_GUEST_BINARY ":ro", l->self);
    }
    if (bf->readonly)
        add(&a, "--read-only");
    if (bf->seccomp)
        addf(&a, "--security-opt=seccomp=%s", bf->seccomp);
    if (bf->isolation == ISO_STRICT) {
        add(&a, "--uidmap=0:1:65536");
        add(&a, "--gidmap=0:1:65536");
    }
    if (l->mode == LAUNCH_AGENT)
        agent_flags(&a);
    else /* attached: bluebox relays and logs the output (clipped); podman's own copy of it
          * would grow in its storage for as long as the run prints */
        add(&a, "--log-driver=none");
    if (l->guest_root)
        add(&a, "--user=0:0");
    /* By name: podman takes the value from its environment, which is ours. */
    if ((l->mode == LAUNCH_RUN || l->mode == LAUNCH_SHELL) && launch_term(bf))
        add(&a, "--env=TERM");
    int fds = 0;
    if (egress_flags(b, l, &a, &fds, err) < 0)
        return -1;
    fd_flags(b, l, &a, fds);
    if (l->interactive)
        add(&a, "-i");
    if (l->tty)
        add(&a, "-t");
    if (b->launch_flags(l, &a, err) < 0 || (b->user_to_guest && vmm_user_flags(l, &a, err) < 0))
        return -1;
    _cleanup_free_ char *image = l->image ? xstrdup(l->image) : image_ref(l->sb);
    add(&a, image);
    if (b->entry(l, &a, err) < 0)
        return -1;
    for (char *const *c = l->cmd; c && *c; c++)
        add(&a, *c);
    *ret = a;
    a = (strv){0};
    return 0;
}
