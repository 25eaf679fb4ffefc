/* The posture line, from the backend's own words and the values launch_argv puts in the argv. */
#include "posture.h"

#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "datadisk.h"
#include "launch/launch.h"
#include "util/fs.h"
#include "util/xalloc.h"

bool limits_enforced(void)
{
    if (getuid() == 0)
        return true;
    struct statfs s;
    if (statfs("/sys/fs/cgroup", &s) < 0 || s.f_type != CGROUP2_SUPER_MAGIC)
        return false; /* rootless podman on cgroups v1 ignores pids and memory limits */
    _cleanup_free_ char *path =
        xasprintf("/sys/fs/cgroup/user.slice/user-%u.slice/user@%u.service/cgroup.controllers",
                  (unsigned)getuid(), (unsigned)getuid());
    _cleanup_free_ char *c = NULL;
    if (read_file(path, 4096, &c, NULL, NULL) < 0)
        return false;
    return strstr(c, "pids") && strstr(c, "memory");
}

char *posture_network(const backend *b, const bluefile *bf)
{
    if (bf->has_allow) {
        _cleanup_sb_ strbuf s = {0};
        sb_printf(&s, "allow %zu host%s", bf->allow.n, bf->allow.n == 1 ? "" : "s");
        if (bf->n_secrets)
            sb_printf(&s, ", %zu secret%s", bf->n_secrets, bf->n_secrets == 1 ? "" : "s");
        return sb_steal(&s);
    }
    if (bf->network != NET_BRIDGE || !b->bridge_reach)
        return xstrdup(bf_network_name(bf->network));
    return xasprintf("%s (%s)", bf_network_name(bf->network), b->bridge_reach);
}

char *posture_line(const backend *b, const bluefile *bf, const char *guest_release)
{
    _cleanup_sb_ strbuf s = {0};
    const char *kernel = guest_release ? guest_release : "?";
    const char *head = b->posture_head_now ? b->posture_head_now() : b->posture_head;
    sb_printf(&s, "isolation: %s%s%s", head, kernel, b->posture_tail);
    _cleanup_free_ char *net = posture_network(b, bf);
    sb_printf(&s, " · network %s", net);
    if (bf->data_limit) {
        _cleanup_free_ char *limit = datadisk_size_words(bf->data_limit);
        sb_printf(&s, " · /data rw, %s disk", limit);
    } else {
        sb_puts(&s, " · /data rw");
    }
    if (bf->n_mounts == 0)
        sb_puts(&s, " · mounts: none");
    for (size_t i = 0; i < bf->n_mounts; i++)
        sb_printf(&s, "%s%s→%s %s", i ? ", " : " · mounts: ", bf->mounts[i].host,
                  bf->mounts[i].guest, bf->mounts[i].rw ? "rw" : "ro");
    if (bf->readonly)
        sb_puts(&s, " · root read-only");
    sb_printf(&s, " · caps %zu", launch_n_caps);
    if (limits_enforced())
        sb_printf(&s, " · pids %d · memory %dm", LAUNCH_PIDS_LIMIT, launch_memory_mib(bf));
    else
        sb_puts(&s, " · pids/memory limits NOT enforced (rootless podman on this host)");
    int cpus = backend_guest_cpus(b, bf);
    if (cpus < bf->cpus)
        sb_printf(&s, " · %d CPU%s (%s; cpus: %d ignored)", cpus, cpus == 1 ? "" : "s",
                  b->guest_cpus_why ? b->guest_cpus_why : b->name, bf->cpus);
    sb_puts(&s, bf->isolation == ISO_STRICT ? " · strict" : " · standard");
    return sb_steal(&s);
}
