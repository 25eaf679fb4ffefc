/* Unit tests for the uml VMM bundle: locating bluebox-vmm, building a bundle into a throwaway
 * home with a test program linked like bluebox-vmm, reuse, and rebuild on a changed input. */
#include "unit.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/uml_bundle.h"
#include "util/elf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#ifndef UML_TESTPROG
#error "UML_TESTPROG must name the test program linked like bluebox-vmm"
#endif

#define UML "/usr/bin/linux.uml"

static char *tmpdir(void)
{
    char *d = xstrdup("/tmp/bb-uml-XXXXXX");
    assert_non_null(mkdtemp(d));
    return d;
}

static void touch_exec(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    assert_true(fd >= 0);
    close(fd);
}

static void locate(void **s)
{
    (void)s;
    char *d = tmpdir();
    char *self = path_join(d, "bin/bluebox");
    char *bin = path_join(d, "bin");
    assert_int_equal(mkdir(bin, 0755), 0);

    unsetenv("BLUEBOX_VMM");
    assert_null(uml_vmm_locate(self));

    /* ../libexec/bluebox/bluebox-vmm */
    char *lx = path_join(d, "libexec/bluebox");
    assert_int_equal(mkdir_p(lx, 0755, NULL), 0);
    char *lvmm = path_join(lx, "bluebox-vmm");
    touch_exec(lvmm);
    char *got = uml_vmm_locate(self);
    assert_non_null(got);
    assert_contains(got, "/bin/../libexec/bluebox/bluebox-vmm");
    free(got);

    /* Beside the binary wins. */
    char *bvmm = path_join(bin, "bluebox-vmm");
    touch_exec(bvmm);
    got = uml_vmm_locate(self);
    assert_string_equal(got, bvmm);
    free(got);

    /* A non-executable file does not count. */
    assert_int_equal(chmod(bvmm, 0644), 0);
    got = uml_vmm_locate(self);
    assert_contains(got, "libexec");
    free(got);

    setenv("BLUEBOX_VMM", "/opt/x/bluebox-vmm", 1);
    got = uml_vmm_locate(self);
    assert_string_equal(got, "/opt/x/bluebox-vmm");
    free(got);
    unsetenv("BLUEBOX_VMM");

    rm_rf(d, NULL);
    free(bvmm);
    free(lvmm);
    free(lx);
    free(bin);
    free(self);
    free(d);
}

static void kernel_path(void **s)
{
    (void)s;
    unsetenv("BLUEBOX_UML_KERNEL");
    assert_string_equal(uml_kernel_path(), "/usr/bin/linux.uml");
    setenv("BLUEBOX_UML_KERNEL", "/k/linux", 1);
    assert_string_equal(uml_kernel_path(), "/k/linux");
    setenv("BLUEBOX_UML_KERNEL", "", 1);
    assert_string_equal(uml_kernel_path(), "/usr/bin/linux.uml");
    unsetenv("BLUEBOX_UML_KERNEL");
}

static mode_t mode_of(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    struct stat st;
    if (lstat(p, &st) != 0)
        fail_msg("%s missing from the bundle", p);
    free(p);
    assert_true(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
    return st.st_mode & 07777;
}

static ino_t ino_of(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    free(p);
    return st.st_ino;
}

static size_t entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void build_and_reuse(void **s)
{
    (void)s;
    if (access(UML, R_OK) != 0)
        skip();
    unsetenv("BLUEBOX_UML_KERNEL");
    char *home = tmpdir();
    char *dir = NULL;
    bb_error *err = NULL;
    mode_t um = umask(077); /* modes must not depend on the caller's umask */
    int r = uml_bundle_ensure(home, UML_TESTPROG, &dir, &err);
    umask(um);
    if (r < 0)
        fail_msg("%s", err->msg);

    char *vmm = path_join(home, "vmm");
    assert_int_equal(entries(vmm), 1);
    assert_contains(dir, "/vmm/uml-");
    assert_int_equal(strlen(strrchr(dir, '/') + 1), 4 + 16);

    assert_int_equal(mode_of(dir, ""), 0755);
    assert_int_equal(mode_of(dir, "linux.uml"), 0755);
    assert_int_equal(mode_of(dir, "ld.so"), 0755);
    assert_int_equal(mode_of(dir, "bluebox-vmm"), 0755);
    assert_int_equal(mode_of(dir, "libc.so.6"), 0644);
    assert_int_equal(mode_of(dir, "libm.so.6"), 0644);
    assert_int_equal(mode_of(dir, "ld-linux-x86-64.so.2"), 0644);
    /* The guest's RAM layer needs the kernel's overlay.ko; the test program has the xstate
     * preload beside it, as bluebox-vmm does. */
    assert_int_equal(mode_of(dir, "overlay.ko"), 0644);
    /* And fuse.ko and virtiofs.ko for /data and rw mounts (src/fsd). */
    assert_int_equal(mode_of(dir, "fuse.ko"), 0644);
    assert_int_equal(mode_of(dir, "virtiofs.ko"), 0644);
    assert_int_equal(mode_of(dir, "bluebox-xstate.so"), 0644);
    /* Always there: it keeps the host's uname out of the guest's /proc/cpuinfo. */
    assert_int_equal(mode_of(dir, "bluebox-uname.so"), 0644);

    char *k = path_join(dir, "linux.uml");
    elf_info e = {0};
    assert_int_equal(elf_inspect(k, &e, NULL), 0);
    assert_string_equal(e.interp, "/.bluebox/vmm/ld.so");
    elf_info_clear(&e);
    struct stat a, b;
    assert_int_equal(stat(k, &a), 0);
    assert_int_equal(stat(UML, &b), 0);
    assert_int_equal(a.st_size, b.st_size);

    uint64_t fp = 0;
    assert_int_equal(uml_bundle_fingerprint(UML_TESTPROG, &fp, NULL), 0);
    char want[32];
    snprintf(want, sizeof want, "uml-%016llx", (unsigned long long)fp);
    assert_string_equal(strrchr(dir, '/') + 1, want);

    /* Second call: the same directory, nothing rebuilt. */
    ino_t ino = ino_of(dir, "linux.uml");
    char *again = NULL;
    assert_int_equal(uml_bundle_ensure(home, UML_TESTPROG, &again, NULL), 0);
    assert_string_equal(again, dir);
    assert_int_equal(ino_of(again, "linux.uml"), ino);
    assert_int_equal(entries(vmm), 1);

    free(again);
    free(k);
    free(vmm);
    free(dir);
    rm_rf(home, NULL);
    free(home);
}

static void changed_input_new_bundle(void **s)
{
    (void)s;
    if (access(UML, R_OK) != 0)
        skip();
    char *home = tmpdir();
    char *kcopy = path_join(home, "linux.uml");
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(read_file(UML, 1u << 30, &data, &len, NULL), 0);
    assert_int_equal(write_file_atomic(kcopy, data, len, 0755, NULL), 0);
    free(data);
    setenv("BLUEBOX_UML_KERNEL", kcopy, 1);

    char *d1 = NULL, *d2 = NULL;
    uint64_t f1 = 0, f2 = 0;
    assert_int_equal(uml_bundle_ensure(home, UML_TESTPROG, &d1, NULL), 0);
    assert_int_equal(uml_bundle_fingerprint(UML_TESTPROG, &f1, NULL), 0);
    /* Touch the kernel: same content, new mtime/ctime. */
    struct timespec ts[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
    assert_int_equal(utimensat(AT_FDCWD, kcopy, ts, 0), 0);
    assert_int_equal(uml_bundle_fingerprint(UML_TESTPROG, &f2, NULL), 0);
    assert_true(f1 != f2);
    assert_int_equal(uml_bundle_ensure(home, UML_TESTPROG, &d2, NULL), 0);
    assert_string_not_equal(d1, d2);
    assert_true(is_dir(d1));
    assert_true(is_dir(d2));

    /* Prune keeps the current one, removes the old one and stale temporaries, and keeps a
     * builder's fresh temporary directory. */
    char *vmm = path_join(home, "vmm");
    char *stale = path_join(vmm, ".uml-0000000000000000.tmp-abcdef");
    char *fresh = path_join(vmm, ".uml-0000000000000000.tmp-ghijkl");
    assert_int_equal(mkdir(stale, 0700), 0);
    assert_int_equal(mkdir(fresh, 0700), 0);
    assert_int_equal(utimensat(AT_FDCWD, stale, ts, 0), 0);
    assert_int_equal(uml_bundle_prune(home, d2, NULL), 0);
    assert_false(path_exists(d1));
    assert_true(is_dir(d2));
    assert_false(path_exists(stale));
    assert_true(is_dir(fresh));

    unsetenv("BLUEBOX_UML_KERNEL");
    free(stale);
    free(fresh);
    free(vmm);
    free(d1);
    free(d2);
    free(kcopy);
    rm_rf(home, NULL);
    free(home);
}

static void refusals(void **s)
{
    (void)s;
    if (access(UML, R_OK) != 0)
        skip();
    char *home = tmpdir();
    char *dir = NULL;
    bb_error *err = NULL;

    /* A VMM with the host's interpreter is not one linked for the bundle. */
    assert_int_equal(uml_bundle_ensure(home, "/bin/sh", &dir, &err), -1);
    assert_contains(err->msg, "-Wl,--dynamic-linker=/.bluebox/vmm/ld.so");
    bb_error_free(err);
    err = NULL;

    assert_int_equal(uml_bundle_ensure(home, NULL, &dir, &err), -1);
    assert_contains(err->msg, "BLUEBOX_VMM");
    bb_error_free(err);
    err = NULL;

    /* A kernel that is not an ELF file. */
    char *bogus = path_join(home, "bogus");
    assert_int_equal(write_file_atomic(bogus, "#!/bin/sh\n", 10, 0755, NULL), 0);
    setenv("BLUEBOX_UML_KERNEL", bogus, 1);
    assert_int_equal(uml_bundle_ensure(home, UML_TESTPROG, &dir, &err), -1);
    assert_contains(err->msg, "not a valid ELF file");
    bb_error_free(err);
    err = NULL;
    unsetenv("BLUEBOX_UML_KERNEL");

    /* Nothing was left behind by the failures. */
    char *vmm = path_join(home, "vmm");
    assert_false(path_exists(vmm));
    free(vmm);
    free(bogus);
    rm_rf(home, NULL);
    free(home);
}

/* A module directory of one release holding the guest's modules (overlay.ko, fuse.ko,
 * virtiofs.ko) whose vermagic names `release`. */
static char *fake_modules(const char *home, const char *release)
{
    static const char *const rel[] = {"overlayfs/overlay", "fuse/fuse", "fuse/virtiofs"};
    char *dir = path_join(home, "modules");
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char *ko = xasprintf("%s/%s/kernel/fs/%s.ko", dir, release, rel[i]);
        char *sub = xstrndup(ko, (size_t)(strrchr(ko, '/') - ko));
        assert_int_equal(mkdir_p(sub, 0755, NULL), 0);
        char *text = xasprintf("\177ELF...name=x%cvermagic=%s mod_unload %c", 0, release, 0);
        size_t len = strlen(text) + 1 + strlen(release) + strlen("vermagic= mod_unload ") + 1;
        assert_int_equal(write_file_atomic(ko, text, len, 0644, NULL), 0);
        free(text);
        free(sub);
        free(ko);
    }
    return dir;
}

static void overlay_module_must_match(void **s)
{
    (void)s;
    if (access(UML, R_OK) != 0)
        skip();
    unsetenv("BLUEBOX_UML_KERNEL");
    char *home = tmpdir();
    char *dir = NULL;
    bb_error *err = NULL;

    /* A module of another release: refused when the bundle is built, naming both. */
    char *mods = fake_modules(home, "9.9.9-other");
    setenv("BLUEBOX_UML_MODULES", mods, 1);
    assert_int_equal(uml_bundle_ensure(home, UML_TESTPROG, &dir, &err), -1);
    assert_contains(err->msg, "built for kernel 9.9.9-other");
    assert_contains(err->msg, "user-mode-linux");
    bb_error_free(err);
    err = NULL;

    /* No module at all for a real kernel: refused too, not at the guest's first boot. */
    char *empty = path_join(home, "empty");
    assert_int_equal(mkdir(empty, 0755), 0);
    setenv("BLUEBOX_UML_MODULES", empty, 1);
    assert_int_equal(uml_bundle_ensure(home, UML_TESTPROG, &dir, &err), -1);
    assert_contains(err->msg, "needs the overlay.ko module");
    bb_error_free(err);
    unsetenv("BLUEBOX_UML_MODULES");

    char *vmm = path_join(home, "vmm");
    assert_int_equal(entries(vmm), 0);
    free(vmm);
    free(empty);
    free(mods);
    rm_rf(home, NULL);
    free(home);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(locate),          cmocka_unit_test(kernel_path),
        cmocka_unit_test(build_and_reuse), cmocka_unit_test(changed_input_new_bundle),
        cmocka_unit_test(refusals),        cmocka_unit_test(overlay_module_must_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
