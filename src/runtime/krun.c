/* The krun backend: crun built with libkrun becomes the VMM (podman --runtime <krun>);
 * libkrun's init runs the command in the guest and podman carries stdio and the exit
 * code. It needs /dev/kvm and a `krun` that resolves to a crun with +LIBKRUN. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "util/spawn.h"
#include "util/xalloc.h"

/* The absolute path of `krun` on PATH (the symlink itself, not its target: crun picks its
 * libkrun handler from the name it was started as). */
static char *krun_path(void)
{
    return program_find("krun");
}

static int krun_preflight(const launch *l, bb_error **err)
{
    if (!program_on_path("podman"))
        return bb_fail(err, ENOENT,
                       "podman is not installed; install it (Debian: apt-get install "
                       "podman) and try again");
    _cleanup_close_ int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (kvm < 0)
        return bb_fail(err, errno,
                       "krun needs KVM and %s, so no microVM can start on this host. "
                       "backend: uml (or BLUEBOX_BACKEND=uml) gives each sandbox its own "
                       "user-mode-linux kernel without KVM; its boundary is ptrace, not hardware "
                       "virtualisation, so it is weaker than krun",
                       errno == ENOENT ? "/dev/kvm does not exist" : "/dev/kvm cannot be opened");
    _cleanup_free_ char *krun = krun_path();
    if (!krun)
        return bb_fail(err, ENOENT,
                       "no krun on PATH; crun with libkrun support is started through a symlink "
                       "named krun: sudo ln -sf \"$(command -v crun)\" /usr/local/bin/krun");
    return 0;
}

static int krun_flags(const launch *l, strv *argv, bb_error **err)
{
    _cleanup_free_ char *krun = krun_path();
    if (!krun)
        return bb_fail(err, ENOENT, "no krun on PATH");
    strv_push(argv, xasprintf("--runtime=%s", krun));
    strv_push(argv, xasprintf("--annotation=krun.cpus=%d", l->bf->cpus));
    strv_push(argv, xasprintf("--annotation=krun.ram_mib=%d", l->bf->ram_mib));
    if (l->bf->passt)
        strv_add(argv, "--annotation=krun.use_passt=1");
    return 0;
}

static int krun_entry(const launch *l, strv *argv, bb_error **err)
{
    return 0; /* libkrun's init runs the image's command directly */
}

const backend backend_krun = {
    .name = "krun",
    .preflight = krun_preflight,
    .launch_flags = krun_flags,
    .entry = krun_entry,
};
