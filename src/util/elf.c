/* ELF64 header reader and PT_INTERP rewriter (see elf.h). The input is a host file, but it
 * is still read as untrusted: every size is capped and every offset checked, with overflow
 * in mind, before anything is read. */
#include "elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc.h"

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#elif defined(__riscv) && __riscv_xlen == 64
#define NATIVE_MACHINE EM_RISCV
#elif defined(__powerpc64__)
#define NATIVE_MACHINE EM_PPC64
#elif defined(__s390x__)
#define NATIVE_MACHINE EM_S390
#else
#error "unsupported architecture for the ELF reader"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif

/* Limits far above any real binary, low enough that a hostile header cannot make us read
 * or allocate much. */
#define MAX_PHNUM     512u
#define MAX_DYN_BYTES ((uint64_t)1 << 20)
#define MAX_NAME      255u
#define MAX_PATHLIST  4096u

typedef struct elf_file {
    int fd;
    const char *what;
    uint64_t size;
    Elf64_Ehdr eh;
    Elf64_Phdr *ph;
} elf_file;

void elf_info_clear(elf_info *e)
{
    free(e->interp);
    free(e->runpath);
    free(e->soname);
    strv_clear(&e->needed);
    *e = (elf_info){0};
}

/* [off, off+len) lies inside the file. */
static bool in_file(const elf_file *f, uint64_t off, uint64_t len)
{
    return off <= f->size && len <= f->size - off;
}

static int read_at(const elf_file *f, void *buf, size_t len, uint64_t off, bb_error **err)
{
    if (!in_file(f, off, len))
        return bb_fail(err, ENOEXEC, "%s: not a valid ELF file (data past the end of the file)",
                       f->what);
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(f->fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "cannot read %s", f->what);
        }
        if (n == 0)
            return bb_fail(err, ENOEXEC, "%s: file shrank while being read", f->what);
        done += (size_t)n;
    }
    return 0;
}

static int bad(const elf_file *f, bb_error **err, const char *why)
{
    return bb_fail(err, ENOEXEC, "%s: not a valid ELF file (%s)", f->what, why);
}

static int read_headers(elf_file *f, bb_error **err)
{
    struct stat st;
    if (fstat(f->fd, &st) < 0)
        return bb_fail_errno(err, errno, "cannot stat %s", f->what);
    if (!S_ISREG(st.st_mode))
        return bb_fail(err, EINVAL, "%s is not a regular file", f->what);
    f->size = (uint64_t)st.st_size;
    if (f->size < sizeof f->eh)
        return bad(f, err, "too short");
    if (read_at(f, &f->eh, sizeof f->eh, 0, err) < 0)
        return -1;
    const unsigned char *id = f->eh.e_ident;
    if (memcmp(id, ELFMAG, SELFMAG) != 0)
        return bad(f, err, "no ELF magic");
    if (id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != NATIVE_DATA)
        return bad(f, err, "not a 64-bit file of this machine's byte order");
    if (id[EI_VERSION] != EV_CURRENT || f->eh.e_version != EV_CURRENT)
        return bad(f, err, "unknown ELF version");
    if (f->eh.e_machine != NATIVE_MACHINE)
        return bad(f, err, "built for another machine");
    if (f->eh.e_type != ET_EXEC && f->eh.e_type != ET_DYN)
        return bad(f, err, "neither an executable nor a shared object");
    if (f->eh.e_ehsize != sizeof(Elf64_Ehdr))
        return bad(f, err, "unexpected header size");
    if (f->eh.e_phnum == 0)
        return bad(f, err, "no program headers");
    if (f->eh.e_phentsize != sizeof(Elf64_Phdr))
        return bad(f, err, "unexpected program header size");
    if (f->eh.e_phnum > MAX_PHNUM)
        return bad(f, err, "too many program headers");
    size_t len = (size_t)f->eh.e_phnum * sizeof(Elf64_Phdr);
    if (!in_file(f, f->eh.e_phoff, len))
        return bad(f, err, "program headers past the end of the file");
    f->ph = xmalloc(len);
    return read_at(f, f->ph, len, f->eh.e_phoff, err);
}

/* The single segment of `type`, NULL when there is none; two is an error. */
static int find_segment(const elf_file *f, uint32_t type, const Elf64_Phdr **ret, bb_error **err)
{
    *ret = NULL;
    for (size_t i = 0; i < f->eh.e_phnum; i++) {
        if (f->ph[i].p_type != type)
            continue;
        if (*ret)
            return bad(f, err, "duplicate PT_INTERP or PT_DYNAMIC");
        if (!in_file(f, f->ph[i].p_offset, f->ph[i].p_filesz))
            return bad(f, err, "segment past the end of the file");
        *ret = &f->ph[i];
    }
    return 0;
}

static int read_interp(const elf_file *f, elf_info *e, bb_error **err)
{
    const Elf64_Phdr *p;
    if (find_segment(f, PT_INTERP, &p, err) < 0)
        return -1;
    if (!p)
        return 0;
    /* The kernel's own rule: 2..PATH_MAX bytes, the last one NUL. */
    if (p->p_filesz < 2 || p->p_filesz > PATH_MAX)
        return bad(f, err, "PT_INTERP of implausible size");
    _cleanup_free_ char *s = xmalloc(p->p_filesz);
    if (read_at(f, s, p->p_filesz, p->p_offset, err) < 0)
        return -1;
    if (s[p->p_filesz - 1] != '\0')
        return bad(f, err, "PT_INTERP not NUL-terminated");
    if (s[0] != '/')
        return bad(f, err, "PT_INTERP is not an absolute path");
    e->interp = xstrdup(s);
    e->interp_off = p->p_offset;
    e->interp_size = p->p_filesz;
    return 0;
}

/* File offset of the virtual address `addr`, through the PT_LOAD segment that holds it. */
static int vaddr_to_off(const elf_file *f, uint64_t addr, uint64_t *ret, bb_error **err)
{
    for (size_t i = 0; i < f->eh.e_phnum; i++) {
        const Elf64_Phdr *p = &f->ph[i];
        if (p->p_type != PT_LOAD || addr < p->p_vaddr || addr - p->p_vaddr >= p->p_filesz)
            continue;
        if (!in_file(f, p->p_offset, p->p_filesz))
            return bad(f, err, "segment past the end of the file");
        *ret = p->p_offset + (addr - p->p_vaddr);
        return 0;
    }
    return bad(f, err, "string table outside every loaded segment");
}

/* The NUL-terminated string at `idx` of the string table [base, base+strsz), at most max
 * bytes long. */
static int read_string(const elf_file *f, uint64_t base, uint64_t strsz, uint64_t idx, size_t max,
                       char **ret, bb_error **err)
{
    if (idx >= strsz)
        return bad(f, err, "string index past the string table");
    uint64_t avail = strsz - idx;
    size_t len = avail < max + 1 ? (size_t)avail : max + 1;
    _cleanup_free_ char *s = xmalloc(len + 1);
    if (read_at(f, s, len, base + idx, err) < 0)
        return -1;
    s[len] = '\0';
    if (strnlen(s, len) == len)
        return bad(f, err, "overlong or unterminated string in the string table");
    *ret = steal_pointer(&s);
    return 0;
}

/* A DT_NEEDED name becomes a file name in the bundle: a single, ordinary path component. */
static bool soname_ok(const char *s)
{
    return s[0] && !strchr(s, '/') && !streq(s, ".") && !streq(s, "..");
}

static int read_dynamic(const elf_file *f, elf_info *e, bb_error **err)
{
    const Elf64_Phdr *p;
    if (find_segment(f, PT_DYNAMIC, &p, err) < 0)
        return -1;
    if (!p)
        return 0;
    if (p->p_filesz > MAX_DYN_BYTES || p->p_filesz % sizeof(Elf64_Dyn) != 0)
        return bad(f, err, "PT_DYNAMIC of implausible size");
    size_t n = (size_t)(p->p_filesz / sizeof(Elf64_Dyn));
    _cleanup_free_ Elf64_Dyn *dyn = xmalloc(n * sizeof *dyn + 1);
    if (read_at(f, dyn, n * sizeof *dyn, p->p_offset, err) < 0)
        return -1;

    uint64_t strtab = 0, strsz = 0;
    bool have_strtab = false, have_strsz = false;
    size_t end = n;
    for (size_t i = 0; i < n; i++) {
        if (dyn[i].d_tag == DT_NULL) {
            end = i;
            break;
        }
        if (dyn[i].d_tag == DT_STRTAB) {
            strtab = dyn[i].d_un.d_ptr;
            have_strtab = true;
        } else if (dyn[i].d_tag == DT_STRSZ) {
            strsz = dyn[i].d_un.d_val;
            have_strsz = true;
        }
    }
    if (!have_strtab || !have_strsz)
        return bad(f, err, "dynamic section without a string table");
    uint64_t base = 0;
    if (vaddr_to_off(f, strtab, &base, err) < 0)
        return -1;
    if (!in_file(f, base, strsz))
        return bad(f, err, "string table past the end of the file");

    _cleanup_free_ char *runpath = NULL, *rpath = NULL;
    for (size_t i = 0; i < end; i++) {
        char *s = NULL;
        switch (dyn[i].d_tag) {
        case DT_NEEDED:
            if (e->needed.n >= MAX_PHNUM)
                return bad(f, err, "too many DT_NEEDED entries");
            if (read_string(f, base, strsz, dyn[i].d_un.d_val, MAX_NAME, &s, err) < 0)
                return -1;
            if (!soname_ok(s)) {
                free(s);
                return bad(f, err, "DT_NEEDED is not a plain file name");
            }
            strv_push(&e->needed, s);
            break;
        case DT_SONAME:
            if (read_string(f, base, strsz, dyn[i].d_un.d_val, MAX_NAME, &s, err) < 0)
                return -1;
            free(e->soname);
            e->soname = s;
            break;
        case DT_RUNPATH:
        case DT_RPATH:
            if (read_string(f, base, strsz, dyn[i].d_un.d_val, MAX_PATHLIST, &s, err) < 0)
                return -1;
            if (dyn[i].d_tag == DT_RUNPATH) {
                free(runpath);
                runpath = s;
            } else {
                free(rpath);
                rpath = s;
            }
            break;
        default:
            break;
        }
    }
    /* As the loader does: DT_RUNPATH, when present, makes DT_RPATH ignored. */
    e->runpath = runpath ? steal_pointer(&runpath) : steal_pointer(&rpath);
    return 0;
}

static int inspect(elf_file *f, elf_info *ret, bb_error **err)
{
    _cleanup_elf_info_ elf_info e = {0};
    int r = read_headers(f, err);
    if (r == 0)
        r = read_interp(f, &e, err);
    if (r == 0)
        r = read_dynamic(f, &e, err);
    free(f->ph);
    f->ph = NULL;
    if (r < 0)
        return -1;
    *ret = e;
    e = (elf_info){0};
    return 0;
}

int elf_inspect_fd(int fd, const char *what, elf_info *ret, bb_error **err)
{
    elf_file f = {.fd = fd, .what = what};
    return inspect(&f, ret, err);
}

int elf_inspect(const char *path, elf_info *ret, bb_error **err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return bb_fail_errno(err, errno, "cannot open %s", path);
    return elf_inspect_fd(fd, path, ret, err);
}

int elf_set_interp_fd(int fd, const char *what, const char *interp, bb_error **err)
{
    _cleanup_elf_info_ elf_info e = {0};
    if (elf_inspect_fd(fd, what, &e, err) < 0)
        return -1;
    if (!e.interp)
        return bb_fail(err, ENOEXEC, "%s has no program interpreter to rewrite", what);
    size_t n = strlen(interp);
    if (interp[0] != '/' || n + 1 > e.interp_size)
        return bb_fail(err, ENAMETOOLONG,
                       "%s: the program interpreter %s does not fit in the %llu bytes of %s", what,
                       interp, (unsigned long long)e.interp_size, e.interp);
    _cleanup_free_ char *buf = xcalloc(1, (size_t)e.interp_size);
    memcpy(buf, interp, n + 1); /* the rest stays NUL from calloc */
    size_t done = 0;
    while (done < e.interp_size) {
        ssize_t w =
            pwrite(fd, buf + done, (size_t)e.interp_size - done, (off_t)(e.interp_off + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return bb_fail_errno(err, errno, "cannot write %s", what);
        }
        done += (size_t)w;
    }
    return 0;
}
