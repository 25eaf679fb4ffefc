/* The qemu machine: QEMU from the bundle (its argv: qemu_argv.h), every mount and the root
 * through the file server, the network on a stream socket it inherits. See machine.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/xalloc.h"
#include "vmm/machine.h"
#include "vmm/qemu_argv.h"
#include "vmm/vmm.h"

/* The host's TSC rate in kHz from /proc/cpuinfo's "cpu MHz" (TCG's guest TSC counts the
 * host's), 0 when unknown. */
static unsigned host_tsc_khz(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        double mhz;
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 && mhz > 0 && mhz < 1e6)
            return (unsigned)(mhz * 1000);
    }
    return 0;
}

static unsigned env_unsigned(const char *name, unsigned dflt, unsigned max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v == 0 || v > max)
        vmm_die("%s must be a number between 1 and %u, not '%s'", name, max, s);
    return (unsigned)v;
}

static void qemu_cmdline(const machine_conf *mc, strv *a)
{
    const char *dir = mc->dir;
    const exports *ex = mc->ex;
    const char *accel = getenv(ABI_ENV_QEMU_ACCEL);
    if (!accel || (!streq(accel, "kvm") && !streq(accel, "tcg")))
        vmm_die(ABI_ENV_QEMU_ACCEL " must be kvm or tcg");
    _cleanup_free_ qemu_dev *devs = xreallocarray(NULL, ex->n ? ex->n : 1, sizeof *devs);
    for (size_t i = 0; i < ex->n; i++)
        devs[i] = (qemu_dev){.sock = ex->v[i].sock_path, .tag = ex->v[i].tag};
    _cleanup_free_ char *vmlinux = xasprintf("%s/" ABI_QEMU_VMLINUX, dir);
    qemu_conf c = {.dir = dir,
                   .pvh = access(vmlinux, R_OK) == 0,
                   .kvm = streq(accel, "kvm"),
                   .ram_mib = mc->ram_mib,
                   .cpus = env_unsigned(ABI_ENV_CPUS, 1, 64),
                   .tsc_khz = host_tsc_khz(),
                   .serial_fd = VMM_SERIAL_FD,
                   .net_fd = mc->net ? VMM_NET_FD : 0,
                   .net_mtu = NET_LINK_MTU,
                   .spec_path = ABI_SPEC_PATH,
                   .devs = devs,
                   .n_devs = ex->n,
                   .extra_cmdline = getenv("BLUEBOX_QEMU_CMDLINE"),
                   .data_disk = mc->disk->path,
                   .console_log = VMM_LOG};
    qemu_argv(&c, a);
}

static bool kvm(void)
{
    const char *accel = getenv(ABI_ENV_QEMU_ACCEL);
    return accel && streq(accel, "kvm");
}

static pid_t qemu_start(char *const *argv, const machine_io *io)
{
    _cleanup_free_ char *ld = xasprintf("LD_LIBRARY_PATH=%s", io->dir);
    _cleanup_free_ char *tmp = xasprintf("TMPDIR=%s", ABI_MEM_DIR);
    /* Its TCG accelerator is a loadable module, which the bundle holds (QEMU would look in
     * the host's directory, which is not in the container). */
    _cleanup_free_ char *modules = xasprintf("QEMU_MODULE_DIR=%s", io->dir);
    char *envp[] = {ld, tmp, modules, NULL};
    return machine_spawn(argv, envp, io, kvm());
}

static const char *qemu_failure_note(bool ready)
{
    return !ready && kvm() ? " on KVM (a host whose KVM cannot run a standard guest kernel, such "
                             "as a nested paravirtual one, never boots it; " ABI_ENV_QEMU_ACCEL
                             "=tcg runs it emulated)"
                           : "";
}

const machine machine_qemu = {
    .name = "qemu",
    .link = NET_LINK_STREAM,
    .serves_all = true,
    .spec_copied = true,
    .argv = qemu_cmdline,
    .start = qemu_start,
    .stop = machine_stop,
    .failure_note = qemu_failure_note,
};
