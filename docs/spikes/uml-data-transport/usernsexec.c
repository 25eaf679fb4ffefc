/* usernsexec OUTER_BASE COUNT PROG ARGS...: run PROG as root of a new user namespace in which
 * ids 0..COUNT-1 are host ids OUTER_BASE..OUTER_BASE+COUNT-1 (maps written by the host-root
 * parent, so no /etc/subuid entry is needed). Spike helper. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void wr(pid_t p, const char *f, const char *s)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", p, f);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, s, strlen(s)) < 0) { perror(path); exit(1); }
    close(fd);
}
int main(int argc, char **argv)
{
    if (argc < 4) return fprintf(stderr, "usage: usernsexec BASE COUNT PROG ARGS...\n"), 2;
    int a[2], b[2];
    pipe(a); pipe(b);
    pid_t c = fork();
    if (c == 0) {
        char x;
        if (unshare(CLONE_NEWUSER) < 0) { perror("unshare"); _exit(1); }
        write(a[1], "u", 1);
        read(b[0], &x, 1);
        if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0) { perror("setid"); _exit(1); }
        execvp(argv[3], argv + 3);
        perror("exec");
        _exit(127);
    }
    char x, map[64];
    read(a[0], &x, 1);
    snprintf(map, sizeof map, "0 %s %s\n", argv[1], argv[2]);
    wr(c, "uid_map", map);
    wr(c, "gid_map", map);
    write(b[1], "g", 1);
    int st;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
