/* bluebox-uname.so: preloaded into the UML kernel (linux.uml, from the VMM bundle) so that the
 * host's kernel does not show in the guest.
 *
 * UML calls the host's uname() twice at boot: for the guest's machine name (`uname -m`,
 * which must stay the host's: x86_64) and for the "host" line of the guest's /proc/cpuinfo,
 * "sysname nodename release version machine" of the host, which would tell every guest
 * process the host kernel's exact release and build. Here uname() answers with the host's
 * sysname and machine and "(hidden)" for the rest. The guest's own `uname -r` is its kernel's
 * (UML's compiled-in release), which this does not touch: the isolation check compares that
 * with the host's. Nothing here reads anything the guest controls. */
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#define HIDDEN "(hidden)"

int uname(struct utsname *u)
{
    if (syscall(SYS_uname, u) < 0)
        return -1;
    /* The fields are arrays of the same size (_UTSNAME_LENGTH), longer than HIDDEN. */
    strcpy(u->nodename, HIDDEN);
    strcpy(u->release, HIDDEN);
    strcpy(u->version, HIDDEN);
    return 0;
}
