/* The uml machine: Debian's UML kernel from the bundle, its root the container's through
 * hostfs, the control line on its ssl0, the network on its vec0 device. See machine.h. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/xalloc.h"
#include "vmm/machine.h"
#include "vmm/vmm.h"

/* Boot-time trims for Debian's UML kernel: initcalls a sandbox does not need. */
static const char *const kernel_trims[] = {
    "quiet",
    "pty.legacy_count=0",
    ("initcall_blacklist=strp_dev_init,init_zswap,raid6_select_algo,init_jfs_fs,init_btrfs_fs,"
     "init_xfs_fs"),
    "cryptomgr.notests",
    /* Skips the delay-loop calibration, 40-60 ms of every boot (bench/boot_profile.py). The
     * value only scales udelay()'s busy loops, which no device of this guest times anything
     * by; it is what the calibration finds on a 2020s x86 host. */
    "lpj=6725632",
    /* A kernel panic ends UML (here it aborts) instead of spinning forever; should a
     * kernel restart itself instead, its second ready frame tells us and we stop it. */
    "panic=1",
};

static void kernel_argv(const machine_conf *c, strv *a)
{
    const char *dir = c->dir;
    const exports *ex = c->ex;
    strv_push(a, xasprintf("%s/" ABI_VMM_KERNEL, dir));
    strv_push(a, xasprintf("mem=%uM", c->ram_mib));
    strv_add(a, "root=/dev/root");
    strv_add(a, "rootfstype=hostfs");
    strv_add(a, "rootflags=/");
    strv_add(a, "rw");
    strv_add(a, "init=" ABI_GUEST_BINARY);
    /* UML keeps its pid file and management socket under ~/.uml by default. */
    strv_add(a, "uml_dir=" ABI_MEM_DIR "/");
    for (size_t i = 0; i < ELEMENTSOF(kernel_trims); i++)
        strv_add(a, kernel_trims[i]);
    /* Only the two lines in use exist: `null` would register all 16 consoles and 64 serial
     * lines, and each device's uevent execs the kernel's uevent helper, which on uml is a new
     * host process even for a missing file (~2 ms each, ~150 ms a boot). */
    strv_add(a, "con=none");
    /* The kernel's console (warnings and worse under `quiet`, panics) goes to the log. */
    strv_add(a, "con0=null,fd:2");
    strv_add(a, "ssl=none");
    strv_push(a, xasprintf("ssl0=fd:%d,fd:%d", VMM_SERIAL_FD, VMM_SERIAL_FD));
    net_kernel_args(c->net, a);
    disk_limit_kernel_args(c->disk, a);
    stdin_ring_kernel_args(c->ring, a);
    /* Each export is a virtio-fs device (id 26) over vhost-user on its socket. */
    for (size_t i = 0; i < ex->n; i++)
        strv_push(a, xasprintf("virtio_uml.device=%s:26", ex->v[i].sock_path));
    /* Debugging aid (e.g. initcall_debug): extra words for the kernel command line. */
    const char *extra = getenv("BLUEBOX_UML_ARGS");
    if (extra) {
        _cleanup_free_ char *copy = xstrdup(extra);
        char *save = NULL;
        for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
            strv_add(a, w);
    }
}

/* LD_PRELOAD for UML: the shims of the bundle that are there; NULL when none is. */
static char *uml_preload(const char *dir)
{
    /* uname.c hides the host's kernel from the guest's /proc/cpuinfo (the bundle always has
     * it); xstate.c saves guest FPU state that Debian's UML cannot hold on AVX-512/AMX hosts. */
    static const char *const shims[] = {ABI_VMM_UNAME, ABI_VMM_XSTATE};
    strbuf b = {0};
    for (size_t i = 0; i < ELEMENTSOF(shims); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, shims[i]);
        if (access(path, R_OK) == 0)
            sb_printf(&b, "%s%s", b.s ? ":" : "LD_PRELOAD=", path);
    }
    return b.s ? sb_steal(&b) : NULL;
}

static pid_t uml_start(char *const *argv, const machine_io *io)
{
    _cleanup_free_ char *ld = xasprintf("LD_LIBRARY_PATH=%s", io->dir);
    _cleanup_free_ char *tmp = xasprintf("TMPDIR=%s", ABI_MEM_DIR);
    _cleanup_free_ char *preload = uml_preload(io->dir);
    char *envp[] = {ld, tmp, preload, NULL};
    return machine_spawn(argv, envp, io, false);
}

/* UML's own last lines say why; nothing is repeated after them. */
static const char *uml_failure_note(bool ready)
{
    return NULL;
}

const machine machine_uml = {
    .name = "uml",
    .link = NET_LINK_BESS,
    .argv = kernel_argv,
    .start = uml_start,
    .stop = machine_stop,
    .failure_note = uml_failure_note,
};
