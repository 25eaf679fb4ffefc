/* Finding a command's program as a shell does. libc's execvpe searches the PATH of the
 * caller's own environment, which for the agent (the guest's PID 1) is the kernel's, not the
 * command's: `exec -- runuser …` was "No such file or directory" while `run` found it. */
#pragma once

/* Where a command whose environment has no PATH looks (a POSIX shell's default). */
#define EXEC_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* execve file, searched for (when it has no '/') in envp's PATH, or EXEC_DEFAULT_PATH when
 * envp has none, with execvp's rules: an empty entry is the working directory, a file the
 * kernel will not execute for want of an interpreter line (ENOEXEC) runs under /bin/sh (with
 * sh_argv, from exec_script_argv), an entry without it (ENOENT, ENOTDIR, …) is passed over,
 * and EACCES from any entry is reported if nothing ran. Safe in a vfork child: it allocates
 * nothing and only makes system calls. Returns -1 with errno when nothing could be run. */
int exec_in_path(const char *file, char *const argv[], char *const envp[], char **sh_argv);
/* The argv for running a script under /bin/sh ({"/bin/sh", <found>, argv[1], …}), made before
 * vfork; free it (not its strings) afterwards. */
char **exec_script_argv(char *const argv[]);
