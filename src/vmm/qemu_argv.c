/* The qemu backend's VMM command line; see qemu_argv.h for what it must hold and why. */
#include "vmm/qemu_argv.h"

#include "abi/abi.h"
#include "util/xalloc.h"

/* Kernel command line words every qemu guest gets. microvm has one serial line, the control
 * line, where no kernel message may land: with a console log the kernel's console is hvc0
 * (console_args), as uml's con0 under `quiet`: errors and worse, panics. */
static const char *const cmdline_words[] = {
    "quiet",        "panic=-1", /* a panic reboots at once, which -no-reboot turns into QEMU's exit
                                 */
    "rdinit=/init", "cryptomgr.notests", "pci=off",
};

static void cmdline(const qemu_conf *c, strv *a)
{
    strbuf s = {0};
    for (size_t i = 0; i < ELEMENTSOF(cmdline_words); i++)
        sb_printf(&s, "%s%s", i ? " " : "", cmdline_words[i]);
    /* TCG has no HPET or PM timer on microvm and cannot calibrate the TSC against the PIT: the
     * guest is told the rate (the host's TSC, which TCG's guest TSC counts). */
    if (!c->kvm && c->tsc_khz)
        sb_printf(&s, " tsc_early_khz=%u", c->tsc_khz);
    /* tty0 first: a console while virtio_console is not loaded yet (the guest init loads it),
     * so the init still has /dev/console; hvc0 takes over the kernel's messages from the
     * start of its buffer once the module registers it. */
    if (c->console_log)
        sb_printf(&s, " console=tty0 console=hvc0");
    if (c->extra_cmdline && *c->extra_cmdline)
        sb_printf(&s, " %s", c->extra_cmdline);
    strv_push(a, sb_steal(&s));
}

/* The data disk and the console (qemu_argv.h says why each is as it is). The console's file is
 * opened by QEMU in append mode: it is the log bluebox-vmm's own stderr also appends to. */
static void storage_devices(const qemu_conf *c, strv *a)
{
    if (c->data_disk) {
        strv_add(a, "-drive");
        strv_push(a, xasprintf("file=%s,if=none,id=bbdata,format=raw,discard=unmap", c->data_disk));
        strv_add(a, "-device");
        strv_add(a, "virtio-blk-device,drive=bbdata");
    }
    if (c->console_log) {
        strv_add(a, "-device");
        strv_add(a, "virtio-serial-device,id=bbconbus,max_ports=1");
        strv_add(a, "-chardev");
        strv_push(a, xasprintf("file,id=bbcon,path=%s,append=on", c->console_log));
        strv_add(a, "-device");
        strv_add(a, "virtconsole,bus=bbconbus.0,chardev=bbcon");
    }
}

void qemu_argv(const qemu_conf *c, strv *a)
{
    strv_push(a, xasprintf("%s/" ABI_VMM_QEMU, c->dir));
    strv_add(a, "-nodefaults");
    strv_add(a, "-no-user-config");
    strv_add(a, "-display");
    strv_add(a, "none");
    strv_add(a, "-monitor");
    strv_add(a, "none");
    strv_add(a, "-no-reboot");
    strv_add(a, "-sandbox");
    strv_add(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
    strv_add(a, "-machine");
    strv_add(a, "microvm,memory-backend=bbmem");
    strv_add(a, "-accel");
    /* TCG's translation cache would default to 1 GiB, more than the container's memory cap
     * leaves beside the guest's RAM. */
    strv_add(a, c->kvm ? "kvm" : "tcg,tb-size=" ABI_STR(QEMU_TCG_TB_MIB));
    strv_add(a, "-cpu");
    strv_add(a, c->kvm ? "host" : "max");
    strv_add(a, "-smp");
    strv_push(a, xasprintf("%u", c->cpus ? c->cpus : 1));
    strv_add(a, "-m");
    strv_push(a, xasprintf("%uM", c->ram_mib));
    strv_add(a, "-object");
    strv_push(a, xasprintf("memory-backend-memfd,id=bbmem,size=%uM,share=on", c->ram_mib));
    /* virtio 1.0 devices: vhost-user backends speak no legacy virtio. */
    strv_add(a, "-global");
    strv_add(a, "virtio-mmio.force-legacy=false");
    /* The firmware and the option ROMs that load the kernel (microvm's qboot, pvh.bin,
     * linuxboot_dma.bin) from the bundle alone. */
    strv_add(a, "-L");
    strv_push(a, xasprintf("%s", c->dir));
    strv_add(a, "-bios");
    strv_push(a, xasprintf("%s/" ABI_QEMU_BIOS, c->dir));
    strv_add(a, "-kernel");
    strv_push(a, xasprintf("%s/%s", c->dir, c->pvh ? ABI_QEMU_VMLINUX : ABI_QEMU_KERNEL));
    strv_add(a, "-initrd");
    strv_push(a, xasprintf("%s/" ABI_QEMU_INITRD, c->dir));
    strv_add(a, "-append");
    cmdline(c, a);
    strv_add(a, "-chardev");
    strv_push(a, xasprintf("socket,id=bbctl,fd=%d", c->serial_fd));
    strv_add(a, "-serial");
    strv_add(a, "chardev:bbctl");
    strv_add(a, "-fw_cfg");
    strv_push(a, xasprintf("name=" ABI_QEMU_SPEC_FWCFG ",file=%s", c->spec_path));
    if (c->net_fd > 0) {
        /* Frames as 4-byte lengths and data on the inherited socket (net/netstream.h). The
         * device offers the MTU: the guest's driver takes it at probe. */
        strv_add(a, "-netdev");
        strv_push(a, xasprintf("stream,id=bbnet,server=off,addr.type=fd,addr.str=%d", c->net_fd));
        strv_add(a, "-device");
        strv_push(a, xasprintf("virtio-net-device,netdev=bbnet,host_mtu=%u", c->net_mtu));
    }
    for (size_t i = 0; i < c->n_devs; i++) {
        strv_add(a, "-chardev");
        strv_push(a, xasprintf("socket,id=bbfs%zu,path=%s", i, c->devs[i].sock));
        strv_add(a, "-device");
        strv_push(a, xasprintf("vhost-user-fs-device,chardev=bbfs%zu,tag=%s", i, c->devs[i].tag));
    }
    storage_devices(c, a);
}
