/* The qemu backend's two command lines: the podman argv (backends/qemu.c through
 * launch_argv) and QEMU's own (vmm/qemu_argv.c). The KVM path cannot boot on the CI hosts
 * without usable KVM, so what it must hold is checked here: /dev/kvm passed only with KVM,
 * QEMU's sandbox on, no default devices, no monitor, no network of QEMU's own: its one
 * network device is bluebox-vmm's libslirp on an inherited stream socket. */
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi.h"
#include "core/bluefile.h"
#include "launch/launch.h"
#include "runtime/posture.h"
#include "qemu_standins.h"
#include "util/fs.h"
#include "util/xalloc.h"
#include "vmm/qemu_argv.h"

static char dir[64];

/* Stand-ins for everything the bundle takes (a dynamically linked program as QEMU, files as
 * firmware, kernel and modules), so that launch_argv can build one here. */
static int setup(void **s)
{
    (void)s;
    strcpy(dir, "/tmp/bb-qemu-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    qemu_standins(dir);
    setenv("BLUEBOX_VMM", "/bin/true", 1);
    unsetenv("BLUEBOX_BACKEND");
    unsetenv("TERM");
    /* The podman argv itself (as root a run would go the direct way, whose template is made
     * from this very argv by podman). */
    setenv("BLUEBOX_LAUNCH", "podman", 1);
    return 0;
}

static int teardown(void **s)
{
    (void)s;
    return rm_rf(dir, NULL);
}

/* An argv joined with spaces, one before and after each word (for assert_contains). */
static char *spaced(const strv *a)
{
    strbuf sb = {0};
    for (size_t i = 0; i < a->n; i++)
        sb_printf(&sb, " %s", a->v[i]);
    sb_puts(&sb, " ");
    return sb_steal(&sb);
}

static bluefile *parse(const char *yaml)
{
    bluefile *bf = NULL;
    bb_error *err = NULL;
    if (bluefile_parse("/h/Bluefile", yaml, strlen(yaml), "/home/u", &bf, &err) < 0)
        fail_msg("%s", err->msg);
    return bf;
}

/* The podman argv of a qemu launch, joined with spaces; NULL with *ret_err on refusal. */
static char *podman_argv(const char *yaml, const char *accel, launch_mode mode, char **ret_err)
{
    bluefile *bf = parse(yaml);
    const backend *b = NULL;
    bb_error *err = NULL;
    assert_int_equal(backend_for(bf, &b, &err), 0);
    assert_string_equal(b->name, "qemu");
    if (accel)
        setenv(ABI_ENV_QEMU_ACCEL, accel, 1);
    else
        unsetenv(ABI_ENV_QEMU_ACCEL);
    char root[128];
    snprintf(root, sizeof root, "%s/home", dir);
    char *cmd[] = {"echo", "hi", NULL};
    _cleanup_sandbox_ sandbox *box = sandbox_of(root, "box");
    launch l = {.root = root,
                .sb = box,
                .bf = bf,
                .container = "c",
                .mode = mode,
                .cmd = cmd,
                .self = "/bin/true",
                .guest_root = true}; /* no image to read a USER from here */
    strv a = {0};
    char *joined = NULL;
    if (launch_argv(b, &l, &a, &err) < 0) {
        *ret_err = xstrdup(err->msg);
        bb_error_free(err);
    } else {
        joined = spaced(&a);
    }
    strv_clear(&a);
    bluefile_free(bf);
    unsetenv(ABI_ENV_QEMU_ACCEL);
    return joined;
}

static void kvm_passes_dev_kvm(void **s)
{
    (void)s;
    char *e = NULL;
    char *got = podman_argv("backend: qemu\n", NULL, LAUNCH_RUN, &e);
    if (!got)
        fail_msg("%s", e);
    assert_contains(got, " --device=/dev/kvm ");
    assert_contains(got, " --env=" ABI_ENV_QEMU_ACCEL "=kvm ");
    assert_contains(got, " --env=" ABI_ENV_VMM_KIND "=qemu ");
    assert_contains(got, " --cap-drop=all ");
    assert_contains(got, " --security-opt=no-new-privileges ");
    assert_contains(got, " --network=none ");
    assert_contains(got, " --entrypoint=" ABI_VMM_DIR "/bluebox-vmm ");
    assert_null(strstr(got, "--privileged"));
    free(got);
}

static void tcg_never_sees_kvm(void **s)
{
    (void)s;
    char *e = NULL;
    char *got = podman_argv("backend: qemu\n", "tcg", LAUNCH_RUN, &e);
    if (!got)
        fail_msg("%s", e);
    assert_null(strstr(got, "/dev/kvm"));
    assert_contains(got, " --env=" ABI_ENV_QEMU_ACCEL "=tcg ");
    free(got);
}

static void accel_refusal(void **s)
{
    (void)s;
    char *e = NULL;
    assert_null(podman_argv("backend: qemu\n", "emulate", LAUNCH_RUN, &e));
    assert_contains(e, ABI_ENV_QEMU_ACCEL " must be kvm or tcg");
    free(e);
}

static char *podman_argv_ok(const char *yaml, launch_mode mode)
{
    char *e = NULL;
    char *got = podman_argv(yaml, "tcg", mode, &e);
    if (!got)
        fail_msg("%s", e);
    return got;
}

/* network: bridge as on uml: bluebox-vmm's libslirp, told the host's addresses to refuse;
 * none stays none (no device: the VMM gets no forward). */
static void bridge_network(void **s)
{
    (void)s;
    char *got = podman_argv_ok("backend: qemu\nnetwork: bridge\n", LAUNCH_RUN);
    assert_contains(got, " --network=bridge ");
    assert_contains(got, " --env=" ABI_ENV_NETWORK "=bridge ");
    assert_contains(got, " --env=" ABI_ENV_NET_DENY "=");
    assert_contains(got, " --no-hosts ");
    assert_null(strstr(got, ABI_ENV_FORWARD));
    assert_null(strstr(got, "NET_ADMIN"));
    free(got);
    got = podman_argv_ok("backend: qemu\n", LAUNCH_RUN);
    assert_contains(got, " --network=none ");
    assert_contains(got, " --env=" ABI_ENV_NETWORK "=none ");
    assert_null(strstr(got, ABI_ENV_FORWARD));
    assert_null(strstr(got, ABI_ENV_NET_DENY));
    free(got);
}

/* up: the agent's port published on the host's loopback alone and forwarded by libslirp into
 * the guest, which with network: none reaches nothing (restricted mode). */
static void agent_forwarded(void **s)
{
    (void)s;
    char *got = podman_argv_ok("backend: qemu\n", LAUNCH_AGENT);
    assert_contains(got, " --publish=127.0.0.1::" ABI_AGENT_PORT_STR " ");
    assert_contains(got, " --env=" ABI_ENV_NETWORK "=none ");
    assert_contains(got, " --env=" ABI_ENV_FORWARD "=" ABI_AGENT_PORT_STR " ");
    assert_contains(got, " --cap-add=NET_ADMIN ");
    assert_contains(got, " --env=" ABI_ENV_MODE "=agent ");
    assert_contains(got, " " ABI_GUEST_BINARY " echo hi ");
    free(got);
}

/* allow: is the VMM's to enforce, as on uml; podman's /etc/hosts stays for its lookups. */
static void allowlist_and_pool(void **s)
{
    (void)s;
    char *got =
        podman_argv_ok("backend: qemu\nnetwork: bridge\nallow: [api.example.com]\n", LAUNCH_RUN);
    assert_contains(got, " --env=" ABI_ENV_NET_ALLOW "=api.example.com ");
    assert_null(strstr(got, "--no-hosts"));
    free(got);
    /* the warm pool keeps agent VMs, offline with network: none */
    bluefile *bf = parse("backend: qemu\nnetwork: none\nwarm: 1\n");
    const backend *b = NULL;
    bb_error *err = NULL;
    if (backend_for(bf, &b, &err) < 0)
        fail_msg("%s", err->msg);
    assert_string_equal(b->name, "qemu");
    bluefile_free(bf);
}

static void posture_says_the_boundary(void **s)
{
    (void)s;
    bluefile *bf = parse("backend: qemu\n");
    const backend *b = NULL;
    bb_error *err = NULL;
    assert_int_equal(backend_for(bf, &b, &err), 0);
    unsetenv(ABI_ENV_QEMU_ACCEL);
    char *p = posture_line(b, bf, "6.1.0");
    assert_contains(p, "isolation: qemu (KVM), guest kernel 6.1.0 ");
    free(p);
    setenv(ABI_ENV_QEMU_ACCEL, "tcg", 1);
    p = posture_line(b, bf, "6.1.0");
    assert_contains(p, "isolation: qemu (TCG, emulated: a software boundary), guest kernel 6.1.0 ");
    free(p);
    unsetenv(ABI_ENV_QEMU_ACCEL);
    bluefile_free(bf);
}

/* QEMU's argv, joined with spaces; net_fd 0: no network. */
static char *qemu_of(bool kvm, int net_fd)
{
    qemu_dev devs[] = {{"/.bluebox/mem/fs0.sock", ABI_QEMU_ROOT_TAG},
                       {"/.bluebox/mem/fs1.sock", "bbfs0"}};
    qemu_conf c = {.dir = ABI_VMM_DIR,
                   .kvm = kvm,
                   .ram_mib = 256,
                   .cpus = 2,
                   .tsc_khz = 2100000,
                   .serial_fd = 3,
                   .net_fd = net_fd,
                   .net_mtu = 9000,
                   .spec_path = ABI_SPEC_PATH,
                   .devs = devs,
                   .n_devs = ELEMENTSOF(devs)};
    strv a = {0};
    qemu_argv(&c, &a);
    assert_string_equal(a.v[0], ABI_VMM_DIR "/" ABI_VMM_QEMU);
    char *got = spaced(&a);
    strv_clear(&a);
    return got;
}

static void qemu_argv_confined(void **s)
{
    (void)s;
    for (int kvm = 0; kvm <= 1; kvm++) {
        char *got = qemu_of(kvm, 0);
        assert_contains(got, " -nodefaults -no-user-config ");
        assert_contains(got, " -display none ");
        assert_contains(got, " -monitor none ");
        assert_contains(got, " -no-reboot ");
        assert_contains(got, " -sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                             "resourcecontrol=deny ");
        assert_contains(got, " -machine microvm,memory-backend=bbmem ");
        assert_contains(got, " -chardev socket,id=bbctl,fd=3 -serial chardev:bbctl ");
        assert_contains(got, " -device vhost-user-fs-device,chardev=bbfs0,tag=bbroot ");
        assert_contains(got, " -device vhost-user-fs-device,chardev=bbfs1,tag=bbfs0 ");
        assert_contains(got, " -fw_cfg name=" ABI_QEMU_SPEC_FWCFG ",file=" ABI_SPEC_PATH " ");
        /* Nothing the guest or anyone else could drive QEMU through, no network of its own. */
        static const char *const never[] = {"-qmp ",  "mon:",    "stdio",       "-gdb",
                                            " -s ",   "-netdev", " -net ",      "-nic",
                                            "telnet", "tcp:",    "-serial pty", "-enable-kvm"};
        for (size_t i = 0; i < ELEMENTSOF(never); i++)
            if (strstr(got, never[i]))
                fail_msg("QEMU's argv holds %s: %s", never[i], got);
        if (kvm) {
            assert_contains(got, " -accel kvm -cpu host ");
            assert_null(strstr(got, "tsc_early_khz"));
            assert_null(strstr(got, "tcg"));
        } else {
            assert_contains(got, " -accel tcg,tb-size=");
            assert_contains(got, " -cpu max ");
            assert_contains(got, " tsc_early_khz=2100000");
            assert_null(strstr(got, "kvm"));
        }
        free(got);
    }
}

/* The network: one virtio-net device on a stream netdev over the inherited fd, with the
 * link's MTU; never QEMU's own user networking, a tap, a listening or connecting socket. */
static void qemu_argv_network(void **s)
{
    (void)s;
    char *got = qemu_of(false, 4);
    assert_contains(got, " -netdev stream,id=bbnet,server=off,addr.type=fd,addr.str=4 "
                         "-device virtio-net-device,netdev=bbnet,host_mtu=9000 ");
    static const char *const never[] = {"-netdev user", "hostfwd",   "-nic",      " -net ",   "tap",
                                        "bridge",       "type=inet", "type=unix", "server=on"};
    for (size_t i = 0; i < ELEMENTSOF(never); i++)
        if (strstr(got, never[i]))
            fail_msg("QEMU's argv holds %s: %s", never[i], got);
    const char *first = strstr(got, "-netdev");
    assert_non_null(first);
    assert_null(strstr(first + 1, "-netdev")); /* one device */
    free(got);
}

/* data_limit on qemu: the podman side binds the image and names it, as for uml (the first
 * stage refused it here). */
static void data_disk_launch(void **s)
{
    (void)s;
    char *e = NULL;
    char *got = podman_argv("backend: qemu\ndata_limit: 32M\n", "tcg", LAUNCH_RUN, &e);
    if (!got)
        fail_msg("%s", e);
    assert_contains(got, ":" ABI_DATA_DISK ":rw ");
    assert_contains(got, " --env=" ABI_ENV_DATA_DISK "=" ABI_DATA_DISK " ");
    free(got);
}

/* QEMU's argv with a data disk and the console log. */
static char *qemu_storage_of(const char *disk, const char *log)
{
    qemu_conf c = {.dir = ABI_VMM_DIR,
                   .ram_mib = 256,
                   .serial_fd = 3,
                   .spec_path = ABI_SPEC_PATH,
                   .data_disk = disk,
                   .console_log = log};
    strv a = {0};
    qemu_argv(&c, &a);
    char *got = spaced(&a);
    strv_clear(&a);
    return got;
}

/* The disk is raw by declaration (no probing of what the guest wrote), one virtio-blk device;
 * the console is hvc0 on its own virtio-serial bus, output only, appended to the log, and the
 * kernel is told so. Without either, neither device. */
static void qemu_argv_disk_and_console(void **s)
{
    (void)s;
    char *got = qemu_storage_of(ABI_DATA_DISK, ABI_MEM_DIR "/uml.log");
    assert_contains(got, " -drive file=" ABI_DATA_DISK
                         ",if=none,id=bbdata,format=raw,discard=unmap -device "
                         "virtio-blk-device,drive=bbdata ");
    assert_contains(got, " -device virtio-serial-device,id=bbconbus,max_ports=1 -chardev "
                         "file,id=bbcon,path=" ABI_MEM_DIR "/uml.log,append=on -device "
                         "virtconsole,bus=bbconbus.0,chardev=bbcon ");
    assert_contains(got, " console=tty0 console=hvc0");
    assert_null(strstr(got, "loglevel=0"));
    static const char *const never[] = {
        "snapshot",       "backing", "format=qcow",    "readonly=off,",
        "-monitor stdio", "mon:",    "socket,id=bbcon"};
    for (size_t i = 0; i < ELEMENTSOF(never); i++)
        if (strstr(got, never[i]))
            fail_msg("QEMU's argv holds %s: %s", never[i], got);
    free(got);
    got = qemu_storage_of(NULL, NULL);
    assert_null(strstr(got, "-drive"));
    assert_null(strstr(got, "virtio-blk"));
    assert_null(strstr(got, "virtio-serial"));
    assert_null(strstr(got, "console="));
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kvm_passes_dev_kvm),
        cmocka_unit_test(tcg_never_sees_kvm),
        cmocka_unit_test(accel_refusal),
        cmocka_unit_test(bridge_network),
        cmocka_unit_test(agent_forwarded),
        cmocka_unit_test(allowlist_and_pool),
        cmocka_unit_test(posture_says_the_boundary),
        cmocka_unit_test(qemu_argv_confined),
        cmocka_unit_test(qemu_argv_network),
        cmocka_unit_test(data_disk_launch),
        cmocka_unit_test(qemu_argv_disk_and_console),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
