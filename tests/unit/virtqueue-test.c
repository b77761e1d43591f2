/*
 * Specification of the device side of a split virtqueue
 * (hw/virtio/virtqueue.c).  Each test plays the driver by hand: it writes
 * descriptors and ring entries into a buffer registered as guest memory and
 * checks what the device pops, what it publishes on the used ring, when it
 * interrupts the driver, when it asks for kicks, and what it records for a
 * restarted back-end.  Every validation rule has a malformed ring of its
 * own; a malformed ring must fail the queue once, loudly, and then stay
 * silent.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "guest-mem.h"
#include "shared-writer.h"
#include "vhost-user-proto.h"
#include "virtqueue.h"
#include "vq-pop-check.h"

/*
 * Guest physical layout: main RAM [RAM_GPA, +1 MiB) directly followed by a
 * second region [HI_GPA, +64 KiB) (a buffer may straddle both), then a hole.
 */
#define RAM_GPA      0x100000ull
#define RAM_SIZE     0x100000ull
#define HI_GPA       (RAM_GPA + RAM_SIZE)
#define HI_SIZE      0x10000ull
#define HOLE_GPA     (HI_GPA + HI_SIZE)

#define QSZ          8
#define DESC_OFF     0x0000
#define AVAIL_OFF    0x1000
#define USED_OFF     0x2000
#define INDIRECT_OFF 0x8000
#define DATA_OFF     0x10000

#define F_EVENT_IDX  (1ull << VIRTIO_RING_F_EVENT_IDX)
#define F_INDIRECT   (1ull << VIRTIO_RING_F_INDIRECT_DESC)
#define F_ON_EMPTY   (1ull << VIRTIO_F_NOTIFY_ON_EMPTY)

#define VQ_NAME "test-vq"

struct tguest {
    struct guest_mem mem;
    uint8_t *ram, *hi;
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    uint16_t avail_idx;           /* the driver's next avail index */
    struct virtqueue vq;
    struct vq_elem elem;
    struct iovec iov[VQ_MAX_SG];
};

static uint64_t ram_gpa(uint64_t off)
{
    return RAM_GPA + off;
}

/* Data buffer k: 4 KiB apart so every buffer has its own address. */
static uint64_t data_gpa(unsigned k)
{
    return RAM_GPA + DATA_OFF + k * 0x1000ull;
}

static void *host_of(struct tguest *t, uint64_t gpa)
{
    if (gpa >= HI_GPA) {
        return t->hi + (gpa - HI_GPA);
    }
    return t->ram + (gpa - RAM_GPA);
}

/* (Re)starts the device side on the rings, like a new back-end instance. */
static void tguest_setup(struct tguest *t, uint64_t features, uint16_t base)
{
    if (t->vq.call_fd >= 0) {
        close(t->vq.call_fd);
    }
    vq_cleanup(&t->vq);
    vq_init(&t->vq, 0, VQ_NAME);
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, QSZ, t->desc, t->avail, t->used, features,
                             base), ==, 0);
    t->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g_assert_cmpint(t->vq.call_fd, >=, 0);
}

static struct tguest *tguest_new(uint64_t features)
{
    struct tguest *t = g_new0(struct tguest, 1);
    struct guest_mem_region lo = {
        .gpa = RAM_GPA, .size = RAM_SIZE, .uva = 0x7f0000000000, .fd = -1,
    };
    struct guest_mem_region hi = {
        .gpa = HI_GPA, .size = HI_SIZE, .uva = 0x7f1000000000, .fd = -1,
    };

    t->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    t->hi = mmap(NULL, HI_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_assert_true(t->ram != MAP_FAILED && t->hi != MAP_FAILED);
    lo.host = t->ram;
    hi.host = t->hi;
    guest_mem_init(&t->mem);
    g_assert_cmpint(guest_mem_add(&t->mem, &lo), ==, 0);
    g_assert_cmpint(guest_mem_add(&t->mem, &hi), ==, 0);

    t->desc = (void *)(t->ram + DESC_OFF);
    t->avail = (void *)(t->ram + AVAIL_OFF);
    t->used = (void *)(t->ram + USED_OFF);
    t->vq.call_fd = -1;
    tguest_setup(t, features, 0);
    return t;
}

static void tguest_free(struct tguest *t)
{
    close(t->vq.call_fd);
    vq_cleanup(&t->vq);
    guest_mem_clear(&t->mem);
    munmap(t->ram, RAM_SIZE);
    munmap(t->hi, HI_SIZE);
    g_free(t);
}

static void set_desc(struct vring_desc *table, unsigned i, uint64_t addr, uint32_t len,
                     uint16_t flags, uint16_t next)
{
    table[i].addr = addr;
    table[i].len = len;
    table[i].flags = flags;
    table[i].next = next;
}

/* The driver publishes head; avail->idx is written last, with release order. */
static void make_avail(struct tguest *t, uint16_t head)
{
    t->avail->ring[t->avail_idx % QSZ] = head;
    t->avail_idx++;
    __atomic_store_n(&t->avail->idx, t->avail_idx, __ATOMIC_RELEASE);
}

/* A one-descriptor writable request at head. */
static void make_simple(struct tguest *t, uint16_t head)
{
    set_desc(t->desc, head, data_gpa(head), 512, VRING_DESC_F_WRITE, 0);
    make_avail(t, head);
}

static int pop(struct tguest *t)
{
    return vq_pop(&t->vq, &t->elem, t->iov, VQ_MAX_SG);
}

/* Returns a chain known only by its head (these cases check the used ring, not buffers). */
static void fill_head(struct virtqueue *vq, uint16_t head, uint32_t len)
{
    struct vq_elem e = { .head = head };

    vq_fill(vq, &e, len);
}

static void push_head(struct virtqueue *vq, uint16_t head, uint32_t len)
{
    fill_head(vq, head, len);
    vq_flush(vq);
}

static uint16_t *used_event(struct tguest *t)
{
    return &t->avail->ring[QSZ];
}

static uint16_t avail_event(struct tguest *t)
{
    return *(uint16_t *)((uint8_t *)t->used + offsetof(struct vring_used, ring) +
                         QSZ * sizeof(struct vring_used_elem));
}

/* How many interrupts the device raised since the last call. */
static uint64_t calls(struct tguest *t)
{
    uint64_t n = 0;

    if (read(t->vq.call_fd, &n, sizeof(n)) != sizeof(n)) {
        g_assert_cmpint(errno, ==, EAGAIN);
        return 0;
    }
    return n;
}

/*
 * The next pop must fail with err and log one warning naming the queue;
 * afterwards the queue is broken and pops fail with -EIO without logging
 * (an unexpected warning would abort the test).
 */
static void assert_pop_breaks(struct tguest *t, int err, const char *why)
{
    char *pattern = g_strdup_printf(VQ_NAME ": malformed virtqueue*%s*", why);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, pattern);
    g_assert_cmpint(pop(t), ==, err);
    g_test_assert_expected_messages();
    g_free(pattern);
    g_assert_true(t->vq.broken);
    g_assert_cmpint(pop(t), ==, -EIO);
    g_assert_cmpint(pop(t), ==, -EIO);
}

/* --- setup --- */

static void test_setup_validation(void)
{
    struct tguest *t = tguest_new(0);
    struct virtqueue vq;
    uint8_t outside[64];

    vq_init(&vq, 1, "setup-vq");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq: ring size 0*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, 0, t->desc, t->avail, t->used, 0, 0), ==, -EINVAL);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq: ring size 6*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, 6, t->desc, t->avail, t->used, 0, 0), ==, -EINVAL);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq: ring size 65536*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, 65536, t->desc, t->avail, t->used, 0, 0), ==,
                    -EINVAL);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq: misaligned*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, QSZ, t->ram + 8, t->avail, t->used, 0, 0), ==,
                    -EINVAL);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq: misaligned*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, QSZ, t->desc, t->ram + AVAIL_OFF + 1, t->used, 0,
                             0), ==, -EINVAL);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq: misaligned*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, QSZ, t->desc, t->avail, t->ram + USED_OFF + 2, 0,
                             0), ==, -EINVAL);
    /* A ring that is not guest memory, or runs off the end of it. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq:*not inside guest*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, QSZ, t->desc, t->avail,
                             (void *)((uintptr_t)(outside + 3) & ~(uintptr_t)3), 0, 0), ==,
                    -EFAULT);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "setup-vq:*not inside guest*");
    g_assert_cmpint(vq_setup(&vq, &t->mem, QSZ, t->ram + RAM_SIZE - 64, t->avail, t->used, 0,
                             0), ==, -EFAULT);
    g_test_assert_expected_messages();

    /* The largest ring size is accepted. */
    g_assert_cmpint(vq_setup(&vq, &t->mem, 32768, t->ram, t->ram + 0x80000,
                             t->ram + 0x92000, 0, 0), ==, 0);
    vq_cleanup(&vq);
    tguest_free(t);
}

static void test_setup_turns_kicks_on(void)
{
    struct tguest *t = tguest_new(0);

    /* A previous back-end left kicks off and the used index at 5. */
    t->used->flags = VRING_USED_F_NO_NOTIFY;
    t->used->idx = 5;
    tguest_setup(t, F_EVENT_IDX, 7);
    g_assert_cmpuint(t->used->flags & VRING_USED_F_NO_NOTIFY, ==, 0);
    g_assert_cmpuint(avail_event(t), ==, 7);
    g_assert_cmpuint(t->vq.used_idx, ==, 5);
    g_assert_cmpuint(t->vq.last_avail_idx, ==, 7);
    tguest_free(t);
}

/* --- popping well-formed chains --- */

static void test_pop_empty(void)
{
    struct tguest *t = tguest_new(0);

    g_assert_false(vq_has_avail(&t->vq));
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_false(t->vq.broken);
    tguest_free(t);
}

static void test_pop_direct_chain(void)
{
    struct tguest *t = tguest_new(0);

    /* Two readable then two writable descriptors, linked out of order: 3-5-1-7. */
    set_desc(t->desc, 3, data_gpa(0), 10, VRING_DESC_F_NEXT, 5);
    set_desc(t->desc, 5, data_gpa(1) + 3, 6, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, data_gpa(2), 100, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 7);
    set_desc(t->desc, 7, data_gpa(3), 28, VRING_DESC_F_WRITE, 0);
    make_avail(t, 3);

    g_assert_true(vq_has_avail(&t->vq));
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    g_assert_cmpuint(t->elem.out_num, ==, 2);
    g_assert_cmpuint(t->elem.in_num, ==, 2);
    g_assert_cmpuint(t->elem.out_len, ==, 16);
    g_assert_cmpuint(t->elem.in_len, ==, 128);
    g_assert_true(t->elem.out_sg == t->iov);
    g_assert_true(t->elem.in_sg == t->iov + 2);
    g_assert_true(t->elem.out_sg[0].iov_base == host_of(t, data_gpa(0)));
    g_assert_cmpuint(t->elem.out_sg[0].iov_len, ==, 10);
    g_assert_true(t->elem.out_sg[1].iov_base == host_of(t, data_gpa(1) + 3));
    g_assert_cmpuint(t->elem.out_sg[1].iov_len, ==, 6);
    g_assert_true(t->elem.in_sg[0].iov_base == host_of(t, data_gpa(2)));
    g_assert_cmpuint(t->elem.in_sg[0].iov_len, ==, 100);
    g_assert_true(t->elem.in_sg[1].iov_base == host_of(t, data_gpa(3)));
    g_assert_cmpuint(t->elem.in_sg[1].iov_len, ==, 28);
    g_assert_cmpuint(t->vq.inflight, ==, 1);

    g_assert_false(vq_has_avail(&t->vq));
    g_assert_cmpint(pop(t), ==, 0);
    tguest_free(t);
}

static void test_pop_in_avail_order(void)
{
    struct tguest *t = tguest_new(0);

    make_simple(t, 6);
    make_simple(t, 2);
    make_simple(t, 4);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 6);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 2);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 4);
    g_assert_cmpuint(t->elem.out_num, ==, 0);
    g_assert_cmpuint(t->elem.in_num, ==, 1);
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, 3);
    tguest_free(t);
}

/*
 * The device reads a batch of heads at once; entries the driver adds while
 * that batch is being served follow it in order, and an entry taken back
 * with vq_unpop is read from the ring again.
 */
static void test_pop_batch_then_later_entries(void)
{
    struct tguest *t = tguest_new(0);

    make_simple(t, 3);
    make_simple(t, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    make_simple(t, 7);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 1);
    vq_unpop(&t->vq);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 7);
    g_assert_cmpint(pop(t), ==, 0);
    tguest_free(t);
}

/* A bad head inside a batch read at once breaks the queue when its turn comes. */
static void test_bad_head_inside_batch(void)
{
    struct tguest *t = tguest_new(0);

    make_simple(t, 2);
    make_avail(t, QSZ + 3);
    make_simple(t, 4);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 2);
    assert_pop_breaks(t, -EINVAL, "holds head 11, ring size 8");
    tguest_free(t);
}

/* The 16-bit free-running indexes wrap from 65535 to 0. */
static void test_pop_across_index_wrap(void)
{
    struct tguest *t = tguest_new(0);

    t->used->idx = 65534;
    t->avail->idx = 65534;
    t->avail_idx = 65534;
    tguest_setup(t, 0, 65534);
    for (unsigned i = 0; i < 4; i++) {
        make_simple(t, i);
    }
    g_assert_cmpuint(t->avail->idx, ==, 2);
    for (unsigned i = 0; i < 4; i++) {
        g_assert_cmpint(pop(t), ==, 1);
        g_assert_cmpuint(t->elem.head, ==, i);
        push_head(&t->vq, i, 1);
    }
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(t->used->idx, ==, 2);
    /* Entries 65534, 65535, 0, 1 land in ring slots 6, 7, 0, 1. */
    g_assert_cmpuint(t->used->ring[6].id, ==, 0);
    g_assert_cmpuint(t->used->ring[7].id, ==, 1);
    g_assert_cmpuint(t->used->ring[0].id, ==, 2);
    g_assert_cmpuint(t->used->ring[1].id, ==, 3);
    tguest_free(t);
}

static void test_pop_zero_length_descriptor(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, data_gpa(0), 8, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, HOLE_GPA, 0, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
    set_desc(t->desc, 2, data_gpa(2), 8, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.out_num, ==, 1);
    g_assert_cmpuint(t->elem.in_num, ==, 1);
    g_assert_true(t->elem.in_sg[0].iov_base == host_of(t, data_gpa(2)));
    tguest_free(t);
}

static void test_pop_indirect_chain(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);

    set_desc(table, 0, data_gpa(0), 51, VRING_DESC_F_NEXT, 2);
    set_desc(table, 2, data_gpa(1), 96, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
    set_desc(table, 1, data_gpa(2), 4096, VRING_DESC_F_WRITE, 0);
    set_desc(t->desc, 4, ram_gpa(INDIRECT_OFF), 3 * sizeof(struct vring_desc),
             VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 4);

    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 4);
    g_assert_cmpuint(t->elem.out_num, ==, 1);
    g_assert_cmpuint(t->elem.in_num, ==, 2);
    g_assert_cmpuint(t->elem.out_len, ==, 51);
    g_assert_cmpuint(t->elem.in_len, ==, 96 + 4096);
    g_assert_true(t->elem.out_sg[0].iov_base == host_of(t, data_gpa(0)));
    g_assert_true(t->elem.in_sg[0].iov_base == host_of(t, data_gpa(1)));
    g_assert_true(t->elem.in_sg[1].iov_base == host_of(t, data_gpa(2)));
    g_assert_cmpuint(t->elem.in_sg[1].iov_len, ==, 4096);
    tguest_free(t);
}

/* Descriptors in the main table may precede the indirect one that ends the chain. */
static void test_pop_direct_then_indirect(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);

    set_desc(table, 0, data_gpa(1), 32, VRING_DESC_F_WRITE, 0);
    set_desc(t->desc, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, ram_gpa(INDIRECT_OFF), sizeof(struct vring_desc),
             VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.out_num, ==, 1);
    g_assert_cmpuint(t->elem.in_num, ==, 1);
    g_assert_true(t->elem.in_sg[0].iov_base == host_of(t, data_gpa(1)));
    tguest_free(t);
}

/* Guest RAM is often two regions; one descriptor may cover both. */
static void test_pop_buffer_straddling_regions(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, HI_GPA - 100, 300, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.in_num, ==, 2);
    g_assert_cmpuint(t->elem.in_len, ==, 300);
    g_assert_true(t->elem.in_sg[0].iov_base == t->ram + RAM_SIZE - 100);
    g_assert_cmpuint(t->elem.in_sg[0].iov_len, ==, 100);
    g_assert_true(t->elem.in_sg[1].iov_base == t->hi);
    g_assert_cmpuint(t->elem.in_sg[1].iov_len, ==, 200);
    tguest_free(t);
}

/* --- malformed rings: one rule each --- */

static void test_bad_head_index(void)
{
    struct tguest *t = tguest_new(0);
    uint64_t errors = 0;

    t->vq.err_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    make_avail(t, QSZ);
    assert_pop_breaks(t, -EINVAL, "holds head 8, ring size 8");
    /* The front-end hears about it once, on the error eventfd. */
    g_assert_cmpint(read(t->vq.err_fd, &errors, sizeof(errors)), ==, sizeof(errors));
    g_assert_cmpuint(errors, ==, 1);
    close(t->vq.err_fd);
    /* A broken queue offers nothing and ignores completions. */
    g_assert_false(vq_has_avail(&t->vq));
    push_head(&t->vq, 0, 1);
    g_assert_cmpuint(t->used->idx, ==, 0);
    g_assert_false(vq_notify(&t->vq));
    tguest_free(t);
}

static void test_bad_next_index(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, QSZ + 100);
    make_avail(t, 0);
    assert_pop_breaks(t, -EINVAL, "descriptor index 108 out of range");
    tguest_free(t);
}

static void test_loop(void)
{
    struct tguest *t = tguest_new(0);

    /* 0 -> 1 -> 2 -> 1: zero-length buffers so only the count limit stops it. */
    set_desc(t->desc, 0, data_gpa(0), 0, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, data_gpa(1), 0, VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 2, data_gpa(2), 0, VRING_DESC_F_NEXT, 1);
    make_avail(t, 0);
    assert_pop_breaks(t, -ELOOP, "loops");
    tguest_free(t);
}

/*
 * The request that broke the queue is still answered: its writable
 * buffers that map get the device's error response, it appears on the
 * used ring with the bytes written, and the driver is interrupted.
 */
static void test_bad_chain_is_answered(void)
{
    struct tguest *t = tguest_new(0);
    static const char resp[12] = "FAILURE-RSP";
    uint8_t *buf = host_of(t, data_gpa(1));

    /* readable header in the hole, then a writable 8-byte + 64-byte response. */
    set_desc(t->desc, 0, HOLE_GPA + 0x1000, 51, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, data_gpa(1), 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 2, data_gpa(2), 64, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    calls(t);
    assert_pop_breaks(t, -EFAULT, "outside guest memory");
    g_assert_cmpint(vq_answer_bad_chain(&t->vq, resp, sizeof(resp)), ==, sizeof(resp));
    g_assert_cmpmem(buf, 8, resp, 8);
    g_assert_cmpmem(host_of(t, data_gpa(2)), 4, resp + 8, 4);
    g_assert_cmpuint(t->used->idx, ==, 1);
    g_assert_cmpuint(t->used->ring[0].id, ==, 0);
    g_assert_cmpuint(t->used->ring[0].len, ==, sizeof(resp));
    g_assert_cmpuint(calls(t), ==, 1);
    /* Only once; a ring broken by its index (no valid head) has nothing to answer. */
    g_assert_cmpint(vq_answer_bad_chain(&t->vq, resp, sizeof(resp)), ==, -ENOENT);
    tguest_free(t);
}

static void test_buffer_outside_memory(void)
{
    struct tguest *t = tguest_new(0);

    /* Starts in the second region and runs into the hole after it. */
    set_desc(t->desc, 0, HOLE_GPA - 16, 32, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EFAULT, "outside guest memory");
    tguest_free(t);
}

static void test_buffer_address_wraps(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, UINT64_MAX - 8, 32, 0, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EFAULT, "outside guest memory");
    tguest_free(t);
}

static void test_indirect_not_negotiated(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, ram_gpa(INDIRECT_OFF), 16, VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EINVAL, "INDIRECT_DESC was not negotiated");
    tguest_free(t);
}

static void test_indirect_bad_length(void)
{
    static const uint32_t lens[] = { 0, 17, 8 };

    for (unsigned k = 0; k < G_N_ELEMENTS(lens); k++) {
        struct tguest *t = tguest_new(F_INDIRECT);

        set_desc(t->desc, 0, ram_gpa(INDIRECT_OFF), lens[k], VRING_DESC_F_INDIRECT, 0);
        make_avail(t, 0);
        assert_pop_breaks(t, -EINVAL, "empty, not a multiple of 16");
        tguest_free(t);
    }
}

static void test_indirect_table_outside_memory(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);

    /* A table must be in one region: this one straddles the hole. */
    set_desc(t->desc, 0, HOLE_GPA - 16, 32, VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EFAULT, "indirect table*not in guest memory");
    tguest_free(t);
}

static void test_nested_indirect(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);

    set_desc(table, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, 1);
    set_desc(table, 1, ram_gpa(INDIRECT_OFF), 32, VRING_DESC_F_INDIRECT, 0);
    set_desc(t->desc, 0, ram_gpa(INDIRECT_OFF), 32, VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EINVAL, "nested indirect");
    tguest_free(t);
}

static void test_indirect_loop(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);

    set_desc(table, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, 1);
    set_desc(table, 1, data_gpa(1), 16, VRING_DESC_F_NEXT, 0);
    set_desc(t->desc, 0, ram_gpa(INDIRECT_OFF), 2 * sizeof(struct vring_desc),
             VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -ELOOP, "longer than its indirect table (2)");
    tguest_free(t);
}

static void test_indirect_next_out_of_table(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);

    /* Index 2 would be valid in the main ring but not in a 2-entry table. */
    set_desc(table, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 0, ram_gpa(INDIRECT_OFF), 2 * sizeof(struct vring_desc),
             VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EINVAL, "indirect descriptor index 2 out of range (2 entries)");
    tguest_free(t);
}

static void test_readable_after_writable(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, data_gpa(0), 16, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
    set_desc(t->desc, 1, data_gpa(1), 16, 0, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EINVAL, "readable descriptor after a writable");
    tguest_free(t);
}

/* The rule spans the main chain and the indirect table it ends with. */
static void test_readable_after_writable_across_indirect(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);

    set_desc(table, 0, data_gpa(1), 16, 0, 0);
    set_desc(t->desc, 0, data_gpa(0), 16, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
    set_desc(t->desc, 1, ram_gpa(INDIRECT_OFF), 16, VRING_DESC_F_INDIRECT, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EINVAL, "readable descriptor after a writable");
    tguest_free(t);
}

static void test_too_many_buffers(void)
{
    struct tguest *t = tguest_new(0);

    /* Three descriptors, the last straddling two regions: four iovecs. */
    set_desc(t->desc, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, data_gpa(1), 16, VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 2, HI_GPA - 8, 16, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    make_avail(t, 0);
    g_assert_cmpint(vq_pop(&t->vq, &t->elem, t->iov, 4), ==, 1);
    g_assert_cmpuint(t->elem.in_num, ==, 2);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          VQ_NAME ": malformed*needs more than 3 buffers");
    g_assert_cmpint(vq_pop(&t->vq, &t->elem, t->iov, 3), ==, -ENOBUFS);
    g_test_assert_expected_messages();
    g_assert_true(t->vq.broken);
    tguest_free(t);
}

static void test_too_many_descriptors(void)
{
    struct tguest *t = tguest_new(0);

    set_desc(t->desc, 0, data_gpa(0), 16, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, data_gpa(1), 16, VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 2, data_gpa(2), 16, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          VQ_NAME ": malformed*needs more than 2 buffers");
    g_assert_cmpint(vq_pop(&t->vq, &t->elem, t->iov, 2), ==, -ENOBUFS);
    g_test_assert_expected_messages();
    tguest_free(t);
}

static void test_avail_index_jump(void)
{
    struct tguest *t = tguest_new(0);

    /* The driver claims QSZ + 1 new entries: it cannot have made them. */
    t->avail->idx = QSZ + 1;
    g_assert_true(vq_has_avail(&t->vq));
    assert_pop_breaks(t, -EINVAL, "avail index moved from 0 to 9, more than the ring size 8");
    tguest_free(t);
}

static void test_avail_index_backwards(void)
{
    struct tguest *t = tguest_new(0);

    make_simple(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    t->avail->idx = 0;
    assert_pop_breaks(t, -EINVAL, "avail index moved from 1 to 0");
    tguest_free(t);
}

/* The longest possible direct chain uses every descriptor once. */
static void test_pop_chain_of_ring_size(void)
{
    struct tguest *t = tguest_new(0);

    for (unsigned i = 0; i < QSZ; i++) {
        set_desc(t->desc, i, data_gpa(i), 8, i + 1 < QSZ ? VRING_DESC_F_NEXT : 0, i + 1);
    }
    make_avail(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.out_num, ==, QSZ);
    g_assert_cmpuint(t->elem.out_len, ==, 8 * QSZ);
    tguest_free(t);
}

/* A full ring (exactly num new entries) is fine. */
static void test_avail_full_ring(void)
{
    struct tguest *t = tguest_new(0);

    for (unsigned i = 0; i < QSZ; i++) {
        make_simple(t, i);
    }
    for (unsigned i = 0; i < QSZ; i++) {
        g_assert_cmpint(pop(t), ==, 1);
    }
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, QSZ);
    tguest_free(t);
}

static void drop_log(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                     gpointer counter)
{
    (*(unsigned *)counter)++;
}

/* A guest-controlled value: mostly plausible, sometimes hostile. */
static uint64_t random_addr(void)
{
    switch (g_test_rand_int_range(0, 4)) {
    case 0:
        return ram_gpa(g_test_rand_int_range(0, RAM_SIZE));
    case 1:
        return HI_GPA - 0x800 + g_test_rand_int_range(0, 0x1000);
    case 2:
        return HOLE_GPA - 0x100 + g_test_rand_int_range(0, 0x200);
    default:
        return ((uint64_t)g_test_rand_int() << 32) | (uint32_t)g_test_rand_int();
    }
}

/*
 * Pops until the ring is empty or the queue breaks (with one of its
 * documented errors); every chain handed out lies in guest memory and
 * within the caller's max_iov iovecs.  Returns the chains popped.
 */
static unsigned pop_all_checked(struct tguest *t, unsigned max_iov)
{
    unsigned popped = 0;

    for (unsigned k = 0; k < QSZ + 2; k++) {
        if (!vq_pop_result_sane(&t->vq, vq_pop(&t->vq, &t->elem, t->iov, max_iov))) {
            break;
        }
        popped++;
        g_assert_cmpuint(t->elem.head, <, QSZ);
        vq_assert_chain_in_guest(&t->mem, &t->elem, max_iov);
    }
    return popped;
}

/*
 * Random descriptor tables, indirect tables and avail rings: the device may
 * pop, report empty or break the queue, but every iovec it hands out lies in
 * guest memory, within the caller's array, and it logs at most once.
 */
static void test_random_rings_never_escape(void)
{
    unsigned warnings = 0, popped = 0;
    guint handler = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, drop_log, &warnings);

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    for (unsigned round = 0; round < 2000; round++) {
        struct tguest *t = tguest_new(F_INDIRECT | F_EVENT_IDX);
        struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);
        unsigned max_iov = g_test_rand_int_range(1, 12);
        unsigned before = warnings;

        for (unsigned i = 0; i < QSZ; i++) {
            uint16_t flags = g_test_rand_int_range(0, 8);
            bool to_table = g_test_rand_int_range(0, 4) == 0;

            set_desc(t->desc, i, to_table ? ram_gpa(INDIRECT_OFF) : random_addr(),
                     to_table ? 16 * g_test_rand_int_range(0, 6) : g_test_rand_int_range(0, 0x3000),
                     flags, g_test_rand_int_range(0, QSZ + 2));
        }
        for (unsigned i = 0; i < 8; i++) {
            set_desc(table, i, random_addr(), g_test_rand_int_range(0, 0x3000),
                     g_test_rand_int_range(0, 8), g_test_rand_int_range(0, 10));
        }
        for (unsigned i = 0; i < QSZ; i++) {
            t->avail->ring[i] = g_test_rand_int_range(0, QSZ + 1);
        }
        t->avail->idx = g_test_rand_int_range(0, QSZ + 2);

        popped += pop_all_checked(t, max_iov);
        g_assert_cmpuint(warnings - before, <=, 1);
        g_assert_cmpuint(warnings - before, ==, t->vq.broken ? 1 : 0);
        tguest_free(t);
    }
    g_log_remove_handler(G_LOG_DOMAIN, handler);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
    /* The generator must actually reach both outcomes. */
    g_assert_cmpuint(warnings, >, 100);
    g_assert_cmpuint(popped, >, 100);
}

/* --- used ring --- */

static void test_fill_then_flush_publishes_once(void)
{
    struct tguest *t = tguest_new(0);

    for (unsigned i = 0; i < 3; i++) {
        make_simple(t, i);
        g_assert_cmpint(pop(t), ==, 1);
    }
    fill_head(&t->vq, 2, 200);
    fill_head(&t->vq, 0, 0);
    fill_head(&t->vq, 1, 100);
    /* Filled elements are not visible before the flush. */
    g_assert_cmpuint(t->used->idx, ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    vq_flush(&t->vq);
    g_assert_cmpuint(t->used->idx, ==, 3);
    g_assert_cmpuint(t->used->ring[0].id, ==, 2);
    g_assert_cmpuint(t->used->ring[0].len, ==, 200);
    g_assert_cmpuint(t->used->ring[1].id, ==, 0);
    g_assert_cmpuint(t->used->ring[1].len, ==, 0);
    g_assert_cmpuint(t->used->ring[2].id, ==, 1);
    g_assert_cmpuint(t->used->ring[2].len, ==, 100);
    /* A flush with nothing filled changes nothing. */
    vq_flush(&t->vq);
    g_assert_cmpuint(t->used->idx, ==, 3);
    tguest_free(t);
}

static void test_unpop(void)
{
    struct tguest *t = tguest_new(0);

    make_simple(t, 5);
    make_simple(t, 6);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 5);
    vq_unpop(&t->vq);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 5);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 6);
    tguest_free(t);
}

/* --- interrupts (device -> driver) --- */

/* Completes n popped requests one at a time; returns the completions that notified. */
static unsigned complete_one_by_one(struct tguest *t, unsigned n, unsigned *which)
{
    unsigned notified = 0;

    for (unsigned i = 0; i < n; i++) {
        make_simple(t, i);
        g_assert_cmpint(pop(t), ==, 1);
        vq_push(&t->vq, &t->elem, 1);
        if (vq_notify(&t->vq)) {
            which[notified++] = i + 1;
        }
    }
    return notified;
}

static void test_event_idx_notifies_when_used_event_passed(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);
    unsigned which[8];

    /* The first completion always notifies: the device knows nothing yet. */
    make_simple(t, 7);
    g_assert_cmpint(pop(t), ==, 1);
    push_head(&t->vq, 7, 1);
    *used_event(t) = 0;
    g_assert_true(vq_notify(&t->vq));
    g_assert_cmpuint(calls(t), ==, 1);

    /* used->idx is 1; the driver wants an interrupt once entry 4 is used (idx 5). */
    *used_event(t) = 4;
    g_assert_cmpuint(complete_one_by_one(t, 6, which), ==, 1);
    g_assert_cmpuint(which[0], ==, 4);
    g_assert_cmpuint(calls(t), ==, 1);
    g_assert_cmpuint(t->vq.notifications, ==, 2);
    tguest_free(t);
}

static void test_event_idx_batch_crossing_used_event(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);

    g_assert_true(vq_notify(&t->vq));     /* first decision: always */
    for (unsigned i = 0; i < 4; i++) {
        make_simple(t, i);
        g_assert_cmpint(pop(t), ==, 1);
    }
    *used_event(t) = 2;
    fill_head(&t->vq, 0, 1);
    fill_head(&t->vq, 1, 1);
    /* Filled but unpublished entries never interrupt. */
    g_assert_false(vq_notify(&t->vq));
    fill_head(&t->vq, 2, 1);
    fill_head(&t->vq, 3, 1);
    vq_flush(&t->vq);
    /* One batch 0..4 passing used_event 2: one interrupt, and no repeat. */
    g_assert_true(vq_notify(&t->vq));
    g_assert_false(vq_notify(&t->vq));
    /* used_event behind everything: the driver does not want more. */
    *used_event(t) = 1;
    make_simple(t, 4);
    g_assert_cmpint(pop(t), ==, 1);
    push_head(&t->vq, 4, 1);
    g_assert_false(vq_notify(&t->vq));
    g_assert_cmpuint(calls(t), ==, 2);
    tguest_free(t);
}

static void test_no_interrupt_flag(void)
{
    struct tguest *t = tguest_new(0);

    make_simple(t, 0);
    make_simple(t, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpint(pop(t), ==, 1);

    t->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
    push_head(&t->vq, 0, 1);
    g_assert_false(vq_notify(&t->vq));
    t->avail->flags = 0;
    push_head(&t->vq, 1, 1);
    g_assert_true(vq_notify(&t->vq));
    /* Nothing new was used since: no interrupt even with the flag clear. */
    g_assert_false(vq_notify(&t->vq));
    g_assert_cmpuint(calls(t), ==, 1);
    tguest_free(t);
}

static void test_notify_on_empty(void)
{
    struct tguest *t = tguest_new(F_ON_EMPTY);

    t->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
    make_simple(t, 0);
    make_simple(t, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpint(pop(t), ==, 1);
    push_head(&t->vq, 0, 1);
    /* Suppressed while a request is still outstanding... */
    g_assert_false(vq_notify(&t->vq));
    push_head(&t->vq, 1, 1);
    /* ...but the queue going empty interrupts despite NO_INTERRUPT. */
    g_assert_true(vq_notify(&t->vq));
    g_assert_cmpuint(calls(t), ==, 1);

    /* Without the feature, the same sequence stays silent. */
    tguest_free(t);
    t = tguest_new(0);
    t->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
    make_simple(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    push_head(&t->vq, 0, 1);
    g_assert_false(vq_notify(&t->vq));
    tguest_free(t);
}

static void test_notify_without_call_fd(void)
{
    struct tguest *t = tguest_new(0);

    close(t->vq.call_fd);
    t->vq.call_fd = -1;
    make_simple(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    push_head(&t->vq, 0, 1);
    g_assert_true(vq_should_notify(&t->vq));
    g_assert_false(vq_notify(&t->vq));
    g_assert_cmpuint(t->vq.notifications, ==, 0);
    t->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    tguest_free(t);
}

/* --- kicks (driver -> device) --- */

static void test_kick_flags_and_enable_race(void)
{
    struct tguest *t = tguest_new(0);

    vq_disable_notify(&t->vq);
    g_assert_cmpuint(t->used->flags & VRING_USED_F_NO_NOTIFY, !=, 0);
    /* Nothing arrived while kicks were off: safe to sleep. */
    g_assert_false(vq_enable_notify(&t->vq));
    g_assert_cmpuint(t->used->flags & VRING_USED_F_NO_NOTIFY, ==, 0);

    /* A buffer added while kicks were off (so no kick came) must be reported. */
    vq_disable_notify(&t->vq);
    make_simple(t, 3);
    g_assert_true(vq_enable_notify(&t->vq));
    g_assert_cmpuint(t->used->flags & VRING_USED_F_NO_NOTIFY, ==, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_false(vq_enable_notify(&t->vq));
    tguest_free(t);
}

static void test_kick_event_idx(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);

    /* EVENT_IDX never uses the flag. */
    vq_disable_notify(&t->vq);
    g_assert_cmpuint(t->used->flags, ==, 0);
    make_simple(t, 0);
    make_simple(t, 1);
    /* Polling with kicks off does not move avail_event. */
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(avail_event(t), ==, 0);

    make_simple(t, 2);
    g_assert_true(vq_enable_notify(&t->vq));
    g_assert_cmpint(pop(t), ==, 1);
    /* Kicks on: an empty pop asks for a kick at the next entry (index 3). */
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(avail_event(t), ==, 3);
    g_assert_false(vq_enable_notify(&t->vq));
    g_assert_cmpuint(avail_event(t), ==, 3);
    /* The driver kicks iff the entry it adds crosses avail_event. */
    g_assert_true(vring_need_event(avail_event(t), 4, 3));
    tguest_free(t);
}

/*
 * --- a real driver and device on two threads ---
 *
 * The driver thread follows the Linux split-ring driver: it kicks only when
 * the device asks for it (NO_NOTIFY / avail_event) and sleeps on the call
 * eventfd only after re-arming interrupts and re-checking the used ring.
 * The device thread runs the event loop of a back-end.  A lost wake-up on
 * either side shows up as a poll timeout, a barrier bug as wrong data.
 */
#define RACE_REQS      20000
#define RACE_INFLIGHT  (QSZ / 2)     /* two descriptors per request */
#define RACE_TIMEOUT_MS 10000

struct race {
    struct tguest *t;
    bool event_idx;
    bool device_toggles;             /* device uses disable/enable_notify */
    int kick_fd, call_fd, stop_fd;
    uint64_t kicks_sent;
};

static void wait_readable(int fd, int stop_fd, const char *who)
{
    GPollFD p[2] = { { .fd = fd, .events = G_IO_IN }, { .fd = stop_fd, .events = G_IO_IN } };

    if (g_poll(p, stop_fd >= 0 ? 2 : 1, RACE_TIMEOUT_MS) <= 0) {
        g_error("%s: no wake-up within %d ms: lost notification", who, RACE_TIMEOUT_MS);
    }
}

static gpointer race_device(gpointer opaque)
{
    struct race *r = opaque;
    struct tguest *t = r->t;
    struct vq_elem elem;
    struct iovec iov[4];

    for (;;) {
        uint64_t v;
        bool again;

        wait_readable(r->kick_fd, r->stop_fd, "device");
        if (read(r->stop_fd, &v, sizeof(v)) == sizeof(v)) {
            return NULL;
        }
        g_assert_cmpint(read(r->kick_fd, &v, sizeof(v)), ==, sizeof(v));
        do {
            int ret;

            if (r->device_toggles) {
                vq_disable_notify(&t->vq);
            }
            while ((ret = vq_pop(&t->vq, &elem, iov, G_N_ELEMENTS(iov))) == 1) {
                uint64_t seq;

                g_assert_cmpuint(elem.out_num, ==, 1);
                g_assert_cmpuint(elem.in_num, ==, 1);
                g_assert_cmpuint(iov_to_buf(elem.out_sg, 1, 0, &seq, 8), ==, 8);
                seq = ~seq;
                g_assert_cmpuint(iov_from_buf(elem.in_sg, 1, 0, &seq, 8), ==, 8);
                vq_fill(&t->vq, &elem, 8);
            }
            g_assert_cmpint(ret, ==, 0);
            vq_flush(&t->vq);
            vq_notify(&t->vq);
            again = r->device_toggles && vq_enable_notify(&t->vq);
        } while (again);
    }
}

static void race_run(bool event_idx, bool device_toggles)
{
    struct tguest *t = tguest_new(event_idx ? F_EVENT_IDX : 0);
    struct race r = { .t = t, .event_idx = event_idx, .device_toggles = device_toggles };
    uint16_t free_heads[RACE_INFLIGHT], nfree = 0, last_used = 0;
    uint64_t sent = 0, done = 0, one = 1;
    uint64_t *out = host_of(t, data_gpa(0)), *in = host_of(t, data_gpa(1));
    GThread *dev;

    r.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r.stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r.call_fd = t->vq.call_fd;
    t->vq.kick_fd = r.kick_fd;
    for (uint16_t h = 0; h < RACE_INFLIGHT; h++) {
        free_heads[nfree++] = 2 * h;
    }
    /* The driver wants interrupts only when it waits. */
    t->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
    *used_event(t) = UINT16_MAX;
    dev = g_thread_new("device", race_device, &r);

    while (done < RACE_REQS) {
        uint16_t old = t->avail_idx;

        while (nfree > 0 && sent < RACE_REQS) {
            uint16_t h = free_heads[--nfree];

            out[h] = sent++;
            in[h] = 0;
            set_desc(t->desc, h, data_gpa(0) + 8 * h, 8, VRING_DESC_F_NEXT, h + 1);
            set_desc(t->desc, h + 1, data_gpa(1) + 8 * h, 8, VRING_DESC_F_WRITE, 0);
            make_avail(t, h);
        }
        if (t->avail_idx != old) {
            bool kick;

            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            kick = event_idx ? vring_need_event(avail_event(t), t->avail_idx, old)
                             : !(__atomic_load_n(&t->used->flags, __ATOMIC_RELAXED) &
                                 VRING_USED_F_NO_NOTIFY);
            if (kick) {
                g_assert_cmpint(write(r.kick_fd, &one, 8), ==, 8);
                r.kicks_sent++;
            }
        }

        for (;;) {
            uint16_t used_idx = __atomic_load_n(&t->used->idx, __ATOMIC_ACQUIRE);

            if (used_idx != last_used) {
                for (; last_used != used_idx; last_used++) {
                    struct vring_used_elem *e = &t->used->ring[last_used % QSZ];
                    uint16_t h = e->id;

                    g_assert_cmpuint(h % 2, ==, 0);
                    g_assert_cmpuint(e->len, ==, 8);
                    g_assert_cmpuint(in[h], ==, ~out[h]);
                    free_heads[nfree++] = h;
                    done++;
                }
                break;
            }
            if (sent < RACE_REQS && nfree > 0) {
                break;
            }
            /* Nothing to do: re-arm the interrupt, re-check, then sleep. */
            if (event_idx) {
                __atomic_store_n(used_event(t), last_used, __ATOMIC_RELAXED);
            } else {
                __atomic_store_n(&t->avail->flags, 0, __ATOMIC_RELAXED);
            }
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(&t->used->idx, __ATOMIC_ACQUIRE) == last_used) {
                uint64_t v;

                wait_readable(r.call_fd, -1, "driver");
                g_assert_cmpint(read(r.call_fd, &v, 8), ==, 8);
            }
            if (event_idx) {
                __atomic_store_n(used_event(t), (uint16_t)(last_used - 1), __ATOMIC_RELAXED);
            } else {
                __atomic_store_n(&t->avail->flags, VRING_AVAIL_F_NO_INTERRUPT,
                                 __ATOMIC_RELAXED);
            }
        }
    }
    g_assert_cmpint(write(r.stop_fd, &one, 8), ==, 8);
    g_thread_join(dev);
    g_assert_false(t->vq.broken);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    /* Suppression works: far fewer kicks and interrupts than requests. */
    g_test_message("event_idx=%d toggles=%d: %" G_GUINT64_FORMAT " kicks, %" G_GUINT64_FORMAT
                   " interrupts for %d requests", event_idx, device_toggles, r.kicks_sent,
                   t->vq.notifications, RACE_REQS);
    g_assert_cmpuint(t->vq.notifications, <, RACE_REQS);
    close(r.kick_fd);
    close(r.stop_fd);
    tguest_free(t);
}

static void test_race_flags(void)
{
    race_run(false, true);
}

static void test_race_event_idx(void)
{
    race_run(true, true);
}

/* A device that never disables kicks relies on the empty pop re-arming avail_event. */
static void test_race_event_idx_no_toggle(void)
{
    race_run(true, false);
}

/* --- inflight tracking for back-end restarts --- */

static struct vhost_user_inflight_queue *inflight_region_new(unsigned num)
{
    struct vhost_user_inflight_queue *q =
        g_malloc0(sizeof(*q) + num * sizeof(struct vhost_user_inflight_desc));

    q->desc_num = num;
    return q;
}

static void test_inflight_pop_marks_flush_clears(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ);

    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    make_simple(t, 4);
    make_simple(t, 2);
    make_simple(t, 6);
    for (unsigned i = 0; i < 3; i++) {
        g_assert_cmpint(pop(t), ==, 1);
    }
    g_assert_cmpuint(q->desc[4].inflight, ==, 1);
    g_assert_cmpuint(q->desc[2].inflight, ==, 1);
    g_assert_cmpuint(q->desc[6].inflight, ==, 1);
    g_assert_cmpuint(q->desc[0].inflight, ==, 0);
    /* Counters follow pop order. */
    g_assert_cmpuint(q->desc[4].counter, <, q->desc[2].counter);
    g_assert_cmpuint(q->desc[2].counter, <, q->desc[6].counter);

    /* A batch of two is linked from last_batch_head and cleared on flush. */
    fill_head(&t->vq, 6, 1);
    fill_head(&t->vq, 4, 1);
    g_assert_cmpuint(q->last_batch_head, ==, 4);
    g_assert_cmpuint(q->desc[4].next, ==, 6);
    g_assert_cmpuint(q->desc[6].inflight, ==, 1);
    vq_flush(&t->vq);
    g_assert_cmpuint(q->desc[6].inflight, ==, 0);
    g_assert_cmpuint(q->desc[4].inflight, ==, 0);
    g_assert_cmpuint(q->desc[2].inflight, ==, 1);
    g_assert_cmpuint(q->used_idx, ==, 2);

    /* Unpopping gives the head back: it is no longer in flight. */
    make_simple(t, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(q->desc[1].inflight, ==, 1);
    vq_unpop(&t->vq);
    g_assert_cmpuint(q->desc[1].inflight, ==, 0);
    tguest_free(t);
    g_free(q);
}

/* A new instance takes over the rings and region the old one left behind. */
static void restart(struct tguest *t, struct vhost_user_inflight_queue *q)
{
    /* QEMU sets the base to used->idx when the back-end died. */
    tguest_setup(t, 0, t->used->idx);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, VQ_NAME ": resubmitting*");
    g_assert_cmpint(vq_set_inflight(&t->vq, q, true), ==, 0);
    g_test_assert_expected_messages();
}

/*
 * A line a front-end causes goes through its connection's limit: each
 * SET_VRING_KICK after a restart resubmits, and says so, until the burst
 * is spent; the rest are counted, and the count said when the connection
 * goes.
 */
static void test_resubmit_lines_are_limited(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ);
    struct log_limit lim;

    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    make_simple(t, 3);
    g_assert_cmpint(pop(t), ==, 1);
    tguest_setup(t, 0, t->used->idx);
    log_limit_init(&lim, "conn0", 2, 0);
    t->vq.log_limit = &lim;
    for (unsigned i = 0; i < 2; i++) {
        g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, VQ_NAME ": resubmitting 1 *");
    }
    for (unsigned i = 0; i < 1000; i++) {
        g_assert_cmpint(vq_set_inflight(&t->vq, q, true), ==, 0);
    }
    g_test_assert_expected_messages();
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          "conn0: 998 messages suppressed (rate limit)");
    log_limit_end(&lim);
    g_test_assert_expected_messages();
    tguest_free(t);
    g_free(q);
}

static void test_inflight_restore_resubmits_oldest_first(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ);
    uint64_t newest;

    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    /*
     * Popped in an order that is neither the heads' order nor its
     * reverse, so only the counters can tell which went first.
     */
    make_simple(t, 3);
    make_simple(t, 1);
    make_simple(t, 5);
    make_simple(t, 0);
    for (unsigned i = 0; i < 4; i++) {
        g_assert_cmpint(pop(t), ==, 1);
    }
    push_head(&t->vq, 1, 1);
    /* The driver queued one more the old instance never saw. */
    make_simple(t, 7);
    newest = q->desc[0].counter;

    restart(t, q);
    /* used idx 1 + three in flight: new work starts at avail index 4. */
    g_assert_cmpuint(t->vq.last_avail_idx, ==, 4);
    g_assert_cmpuint(t->vq.inflight, ==, 3);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    g_assert_cmpuint(t->elem.in_num, ==, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 5);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 7);
    /* The counter continues after the old instance's newest. */
    g_assert_cmpuint(q->desc[7].counter, >, newest);
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, 4);

    for (unsigned h = 0; h < QSZ; h++) {
        if (q->desc[h].inflight) {
            fill_head(&t->vq, h, 1);
        }
    }
    vq_flush(&t->vq);
    g_assert_cmpuint(t->used->idx, ==, 5);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    for (unsigned h = 0; h < QSZ; h++) {
        g_assert_cmpuint(q->desc[h].inflight, ==, 0);
    }
    tguest_free(t);
    g_free(q);
}

/* The old instance died after publishing a batch but before clearing it. */
static void test_inflight_restore_after_torn_batch(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ);

    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    for (unsigned i = 0; i < 4; i++) {
        make_simple(t, i);
        g_assert_cmpint(pop(t), ==, 1);
    }
    fill_head(&t->vq, 1, 1);
    fill_head(&t->vq, 2, 1);
    /* vq_flush's used->idx store happened; the inflight marks were not cleared. */
    t->used->idx = 2;
    g_assert_cmpuint(q->used_idx, ==, 0);
    g_assert_cmpuint(q->desc[1].inflight, ==, 1);

    restart(t, q);
    g_assert_cmpuint(q->used_idx, ==, 2);
    g_assert_cmpuint(q->desc[1].inflight, ==, 0);
    g_assert_cmpuint(q->desc[2].inflight, ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, 2);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    g_assert_cmpint(pop(t), ==, 0);
    tguest_free(t);
    g_free(q);
}

static void test_inflight_unpop_resubmitted(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ);

    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    make_simple(t, 6);
    g_assert_cmpint(pop(t), ==, 1);
    restart(t, q);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 6);
    vq_unpop(&t->vq);
    g_assert_cmpuint(q->desc[6].inflight, ==, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 6);
    g_assert_cmpint(pop(t), ==, 0);
    tguest_free(t);
    g_free(q);
}

static void test_inflight_region_mismatch(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ * 2);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          VQ_NAME ": inflight region has 16 descriptors, ring has 8");
    g_assert_cmpint(vq_set_inflight(&t->vq, q, true), ==, -EINVAL);
    g_test_assert_expected_messages();
    g_assert_null(t->vq.inflight_region);
    tguest_free(t);
    g_free(q);
}

/*
 * --- shared memory is read once: a front-end rewriting it while we read ---
 *
 * A second thread plays a front-end (or guest) that rewrites the shared
 * memory without pause while this thread runs the device's code on it a
 * fixed number of rounds.  Whatever it sees, the device stays inside its
 * own allocations and guest memory (ASan checks that), and each round ends
 * consistent or with the queue cleanly broken.
 */
#define RO_ROUNDS     2000
#define RO_QSZ        1024          /* a large ring: a long window between two reads */
#define RO_DESC_OFF   0x40000
#define RO_AVAIL_OFF  0x48000
#define RO_USED_OFF   0x50000

static void quiet_messages(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                           gpointer unused)
{
}

/*
 * Flips every inflight flag of the area, back and forth, as fast as it
 * can, and now and then scrambles the links, counters and the recorded
 * used index: what a front-end writing during SET_VRING_KICK makes the
 * device read.
 */
static void scramble_inflight(void *shared, GRand *rand)
{
    struct vhost_user_inflight_queue *q = shared;
    uint32_t salt = g_rand_int(rand);

    for (unsigned flip = 0; flip < 16; flip++) {
        for (unsigned i = 0; i < RO_QSZ; i++) {
            __atomic_store_n(&q->desc[i].inflight, flip & 1, __ATOMIC_RELAXED);
        }
    }
    for (unsigned i = 0; i < RO_QSZ; i++) {
        __atomic_store_n(&q->desc[i].next, (uint16_t)(salt + 7 * i), __ATOMIC_RELAXED);
        __atomic_store_n(&q->desc[i].counter, (uint64_t)salt * i, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&q->used_idx, (uint16_t)(salt >> 8), __ATOMIC_RELAXED);
    __atomic_store_n(&q->last_batch_head, (uint16_t)(salt >> 16), __ATOMIC_RELAXED);
}

/* Whether a restore left distinct heads of the ring to resubmit, all counted in flight. */
static bool resubmit_consistent(const struct virtqueue *vq, uint16_t used)
{
    g_autofree uint8_t *seen = g_malloc0(vq->num);

    if (vq->resubmit_num > vq->num || vq->inflight != vq->resubmit_num ||
        vq->last_avail_idx != (uint16_t)(used + vq->inflight)) {
        return false;
    }
    for (unsigned k = 0; k < vq->resubmit_num; k++) {
        if (vq->resubmit[k] >= vq->num || seen[vq->resubmit[k]]) {
            return false;
        }
        seen[vq->resubmit[k]] = 1;
    }
    return true;
}

/*
 * The restore counts and lists the in-flight heads from one copy of the
 * area: with every flag flipping meanwhile, the list still fits the count
 * (reading the flags twice, once to size the list and once to fill it,
 * overflowed the heap).  Once the writer stops, the restore is exact.
 */
static void test_read_once_inflight_area(void)
{
    struct tguest *t = tguest_new(0);
    size_t bytes = sizeof(struct vhost_user_inflight_queue) +
                   RO_QSZ * sizeof(struct vhost_user_inflight_desc);
    struct vhost_user_inflight_queue *q = g_malloc0(bytes);
    guint quiet = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, quiet_messages, NULL);
    struct shared_writer *w;
    unsigned resubmitted = 0, inconsistent = 0;

    vq_cleanup(&t->vq);
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, RO_QSZ, t->ram + RO_DESC_OFF,
                             t->ram + RO_AVAIL_OFF, t->ram + RO_USED_OFF, 0, 0), ==, 0);
    q->desc_num = RO_QSZ;
    w = shared_writer_start(scramble_inflight, q);
    for (unsigned round = 0; round < RO_ROUNDS; round++) {
        g_assert_cmpint(vq_set_inflight(&t->vq, q, true), ==, 0);
        /* Counted, not asserted at once: a list longer than its count is ASan's to catch. */
        inconsistent += !resubmit_consistent(&t->vq, 0);
        resubmitted += t->vq.resubmit_num;
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; %u heads resubmitted in %d "
                   "rounds", shared_writer_stop(w), resubmitted, RO_ROUNDS);
    g_assert_cmpuint(inconsistent, ==, 0);

    memset(q->desc, 0, RO_QSZ * sizeof(q->desc[0]));
    q->used_idx = 0;
    q->desc[9].inflight = q->desc[700].inflight = 1;
    q->desc[9].counter = 8;
    q->desc[700].counter = 5;
    g_assert_cmpint(vq_set_inflight(&t->vq, q, true), ==, 0);
    g_assert_true(resubmit_consistent(&t->vq, 0));
    g_assert_cmpuint(t->vq.resubmit_num, ==, 2);
    g_assert_cmpuint(t->vq.resubmit[1], ==, 700);           /* oldest first */
    g_assert_cmpuint(t->vq.resubmit[0], ==, 9);
    g_log_remove_handler(G_LOG_DOMAIN, quiet);
    vq_cleanup(&t->vq);
    g_free(q);
    tguest_free(t);
}

/* Rewrites the links, marks and batch head of the tracking a running queue keeps. */
static void scramble_tracking(void *shared, GRand *rand)
{
    struct vhost_user_inflight_queue *q = shared;
    unsigned i = g_rand_int_range(rand, 0, QSZ);

    __atomic_store_n(&q->desc[i].next, (uint16_t)g_rand_int(rand), __ATOMIC_RELAXED);
    __atomic_store_n(&q->desc[i].inflight, (uint8_t)g_rand_boolean(rand), __ATOMIC_RELAXED);
    __atomic_store_n(&q->last_batch_head, (uint16_t)g_rand_int(rand), __ATOMIC_RELAXED);
}

/*
 * While the queue runs with tracking, the front-end rewrites the links the
 * flush follows to clear a batch: the device keeps to the area, and the
 * ring is served exactly as without tracking.
 */
static void test_read_once_tracking_rewritten_while_running(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q = inflight_region_new(QSZ);
    struct shared_writer *w;

    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    w = shared_writer_start(scramble_tracking, q);
    for (unsigned round = 0; round < RO_ROUNDS; round++) {
        for (uint16_t h = 0; h < QSZ / 2; h++) {
            make_simple(t, h);
        }
        for (uint16_t h = 0; h < QSZ / 2; h++) {
            g_assert_cmpint(pop(t), ==, 1);
            g_assert_cmpuint(t->elem.head, ==, h);
        }
        for (uint16_t h = QSZ / 2; h-- > 0;) {
            fill_head(&t->vq, h, h + 1);
        }
        vq_flush(&t->vq);
        g_assert_cmpuint(t->used->idx, ==, (uint16_t)((round + 1) * (QSZ / 2)));
        for (uint16_t k = 0; k < QSZ / 2; k++) {
            const struct vring_used_elem *e = &t->used->ring[(round * (QSZ / 2) + k) % QSZ];

            g_assert_cmpuint(e->id, ==, QSZ / 2 - 1 - k);
            g_assert_cmpuint(e->len, ==, QSZ / 2 - k);
        }
        g_assert_cmpuint(q->used_idx, ==, t->used->idx);
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer", shared_writer_stop(w));
    g_assert_false(t->vq.broken);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    tguest_free(t);
    g_free(q);
}

/*
 * Rewrites the descriptor table (address, length, flags, next), the
 * indirect table and the avail ring's entries with mostly plausible,
 * sometimes hostile values; the avail index only rarely, within reach.
 */
static void scramble_split_ring(void *shared, GRand *rand)
{
    struct tguest *t = shared;
    struct vring_desc *table = (void *)(t->ram + INDIRECT_OFF);
    unsigned i = g_rand_int_range(rand, 0, QSZ);
    bool to_table = g_rand_int_range(rand, 0, 8) == 0;
    uint64_t addr = g_rand_int_range(rand, 0, 4) ? data_gpa(g_rand_int_range(rand, 0, 16))
                                                 : ((uint64_t)g_rand_int(rand) << 32 |
                                                    g_rand_int(rand));

    __atomic_store_n(&t->desc[i].addr, to_table ? ram_gpa(INDIRECT_OFF) : addr, __ATOMIC_RELAXED);
    __atomic_store_n(&t->desc[i].len, to_table ? 16 * g_rand_int_range(rand, 0, 6)
                                               : g_rand_int_range(rand, 0, 0x3000),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&t->desc[i].flags, (uint16_t)(to_table ? VRING_DESC_F_INDIRECT
                                                            : g_rand_int_range(rand, 0, 4)),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&t->desc[i].next, (uint16_t)g_rand_int_range(rand, 0, QSZ + 2),
                     __ATOMIC_RELAXED);
    i = g_rand_int_range(rand, 0, 8);
    __atomic_store_n(&table[i].addr, addr, __ATOMIC_RELAXED);
    __atomic_store_n(&table[i].len, g_rand_int_range(rand, 0, 0x3000), __ATOMIC_RELAXED);
    __atomic_store_n(&table[i].flags, (uint16_t)g_rand_int_range(rand, 0, 8), __ATOMIC_RELAXED);
    __atomic_store_n(&table[i].next, (uint16_t)g_rand_int_range(rand, 0, 10), __ATOMIC_RELAXED);
    __atomic_store_n(&t->avail->ring[g_rand_int_range(rand, 0, QSZ)],
                     (uint16_t)g_rand_int_range(rand, 0, QSZ + 1), __ATOMIC_RELAXED);
    if (g_rand_int_range(rand, 0, 64) == 0) {
        __atomic_store_n(&t->avail->idx, (uint16_t)g_rand_int_range(rand, 0, QSZ + 2),
                         __ATOMIC_RELEASE);
    }
}

/*
 * The device pops from rings the guest keeps rewriting: each pop yields
 * a chain inside guest memory and the caller's iovecs, or reports an empty
 * ring, or breaks the queue once with one of its documented errors.
 */
static void test_read_once_split_ring(void)
{
    struct tguest *t = tguest_new(F_INDIRECT | F_EVENT_IDX);
    unsigned warnings = 0, popped = 0, broken = 0;
    guint handler = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, drop_log, &warnings);
    struct shared_writer *w;

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    w = shared_writer_start(scramble_split_ring, t);
    for (unsigned round = 0; round < RO_ROUNDS; round++) {
        unsigned max_iov = 1 + round % 11, before = warnings;

        tguest_setup(t, F_INDIRECT | F_EVENT_IDX, 0);
        popped += pop_all_checked(t, max_iov);
        g_assert_cmpuint(warnings - before, ==, t->vq.broken ? 1 : 0);
        broken += t->vq.broken;
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; %u chains popped, %u queues "
                   "broken in %d rounds", shared_writer_stop(w), popped, broken, RO_ROUNDS);
    g_log_remove_handler(G_LOG_DOMAIN, handler);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
    tguest_free(t);
}

/* --- dirty logging (live migration) --- */

/* A bitmap with a bit for every page up to the hole, and room to spare. */
#define TLOG_BYTES (HOLE_GPA / VHOST_LOG_PAGE / 8 + 8)

struct tlog {
    uint8_t bits[TLOG_BYTES];
    struct vhost_log log;
};

static bool page_logged(const struct tlog *l, uint64_t gpa)
{
    uint64_t p = gpa / VHOST_LOG_PAGE;

    return l->bits[p / 8] & (1u << (p % 8));
}

static unsigned pages_logged(const struct tlog *l)
{
    unsigned n = 0;

    for (size_t i = 0; i < sizeof(l->bits); i++) {
        n += (unsigned)__builtin_popcount(l->bits[i]);
    }
    return n;
}

/* Starts the queue again with logging on, as the server does once a log is mapped. */
static struct tlog *tguest_log(struct tguest *t, uint64_t features)
{
    struct tlog *l = g_new0(struct tlog, 1);

    l->log = (struct vhost_log) { .bits = l->bits, .size = sizeof(l->bits) };
    close(t->vq.call_fd);
    vq_cleanup(&t->vq);
    vq_init(&t->vq, 0, VQ_NAME);
    vq_set_log(&t->vq, &l->log);
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, QSZ, t->desc, t->avail, t->used, features, 0),
                    ==, 0);
    t->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return l;
}

/* Starting a ring writes it (flags, avail_event): those pages are marked too. */
static void test_log_setup_marks_the_used_ring(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);
    struct tlog *l = tguest_log(t, F_EVENT_IDX);

    g_assert_true(page_logged(l, ram_gpa(USED_OFF)));
    g_assert_cmpuint(pages_logged(l), ==, 1);
    g_free(l);
    tguest_free(t);
}

/*
 * vq_fill marks every page of the chain's writable buffers — all of
 * them, even past the length reported — and the used element; vq_flush
 * the used index.  Readable buffers are not written and not marked.
 */
static void test_log_fill_marks_writable_buffers(void)
{
    struct tguest *t = tguest_new(0);
    struct tlog *l = tguest_log(t, 0);

    memset(l->bits, 0, sizeof(l->bits));
    /* A readable header, then a response straddling the two regions, then 4 KiB more. */
    set_desc(t->desc, 0, data_gpa(0), 51, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, HI_GPA - 0x100, 0x200, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 2, data_gpa(5), 0x1000, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.in_num, ==, 3);
    g_assert_cmpuint(pages_logged(l), ==, 0);

    vq_fill(&t->vq, &t->elem, 16);
    g_assert_true(page_logged(l, HI_GPA - 1));
    g_assert_true(page_logged(l, HI_GPA));
    g_assert_true(page_logged(l, data_gpa(5)));
    g_assert_true(page_logged(l, ram_gpa(USED_OFF)));
    g_assert_false(page_logged(l, data_gpa(0)));
    g_assert_cmpuint(pages_logged(l), ==, 4);

    memset(l->bits, 0, sizeof(l->bits));
    vq_flush(&t->vq);
    g_assert_true(page_logged(l, ram_gpa(USED_OFF)));
    g_assert_cmpuint(pages_logged(l), ==, 1);
    g_assert_cmpuint(l->log.missed, ==, 0);
    g_free(l);
    tguest_free(t);
}

/* With logging off the same requests set no bit. */
static void test_log_off_marks_nothing(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);
    struct tlog *l = tguest_log(t, F_EVENT_IDX);

    memset(l->bits, 0, sizeof(l->bits));
    vq_set_log(&t->vq, NULL);
    make_simple(t, 3);
    g_assert_cmpint(pop(t), ==, 1);
    vq_push(&t->vq, &t->elem, 512);
    vq_disable_notify(&t->vq);
    vq_enable_notify(&t->vq);
    g_assert_cmpuint(t->used->idx, ==, 1);
    g_assert_cmpuint(pages_logged(l), ==, 0);
    g_free(l);
    tguest_free(t);
}

/* Kick suppression writes the used ring's flags or avail_event: marked. */
static void test_log_notification_writes_mark(void)
{
    uint64_t features[] = { 0, F_EVENT_IDX };

    for (unsigned i = 0; i < G_N_ELEMENTS(features); i++) {
        struct tguest *t = tguest_new(features[i]);
        struct tlog *l = tguest_log(t, features[i]);

        memset(l->bits, 0, sizeof(l->bits));
        vq_disable_notify(&t->vq);
        vq_enable_notify(&t->vq);
        g_assert_true(page_logged(l, ram_gpa(USED_OFF)));
        g_assert_cmpuint(pages_logged(l), ==, 1);
        g_free(l);
        tguest_free(t);
    }
}

/*
 * A request completing after its queue broke was still written by its
 * backend: its pages are marked although the used ring is not touched.
 */
static void test_log_broken_queue_still_marks(void)
{
    struct tguest *t = tguest_new(0);
    struct tlog *l = tguest_log(t, 0);
    struct vq_elem first;
    struct iovec keep[VQ_MAX_SG];

    make_simple(t, 1);
    g_assert_cmpint(pop(t), ==, 1);
    first = t->elem;
    memcpy(keep, t->iov, sizeof(struct iovec) * (first.out_num + first.in_num));
    first.out_sg = keep;
    first.in_sg = keep + first.out_num;
    set_desc(t->desc, 2, HOLE_GPA, 512, VRING_DESC_F_WRITE, 0);
    make_avail(t, 2);
    assert_pop_breaks(t, -EFAULT, "outside guest memory");
    memset(l->bits, 0, sizeof(l->bits));
    vq_fill(&t->vq, &first, 512);
    g_assert_true(page_logged(l, data_gpa(1)));
    g_assert_cmpuint(pages_logged(l), ==, 1);
    g_assert_cmpuint(t->used->idx, ==, 0);
    g_free(l);
    tguest_free(t);
}

/* The answer to a malformed chain is written into guest memory: marked. */
static void test_log_bad_chain_answer_marks(void)
{
    struct tguest *t = tguest_new(0);
    struct tlog *l = tguest_log(t, 0);
    static const char resp[12] = "FAILURE-RSP";

    set_desc(t->desc, 0, HOLE_GPA + 0x1000, 51, VRING_DESC_F_NEXT, 1);
    set_desc(t->desc, 1, data_gpa(1), 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
    set_desc(t->desc, 2, data_gpa(2), 64, VRING_DESC_F_WRITE, 0);
    make_avail(t, 0);
    assert_pop_breaks(t, -EFAULT, "outside guest memory");
    memset(l->bits, 0, sizeof(l->bits));
    g_assert_cmpint(vq_answer_bad_chain(&t->vq, resp, sizeof(resp)), ==, sizeof(resp));
    g_assert_true(page_logged(l, data_gpa(1)));
    g_assert_true(page_logged(l, data_gpa(2)));
    g_assert_true(page_logged(l, ram_gpa(USED_OFF)));
    g_assert_cmpuint(pages_logged(l), ==, 3);
    g_free(l);
    tguest_free(t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/virtqueue/setup/rejects-bad-size-alignment-placement",
                    test_setup_validation);
    g_test_add_func("/virtqueue/setup/turns-kicks-on-and-resumes-used-idx",
                    test_setup_turns_kicks_on);

    g_test_add_func("/virtqueue/pop/empty-ring", test_pop_empty);
    g_test_add_func("/virtqueue/pop/direct-chain", test_pop_direct_chain);
    g_test_add_func("/virtqueue/pop/in-avail-ring-order", test_pop_in_avail_order);
    g_test_add_func("/virtqueue/pop/batch-then-later-entries", test_pop_batch_then_later_entries);
    g_test_add_func("/virtqueue/pop/across-16-bit-index-wrap", test_pop_across_index_wrap);
    g_test_add_func("/virtqueue/pop/zero-length-descriptor-has-no-iovec",
                    test_pop_zero_length_descriptor);
    g_test_add_func("/virtqueue/pop/indirect-chain", test_pop_indirect_chain);
    g_test_add_func("/virtqueue/pop/direct-then-indirect", test_pop_direct_then_indirect);
    g_test_add_func("/virtqueue/pop/buffer-straddling-two-regions",
                    test_pop_buffer_straddling_regions);
    g_test_add_func("/virtqueue/pop/full-ring", test_avail_full_ring);
    g_test_add_func("/virtqueue/pop/chain-of-ring-size", test_pop_chain_of_ring_size);

    g_test_add_func("/virtqueue/malformed/head-out-of-range", test_bad_head_index);
    g_test_add_func("/virtqueue/malformed/head-out-of-range-inside-batch",
                    test_bad_head_inside_batch);
    g_test_add_func("/virtqueue/malformed/next-out-of-range", test_bad_next_index);
    g_test_add_func("/virtqueue/malformed/bad-chain-is-answered", test_bad_chain_is_answered);
    g_test_add_func("/virtqueue/malformed/loop", test_loop);
    g_test_add_func("/virtqueue/malformed/buffer-into-hole", test_buffer_outside_memory);
    g_test_add_func("/virtqueue/malformed/buffer-address-wraps", test_buffer_address_wraps);
    g_test_add_func("/virtqueue/malformed/indirect-not-negotiated",
                    test_indirect_not_negotiated);
    g_test_add_func("/virtqueue/malformed/indirect-length-zero-or-not-16n",
                    test_indirect_bad_length);
    g_test_add_func("/virtqueue/malformed/indirect-table-outside-memory",
                    test_indirect_table_outside_memory);
    g_test_add_func("/virtqueue/malformed/nested-indirect", test_nested_indirect);
    g_test_add_func("/virtqueue/malformed/indirect-loop", test_indirect_loop);
    g_test_add_func("/virtqueue/malformed/indirect-next-out-of-table",
                    test_indirect_next_out_of_table);
    g_test_add_func("/virtqueue/malformed/readable-after-writable",
                    test_readable_after_writable);
    g_test_add_func("/virtqueue/malformed/readable-after-writable-across-indirect",
                    test_readable_after_writable_across_indirect);
    g_test_add_func("/virtqueue/malformed/more-than-max-iov", test_too_many_buffers);
    g_test_add_func("/virtqueue/malformed/more-descriptors-than-max-iov",
                    test_too_many_descriptors);
    g_test_add_func("/virtqueue/malformed/avail-index-jumps", test_avail_index_jump);
    g_test_add_func("/virtqueue/malformed/avail-index-backwards", test_avail_index_backwards);
    g_test_add_func("/virtqueue/malformed/random-rings-never-escape",
                    test_random_rings_never_escape);

    g_test_add_func("/virtqueue/used/fill-then-flush-publishes-once",
                    test_fill_then_flush_publishes_once);
    g_test_add_func("/virtqueue/used/unpop", test_unpop);

    g_test_add_func("/virtqueue/interrupt/event-idx-used-event",
                    test_event_idx_notifies_when_used_event_passed);
    g_test_add_func("/virtqueue/interrupt/event-idx-batch",
                    test_event_idx_batch_crossing_used_event);
    g_test_add_func("/virtqueue/interrupt/no-interrupt-flag", test_no_interrupt_flag);
    g_test_add_func("/virtqueue/interrupt/notify-on-empty", test_notify_on_empty);
    g_test_add_func("/virtqueue/interrupt/no-call-fd", test_notify_without_call_fd);

    g_test_add_func("/virtqueue/kick/flags-and-enable-race", test_kick_flags_and_enable_race);
    g_test_add_func("/virtqueue/kick/event-idx-avail-event", test_kick_event_idx);
    g_test_add_func("/virtqueue/log-limit/resubmit-lines-are-limited",
                    test_resubmit_lines_are_limited);

    g_test_add_func("/virtqueue/threads/flags", test_race_flags);
    g_test_add_func("/virtqueue/threads/event-idx", test_race_event_idx);
    g_test_add_func("/virtqueue/threads/event-idx-device-never-disables",
                    test_race_event_idx_no_toggle);

    g_test_add_func("/virtqueue/inflight/pop-marks-flush-clears",
                    test_inflight_pop_marks_flush_clears);
    g_test_add_func("/virtqueue/inflight/restore-resubmits-oldest-first",
                    test_inflight_restore_resubmits_oldest_first);
    g_test_add_func("/virtqueue/inflight/restore-after-torn-batch",
                    test_inflight_restore_after_torn_batch);
    g_test_add_func("/virtqueue/inflight/unpop-resubmitted", test_inflight_unpop_resubmitted);
    g_test_add_func("/virtqueue/inflight/region-size-mismatch", test_inflight_region_mismatch);
    g_test_add_func("/virtqueue/read-once/inflight-area-rewritten-during-restore",
                    test_read_once_inflight_area);
    g_test_add_func("/virtqueue/read-once/split-ring-rewritten-during-pop",
                    test_read_once_split_ring);
    g_test_add_func("/virtqueue/read-once/tracking-rewritten-while-running",
                    test_read_once_tracking_rewritten_while_running);
    g_test_add_func("/virtqueue/log/setup-marks-the-used-ring", test_log_setup_marks_the_used_ring);
    g_test_add_func("/virtqueue/log/fill-marks-writable-buffers",
                    test_log_fill_marks_writable_buffers);
    g_test_add_func("/virtqueue/log/off-marks-nothing", test_log_off_marks_nothing);
    g_test_add_func("/virtqueue/log/notification-writes-mark", test_log_notification_writes_mark);
    g_test_add_func("/virtqueue/log/broken-queue-still-marks", test_log_broken_queue_still_marks);
    g_test_add_func("/virtqueue/log/bad-chain-answer-marks", test_log_bad_chain_answer_marks);
    return g_test_run();
}
