/* A VM's lifeline; see lifeline.h. */
#include "lifeline.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "abi/abi.h"

/* Above the numbers spawns place fds at (3, 4: the secrets' memfd and the lifeline), so
 * that placing one never overwrites the other's source. */
#define LIFELINE_MIN_FD 10

static int lift(int fd)
{
    int high = fcntl(fd, F_DUPFD_CLOEXEC, LIFELINE_MIN_FD);
    int e = errno;
    close(fd);
    errno = e;
    return high;
}

int lifeline_open(lifeline *ret, bb_error **err)
{
    int p[2];
    *ret = LIFELINE_NONE;
    if (pipe2(p, O_CLOEXEC) < 0)
        return bb_fail_errno(err, errno, "cannot make the VM's lifeline");
    ret->vm = lift(p[0]);
    ret->hold = lift(p[1]);
    if (ret->vm < 0 || ret->hold < 0) {
        int e = errno;
        lifeline_close(ret);
        return bb_fail_errno(err, e, "cannot make the VM's lifeline");
    }
    return 0;
}

void lifeline_passed(lifeline *l)
{
    if (l->vm >= 0)
        close(l->vm);
    l->vm = -1;
}

void lifeline_release(lifeline *l)
{
    static const char b = ABI_LIFELINE_RELEASE;
    lifeline_passed(l);
    if (l->hold >= 0) {
        ssize_t w;
        do
            w = write(l->hold, &b, 1);
        while (w < 0 && errno == EINTR);
        close(l->hold);
    }
    l->hold = -1;
}

void lifeline_close(lifeline *l)
{
    lifeline_passed(l);
    if (l->hold >= 0)
        close(l->hold);
    l->hold = -1;
}
