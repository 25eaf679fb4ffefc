/* Unit tests for the ELF64 reader: the host's linux.uml, the in-place PT_INTERP rewrite, and
 * hostile headers built by hand. */
#include "unit.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/elf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define UML "/usr/bin/linux.uml"

static bool has(const strv *s, const char *x)
{
    for (size_t i = 0; i < s->n; i++)
        if (streq(s->v[i], x))
            return true;
    return false;
}

static char *slurp(const char *path, size_t *len)
{
    char *b = NULL;
    assert_int_equal(read_file(path, 1u << 30, &b, len, NULL), 0);
    return b;
}

static char *write_tmp(const void *data, size_t len)
{
    char *path = xstrdup("/tmp/bb-elf-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

static void parse_linux_uml(void **s)
{
    (void)s;
    if (access(UML, R_OK) != 0)
        skip();
    elf_info e = {0};
    bb_error *err = NULL;
    assert_int_equal(elf_inspect(UML, &e, &err), 0);
    assert_non_null(e.interp);
    assert_string_equal(e.interp, "/lib64/ld-linux-x86-64.so.2");
    assert_int_equal(e.interp_size, strlen(e.interp) + 1);
    assert_true(has(&e.needed, "libc.so.6"));
    elf_info_clear(&e);

    /* A shared library (glibc's is also runnable, so it has a PT_INTERP too). */
    assert_int_equal(elf_inspect("/lib/x86_64-linux-gnu/libc.so.6", &e, &err), 0);
    assert_string_equal(e.soname, "libc.so.6");
    assert_true(has(&e.needed, "ld-linux-x86-64.so.2"));
    elf_info_clear(&e);
}

static void rewrite_interp(void **s)
{
    (void)s;
    if (access(UML, R_OK) != 0)
        skip();
    size_t len = 0;
    char *orig = slurp(UML, &len);
    char *copy = write_tmp(orig, len);

    elf_info before = {0};
    assert_int_equal(elf_inspect(copy, &before, NULL), 0);
    int fd = open(copy, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    bb_error *err = NULL;
    assert_int_equal(elf_set_interp_fd(fd, copy, "/.bluebox/vmm/ld.so", &err), 0);
    close(fd);

    elf_info after = {0};
    assert_int_equal(elf_inspect(copy, &after, NULL), 0);
    assert_string_equal(after.interp, "/.bluebox/vmm/ld.so");
    assert_int_equal(after.interp_off, before.interp_off);
    assert_int_equal(after.interp_size, before.interp_size);
    assert_int_equal(after.needed.n, before.needed.n);

    size_t nlen = 0;
    char *now = slurp(copy, &nlen);
    assert_int_equal(nlen, len);
    size_t lo = (size_t)before.interp_off, hi = lo + (size_t)before.interp_size;
    assert_memory_equal(now, orig, lo);
    assert_memory_equal(now + hi, orig + hi, len - hi);
    assert_string_equal(now + lo, "/.bluebox/vmm/ld.so");
    for (size_t i = lo + strlen("/.bluebox/vmm/ld.so"); i < hi; i++)
        assert_int_equal(now[i], 0);

    /* A path that does not fit (with its NUL) is refused and nothing is written. */
    char *big = xmalloc(before.interp_size + 1);
    memset(big, 'x', before.interp_size);
    big[0] = '/';
    big[before.interp_size] = '\0';
    fd = open(copy, O_RDWR | O_CLOEXEC);
    assert_int_equal(elf_set_interp_fd(fd, copy, big, &err), -1);
    assert_contains(err->msg, "does not fit");
    bb_error_free(err);
    err = NULL;
    close(fd);
    free(now);
    now = slurp(copy, &nlen);
    assert_string_equal(now + lo, "/.bluebox/vmm/ld.so");

    free(big);
    free(now);
    elf_info_clear(&before);
    elf_info_clear(&after);
    unlink(copy);
    free(copy);
    free(orig);
}

/* A small, valid ELF64 built by hand: header, PT_LOAD over the whole file, PT_INTERP,
 * PT_DYNAMIC (DT_STRTAB, DT_STRSZ, DT_NEEDED x2, DT_NULL), the interp and string table. */
typedef struct synth {
    Elf64_Ehdr eh;
    Elf64_Phdr ph[3];
    char interp[32];
    Elf64_Dyn dyn[6];
    char str[32];
} synth;

#define VBASE 0x400000u

static synth make_synth(void)
{
    synth x;
    memset(&x, 0, sizeof x);
    memcpy(x.eh.e_ident, ELFMAG, SELFMAG);
    x.eh.e_ident[EI_CLASS] = ELFCLASS64;
    x.eh.e_ident[EI_DATA] = ELFDATA2LSB;
    x.eh.e_ident[EI_VERSION] = EV_CURRENT;
    x.eh.e_type = ET_EXEC;
    x.eh.e_machine = EM_X86_64;
    x.eh.e_version = EV_CURRENT;
    x.eh.e_ehsize = sizeof(Elf64_Ehdr);
    x.eh.e_phoff = offsetof(synth, ph);
    x.eh.e_phentsize = sizeof(Elf64_Phdr);
    x.eh.e_phnum = 3;
    x.ph[0] = (Elf64_Phdr){.p_type = PT_LOAD,
                           .p_offset = 0,
                           .p_vaddr = VBASE,
                           .p_filesz = sizeof x,
                           .p_memsz = sizeof x};
    strcpy(x.interp, "/lib64/ld-linux-x86-64.so.2");
    x.ph[1] = (Elf64_Phdr){
        .p_type = PT_INTERP, .p_offset = offsetof(synth, interp), .p_filesz = strlen(x.interp) + 1};
    x.ph[2] = (Elf64_Phdr){
        .p_type = PT_DYNAMIC, .p_offset = offsetof(synth, dyn), .p_filesz = sizeof x.dyn};
    memcpy(x.str, "\0libc.so.6\0libm.so.6\0", 21);
    x.dyn[0] = (Elf64_Dyn){.d_tag = DT_STRTAB, .d_un.d_ptr = VBASE + offsetof(synth, str)};
    x.dyn[1] = (Elf64_Dyn){.d_tag = DT_STRSZ, .d_un.d_val = 21};
    x.dyn[2] = (Elf64_Dyn){.d_tag = DT_NEEDED, .d_un.d_val = 1};
    x.dyn[3] = (Elf64_Dyn){.d_tag = DT_NEEDED, .d_un.d_val = 11};
    x.dyn[4] = (Elf64_Dyn){.d_tag = DT_NULL};
    return x;
}

/* Inspect `len` bytes of x; return the error message (NULL on success). */
static char *inspect_bytes(const void *x, size_t len, elf_info *e)
{
    char *path = write_tmp(x, len);
    bb_error *err = NULL;
    int r = elf_inspect(path, e, &err);
    unlink(path);
    free(path);
    if (r == 0) {
        assert_null(err);
        return NULL;
    }
    assert_non_null(err);
    char *m = xstrdup(err->msg);
    bb_error_free(err);
    return m;
}

static void expect_refused(const synth *x, size_t len, const char *msg)
{
    elf_info e = {0};
    char *m = inspect_bytes(x, len, &e);
    if (!m)
        fail_msg("hostile ELF accepted; wanted \"%s\"", msg);
    assert_contains(m, msg);
    assert_null(e.interp);
    assert_int_equal(e.needed.n, 0);
    free(m);
}

static void synthetic_valid(void **s)
{
    (void)s;
    synth x = make_synth();
    elf_info e = {0};
    char *m = inspect_bytes(&x, sizeof x, &e);
    assert_null(m);
    assert_string_equal(e.interp, "/lib64/ld-linux-x86-64.so.2");
    assert_int_equal(e.needed.n, 2);
    assert_string_equal(e.needed.v[0], "libc.so.6");
    assert_string_equal(e.needed.v[1], "libm.so.6");
    elf_info_clear(&e);
}

static void hostile_headers(void **s)
{
    (void)s;
    synth x;

    x = make_synth();
    expect_refused(&x, 40, "too short");

    x = make_synth();
    memcpy(&x,
           "\x7f"
           "ELG",
           4);
    expect_refused(&x, sizeof x, "no ELF magic");

    x = make_synth();
    x.eh.e_ident[EI_CLASS] = ELFCLASS32;
    expect_refused(&x, sizeof x, "64-bit");

    x = make_synth();
    x.eh.e_machine = EM_386;
    expect_refused(&x, sizeof x, "another machine");

    x = make_synth();
    x.eh.e_phoff = sizeof x + 100;
    expect_refused(&x, sizeof x, "program headers past the end");

    x = make_synth();
    x.eh.e_phoff = UINT64_MAX - 8;
    expect_refused(&x, sizeof x, "program headers past the end");

    x = make_synth();
    x.eh.e_phnum = 0xffff;
    expect_refused(&x, sizeof x, "too many program headers");

    x = make_synth();
    x.eh.e_phentsize = 32;
    expect_refused(&x, sizeof x, "program header size");

    /* Program headers that run past the end of a file cut short. */
    x = make_synth();
    expect_refused(&x, offsetof(synth, ph) + sizeof(Elf64_Phdr), "program headers past the end");

    x = make_synth();
    x.ph[1].p_offset = sizeof x;
    expect_refused(&x, sizeof x, "past the end of the file");

    x = make_synth();
    x.ph[1].p_offset = UINT64_MAX - 4;
    expect_refused(&x, sizeof x, "past the end of the file");

    x = make_synth();
    x.ph[1].p_filesz = 1u << 30;
    expect_refused(&x, sizeof x, "past the end of the file");

    x = make_synth();
    x.interp[x.ph[1].p_filesz - 1] = 'x';
    expect_refused(&x, sizeof x, "not NUL-terminated");

    x = make_synth();
    x.ph[2].p_type = PT_INTERP;
    expect_refused(&x, sizeof x, "duplicate");

    x = make_synth();
    x.ph[2].p_filesz = 7;
    expect_refused(&x, sizeof x, "PT_DYNAMIC of implausible size");

    x = make_synth();
    x.dyn[0].d_un.d_ptr = 0x10;
    expect_refused(&x, sizeof x, "outside every loaded segment");

    x = make_synth();
    x.dyn[1].d_un.d_val = UINT64_MAX;
    expect_refused(&x, sizeof x, "string table past the end");

    x = make_synth();
    x.dyn[2].d_un.d_val = 5000;
    expect_refused(&x, sizeof x, "string index past");

    /* A string that runs off the end of the string table. */
    x = make_synth();
    x.dyn[1].d_un.d_val = 15;
    expect_refused(&x, sizeof x, "unterminated string");

    x = make_synth();
    memcpy(x.str + 1, "../evil.6", 9);
    expect_refused(&x, sizeof x, "not a plain file name");

    x = make_synth();
    x.dyn[0].d_tag = DT_HASH;
    expect_refused(&x, sizeof x, "without a string table");
}

static void random_garbage(void **s)
{
    (void)s;
    /* Random bytes behind a valid magic: refused or parsed, never a crash (ASan runs this). */
    unsigned seed = 12345;
    for (int round = 0; round < 2000; round++) {
        synth x = make_synth();
        uint8_t *b = (uint8_t *)&x;
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % sizeof x;
            if (at < 8)
                continue;
            seed = seed * 1103515245u + 12345u;
            b[at] = (uint8_t)(seed >> 16);
        }
        elf_info e = {0};
        free(inspect_bytes(&x, sizeof x, &e));
        elf_info_clear(&e);
    }
}

static void set_interp_without_interp(void **s)
{
    (void)s;
    synth x = make_synth();
    x.ph[1].p_type = PT_NOTE;
    char *path = write_tmp(&x, sizeof x);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    bb_error *err = NULL;
    assert_int_equal(elf_set_interp_fd(fd, path, "/x", &err), -1);
    assert_contains(err->msg, "no program interpreter");
    bb_error_free(err);
    close(fd);
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_linux_uml), cmocka_unit_test(rewrite_interp),
        cmocka_unit_test(synthetic_valid), cmocka_unit_test(hostile_headers),
        cmocka_unit_test(random_garbage),  cmocka_unit_test(set_interp_without_interp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
