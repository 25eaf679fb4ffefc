/* vhost-user control messages for one virtio-fs device (see vhost.h). The frontend (UML)
 * is the guest's kernel, and guest root can change that kernel: every message is checked
 * for size, every fd it carries is either taken or closed, and the memory it names is
 * mapped only as the fd and sizes allow. */
#include "fsd/vhost.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/xalloc.h"

enum {
    VU_GET_FEATURES = 1,
    VU_SET_FEATURES = 2,
    VU_SET_OWNER = 3,
    VU_RESET_OWNER = 4,
    VU_SET_MEM_TABLE = 5,
    VU_SET_VRING_NUM = 8,
    VU_SET_VRING_ADDR = 9,
    VU_SET_VRING_BASE = 10,
    VU_GET_VRING_BASE = 11,
    VU_SET_VRING_KICK = 12,
    VU_SET_VRING_CALL = 13,
    VU_SET_VRING_ERR = 14,
    VU_GET_PROTOCOL_FEATURES = 15,
    VU_SET_PROTOCOL_FEATURES = 16,
    VU_GET_QUEUE_NUM = 17,
    VU_SET_VRING_ENABLE = 18,
    VU_SET_BACKEND_REQ_FD = 21,
    VU_GET_CONFIG = 24,
    VU_SET_CONFIG = 25,
};

#define VU_VERSION        0x1u
#define VU_FLAG_REPLY     0x4u
#define VU_F_PROTOCOL     (1ull << 30)
#define VU_PF_BACKEND_REQ (1ull << 5)
#define VU_PF_CONFIG      (1ull << 9)
/* Offered: CONFIG carries the tag. BACKEND_REQ only because UML 6.1's virtio_uml allocates
 * the device's interrupt when it sets up that channel, and without it requests the rings'
 * interrupts on IRQ 0, the timer's (probe fails, -EBUSY). The channel stays unused; its fd
 * is held open, since UML reads its closing as the device going away. */
#define VU_PROTOCOL_FEATURES (VU_PF_CONFIG | VU_PF_BACKEND_REQ)
#define VU_VRING_NOFD        (1ull << 8)
#define VU_VRING_IDX_MASK    0xffull
#define VU_MAX_FDS           8
#define VU_CONFIG_MAX        256

typedef struct vu_hdr {
    uint32_t request, flags, size;
} vu_hdr;

typedef struct vu_region {
    uint64_t gpa, size, uaddr, mmap_offset;
} vu_region;

typedef union vu_payload {
    uint64_t u64;
    struct {
        uint32_t index, num;
    } state;
    struct {
        uint32_t index, flags;
        uint64_t desc, used, avail, log;
    } addr;
    struct {
        uint32_t n, padding;
        vu_region r[GUEST_MEM_REGIONS];
    } mem;
    struct {
        uint32_t offset, size, flags;
        uint8_t data[VU_CONFIG_MAX];
    } config;
} vu_payload;

/* struct virtio_fs_config: the tag and the number of request queues. */
typedef struct fs_config {
    char tag[VU_TAG_MAX];
    uint32_t num_request_queues;
} __attribute__((packed)) fs_config;

void vu_dev_init(vu_dev *d, int sock, const char *tag)
{
    *d = (vu_dev){.sock = sock, .backend_fd = -1};
    snprintf(d->tag, sizeof d->tag, "%s", tag);
    for (unsigned i = 0; i < VU_QUEUES; i++)
        virtq_init(&d->q[i]);
}

static void rings_reset(vu_dev *d)
{
    for (unsigned i = 0; i < VU_QUEUES; i++)
        virtq_reset(&d->q[i]);
}

void vu_dev_clear(vu_dev *d)
{
    rings_reset(d);
    guest_mem_clear(&d->mem);
    if (d->sock >= 0)
        close(d->sock);
    if (d->backend_fd >= 0)
        close(d->backend_fd);
    d->sock = -1;
    d->backend_fd = -1;
}

static void close_fds(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* One message: the header with its fds, then the payload. -1 on EOF or a bad message. */
static int recv_msg(int sock, vu_hdr *h, vu_payload *p, int *fds, unsigned *n_fds)
{
    *n_fds = 0;
    struct iovec iov = {h, sizeof *h};
    char cbuf[CMSG_SPACE(VU_MAX_FDS * sizeof(int))];
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t n;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t j = 0; j < k; j++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof fd);
                if (*n_fds < VU_MAX_FDS)
                    fds[(*n_fds)++] = fd;
                else
                    close(fd);
            }
        }
    if (n != (ssize_t)sizeof *h || (m.msg_flags & MSG_CTRUNC) || h->size > sizeof *p)
        goto bad;
    for (size_t got = 0; got < h->size;) {
        n = recv(sock, (uint8_t *)p + got, h->size - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto bad;
        got += (size_t)n;
    }
    return 0;
bad:
    close_fds(fds, *n_fds);
    *n_fds = 0;
    return -1;
}

static int send_reply(vu_dev *d, const vu_hdr *req, const void *data, uint32_t size)
{
    struct {
        vu_hdr h;
        uint8_t data[sizeof(vu_payload)];
    } msg = {.h = {.request = req->request, .flags = VU_VERSION | VU_FLAG_REPLY, .size = size}};
    memcpy(msg.data, data, size);
    size_t len = sizeof msg.h + size;
    for (size_t off = 0; off < len;) {
        ssize_t n = send(d->sock, (uint8_t *)&msg + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

static int reply_u64(vu_dev *d, const vu_hdr *req, uint64_t v)
{
    return send_reply(d, req, &v, sizeof v);
}

static int set_mem_table(vu_dev *d, const vu_hdr *h, const vu_payload *p, int *fds, unsigned n_fds)
{
    if (h->size < 8 || p->mem.n == 0 || p->mem.n > GUEST_MEM_REGIONS || p->mem.n != n_fds ||
        h->size < 8 + p->mem.n * sizeof(vu_region))
        return -1;
    guest_mem_clear(&d->mem);
    long page = sysconf(_SC_PAGESIZE);
    for (unsigned i = 0; i < p->mem.n; i++) {
        const vu_region *r = &p->mem.r[i];
        if (r->size == 0 || r->size > (1ull << 40) || (r->mmap_offset & (uint64_t)(page - 1)) ||
            r->mmap_offset > (1ull << 40))
            return -1;
        size_t len = (size_t)(r->mmap_offset + r->size);
        /* Memory past the end of its file would fault (SIGBUS) when a ring touches it. */
        struct stat st;
        if (fstat(fds[i], &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < len)
            return -1;
        void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
        close(fds[i]);
        fds[i] = -1;
        if (base == MAP_FAILED)
            return -1;
        guest_region *g = &d->mem.r[d->mem.n++];
        *g = (guest_region){.gpa = r->gpa,
                            .uaddr = r->uaddr,
                            .size = r->size,
                            .host = (uint8_t *)base + r->mmap_offset,
                            .map_base = base,
                            .map_len = len};
    }
    /* Rings set up before a new table point into the old one. */
    for (unsigned i = 0; i < VU_QUEUES; i++)
        if (d->q[i].num && virtq_map(&d->q[i], &d->mem) < 0)
            d->q[i].broken = true;
    return 0;
}

static virtq *ring_of(vu_dev *d, uint64_t index)
{
    return (index & VU_VRING_IDX_MASK) < VU_QUEUES ? &d->q[index & VU_VRING_IDX_MASK] : NULL;
}

/* The kick or call fd of a ring: taken from the message, or none with VU_VRING_NOFD. */
static int set_ring_fd(vu_dev *d, const vu_payload *p, int *fds, unsigned n_fds, bool kick)
{
    virtq *q = ring_of(d, p->u64);
    bool nofd = p->u64 & VU_VRING_NOFD;
    if (!q || (nofd ? n_fds != 0 : n_fds != 1))
        return -1;
    /* An eventfd or a pipe: a file or device (/dev/zero) would read as a kick forever. */
    struct stat st;
    if (!nofd && (fstat(fds[0], &st) < 0 || (st.st_mode & S_IFMT) == S_IFREG ||
                  S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
        return -1;
    int *slot = kick ? &q->kick_fd : &q->call_fd;
    if (*slot >= 0)
        close(*slot);
    *slot = nofd ? -1 : fds[0];
    if (!nofd) {
        fds[0] = -1;
        /* Neither a kick we drain nor a call we raise may ever block the server. */
        int fl = fcntl(*slot, F_GETFL);
        if (fl < 0 || fcntl(*slot, F_SETFL, fl | O_NONBLOCK) < 0)
            return -1;
    }
    return 0;
}

static int get_config(vu_dev *d, const vu_hdr *h, vu_payload *p)
{
    if (h->size < 12 || p->config.size > VU_CONFIG_MAX || p->config.offset > VU_CONFIG_MAX ||
        h->size != 12 + p->config.size)
        return -1;
    fs_config cfg = {.num_request_queues = VU_QUEUES - 1};
    memcpy(cfg.tag, d->tag, sizeof cfg.tag);
    uint8_t space[VU_CONFIG_MAX] = {0};
    memcpy(space, &cfg, sizeof cfg);
    /* The frontend asks for [0, offset+len) with offset 0 and takes its part itself. */
    uint32_t off = p->config.offset, size = p->config.size;
    memset(p->config.data, 0, size);
    if (off < VU_CONFIG_MAX)
        memcpy(p->config.data, space + off,
               size < VU_CONFIG_MAX - off ? size : VU_CONFIG_MAX - off);
    return send_reply(d, h, p, h->size);
}

/* Whether a ring can start: its addresses resolve now that it is fully described. */
static void ring_start(vu_dev *d, virtq *q)
{
    if (q->broken || !q->num || virtq_map(q, &d->mem) < 0)
        return;
    q->used_idx = __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE);
}

int vu_dev_handle(vu_dev *d)
{
    vu_hdr h = {0};
    vu_payload p;
    int fds[VU_MAX_FDS];
    unsigned n_fds;
    memset(&p, 0, sizeof p);
    if (recv_msg(d->sock, &h, &p, fds, &n_fds) < 0)
        return -1;
    int r = 0;
    virtq *q;
    switch (h.request) {
    case VU_GET_FEATURES:
        r = reply_u64(d, &h, (1ull << VIRTIO_F_VERSION_1) | VU_F_PROTOCOL);
        break;
    case VU_SET_FEATURES:
        d->features = p.u64;
        break;
    case VU_GET_PROTOCOL_FEATURES:
        r = reply_u64(d, &h, VU_PROTOCOL_FEATURES);
        break;
    case VU_SET_PROTOCOL_FEATURES:
        d->protocol_features = p.u64 & VU_PROTOCOL_FEATURES;
        break;
    case VU_SET_BACKEND_REQ_FD:
        if (n_fds != 1 || d->backend_fd >= 0) {
            r = -1;
            break;
        }
        d->backend_fd = fds[0];
        fds[0] = -1;
        break;
    case VU_GET_QUEUE_NUM:
        r = reply_u64(d, &h, VU_QUEUES);
        break;
    case VU_SET_OWNER:
        break;
    case VU_RESET_OWNER:
        rings_reset(d);
        break;
    case VU_SET_MEM_TABLE:
        r = set_mem_table(d, &h, &p, fds, n_fds);
        break;
    case VU_SET_VRING_NUM:
        if (!(q = ring_of(d, p.state.index)) || p.state.num == 0 || p.state.num > VIRTQ_MAX ||
            (p.state.num & (p.state.num - 1)))
            r = -1;
        else {
            q->num = p.state.num;
            ring_start(d, q); /* addresses given before are checked again for this size */
        }
        break;
    case VU_SET_VRING_BASE:
        if (!(q = ring_of(d, p.state.index)))
            r = -1;
        else
            q->last_avail = (uint16_t)p.state.num;
        break;
    case VU_GET_VRING_BASE:
        /* Also stops the ring, as the protocol says. */
        if (!(q = ring_of(d, p.state.index))) {
            r = -1;
            break;
        }
        p.state.num = q->last_avail;
        q->enabled = false;
        r = send_reply(d, &h, &p.state, sizeof p.state);
        break;
    case VU_SET_VRING_ADDR:
        if (h.size < sizeof p.addr || !(q = ring_of(d, p.addr.index))) {
            r = -1;
            break;
        }
        q->desc_ua = p.addr.desc;
        q->avail_ua = p.addr.avail;
        q->used_ua = p.addr.used;
        ring_start(d, q);
        break;
    case VU_SET_VRING_KICK:
    case VU_SET_VRING_CALL:
        r = set_ring_fd(d, &p, fds, n_fds, h.request == VU_SET_VRING_KICK);
        /* Without protocol features a ring starts with its kick fd. */
        if (r == 0 && h.request == VU_SET_VRING_KICK && !(d->features & VU_F_PROTOCOL))
            d->q[p.u64 & VU_VRING_IDX_MASK].enabled = true;
        break;
    case VU_SET_VRING_ERR:
        break; /* its fd, if any, is closed below */
    case VU_SET_VRING_ENABLE:
        if (!(q = ring_of(d, p.state.index)))
            r = -1;
        else
            q->enabled = p.state.num != 0;
        break;
    case VU_GET_CONFIG:
        r = get_config(d, &h, &p);
        break;
    case VU_SET_CONFIG:
        break; /* the tag is ours: nothing the guest writes changes it */
    default:
        fprintf(stderr, "bluebox-fsd: %s: unknown vhost-user request %u ignored\n", d->tag,
                h.request);
        break;
    }
    close_fds(fds, n_fds);
    return r;
}
