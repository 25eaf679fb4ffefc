/* A command's program found in the command's own PATH (pathexec.h). */
#include "pathexec.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "util/xalloc.h"

static const char *env_path(char *const envp[])
{
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            return *e + 5;
    return EXEC_DEFAULT_PATH;
}

char **exec_script_argv(char *const argv[])
{
    size_t argc = 0;
    while (argv[argc])
        argc++;
    char **v = xcalloc(argc + 3, sizeof *v);
    v[0] = (char *)"/bin/sh"; /* v[1]: the program found, filled in by exec_one */
    for (size_t i = 1; i < argc; i++)
        v[i + 1] = argv[i];
    return v;
}

static void exec_one(const char *path, char *const argv[], char *const envp[], char **sh_argv)
{
    execve(path, argv, envp);
    if (errno == ENOEXEC) { /* no interpreter line: a shell script, as execvp has it */
        sh_argv[1] = (char *)path;
        execve("/bin/sh", sh_argv, envp);
        errno = ENOEXEC;
    }
}

int exec_in_path(const char *file, char *const argv[], char *const envp[], char **sh_argv)
{
    if (!file || !*file) {
        errno = ENOENT;
        return -1;
    }
    if (strchr(file, '/')) {
        exec_one(file, argv, envp, sh_argv);
        return -1;
    }
    size_t flen = strlen(file);
    if (flen >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    bool denied = false;
    char buf[PATH_MAX];
    for (const char *p = env_path(envp);; p++) {
        const char *end = strchrnul(p, ':');
        size_t dlen = (size_t)(end - p);
        if (dlen + 1 + flen < sizeof buf) { /* a longer one cannot name anything: passed over */
            if (dlen) {
                memcpy(buf, p, dlen);
                buf[dlen++] = '/';
            }
            memcpy(buf + dlen, file, flen + 1);
            exec_one(buf, argv, envp, sh_argv);
            switch (errno) {
            case EACCES:
                denied = true;
                break;
            case ENOENT:
            case ENOTDIR:
            case ESTALE:
            case ENODEV:
            case ETIMEDOUT:
            case ELOOP:
            case ENAMETOOLONG:
                break;
            default:
                return -1; /* it is there but will not run (ENOEXEC, E2BIG, ENOMEM, …) */
            }
        }
        if (!*end)
            break;
        p = end;
    }
    errno = denied ? EACCES : ENOENT;
    return -1;
}
