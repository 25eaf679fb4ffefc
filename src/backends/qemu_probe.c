/* The KVM probe boot (qemu_probe.h). The host's QEMU boots the qemu backend's kernel under
 * KVM with no initramfs, no disk and no network: a kernel that runs panics for want of a root
 * filesystem, which -no-reboot turns into QEMU's exit, in well under a second; one that
 * cannot run hangs, and is killed at KVM_PROBE_TIMEOUT_MS.
 *
 * Why not inside a confined container like a sandbox's VMM: the guest here is the
 * distribution's kernel alone, the same the host trusts, with nothing of a sandbox's (no
 * image, no workload, no file server), so there is nothing untrusted for a container to hold
 * in; and doctor must answer where podman does not work yet. The QEMU process still gets
 * nothing it does not need: no devices but one serial line to a pipe, QEMU's seccomp sandbox
 * (-sandbox on, no spawning, no obsolete calls), a clean environment, and when bluebox runs
 * as root it drops to nobody (-runas) once /dev/kvm is open, before the guest runs. */
#include "qemu_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/home.h"
#include "qemu_bundle.h"
#include "util/fs.h"
#include "util/spawn.h"
#include "util/strv.h"
#include "util/time.h"
#include "util/xalloc.h"

#define CACHE_FILE "vmm/kvm-probe" /* under BLUEBOX_HOME; not a bundle name (qemu-*, uml-*) */
#define OUT_MAX    (64u << 10)
#define PANIC_MARK "Kernel panic - not syncing"
#define NOBODY     "65534:65534"

void kvm_probe_clear(kvm_probe *p)
{
    free(p->detail);
    *p = (kvm_probe){0};
}

static void ident(strbuf *b, const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        sb_printf(b, " %s=%s:none", what, path);
        return;
    }
    sb_printf(b, " %s=%s:%lld:%llu:%lld.%09ld", what, path, (long long)st.st_size,
              (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* What a verdict holds for: this boot of the host, this kernel, this QEMU and its firmware
 * (their stat data: an upgrade of either changes it). NULL when there is no kernel. */
static char *probe_key(const char *kernel)
{
    _cleanup_free_ char *boot = NULL;
    size_t len = 0;
    if (read_file("/proc/sys/kernel/random/boot_id", 128, &boot, &len, NULL) < 0)
        boot = xstrdup("unknown");
    boot[strcspn(boot, "\n")] = '\0';
    _cleanup_sb_ strbuf b = {0};
    sb_printf(&b, "boot=%s", boot);
    ident(&b, "kernel", kernel);
    ident(&b, "qemu", qemu_binary_path());
    ident(&b, "bios", qemu_bios_path());
    return sb_steal(&b);
}

static char *cache_path(const char *home_root)
{
    return path_join(home_root, CACHE_FILE);
}

/* The cache file: the key, "runs" or "cannot", the detail; one line each. */
static void cache_read(const char *home_root, const char *key, kvm_probe *ret)
{
    _cleanup_free_ char *path = cache_path(home_root), *text = NULL;
    size_t len = 0;
    *ret = (kvm_probe){0};
    if (read_file(path, 8192, &text, &len, NULL) < 0)
        return;
    char *save = NULL;
    const char *k = strtok_r(text, "\n", &save);
    const char *v = strtok_r(NULL, "\n", &save);
    const char *d = strtok_r(NULL, "\n", &save);
    if (!k || !v || !d || !streq(k, key))
        return;
    if (streq(v, "runs"))
        ret->verdict = KVM_RUNS;
    else if (streq(v, "cannot"))
        ret->verdict = KVM_CANNOT;
    else
        return;
    ret->cached = true;
    ret->detail = xstrdup(d);
}

static void cache_write(const char *home_root, const char *key, const kvm_probe *p)
{
    _cleanup_free_ char *vmm = path_join(home_root, "vmm"), *path = cache_path(home_root);
    _cleanup_free_ char *text =
        xasprintf("%s\n%s\n%s\n", key, p->verdict == KVM_RUNS ? "runs" : "cannot", p->detail);
    /* A cache: when it cannot be written, the next doctor probes again. */
    if (mkdir_p(home_root, HOME_DIR_MODE, NULL) == 0 && mkdir_p(vmm, 0755, NULL) == 0)
        (void)write_file_atomic(path, text, strlen(text), 0644, NULL);
}

void qemu_kvm_cached(const char *home_root, kvm_probe *ret)
{
    _cleanup_free_ char *kernel = NULL, *modules = NULL;
    *ret = (kvm_probe){0};
    if (qemu_kernel_find(&kernel, &modules, NULL) < 0)
        return;
    _cleanup_free_ char *key = probe_key(kernel);
    cache_read(home_root, key, ret);
}

/* The last non-empty line of what QEMU and the guest printed, printable ASCII only. */
static char *last_line(const strbuf *out)
{
    size_t end = out->len;
    while (end > 0 && (out->s[end - 1] == '\n' || out->s[end - 1] == '\r'))
        end--;
    size_t start = end;
    while (start > 0 && out->s[start - 1] != '\n')
        start--;
    if (end - start > 200)
        start = end - 200;
    _cleanup_sb_ strbuf b = {0};
    for (size_t i = start; i < end; i++) {
        unsigned char c = (unsigned char)out->s[i];
        sb_putc(&b, c >= 0x20 && c < 0x7f ? (char)c : '?');
    }
    return b.len ? sb_steal(&b) : NULL;
}

static void probe_argv(const char *kernel, strv *a)
{
    strv_add(a, qemu_binary_path());
    static const char *const fixed[] = {
        "-nodefaults", "-no-user-config",
        "-display",    "none",
        "-monitor",    "none",
        "-no-reboot",  "-machine",
        "microvm",     "-accel",
        "kvm",         "-cpu",
        "host",        "-smp",
        "1",           "-m",
        "128M",        "-serial",
        "stdio",
    };
    for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
        strv_add(a, fixed[i]);
    strv_add(a, "-sandbox");
    /* -runas needs set*id, which elevateprivileges=deny would refuse it. */
    strv_add(a, geteuid() == 0 ? "on,obsolete=deny,spawn=deny,resourcecontrol=deny"
                               : "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                                 "resourcecontrol=deny");
    if (geteuid() == 0) {
        strv_add(a, "-runas");
        strv_add(a, NOBODY);
    }
    strv_add(a, "-bios");
    strv_add(a, qemu_bios_path());
    strv_add(a, "-kernel");
    strv_add(a, kernel);
    strv_add(a, "-append");
    strv_add(a, "console=ttyS0 panic=-1 pci=off cryptomgr.notests");
}

static pid_t probe_start(char **argv, int out_fd, bb_error **err)
{
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0)
        return bb_fail_errno(err, errno, "cannot open /dev/null");
    pid_t pid = fork();
    if (pid < 0) {
        close(null);
        return bb_fail_errno(err, errno, "cannot fork the KVM probe");
    }
    if (pid == 0) {
        static char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        setpgid(0, 0);
        if (dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0 || chdir("/") < 0)
            _exit(127);
        execve(argv[0], argv, envp);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(null);
    setpgid(pid, pid);
    return pid;
}

/* The end of the boot log is what tells (the panic, or the last words before a hang). */
static void keep_tail(strbuf *out, const char *buf, size_t n)
{
    if (out->len + n > OUT_MAX && out->len > OUT_MAX / 2) {
        memmove(out->s, out->s + out->len - OUT_MAX / 2, OUT_MAX / 2);
        out->len = OUT_MAX / 2;
        out->s[out->len] = '\0';
    }
    sb_putn(out, buf, n);
}

/* Read what the probe prints until it exits or the deadline passes; true when it exited (its
 * status in *status), false when it was killed at the deadline. */
static bool probe_wait(pid_t pid, int fd, int64_t deadline, strbuf *out, int *status)
{
    char buf[4096];
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            break;
        int64_t now = now_mono_ms();
        if (now >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            while (waitpid(pid, status, 0) < 0 && errno == EINTR)
                ;
            return false;
        }
        int t = poll_timeout_until(deadline, now);
        if (fd < 0) { /* its output closed: wait for its exit in short steps */
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, t > 50 ? 50 : t) <= 0)
            continue;
        ssize_t n = read_or_close(&fd, buf, sizeof buf);
        if (n > 0)
            keep_tail(out, buf, (size_t)n);
    }
    /* What it printed last, still in the pipe. */
    ssize_t n;
    while (fd >= 0 && (n = read_or_close(&fd, buf, sizeof buf)) >= 0)
        if (n > 0)
            keep_tail(out, buf, (size_t)n);
    return true;
}

static int probe_boot(const char *kernel, kvm_probe *ret, bb_error **err)
{
    _cleanup_strv_ strv argv = {0};
    probe_argv(kernel, &argv);
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return bb_fail_errno(err, errno, "cannot make a pipe for the KVM probe");
    int64_t start = now_mono_ms();
    pid_t pid = probe_start(argv.v, pfd[1], err);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        return -1;
    }
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    _cleanup_sb_ strbuf out = {0};
    int status = 0;
    bool exited = probe_wait(pid, pfd[0], start + KVM_PROBE_TIMEOUT_MS, &out, &status);
    ret->ms = (long)mono_ms_since(start);
    _cleanup_free_ char *last = last_line(&out);
    bool panicked = out.s && memmem(out.s, out.len, PANIC_MARK, strlen(PANIC_MARK));
    if (exited && panicked) {
        ret->verdict = KVM_RUNS;
        ret->detail = xasprintf("a probe boot of %s under KVM ran to its end in %.1f s", kernel,
                                (double)ret->ms / 1000.0);
    } else if (!exited) {
        ret->verdict = KVM_CANNOT;
        ret->detail =
            xasprintf("a probe boot of %s under KVM hung (killed after %d s)%s%s%s", kernel,
                      KVM_PROBE_TIMEOUT_MS / 1000, last ? "; its last words: \"" : "",
                      last ? last : "", last ? "\"" : "");
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        return bb_fail(err, ENOEXEC, "cannot run %s for the KVM probe%s%s", qemu_binary_path(),
                       last ? ": " : "", last ? last : "");
    } else {
        ret->verdict = KVM_CANNOT;
        ret->detail = xasprintf("a probe boot of %s under KVM failed: QEMU stopped (%s %d) "
                                "before the kernel finished booting%s%s",
                                kernel, WIFEXITED(status) ? "exit status" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                                last ? ": " : "", last ? last : "");
    }
    return 0;
}

int qemu_kvm_probe(const char *home_root, kvm_probe *ret, bb_error **err)
{
    _cleanup_free_ char *kernel = NULL, *modules = NULL;
    *ret = (kvm_probe){0};
    if (qemu_kernel_find(&kernel, &modules, err) < 0)
        return -1;
    if (access(qemu_binary_path(), X_OK) < 0)
        return bb_fail_errno(err, errno, "cannot run %s", qemu_binary_path());
    _cleanup_free_ char *key = probe_key(kernel);
    cache_read(home_root, key, ret);
    if (ret->verdict != KVM_UNKNOWN)
        return 0;
    if (probe_boot(kernel, ret, err) < 0)
        return -1;
    cache_write(home_root, key, ret);
    return 0;
}
