/* bluebox-xstate.so: preloaded into Debian 12's UML kernel (linux.uml, from the VMM bundle)
 * so that it works on hosts with a large XSAVE area.
 *
 * UML 6.1 moves a guest thread's FPU state in and out of the host process that runs it with
 * PTRACE_GETREGSET/SETREGSET on NT_X86_XSTATE, through a buffer of sizeof(struct _xstate) =
 * 832 bytes (legacy area, XSAVE header, AVX upper halves). The host accepts a SETREGSET only
 * of its whole XSAVE size, so on a host with AVX-512 or AMX (2.6 KiB, 11 KiB) every write
 * fails with EFAULT and the first guest process dies ("userspace - ptrace set fp regs
 * failed, errno = 14"). Making UML fall back to PTRACE_SETFPREGS is no way out either: the
 * vector state beyond SSE is then lost whenever UML takes a fault for the process, and glibc's
 * EVEX memcpy copies zeros (static binaries die in __ctype_init). Newer UML kernels size the
 * buffer from CPUID; this one cannot be changed, so its ptrace() calls are.
 *
 * For the XSTATE regset with a buffer shorter than the host's: a GETREGSET reads the whole
 * state into a buffer of ours kept per UML buffer (UML keeps one per guest thread, at a fixed
 * address) and hands UML its first part; a SETREGSET writes UML's part over that whole state
 * (or over the process's live state, for a buffer never read), so every register UML does not
 * know about is restored with the thread it belongs to. Everything else goes to the kernel
 * unchanged. Nothing here reads guest memory or anything the guest controls beyond register
 * contents. */
#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

long ptrace(enum __ptrace_request request, ...);

typedef struct {
    const void *key; /* UML's buffer */
    uint8_t *state;  /* the whole XSAVE state last read into it */
} saved;

static size_t host_size;
static saved *table;
static size_t n_table, cap_table;

static size_t xsave_size(void)
{
    if (host_size == 0) {
        unsigned a, b, c, d;
        /* CPUID.(EAX=0DH,ECX=0):ECX: the XSAVE area of every feature the CPU supports, the
         * size the kernel's regset holds. */
        host_size = __get_cpuid_count(0xd, 0, &a, &b, &c, &d) && c > 0 ? c : SIZE_MAX;
    }
    return host_size;
}

static long sys_ptrace(long request, pid_t pid, void *addr, void *data)
{
    return syscall(SYS_ptrace, request, (long)pid, addr, data);
}

/* NULL when out of memory: the caller then passes the request through unchanged. */
static uint8_t *state_for(const void *key, bool create)
{
    for (size_t i = 0; i < n_table; i++)
        if (table[i].key == key)
            return table[i].state;
    if (!create)
        return NULL;
    if (n_table == cap_table) {
        size_t cap = cap_table ? cap_table * 2 : 64;
        saved *t = realloc(table, cap * sizeof *t);
        if (!t)
            return NULL;
        table = t;
        cap_table = cap;
    }
    uint8_t *state = calloc(1, xsave_size());
    if (!state)
        return NULL;
    table[n_table++] = (saved){.key = key, .state = state};
    return state;
}

static long get_xstate(pid_t pid, struct iovec *iov)
{
    uint8_t *state = state_for(iov->iov_base, true);
    if (!state)
        return sys_ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, iov);
    struct iovec whole = {.iov_base = state, .iov_len = xsave_size()};
    long r = sys_ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &whole);
    if (r < 0)
        return r;
    memcpy(iov->iov_base, state, iov->iov_len);
    return r;
}

static long set_xstate(pid_t pid, const struct iovec *iov)
{
    uint8_t *state = state_for(iov->iov_base, false);
    uint8_t *live = NULL;
    if (!state) {
        live = malloc(xsave_size());
        if (!live)
            return sys_ptrace(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, (void *)iov);
        struct iovec cur = {.iov_base = live, .iov_len = xsave_size()};
        if (sys_ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &cur) < 0) {
            free(live);
            return -1;
        }
        state = live;
    }
    memcpy(state, iov->iov_base, iov->iov_len);
    struct iovec whole = {.iov_base = state, .iov_len = xsave_size()};
    long r = sys_ptrace(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, &whole);
    free(live);
    return r;
}

long ptrace(enum __ptrace_request request, ...)
{
    va_list ap;
    va_start(ap, request);
    pid_t pid = va_arg(ap, pid_t);
    void *addr = va_arg(ap, void *);
    void *data = va_arg(ap, void *);
    va_end(ap);

    if ((request == PTRACE_GETREGSET || request == PTRACE_SETREGSET) &&
        (uintptr_t)addr == NT_X86_XSTATE && data &&
        ((struct iovec *)data)->iov_len < xsave_size()) {
        struct iovec *iov = data;
        return request == PTRACE_GETREGSET ? get_xstate(pid, iov) : set_xstate(pid, iov);
    }
    /* glibc's wrapper returns the word read by a PEEK request and keeps -1 for errors. */
    if (request == PTRACE_PEEKTEXT || request == PTRACE_PEEKDATA || request == PTRACE_PEEKUSER) {
        long word;
        if (sys_ptrace(request, pid, addr, &word) < 0)
            return -1;
        errno = 0;
        return word;
    }
    return sys_ptrace(request, pid, addr, data);
}
