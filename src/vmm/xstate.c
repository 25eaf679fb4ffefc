/* Preloaded into linux.uml (LD_PRELOAD, from the VMM bundle): lets Debian's UML 6.1 save and
 * restore its guests' FPU state on hosts with a large XSAVE area (AMX).
 *
 * UML keeps each guest thread's FPU state in a buffer of a size fixed at its build and moves
 * it with PTRACE_GETREGSET/SETREGSET(NT_X86_XSTATE). A GET into a short buffer is fine (the
 * kernel truncates); a SET must pass the host's whole XSAVE area, or the kernel refuses it
 * with EFAULT, and on such hosts every guest process dies at its first switch ("ptrace set
 * fp regs failed, errno = 14"). Here a short SET becomes: GET the thread's whole area, lay
 * UML's bytes over its start, SET the whole area. What UML's buffer holds (x87, SSE, AVX,
 * AVX-512 on Debian's build) is restored exactly as before; the parts it cannot hold (AMX
 * tiles) keep the thread's current values. Later kernels (6.13+) size the buffer at boot. */
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Far above any XSAVE area today (AMX: about 11 KiB). */
#define XSTATE_MAX (64u * 1024)

typedef long (*ptrace_fn)(enum __ptrace_request, pid_t, void *, void *);

long ptrace(enum __ptrace_request req, ...);

static long set_whole(ptrace_fn real, pid_t pid, void *addr, const struct iovec *part)
{
    static _Thread_local _Alignas(64) unsigned char whole[XSTATE_MAX];
    struct iovec w = {whole, sizeof whole};
    if (part->iov_len >= sizeof whole || real(PTRACE_GETREGSET, pid, addr, &w) < 0 ||
        w.iov_len <= part->iov_len)
        return real(PTRACE_SETREGSET, pid, addr, (void *)part);
    memcpy(whole, part->iov_base, part->iov_len);
    return real(PTRACE_SETREGSET, pid, addr, &w);
}

long ptrace(enum __ptrace_request req, ...)
{
    static ptrace_fn real;
    va_list ap;
    va_start(ap, req);
    pid_t pid = va_arg(ap, pid_t);
    void *addr = va_arg(ap, void *);
    void *data = va_arg(ap, void *);
    va_end(ap);
    if (!real)
        real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
    if (req == PTRACE_SETREGSET && (unsigned long)addr == NT_X86_XSTATE && data)
        return set_whole(real, pid, addr, data);
    return real(req, pid, addr, data);
}
