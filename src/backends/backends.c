/* The backend registry: which backends exist, how one is chosen, and the limits every
 * Bluefile is checked against once, before anything starts. A new backend is its own file
 * (krun.c, uml.c) and a line in the table below. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "backend.h"
#include "util/spawn.h"
#include "util/xalloc.h"

extern const backend backend_krun; /* krun.c */
extern const backend backend_uml;  /* uml.c */
extern const backend backend_qemu; /* qemu.c */

const backend *const backend_registry[] = {
    &backend_krun, /* the default */
    &backend_uml,
    &backend_qemu, /* never picked unless named: KVM, or TCG when asked for (qemu.c) */
    NULL,
};

int preflight_podman(bb_error **err)
{
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install podman) "
                       "and try again");
    return 0;
}

int kvm_unusable(void)
{
    _cleanup_close_ int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (kvm < 0 || fstat(kvm, &st) < 0)
        return errno;
    return S_ISCHR(st.st_mode) ? 0 : ENODEV;
}

const char *kvm_why(int e)
{
    switch (e) {
    case ENOENT:
        return "/dev/kvm does not exist";
    case ENODEV:
        return "/dev/kvm is not a device node";
    default:
        return "/dev/kvm cannot be opened";
    }
}

const backend *backend_runs_instead(const backend *self, const launch *l)
{
    for (const backend *const *b = backend_registry; *b; b++) {
        _cleanup_error_ bb_error *e = NULL;
        if (*b != self && (*b)->preflight(l, &e) == 0)
            return *b;
    }
    return NULL;
}

const char *backend_env(void)
{
    const char *env = getenv("BLUEBOX_BACKEND");
    return env && *env ? env : NULL;
}

const backend *backend_named(const char *name)
{
    for (const backend *const *b = backend_registry; *b; b++)
        if (streq(name, (*b)->name) || ((*b)->alias && streq(name, (*b)->alias)))
            return *b;
    return NULL;
}

/* "krun, uml or qemu (podman is an alias of krun)" */
static char *backend_choices(void)
{
    _cleanup_sb_ strbuf s = {0};
    for (const backend *const *b = backend_registry; *b; b++)
        sb_printf(&s, "%s%s", b == backend_registry ? "" : b[1] ? ", " : " or ", (*b)->name);
    for (const backend *const *b = backend_registry; *b; b++)
        if ((*b)->alias)
            sb_printf(&s, " (%s is an alias of %s)", (*b)->alias, (*b)->name);
    return sb_steal(&s);
}

static int check_limit(const backend *b, const char *env, const char *key, int value, int max,
                       bb_error **err)
{
    if (value <= max)
        return 0;
    return bb_fail(err, EINVAL,
                   "%s %d is more than the %s backend can give a guest (at most %d); lower %s in "
                   "the Bluefile%s%s%s",
                   key, value, b->name, max, key, env ? " (BLUEBOX_BACKEND=" : "", env ? env : "",
                   env ? " overrides its backend)" : "");
}

/* krun's equivalent is designed, not built (SECURITY.md, "Egress"): refusing is the honest
 * answer until a VMM enforces the list, never a sandbox that silently reaches everything. */
static int check_egress(const backend *b, const bluefile *bf, const char *env, bb_error **err)
{
    if (!bf->has_allow || b->egress)
        return 0;
    _cleanup_sb_ strbuf s = {0};
    for (const backend *const *o = backend_registry; *o; o++)
        if ((*o)->egress)
            sb_printf(&s, "%s%s", s.len ? " or " : "", (*o)->name);
    return bb_fail(err, ENOTSUP,
                   "allow: and secrets: are enforced by bluebox's own VMM network path, which the "
                   "%s backend does not have yet (SECURITY.md, \"Egress\"); set backend: %s%s%s%s",
                   b->name, s.len ? s.s : "(none)", env ? " (BLUEBOX_BACKEND=" : "", env ? env : "",
                   env ? " overrides the Bluefile's backend)" : "");
}

/* A pool VM is an up VM (runtime/pool.h): it needs the agent, and offline it needs a backend
 * that keeps network: none offline with the agent's port published. */
static int check_warm(const backend *b, const bluefile *bf, const char *env, bb_error **err)
{
    if (bf->warm == 0)
        return 0;
    _cleanup_free_ char *reason = NULL;
    if (!b->agent)
        reason =
            xasprintf("its VMs run bluebox's agent, which the %s backend does not run", b->name);
    else if (bf->network == NET_NONE && !b->agent_offline)
        reason = xasprintf("with network: none its VMs must stay offline with the agent's port "
                           "published, which the %s backend cannot do",
                           b->name);
    if (!reason)
        return 0;
    _cleanup_sb_ strbuf s = {0};
    for (const backend *const *o = backend_registry; *o; o++)
        if ((*o)->agent && (bf->network != NET_NONE || (*o)->agent_offline))
            sb_printf(&s, "%s%s", s.len ? " or " : "", (*o)->name);
    return bb_fail(err, ENOTSUP,
                   "warm: %d keeps VMs booted for run, and %s; set backend: %s%s%s%s, "
                   "or warm: 0",
                   bf->warm, reason, s.len ? s.s : "(none)", env ? " (BLUEBOX_BACKEND=" : "",
                   env ? env : "", env ? " overrides the Bluefile's backend)" : "");
}

int backend_guest_cpus(const backend *b, const bluefile *bf)
{
    return b->guest_cpus > 0 && b->guest_cpus < bf->cpus ? b->guest_cpus : bf->cpus;
}

int backend_for(const bluefile *bf, const backend **ret, bb_error **err)
{
    const char *env = backend_env();
    const backend *b = backend_named(env ? env : bf_backend_name(bf->backend));
    if (!b && env) {
        _cleanup_free_ char *choices = backend_choices();
        return bb_fail(err, EINVAL, "BLUEBOX_BACKEND must be %s, got \"%s\"", choices, env);
    }
    if (!b)
        return bb_fail(err, EINVAL, "no backend named %s", bf_backend_name(bf->backend));
    if (check_limit(b, env, "ram_mib", bf->ram_mib, b->max_ram_mib, err) < 0 ||
        check_limit(b, env, "cpus", bf->cpus, b->max_cpus, err) < 0 ||
        check_egress(b, bf, env, err) < 0 || check_warm(b, bf, env, err) < 0)
        return -1;
    *ret = b;
    return 0;
}
