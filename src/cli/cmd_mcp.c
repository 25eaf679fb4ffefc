/* `bluebox mcp [--allow-restore]`: the MCP server on stdin/stdout (src/api/mcp.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "api/mcp.h"
#include "api/mcp_api.h"
#include "cli.h"

/* Take the protocol's stdin and stdout for the server alone: the server keeps private copies,
 * fd 0 becomes /dev/null and fd 1 a copy of stderr. Nothing else this process prints, and no
 * process it starts (podman, the VMM), can then read a client's message or write into the
 * reply stream. */
static int take_stdio(int *ret_in, int *ret_out, bb_error **err)
{
    _cleanup_close_ int in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    _cleanup_close_ int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (in < 0 || out < 0)
        return bb_fail_errno(err, errno, "mcp needs its stdin and stdout");
    _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0)
        return bb_fail_errno(err, errno, "cannot open /dev/null");
    fflush(stdout);
    if (dup2(null, STDIN_FILENO) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        return bb_fail_errno(err, errno, "cannot set up mcp's stdio");
    *ret_in = steal_fd(&in);
    *ret_out = steal_fd(&out);
    return 0;
}

/* A client stops its server with SIGTERM (or SIGINT, SIGHUP) to the server's pid alone. The
 * command a tool is running lives in a child of the API's handler; pass the signal on to the
 * server's process group, as a terminal's Ctrl-C reaches a CLI command and its children, then
 * die of it: the agent session ends and the agent kills the command in the guest. */
static void stop_group(int sig)
{
    signal(sig, SIG_DFL);
    kill(0, sig); /* this process too: it dies of sig once the handler returns */
}

/* Lead a process group of our own, so that stop_group reaches only what this server started,
 * never the client that started it. Not when the client is a terminal: a background group
 * could not read it. */
static void take_group(int in)
{
    if (isatty(in) || (getpgrp() != getpid() && setpgid(0, 0) < 0))
        return;
    struct sigaction sa = {.sa_handler = stop_group};
    sigemptyset(&sa.sa_mask);
    for (const int *sig = (const int[]){SIGTERM, SIGINT, SIGHUP, 0}; *sig; sig++)
        sigaction(*sig, &sa, NULL);
}

int cmd_mcp(cli_args *a, bb_error **err)
{
    /* A client that goes away closes the pipe: end quietly rather than die of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    _cleanup_close_ int in = -1, out = -1;
    if (take_stdio(&in, &out, err) < 0)
        return -1;
    take_group(in);
    mcp_server s = {
        .api = mcp_api_inprocess,
        .api_ctx = (void *)a->root,
        .allow_restore = cli_flag(a, "allow-restore"),
    };
    return mcp_serve(&s, in, out, err);
}
