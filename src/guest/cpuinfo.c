/* The uml guest's /proc/cpuinfo. UML prints one entry per processor (number, vendor, model,
 * flags, bogomips) and none of the topology lines ("core id") an x86 kernel prints. procps
 * 4.0.2, the ps and top of Debian 12 images, reads /proc/cpuinfo when it opens the system's
 * stat and fails when a processor entry ends without a "core id": `ps -ef` then dies with
 * "Unable to get system boot time". The guest init mounts the kernel's text, with a "core id"
 * in every entry, read-only over /proc/cpuinfo. UML's entries never change after boot (one
 * CPU, no hotplug), so a copy made at boot stays true. Guest root may unmount it: it only
 * hides the kernel's file, and shows nothing the kernel's does not. */
#include "cpuinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "abi/abi.h"
#include "util/fs.h"
#include "util/xalloc.h"

#define CPUINFO "/proc/cpuinfo"
/* A directory in every uml guest's root (the exec tmpfs's mount point): a tmpfs is mounted
 * there for a moment to hold the file, and stays reachable only through the bind. */
#define SCRATCH_DIR  ABI_MEM_DIR
#define SCRATCH_FILE SCRATCH_DIR "/cpuinfo"
#define CPUINFO_MAX  (1u << 20)

static bool starts_with(const char *line, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len >= n && memcmp(line, word, n) == 0;
}

/* An entry's processor number from its "processor\t: N" line; -1 when there is none. */
static long processor_number(const char *line, size_t len)
{
    if (!starts_with(line, len, "processor"))
        return -1;
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return -1;
    char *end = NULL;
    long n = strtol(colon + 1, &end, 10);
    return end == colon + 1 || n < 0 ? -1 : n;
}

static void end_entry(strbuf *b, long processor, bool has_core)
{
    if (processor >= 0 && !has_core)
        sb_printf(b, "core id\t\t: %ld\n", processor);
    sb_putc(b, '\n');
}

char *cpuinfo_with_topology(const char *text)
{
    strbuf b = {0};
    long processor = -1;
    bool has_core = false, in_entry = false;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len == 0) { /* the empty line that ends an entry */
            if (in_entry)
                end_entry(&b, processor, has_core);
            processor = -1, has_core = false, in_entry = false;
        } else {
            long n = processor_number(p, len);
            if (n >= 0)
                processor = n;
            has_core = has_core || starts_with(p, len, "core id");
            in_entry = true;
            sb_putn(&b, p, len);
            sb_putc(&b, '\n');
        }
        p += len + (nl ? 1 : 0);
    }
    if (in_entry)
        end_entry(&b, processor, has_core);
    return sb_steal(&b);
}

static int bind_over(const char *text, bb_error **err)
{
    if (mount("tmpfs", SCRATCH_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=1m,mode=0755") < 0)
        return bb_fail_errno(err, errno, "cannot mount a tmpfs for %s", CPUINFO);
    int r = -1;
    _cleanup_close_ int fd =
        open(SCRATCH_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (fd < 0)
        bb_fail_errno(err, errno, "cannot write %s", SCRATCH_FILE);
    else if (write_full(fd, text, strlen(text), SCRATCH_FILE, err) == 0) {
        if (mount(SCRATCH_FILE, CPUINFO, NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, CPUINFO, NULL,
                  MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
            bb_fail_errno(err, errno, "cannot mount over %s", CPUINFO);
        else
            r = 0;
    }
    umount2(SCRATCH_DIR, MNT_DETACH); /* the bind keeps the file */
    return r;
}

int cpuinfo_setup(bb_error **err)
{
    _cleanup_free_ char *text = NULL;
    if (read_file(CPUINFO, CPUINFO_MAX, &text, NULL, err) < 0)
        return -1;
    _cleanup_free_ char *fixed = cpuinfo_with_topology(text);
    if (streq(fixed, text))
        return 0; /* a kernel that prints its topology itself */
    return bind_over(fixed, err);
}
