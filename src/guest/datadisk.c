/* /data from a disk image (Bluefile data_limit), the guest side. The image is an ext4 file
 * system of exactly data_limit bytes on the host; the guest kernel sees it as a block
 * device, so /data ends where the disk does (ENOSPC), and the ownership and modes the guest
 * sets are real ext4 metadata. What holds a hostile guest kernel to that size is on the
 * host (bluebox-vmm caps every file the VMM writes with RLIMIT_FSIZE): the go-ahead waited
 * for here is what orders that cap before any of the workload's code. */
#include "datadisk.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/fs.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi/abi.h"
#include "abi/proto.h"
#include "guest/root.h"
#include "util/xalloc.h"

#define DATA_DIR "/data"
/* ABI_DATA_DISK, where the launch binds the image into the container (launch.c): the
 * guest's root shows it through hostfs, and a guest user must not reach the raw file behind
 * /data's permissions. */

static int wait_for_go(int serial, char **ret_why)
{
    frame_decoder d;
    frame_decoder_init(&d);
    int r;
    for (;;) {
        frame f;
        _cleanup_error_ bb_error *err = NULL;
        r = frame_read(serial, &d, &f, &err);
        if (r <= 0) {
            *ret_why = xasprintf("the host went away before the data disk was capped (%s)",
                                 err ? err->msg : "end of the control line");
            r = -1;
            break;
        }
        /* Only a window size can be queued before the go-ahead; the spec already has one. */
        if (f.type == FRAME_GO) {
            r = 0;
            break;
        }
    }
    frame_decoder_done(&d);
    return r;
}

#define EXT4_IOC_RESIZE_FS_ _IOW('f', 16, uint64_t)

/* A data_limit raised since the file system was made: the host grew the image (datadisk.c in
 * src/runtime); grow the file system into it, online. The same size is a no-op. */
static const char *disk_dev(void)
{
    return guest_root_is_qemu() ? DATADISK_DEV_QEMU : DATADISK_DEV;
}

static int grow_fs(char **ret_why)
{
    _cleanup_close_ int dev = open(disk_dev(), O_RDONLY | O_CLOEXEC);
    uint64_t bytes = 0;
    struct statfs sf;
    if (dev < 0 || ioctl(dev, BLKGETSIZE64, &bytes) < 0 || statfs(DATA_DIR, &sf) < 0 ||
        sf.f_bsize <= 0) {
        *ret_why = xasprintf("cannot read the size of the data disk: %s", strerror(errno));
        return -1;
    }
    uint64_t blocks = bytes / (uint64_t)sf.f_bsize;
    if (blocks <= sf.f_blocks)
        return 0;
    _cleanup_close_ int dir = open(DATA_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 || ioctl(dir, EXT4_IOC_RESIZE_FS_, &blocks) < 0) {
        *ret_why = xasprintf("cannot grow /data to its new data_limit: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Cover the image's path with an empty file: only guest root, which owns /data anyway,
 * could take the cover off. */
static void hide_image(void)
{
    struct stat st;
    if (lstat(ABI_DATA_DISK, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    (void)mount("/dev/null", ABI_DATA_DISK, NULL, MS_BIND, NULL);
}

int datadisk_setup(int serial, char **ret_why)
{
    struct stat st;
    if (stat(disk_dev(), &st) < 0 || !S_ISBLK(st.st_mode))
        return 0;
    if (wait_for_go(serial, ret_why) < 0)
        return -1;
    mkdir(DATA_DIR, 0755);
    /* discard: what the guest deletes is punched out of the host file (UML's ubd, and QEMU
     * with discard=unmap, turn a discard into fallocate(PUNCH_HOLE)), so the file takes about the
     * space /data's files take rather than the most they ever took. Best effort: discards still
     * queued when the guest powers off are lost; `fstrim /data` in the guest returns all free
     * space. */
    if (mount(disk_dev(), DATA_DIR, "ext4", MS_NOSUID | MS_NODEV, "discard") < 0) {
        *ret_why = xasprintf("cannot mount the data disk on %s: %s", DATA_DIR, strerror(errno));
        return -1;
    }
    if (grow_fs(ret_why) < 0)
        return -1;
    hide_image();
    return 0;
}
