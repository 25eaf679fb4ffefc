/* The machines' registry and what their starts share: the fork into the jail, the fds, the
 * exec; and their stop. See machine.h. */
#include "vmm/machine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/xalloc.h"
#include "vmm/jail.h"
#include "vmm/vmm.h"

const machine *machine_get(void)
{
    const char *k = getenv(ABI_ENV_VMM_KIND);
    return k && streq(k, "qemu") ? &machine_qemu : &machine_uml;
}

pid_t machine_spawn(char *const *argv, char *const *envp, const machine_io *io, bool kvm)
{
    int log = io->log_fd >= 0 ? fcntl(io->log_fd, F_DUPFD_CLOEXEC, 0)
                              : open("/dev/null", O_WRONLY | O_CLOEXEC);
    /* Opened here: the machine's view of the container has no /dev. */
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int net = io->net;
    pid_t pid = fork();
    if (pid < 0)
        vmm_die("fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        const char *what = "";
        if (jail_enter(&what, io->served, kvm) < 0) {
            dprintf(2, "bluebox-vmm: cannot give the kernel its view of the container (%s): %s\n",
                    what, strerror(errno));
            _exit(ABI_EXIT_SETUP);
        }
        /* Above the fds it is dup'ed to first: dup2 onto itself would keep it close-on-exec,
         * and the serial line's dup2 would replace it at VMM_SERIAL_FD. */
        if (net >= 0 && (net = fcntl(net, F_DUPFD_CLOEXEC, VMM_NET_FD + 1)) < 0)
            _exit(ABI_EXIT_SETUP);
        if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 ||
            dup2(io->serial, VMM_SERIAL_FD) < 0 || (net >= 0 && dup2(net, VMM_NET_FD) < 0))
            _exit(ABI_EXIT_SETUP);
        /* Our handlers and ignored SIGPIPE are not the machine's; an ignored SIGXFSZ is
         * (disklimit.c: a write past the /data image's cap fails, it does not kill the VM). */
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGXFSZ)
                (void)signal(sig, SIG_DFL);
        sigprocmask(SIG_SETMASK, io->mask, NULL);
        execve(argv[0], argv, envp);
        dprintf(2, "bluebox-vmm: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(ABI_EXIT_SETUP);
    }
    setpgid(pid, pid); /* also here: no race with a kill before the child ran */
    const char *what = "";
    if (jail_lock(&what) < 0)
        vmm_die("%s: %s", what, strerror(errno));
    if (null >= 0)
        close(null);
    if (log >= 0)
        close(log);
    return pid;
}

bool machine_stop(pid_t pid, int *status)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    /* ECHILD: reaped already; never left "alive" for the caller to kill again forever. */
    return waitpid(pid, status, 0) == pid || errno == ECHILD;
}
