/* Process helpers on posix_spawn. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "xalloc.h"

extern char **environ;

static int run(char *const argv[], bool quiet, bb_error **err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet) {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return bb_fail_errno(err, r, "cannot run %s", argv[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return bb_fail_errno(err, errno, "cannot wait for %s", argv[0]);
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int spawn_wait(char *const argv[], bb_error **err)
{
    return run(argv, false, err);
}

int spawn_quiet(char *const argv[], bb_error **err)
{
    return run(argv, true, err);
}

char *program_find(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        char *p = xasprintf("%.*s/%s", (int)n, path, name);
        if (n && p[0] == '/' && access(p, X_OK) == 0)
            return p;
        free(p);
        path += n + (path[n] == ':');
    }
    return NULL;
}

bool program_on_path(const char *name)
{
    _cleanup_free_ char *p = program_find(name);
    return p != NULL;
}
