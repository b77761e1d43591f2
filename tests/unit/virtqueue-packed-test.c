/*
 * Specification of the device side of a packed virtqueue
 * (lib/vhost/virtqueue-packed.c, reached through virtqueue.h).  Each test
 * plays a driver as virtio 1.2 section 2.8 describes it: descriptors made
 * available in ring slots with the lap's wrap counter, the first one's
 * flags written last; used descriptors read back in ring order, each
 * moving the driver on by its chain's slot count; the two event areas for
 * interrupts and kicks.  Malformed rings fail the queue once.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "guest-mem.h"
#include "vhost-user-proto.h"
#include "virtqueue.h"

#define RAM_GPA      0x100000ull
#define RAM_SIZE     0x100000ull
#define HOLE_GPA     (RAM_GPA + RAM_SIZE)

#define QSZ          8
#define RING_OFF     0x0000
#define DRIVER_OFF   0x1000
#define DEVICE_OFF   0x2000
#define INDIRECT_OFF 0x8000
#define DATA_OFF     0x10000

#define F_PACKED     (1ull << VIRTIO_F_RING_PACKED)
#define F_EVENT_IDX  (1ull << VIRTIO_RING_F_EVENT_IDX)
#define F_INDIRECT   (1ull << VIRTIO_RING_F_INDIRECT_DESC)
#define F_ON_EMPTY   (1ull << VIRTIO_F_NOTIFY_ON_EMPTY)

#define AVAIL        (1u << VRING_PACKED_DESC_F_AVAIL)
#define USED         (1u << VRING_PACKED_DESC_F_USED)
#define WRAP         (1u << VRING_PACKED_EVENT_F_WRAP_CTR)
#define FRESH_BASE   0x80008000u

#define VQ_NAME "test-pvq"

/* A buffer of a chain, as the driver describes it. */
struct tbuf {
    uint64_t gpa;
    uint32_t len;
    bool write;
};

struct tguest {
    struct guest_mem mem;
    uint8_t *ram;
    struct vring_packed_desc *ring;
    struct vring_packed_desc_event *driver_event, *device_event;
    /* The driver's side of the ring. */
    uint16_t next_avail;
    bool avail_wrap;
    uint16_t next_used;
    bool used_wrap;
    uint16_t ndescs[QSZ];         /* slots of the chain with that id */
    struct virtqueue vq;
    struct vq_elem elem;
    struct iovec iov[VQ_MAX_SG];
};

static uint64_t data_gpa(unsigned k)
{
    return RAM_GPA + DATA_OFF + k * 0x1000ull;
}

static void *host_of(struct tguest *t, uint64_t gpa)
{
    return t->ram + (gpa - RAM_GPA);
}

static void tguest_setup(struct tguest *t, uint64_t features, uint32_t base)
{
    if (t->vq.call_fd >= 0) {
        close(t->vq.call_fd);
    }
    vq_cleanup(&t->vq);
    vq_init(&t->vq, 0, VQ_NAME);
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, QSZ, t->ring, t->driver_event,
                             t->device_event, features | F_PACKED, base), ==, 0);
    t->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g_assert_cmpint(t->vq.call_fd, >=, 0);
}

static struct tguest *tguest_new(uint64_t features)
{
    struct tguest *t = g_new0(struct tguest, 1);
    struct guest_mem_region lo = {
        .gpa = RAM_GPA, .size = RAM_SIZE, .uva = 0x7f0000000000, .fd = -1,
    };

    t->ram = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    g_assert_true(t->ram != MAP_FAILED);
    lo.host = t->ram;
    guest_mem_init(&t->mem);
    g_assert_cmpint(guest_mem_add(&t->mem, &lo), ==, 0);
    t->ring = (void *)(t->ram + RING_OFF);
    t->driver_event = (void *)(t->ram + DRIVER_OFF);
    t->device_event = (void *)(t->ram + DEVICE_OFF);
    t->avail_wrap = t->used_wrap = true;
    t->vq.call_fd = -1;
    tguest_setup(t, features, FRESH_BASE);
    return t;
}

static void tguest_free(struct tguest *t)
{
    close(t->vq.call_fd);
    vq_cleanup(&t->vq);
    guest_mem_clear(&t->mem);
    munmap(t->ram, RAM_SIZE);
    g_free(t);
}

static uint16_t avail_flags(bool wrap)
{
    return wrap ? AVAIL : USED;
}

/*
 * Makes a chain of n buffers available under one id, the way Linux does:
 * every descriptor carries the id, the first one's flags go last.  extra
 * is or'ed into every descriptor's flags (e.g. INDIRECT).
 */
static uint16_t drv_add_flags(struct tguest *t, const struct tbuf *b, unsigned n, uint16_t id,
                              uint16_t extra)
{
    uint16_t first = t->next_avail, first_flags = 0;

    for (unsigned i = 0; i < n; i++) {
        struct vring_packed_desc *d = &t->ring[t->next_avail];
        uint16_t flags = avail_flags(t->avail_wrap) | extra;

        if (b[i].write) {
            flags |= VRING_DESC_F_WRITE;
        }
        if (i + 1 < n) {
            flags |= VRING_DESC_F_NEXT;
        }
        d->addr = b[i].gpa;
        d->len = b[i].len;
        d->id = id;
        if (i == 0) {
            first_flags = flags;
        } else {
            d->flags = flags;
        }
        if (++t->next_avail == QSZ) {
            t->next_avail = 0;
            t->avail_wrap = !t->avail_wrap;
        }
    }
    __atomic_store_n(&t->ring[first].flags, first_flags, __ATOMIC_RELEASE);
    t->ndescs[id] = (uint16_t)n;
    return first;
}

static uint16_t drv_add(struct tguest *t, const struct tbuf *b, unsigned n, uint16_t id)
{
    return drv_add_flags(t, b, n, id, 0);
}

/* A request: a 32-byte readable header and a writable response, both its own. */
static void drv_add_req(struct tguest *t, uint16_t id)
{
    struct tbuf b[2] = { { data_gpa(2 * id), 32, false }, { data_gpa(2 * id + 1), 64, true } };

    drv_add(t, b, 2, id);
}

/* Reads the next used descriptor, if the device published one. */
static bool drv_get_used(struct tguest *t, uint16_t *id, uint32_t *len)
{
    const struct vring_packed_desc *d = &t->ring[t->next_used];
    uint16_t flags = __atomic_load_n(&d->flags, __ATOMIC_ACQUIRE);
    unsigned next;

    if (!!(flags & AVAIL) != t->used_wrap || !!(flags & USED) != t->used_wrap) {
        return false;
    }
    *id = d->id;
    *len = d->len;
    g_assert_cmpuint(*id, <, QSZ);
    g_assert_cmpuint(t->ndescs[*id], >, 0);
    next = t->next_used + t->ndescs[*id];
    t->ndescs[*id] = 0;
    if (next >= QSZ) {
        next -= QSZ;
        t->used_wrap = !t->used_wrap;
    }
    t->next_used = (uint16_t)next;
    return true;
}

static int pop(struct tguest *t)
{
    return vq_pop(&t->vq, &t->elem, t->iov, VQ_MAX_SG);
}

static uint64_t call_count(struct tguest *t)
{
    uint64_t v = 0;

    if (read(t->vq.call_fd, &v, sizeof(v)) != sizeof(v)) {
        return 0;
    }
    return v;
}

static void expect_failure(const char *what)
{
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING, what);
}

/* --- setup --- */

static void test_setup(void)
{
    struct tguest *t = tguest_new(0);

    /* A fresh ring starts at slot 0 of lap 1 on both sides, kicks on. */
    g_assert_true(t->vq.packed);
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE);
    g_assert_cmpuint(t->device_event->flags, ==, VRING_PACKED_EVENT_FLAG_ENABLE);

    /* With EVENT_IDX a kick is wanted only when slot 0 of lap 1 comes. */
    t->device_event->flags = VRING_PACKED_EVENT_FLAG_DISABLE;
    tguest_setup(t, F_EVENT_IDX, FRESH_BASE);
    g_assert_cmpuint(t->device_event->flags, ==, VRING_PACKED_EVENT_FLAG_DESC);
    g_assert_cmphex(t->device_event->off_wrap, ==, WRAP);

    /* Misplaced areas are refused. */
    close(t->vq.call_fd);
    vq_init(&t->vq, 0, VQ_NAME);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING, "*misaligned packed ring*");
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, QSZ, t->ring, (char *)t->driver_event + 2,
                             t->device_event, F_PACKED, FRESH_BASE), ==, -EINVAL);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_WARNING, "*not inside guest memory*");
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, QSZ, t->ring, t->driver_event,
                             t->ram + RAM_SIZE, F_PACKED, FRESH_BASE), ==, -EFAULT);
    g_test_assert_expected_messages();
    tguest_setup(t, 0, FRESH_BASE);
    tguest_free(t);
}

/* --- popping --- */

static void test_pop_empty_and_stale_lap(void)
{
    struct tguest *t = tguest_new(0);
    struct tbuf b = { data_gpa(0), 16, false };

    g_assert_cmpint(pop(t), ==, 0);
    g_assert_false(vq_has_avail(&t->vq));
    /* A descriptor marked for the other lap (a used one, as it reads) is not available. */
    t->ring[0] = (struct vring_packed_desc){ .addr = data_gpa(0), .len = 16,
                                            .flags = AVAIL | USED };
    g_assert_cmpint(pop(t), ==, 0);
    drv_add(t, &b, 1, 3);
    g_assert_true(vq_has_avail(&t->vq));
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    tguest_free(t);
}

static void test_pop_chain(void)
{
    struct tguest *t = tguest_new(0);
    struct tbuf b[3] = {
        { data_gpa(0), 51, false }, { data_gpa(1), 4096, false }, { data_gpa(2), 108, true },
    };

    drv_add(t, b, 3, 6);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 6);
    g_assert_cmpuint(t->elem.ndescs, ==, 3);
    g_assert_cmpuint(t->elem.out_num, ==, 2);
    g_assert_cmpuint(t->elem.in_num, ==, 1);
    g_assert_cmpuint(t->elem.out_len, ==, 51 + 4096);
    g_assert_cmpuint(t->elem.in_len, ==, 108);
    g_assert_true(t->elem.out_sg[0].iov_base == host_of(t, data_gpa(0)));
    g_assert_true(t->elem.in_sg[0].iov_base == host_of(t, data_gpa(2)));
    g_assert_cmpuint(t->elem.in_sg[0].iov_len, ==, 108);
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmphex(vq_get_base(&t->vq), ==, 3 | WRAP | FRESH_BASE);
    tguest_free(t);
}

static void test_pop_indirect(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    struct vring_packed_desc *table = host_of(t, RAM_GPA + INDIRECT_OFF);
    struct tbuf ind = { RAM_GPA + INDIRECT_OFF, 3 * sizeof(*table), false };

    /* Table entries are consecutive; only WRITE counts, NEXT and ids are ignored. */
    table[0] = (struct vring_packed_desc){ .addr = data_gpa(0), .len = 19, .id = 77 };
    table[1] = (struct vring_packed_desc){ .addr = data_gpa(1), .len = 512 };
    table[2] = (struct vring_packed_desc){ .addr = data_gpa(2), .len = 96,
                                          .flags = VRING_DESC_F_WRITE | VRING_DESC_F_NEXT };
    drv_add_flags(t, &ind, 1, 2, VRING_DESC_F_INDIRECT);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 2);
    g_assert_cmpuint(t->elem.ndescs, ==, 1);
    g_assert_cmpuint(t->elem.out_num, ==, 2);
    g_assert_cmpuint(t->elem.in_num, ==, 1);
    g_assert_cmpuint(t->elem.in_len, ==, 96);
    tguest_free(t);
}

/*
 * Completions in another order than the pops: each used descriptor goes
 * to the next used slot and moves on by its own chain's slot count.
 */
static void test_complete_out_of_order(void)
{
    struct tguest *t = tguest_new(0);
    struct tbuf one = { data_gpa(7), 64, true };
    struct vq_elem a, b;
    uint16_t id;
    uint32_t len;

    drv_add_req(t, 1);                  /* slots 0-1 */
    drv_add(t, &one, 1, 2);             /* slot 2 */
    g_assert_cmpint(pop(t), ==, 1);
    a = t->elem;
    g_assert_cmpint(vq_pop(&t->vq, &b, t->iov + 8, 8), ==, 1);
    g_assert_cmpuint(t->vq.inflight, ==, 2);

    vq_push(&t->vq, &b, 40);
    g_assert_cmpuint(t->ring[0].id, ==, 2);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 2);
    g_assert_cmpuint(len, ==, 40);
    g_assert_true(t->ring[0].flags & VRING_DESC_F_WRITE);
    g_assert_false(drv_get_used(t, &id, &len));

    vq_push(&t->vq, &a, 0);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 1);
    g_assert_cmpuint(len, ==, 0);
    g_assert_cmpuint(t->next_used, ==, 3);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE | 3 | 3 << 16);
    tguest_free(t);
}

/* Filled descriptors reach the driver together, when vq_flush publishes them. */
static void test_batch_published_by_flush(void)
{
    struct tguest *t = tguest_new(0);
    struct vq_elem e[3];
    uint16_t id;
    uint32_t len;

    for (uint16_t i = 0; i < 3; i++) {
        drv_add_req(t, i);
        g_assert_cmpint(vq_pop(&t->vq, &e[i], t->iov + 4 * i, 4), ==, 1);
    }
    vq_fill(&t->vq, &e[2], 1);
    vq_fill(&t->vq, &e[0], 2);
    g_assert_cmpuint(vq_unflushed(&t->vq), ==, 2);
    g_assert_false(drv_get_used(t, &id, &len));
    vq_flush(&t->vq);
    g_assert_cmpuint(vq_unflushed(&t->vq), ==, 0);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 2);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 0);
    g_assert_false(drv_get_used(t, &id, &len));
    vq_push(&t->vq, &e[1], 3);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 1);
    tguest_free(t);
}

/*
 * Many laps with chains that cross the ring's end, completed out of
 * order, and a restart from GET_VRING_BASE's value halfway: the driver
 * gets every id back exactly once with its length.
 */
static void test_laps_and_restart(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    unsigned done = 0, added = 0;
    struct vq_elem held[QSZ];
    unsigned nheld = 0;

    for (unsigned round = 0; round < 40; round++) {
        uint16_t id;
        uint32_t len;

        /* Chains of 3 in a ring of 8: they straddle the end every few laps. */
        if (t->ndescs[round % QSZ] == 0 && (added - done) < 2) {
            struct tbuf b[3] = { { data_gpa(0), 16, false }, { data_gpa(1), 8, false },
                                 { data_gpa(round % QSZ + 2), 32, true } };

            drv_add(t, b, 3, (uint16_t)(round % QSZ));
            added++;
        }
        while (nheld < QSZ && pop(t) == 1) {
            held[nheld++] = t->elem;
        }
        if (nheld == 2) {
            /* Newest first. */
            vq_fill(&t->vq, &held[1], held[1].head + 100);
            vq_fill(&t->vq, &held[0], held[0].head + 100);
            vq_flush(&t->vq);
            nheld = 0;
        }
        while (drv_get_used(t, &id, &len)) {
            g_assert_cmpuint(len, ==, id + 100u);
            done++;
        }
        if (round == 21 && nheld == 0) {
            uint32_t base = vq_get_base(&t->vq);

            tguest_setup(t, F_INDIRECT, base);
            g_assert_cmphex(vq_get_base(&t->vq), ==, base);
        }
    }
    g_assert_cmpuint(added, >=, 12);
    g_assert_cmpuint(done + nheld, ==, added);
    tguest_free(t);
}

static void test_unpop(void)
{
    struct tguest *t = tguest_new(0);

    drv_add_req(t, 4);
    g_assert_cmpint(pop(t), ==, 1);
    vq_unpop(&t->vq);
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 4);
    g_assert_cmpuint(t->elem.ndescs, ==, 2);
    tguest_free(t);
}

/* --- malformed rings --- */

static void test_chain_longer_than_ring(void)
{
    struct tguest *t = tguest_new(0);

    for (unsigned i = 0; i < QSZ; i++) {
        t->ring[i] = (struct vring_packed_desc){
            .addr = data_gpa(i), .len = 8, .flags = AVAIL | VRING_DESC_F_NEXT };
    }
    expect_failure("*chain at slot 0 is longer than the ring*");
    g_assert_cmpint(pop(t), ==, -ELOOP);
    g_test_assert_expected_messages();
    g_assert_true(t->vq.broken);
    g_assert_cmpint(pop(t), ==, -EIO);
    /* No end to the chain: nothing to answer. */
    g_assert_cmpint(vq_answer_bad_chain(&t->vq, "x", 1), ==, -ENOENT);
    tguest_free(t);
}

static void test_indirect_rules(void)
{
    struct tguest *t = tguest_new(0);
    struct vring_packed_desc *table = host_of(t, RAM_GPA + INDIRECT_OFF);
    struct tbuf ind = { RAM_GPA + INDIRECT_OFF, 2 * sizeof(*table), false };
    struct tbuf two[2] = { ind, { data_gpa(0), 8, true } };

    table[0] = (struct vring_packed_desc){ .addr = data_gpa(0), .len = 8 };
    table[1] = (struct vring_packed_desc){ .addr = data_gpa(1), .len = 8 };
    drv_add_flags(t, &ind, 1, 0, VRING_DESC_F_INDIRECT);
    expect_failure("*INDIRECT_DESC was not negotiated*");
    g_assert_cmpint(pop(t), ==, -EINVAL);
    g_test_assert_expected_messages();
    tguest_free(t);

    /* An indirect descriptor that claims a successor would desynchronise the slots. */
    t = tguest_new(F_INDIRECT);
    drv_add_flags(t, two, 2, 0, VRING_DESC_F_INDIRECT);
    expect_failure("*indirect descriptor at slot 0 has NEXT set*");
    g_assert_cmpint(pop(t), ==, -EINVAL);
    g_test_assert_expected_messages();
    tguest_free(t);

    t = tguest_new(F_INDIRECT);
    table = host_of(t, RAM_GPA + INDIRECT_OFF);
    table[1] = (struct vring_packed_desc){ .addr = data_gpa(1), .len = 16,
                                          .flags = VRING_DESC_F_INDIRECT };
    drv_add_flags(t, &ind, 1, 0, VRING_DESC_F_INDIRECT);
    expect_failure("*nested indirect*");
    g_assert_cmpint(pop(t), ==, -EINVAL);
    g_test_assert_expected_messages();
    tguest_free(t);

    t = tguest_new(F_INDIRECT);
    ind.len = 24;
    drv_add_flags(t, &ind, 1, 0, VRING_DESC_F_INDIRECT);
    expect_failure("*not a multiple of 16*");
    g_assert_cmpint(pop(t), ==, -EINVAL);
    g_test_assert_expected_messages();
    tguest_free(t);
}

/*
 * A chain whose readable buffer lies outside guest memory breaks the
 * queue, but its response buffer is answered, and earlier completions
 * still reach the driver in the same batch.
 */
static void test_bad_chain_is_answered(void)
{
    struct tguest *t = tguest_new(0);
    struct tbuf bad[3] = {
        { data_gpa(0), 16, false }, { HOLE_GPA, 16, false }, { data_gpa(5), 8, true },
    };
    uint8_t *resp = host_of(t, data_gpa(5));
    uint16_t id;
    uint32_t len;

    drv_add_req(t, 1);
    g_assert_cmpint(pop(t), ==, 1);
    vq_fill(&t->vq, &t->elem, 7);
    drv_add(t, bad, 3, 5);
    expect_failure("*outside guest memory*");
    g_assert_cmpint(pop(t), ==, -EFAULT);
    g_test_assert_expected_messages();
    g_assert_cmpint(vq_answer_bad_chain(&t->vq, "ABCDEFGHIJ", 10), ==, 8);
    g_assert_cmpmem(resp, 8, "ABCDEFGH", 8);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 1);
    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, 5);
    g_assert_cmpuint(len, ==, 8);
    g_assert_cmpuint(t->next_used, ==, 5);
    g_assert_cmpuint(call_count(t), ==, 1);
    g_assert_cmpint(vq_answer_bad_chain(&t->vq, "x", 1), ==, -ENOENT);
    tguest_free(t);
}

/* A bogus slot count (a corrupted element) breaks the queue instead of the ring. */
static void test_fill_checks_slot_count(void)
{
    struct tguest *t = tguest_new(0);
    struct vq_elem e;

    drv_add_req(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    e = t->elem;
    e.ndescs = QSZ + 1;
    expect_failure("*completing a chain of 9 slots*");
    vq_fill(&t->vq, &e, 0);
    g_test_assert_expected_messages();
    g_assert_true(t->vq.broken);
    tguest_free(t);
}

/* --- notifications --- */

static void complete_one(struct tguest *t, uint16_t id)
{
    uint32_t len;
    uint16_t got;

    drv_add_req(t, id);
    g_assert_cmpint(pop(t), ==, 1);
    vq_push(&t->vq, &t->elem, 1);
    g_assert_true(drv_get_used(t, &got, &len));
    g_assert_cmpuint(got, ==, id);
}

static void test_interrupt_enable_disable(void)
{
    struct tguest *t = tguest_new(0);

    complete_one(t, 0);
    g_assert_true(vq_notify(&t->vq));
    g_assert_false(vq_notify(&t->vq));          /* nothing new */
    t->driver_event->flags = VRING_PACKED_EVENT_FLAG_DISABLE;
    complete_one(t, 1);
    g_assert_false(vq_notify(&t->vq));
    t->driver_event->flags = VRING_PACKED_EVENT_FLAG_ENABLE;
    complete_one(t, 2);
    g_assert_true(vq_notify(&t->vq));
    g_assert_cmpuint(call_count(t), ==, 2);
    tguest_free(t);
}

/*
 * With EVENT_IDX the driver names the used slot (and lap) it wants an
 * interrupt for: completions before it stay quiet, the one that reaches
 * it interrupts, also when it lies in the next lap.
 */
static void test_interrupt_event_idx(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);

    complete_one(t, 0);                          /* used slots 0-1 */
    g_assert_true(vq_notify(&t->vq));            /* the first decision always notifies */
    t->driver_event->off_wrap = 6 | WRAP;        /* wake me when slot 6 of lap 1 is used */
    t->driver_event->flags = VRING_PACKED_EVENT_FLAG_DESC;
    complete_one(t, 1);                          /* slots 2-3 */
    g_assert_false(vq_notify(&t->vq));
    complete_one(t, 2);                          /* slots 4-5 */
    g_assert_false(vq_notify(&t->vq));
    complete_one(t, 3);                          /* slots 6-7: reaches 6 */
    g_assert_true(vq_notify(&t->vq));

    /* Lap 0 now (the wrap bit clear): slot 2 of it. */
    t->driver_event->off_wrap = 2;
    complete_one(t, 4);                          /* slots 0-1 of lap 0 */
    g_assert_false(vq_notify(&t->vq));
    complete_one(t, 5);                          /* slots 2-3 */
    g_assert_true(vq_notify(&t->vq));

    /* An event slot in the lap behind (already passed) stays quiet. */
    t->driver_event->off_wrap = 1 | WRAP;
    complete_one(t, 6);
    g_assert_false(vq_notify(&t->vq));
    g_assert_cmpuint(t->vq.notifications, ==, 3);
    tguest_free(t);
}

static void test_notify_on_empty(void)
{
    struct tguest *t = tguest_new(F_ON_EMPTY);

    complete_one(t, 0);
    g_assert_true(vq_notify(&t->vq));
    /* Even with interrupts disabled, running out of work notifies. */
    t->driver_event->flags = VRING_PACKED_EVENT_FLAG_DISABLE;
    complete_one(t, 1);
    g_assert_true(vq_notify(&t->vq));
    tguest_free(t);
}

/* Kick suppression: off while we poll; on, at our next slot, when we stop. */
static void test_kicks(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);

    vq_disable_notify(&t->vq);
    g_assert_cmpuint(t->device_event->flags, ==, VRING_PACKED_EVENT_FLAG_DISABLE);
    complete_one(t, 0);
    complete_one(t, 1);
    complete_one(t, 2);
    complete_one(t, 3);
    complete_one(t, 4);                          /* next slot: 2 of lap 0 */
    g_assert_cmpuint(t->device_event->flags, ==, VRING_PACKED_EVENT_FLAG_DISABLE);
    g_assert_false(vq_enable_notify(&t->vq));
    g_assert_cmpuint(t->device_event->flags, ==, VRING_PACKED_EVENT_FLAG_DESC);
    g_assert_cmphex(t->device_event->off_wrap, ==, 2);

    /* A request that came while kicks were off is reported, not lost. */
    vq_disable_notify(&t->vq);
    drv_add_req(t, 5);
    g_assert_true(vq_enable_notify(&t->vq));
    g_assert_cmpint(pop(t), ==, 1);
    /* An empty pop with kicks on asks for the next slot again. */
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmphex(t->device_event->off_wrap, ==, 4);
    tguest_free(t);

    /* Without EVENT_IDX: every addition kicks while enabled. */
    t = tguest_new(0);
    vq_disable_notify(&t->vq);
    g_assert_false(vq_enable_notify(&t->vq));
    g_assert_cmpuint(t->device_event->flags, ==, VRING_PACKED_EVENT_FLAG_ENABLE);
    tguest_free(t);
}

/* --- what packed rings go without --- */

static void test_inflight_not_tracked(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *q =
        g_malloc0(sizeof(*q) + QSZ * sizeof(struct vhost_user_inflight_desc));

    q->desc_num = QSZ;
    g_assert_cmpint(vq_set_inflight(&t->vq, q, false), ==, 0);
    g_assert_null(t->vq.inflight_region);
    complete_one(t, 0);
    g_free(q);
    tguest_free(t);
}

/* --- dirty logging --- */

#define TLOG_BYTES (HOLE_GPA / VHOST_LOG_PAGE / 8 + 8)

static bool page_logged(const uint8_t *bits, uint64_t gpa)
{
    uint64_t p = gpa / VHOST_LOG_PAGE;

    return bits[p / 8] & (1u << (p % 8));
}

/*
 * Used descriptors are written into the descriptor ring: its page is
 * marked when they are filled and again when the batch's first flags are
 * published (a log sync may fall between), and the kick area when armed.
 */
static void test_log_marks_ring(void)
{
    struct tguest *t = tguest_new(F_EVENT_IDX);
    uint8_t bits[TLOG_BYTES] = { 0 };
    struct vhost_log log = { .bits = bits, .size = sizeof(bits) };

    close(t->vq.call_fd);
    vq_cleanup(&t->vq);
    vq_init(&t->vq, 0, VQ_NAME);
    vq_set_log(&t->vq, &log);
    g_assert_cmpint(vq_setup(&t->vq, &t->mem, QSZ, t->ring, t->driver_event, t->device_event,
                             F_PACKED | F_EVENT_IDX, FRESH_BASE), ==, 0);
    t->vq.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g_assert_true(page_logged(bits, RAM_GPA + DEVICE_OFF));
    g_assert_false(page_logged(bits, RAM_GPA + RING_OFF));

    drv_add_req(t, 0);
    g_assert_cmpint(pop(t), ==, 1);
    vq_fill(&t->vq, &t->elem, 4);
    g_assert_true(page_logged(bits, RAM_GPA + RING_OFF));
    g_assert_true(page_logged(bits, data_gpa(1)));      /* the response buffer */
    g_assert_false(page_logged(bits, data_gpa(0)));     /* the header: only read */
    memset(bits, 0, sizeof(bits));
    vq_flush(&t->vq);
    g_assert_true(page_logged(bits, RAM_GPA + RING_OFF));
    g_assert_cmpuint(log.missed, ==, 0);
    tguest_free(t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_log_set_always_fatal(G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR);

    g_test_add_func("/virtqueue-packed/setup/fresh-base-kicks-on-bad-areas", test_setup);
    g_test_add_func("/virtqueue-packed/pop/empty-and-other-lap", test_pop_empty_and_stale_lap);
    g_test_add_func("/virtqueue-packed/pop/chain-with-id-of-its-last-descriptor",
                    test_pop_chain);
    g_test_add_func("/virtqueue-packed/pop/indirect-table", test_pop_indirect);
    g_test_add_func("/virtqueue-packed/pop/unpop", test_unpop);
    g_test_add_func("/virtqueue-packed/used/out-of-order-completions",
                    test_complete_out_of_order);
    g_test_add_func("/virtqueue-packed/used/batch-published-by-flush",
                    test_batch_published_by_flush);
    g_test_add_func("/virtqueue-packed/used/laps-chains-across-the-end-and-restart",
                    test_laps_and_restart);
    g_test_add_func("/virtqueue-packed/malformed/chain-longer-than-ring",
                    test_chain_longer_than_ring);
    g_test_add_func("/virtqueue-packed/malformed/indirect-rules", test_indirect_rules);
    g_test_add_func("/virtqueue-packed/malformed/bad-chain-is-answered",
                    test_bad_chain_is_answered);
    g_test_add_func("/virtqueue-packed/malformed/fill-checks-slot-count",
                    test_fill_checks_slot_count);
    g_test_add_func("/virtqueue-packed/notify/driver-enables-and-disables",
                    test_interrupt_enable_disable);
    g_test_add_func("/virtqueue-packed/notify/event-idx-slot-and-lap",
                    test_interrupt_event_idx);
    g_test_add_func("/virtqueue-packed/notify/on-empty", test_notify_on_empty);
    g_test_add_func("/virtqueue-packed/kicks/off-while-polling-on-at-next-slot", test_kicks);
    g_test_add_func("/virtqueue-packed/inflight/packed-rings-run-untracked",
                    test_inflight_not_tracked);
    g_test_add_func("/virtqueue-packed/log/used-descriptors-mark-the-ring",
                    test_log_marks_ring);
    return g_test_run();
}
