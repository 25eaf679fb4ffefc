/* The device side of a virtio split ring (src/fsd/virtq.c) against rings a hostile guest
 * could write: descriptors outside its memory, loops, indirect tables, readable after
 * writable, an avail index far ahead. Each breaks the ring without touching memory outside
 * the guest's; a well-formed chain is served and its reply scattered. */
#include <linux/virtio_ring.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fsd/vhost.h"
#include "fsd/virtq.h"

#define NUM     8
#define MEM     (64 * 1024)
#define GPA     0x100000ull /* where the guest's memory starts, guest-physical */
#define DESC    0x0000
#define AVAIL   0x1000
#define USED    0x2000
#define BUFS    0x4000
#define SCRATCH 4096

typedef struct fixture {
    uint8_t *mem;
    guest_mem gm;
    virtq q;
    uint8_t in[SCRATCH], out[SCRATCH];
    size_t calls, last_len;
    uint8_t last[SCRATCH];
} fixture;

static struct vring_desc *desc(fixture *f)
{
    return (struct vring_desc *)(f->mem + DESC);
}

static struct vring_avail *avail(fixture *f)
{
    return (struct vring_avail *)(f->mem + AVAIL);
}

static struct vring_used *used(fixture *f)
{
    return (struct vring_used *)(f->mem + USED);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->mem = aligned_alloc(4096, MEM);
    memset(f->mem, 0, MEM);
    f->gm.n = 1;
    f->gm.r[0] = (guest_region){.gpa = GPA, .uaddr = GPA, .size = MEM, .host = f->mem};
    virtq_init(&f->q);
    f->q.num = NUM;
    f->q.desc_ua = GPA + DESC;
    f->q.avail_ua = GPA + AVAIL;
    f->q.used_ua = GPA + USED;
    f->q.enabled = true;
    assert_int_equal(virtq_map(&f->q, &f->gm), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->mem);
    free(f);
    return 0;
}

/* Echo the request back, upper-cased, as the reply. */
static size_t echo(void *userdata, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    fixture *f = userdata;
    f->calls++;
    f->last_len = len;
    memcpy(f->last, in, len);
    size_t n = len < cap ? len : cap;
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(in[i] >= 'a' && in[i] <= 'z' ? in[i] - 32 : in[i]);
    return n;
}

static void put(fixture *f, uint16_t i, uint64_t gpa, uint32_t len, uint16_t flags, uint16_t next)
{
    desc(f)[i] = (struct vring_desc){.addr = gpa, .len = len, .flags = flags, .next = next};
}

static void offer(fixture *f, uint16_t head)
{
    struct vring_avail *a = avail(f);
    a->ring[a->idx % NUM] = head;
    a->idx++;
}

static unsigned serve(fixture *f)
{
    return virtq_serve(&f->q, &f->gm, echo, f, f->in, f->out, SCRATCH);
}

static void well_formed_chain(void **state)
{
    fixture *f = *state;
    memcpy(f->mem + BUFS, "hel", 3);
    memcpy(f->mem + BUFS + 16, "lo", 2);
    put(f, 0, GPA + BUFS, 3, VRING_DESC_F_NEXT, 1);
    put(f, 1, GPA + BUFS + 16, 2, VRING_DESC_F_NEXT, 2);
    put(f, 2, GPA + BUFS + 64, 2, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 3);
    put(f, 3, GPA + BUFS + 128, 8, VRING_DESC_F_WRITE, 0);
    offer(f, 0);
    assert_int_equal(serve(f), 1);
    assert_int_equal(f->last_len, 5);
    assert_memory_equal(f->last, "hello", 5);
    assert_memory_equal(f->mem + BUFS + 64, "HE", 2);
    assert_memory_equal(f->mem + BUFS + 128, "LLO", 3);
    assert_int_equal(used(f)->idx, 1);
    assert_int_equal(used(f)->ring[0].id, 0);
    assert_int_equal(used(f)->ring[0].len, 5);
    assert_false(f->q.broken);
}

static void descriptor_outside_memory_breaks(void **state)
{
    fixture *f = *state;
    put(f, 0, GPA + MEM - 2, 4, 0, 0); /* runs past the end */
    offer(f, 0);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
    assert_int_equal(f->calls, 0);
    /* and nothing is served any more */
    put(f, 1, GPA + BUFS, 1, 0, 0);
    offer(f, 1);
    assert_int_equal(serve(f), 0);
}

static void address_wraps_breaks(void **state)
{
    fixture *f = *state;
    put(f, 0, UINT64_MAX - 1, 16, 0, 0);
    offer(f, 0);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void loop_breaks(void **state)
{
    fixture *f = *state;
    put(f, 0, GPA + BUFS, 1, VRING_DESC_F_NEXT, 1);
    put(f, 1, GPA + BUFS, 1, VRING_DESC_F_NEXT, 0);
    offer(f, 0);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void next_out_of_table_breaks(void **state)
{
    fixture *f = *state;
    put(f, 0, GPA + BUFS, 1, VRING_DESC_F_NEXT, NUM);
    offer(f, 0);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void head_out_of_table_breaks(void **state)
{
    fixture *f = *state;
    offer(f, NUM + 3);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void indirect_breaks(void **state)
{
    fixture *f = *state;
    put(f, 0, GPA + BUFS, 16, VRING_DESC_F_INDIRECT, 0);
    offer(f, 0);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void readable_after_writable_breaks(void **state)
{
    fixture *f = *state;
    put(f, 0, GPA + BUFS, 4, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
    put(f, 1, GPA + BUFS + 8, 4, 0, 0);
    offer(f, 0);
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void avail_index_far_ahead_breaks(void **state)
{
    fixture *f = *state;
    avail(f)->idx = NUM + 1;
    assert_int_equal(serve(f), 0);
    assert_true(f->q.broken);
}

static void oversized_request_gets_no_reply_bytes(void **state)
{
    fixture *f = *state;
    put(f, 0, GPA + BUFS, SCRATCH + 1, VRING_DESC_F_NEXT, 1);
    put(f, 1, GPA + BUFS + 2 * SCRATCH, 16, VRING_DESC_F_WRITE, 0);
    offer(f, 0);
    assert_int_equal(serve(f), 1);
    assert_int_equal(f->calls, 0);
    assert_int_equal(used(f)->ring[0].len, 0);
    assert_false(f->q.broken);
}

static void ring_outside_memory_is_refused(void **state)
{
    fixture *f = *state;
    f->q.used_ua = GPA + MEM - 4;
    assert_int_equal(virtq_map(&f->q, &f->gm), -1);
    assert_false(virtq_ready(&f->q));
    f->q.used_ua = GPA + USED;
    f->q.num = 6; /* not a power of two */
    assert_int_equal(virtq_map(&f->q, &f->gm), -1);
}

/* vhost-user's SET_VRING_NUM can come after SET_VRING_ADDR: a ring checked against memory
 * for 8 entries must not then be served as 1024 (reads and writes past what was checked). */
static void size_changed_after_map_is_not_served(void **state)
{
    fixture *f = *state;
    f->q.desc_ua = GPA + MEM - NUM * sizeof(struct vring_desc);
    assert_int_equal(virtq_map(&f->q, &f->gm), 0);
    f->q.num = VIRTQ_MAX;
    avail(f)->ring[0] = VIRTQ_MAX - 1; /* its descriptor lies 16 KiB past the guest's memory */
    avail(f)->idx = 1;
    assert_false(virtq_ready(&f->q));
    assert_int_equal(serve(f), 0);
    assert_int_equal(f->calls, 0);
    /* Mapped again at the new size, it is checked again (and refused: it does not fit). */
    assert_int_equal(virtq_map(&f->q, &f->gm), -1);
    assert_false(virtq_ready(&f->q));
}

/* One vhost-user message (`msg`, `len` bytes) carrying `fd` (closed here) to a fresh
 * device; what vu_dev_handle() makes of it. */
static int vu_send(const void *msg, size_t len, int fd)
{
    int sv[2];
    assert_true(fd >= 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    char cbuf[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {(void *)msg, len};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    assert_int_equal(sendmsg(sv[0], &m, 0), (ssize_t)len);
    close(fd);
    vu_dev d;
    vu_dev_init(&d, sv[1], "t");
    int rc = vu_dev_handle(&d);
    vu_dev_clear(&d);
    close(sv[0]);
    return rc;
}

/* SET_MEM_TABLE with one region of `size` bytes backed by a memfd of `fd_size` bytes. */
static int mem_table(uint64_t size, off_t fd_size)
{
    int mfd = memfd_create("guest", MFD_CLOEXEC);
    assert_true(mfd >= 0);
    assert_int_equal(ftruncate(mfd, fd_size), 0);
    struct {
        uint32_t request, flags, len;
        uint32_t n, pad;
        uint64_t gpa, size, uaddr, mmap_offset;
    } __attribute__((packed)) msg = {5, 1, 40, 1, 0, 0, size, 0x7f0000000000ull, 0};
    return vu_send(&msg, sizeof msg, mfd);
}

/* Guest memory larger than the file behind it would fault (SIGBUS) on the first ring or
 * buffer the guest places past the file's end: the table is refused. */
static void memory_past_its_file_is_refused(void **state)
{
    (void)state;
    assert_int_equal(mem_table(1 << 20, 4096), -1);
    assert_int_equal(mem_table(1 << 20, 1 << 20), 0);
}

/* SET_VRING_KICK for ring 1 with `fd`. */
static int set_kick(int fd)
{
    struct {
        uint32_t request, flags, len;
        uint64_t index;
    } __attribute__((packed)) msg = {12, 1, 8, 1};
    return vu_send(&msg, sizeof msg, fd);
}

/* A kick fd that always reads (a file, /dev/zero) would keep the server draining it
 * forever: refused; an eventfd (UML's) and a pipe are taken. */
static void kick_that_never_drains_is_refused(void **state)
{
    (void)state;
    assert_int_equal(set_kick(open("/dev/zero", O_RDONLY | O_CLOEXEC)), -1);
    assert_int_equal(set_kick(memfd_create("k", MFD_CLOEXEC)), -1);
    assert_int_equal(set_kick(eventfd(0, EFD_CLOEXEC)), 0);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    close(p[1]);
    assert_int_equal(set_kick(p[0]), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(well_formed_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(descriptor_outside_memory_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(address_wraps_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(loop_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(next_out_of_table_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(head_out_of_table_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(indirect_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(readable_after_writable_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(avail_index_far_ahead_breaks, setup, teardown),
        cmocka_unit_test_setup_teardown(oversized_request_gets_no_reply_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(ring_outside_memory_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(size_changed_after_map_is_not_served, setup, teardown),
        cmocka_unit_test(memory_past_its_file_is_refused),
        cmocka_unit_test(kick_that_never_drains_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
