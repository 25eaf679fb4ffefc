/* The kernel probe. */
#include "probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "util/fs.h"

int kernel_id_self(kernel_id *ret, bb_error **err)
{
    struct utsname u;
    if (uname(&u) < 0)
        return bb_fail_errno(err, errno, "uname");
    _cleanup_free_ char *boot = NULL;
    if (read_file("/proc/sys/kernel/random/boot_id", 4096, &boot, NULL, err) < 0)
        return -1;
    boot[strcspn(boot, "\n")] = '\0';
    snprintf(ret->release, sizeof ret->release, "%s", u.release);
    snprintf(ret->boot_id, sizeof ret->boot_id, "%s", boot);
    return 0;
}

static bool printable_word(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return false;
    return true;
}

int kernel_id_parse(const char *out, kernel_id *ret, bb_error **err)
{
    const char *nl = strchr(out, '\n');
    if (!nl)
        return bb_fail(err, EBADMSG, "the probe printed no kernel release");
    const char *b = nl + 1, *nl2 = strchr(b, '\n');
    size_t rn = (size_t)(nl - out), bn = nl2 ? (size_t)(nl2 - b) : 0;
    if (!nl2 || nl2[1] != '\0' || !printable_word(out, rn) || rn >= sizeof ret->release ||
        !printable_word(b, bn) || bn >= sizeof ret->boot_id)
        return bb_fail(err, EBADMSG, "the probe's output is not a kernel release and boot_id");
    memcpy(ret->release, out, rn);
    ret->release[rn] = '\0';
    memcpy(ret->boot_id, b, bn);
    ret->boot_id[bn] = '\0';
    return 0;
}
