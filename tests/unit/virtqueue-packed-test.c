/*
 * Specification of the device side of a packed virtqueue
 * (hw/virtio/virtqueue-packed.c, reached through virtqueue.h).  Each test
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
#include "shared-writer.h"
#include "vhost-user-proto.h"
#include "virtqueue.h"
#include "vq-pop-check.h"

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
    struct vhost_user_inflight_queue_packed *record;  /* tguest_tracked's */
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
    g_free(t->record);
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

/*
 * Reads the next used descriptor, if the device published one.  Both outputs are set on
 * every path, an impossible id on a miss: g_assert_true() returns when the
 * test's assertions are non-fatal, so a caller may read them after a miss.
 */
static bool drv_get_used(struct tguest *t, uint16_t *id, uint32_t *len)
{
    const struct vring_packed_desc *d = &t->ring[t->next_used];
    uint16_t flags = __atomic_load_n(&d->flags, __ATOMIC_ACQUIRE);
    unsigned next;

    if (!!(flags & AVAIL) != t->used_wrap || !!(flags & USED) != t->used_wrap) {
        *id = UINT16_MAX;
        *len = 0;
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

/* --- inflight tracking for back-end restarts --- */

static struct vhost_user_inflight_queue_packed *record_new(void)
{
    struct vhost_user_inflight_queue_packed *q =
        g_malloc0(sizeof(*q) + QSZ * sizeof(q->desc[0]));

    q->version = 1;
    q->desc_num = QSZ;
    return q;
}

/* A ring tracked in a fresh record (t->record). */
static struct tguest *tguest_tracked(void)
{
    struct tguest *t = tguest_new(0);

    t->record = record_new();
    g_assert_cmpint(vq_set_inflight_packed(&t->vq, t->record, false), ==, 0);
    return t;
}

/*
 * The back-end dies and a new one takes the ring over.  QEMU gives it
 * the base of the ring's last start (FRESH_BASE: it cannot ask the dead
 * one for a packed ring's), the record says where the ring stands;
 * resubmitted is how many requests the new one will hand out again.
 */
static void restart(struct tguest *t, struct vhost_user_inflight_queue_packed *q,
                    unsigned resubmitted)
{
    tguest_setup(t, 0, FRESH_BASE);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_MESSAGE, "*resuming the packed ring*");
    if (resubmitted) {
        g_autofree char *what = g_strdup_printf(VQ_NAME ": resubmitting %u in-flight*",
                                                resubmitted);

        g_test_expect_message("vhost-scsi", G_LOG_LEVEL_MESSAGE, what);
    }
    g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, true), ==, 0);
    g_test_assert_expected_messages();
    g_assert_true(t->vq.inflight_packed == q);
}

static void pop_into(struct tguest *t, struct vq_elem *e, unsigned k)
{
    g_assert_cmpint(vq_pop(&t->vq, e, t->iov + 8 * k, 8), ==, 1);
}

/* The next pop hands out drv_add_req(t, id)'s request, buffers and all. */
static void pop_req(struct tguest *t, uint16_t id)
{
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, id);
    g_assert_cmpuint(t->elem.ndescs, ==, 2);
    g_assert_true(t->elem.out_sg[0].iov_base == host_of(t, data_gpa(2 * id)));
    g_assert_cmpuint(t->elem.out_len, ==, 32);
    g_assert_true(t->elem.in_sg[0].iov_base == host_of(t, data_gpa(2 * id + 1)));
    g_assert_cmpuint(t->elem.in_len, ==, 64);
}

static void expect_used(struct tguest *t, uint16_t want_id, uint32_t want_len)
{
    uint16_t id;
    uint32_t len;

    g_assert_true(drv_get_used(t, &id, &len));
    g_assert_cmpuint(id, ==, want_id);
    g_assert_cmpuint(len, ==, want_len);
}

/*
 * A popped chain's descriptors are copied into entries taken from the
 * record's free list, the first entry also holding the chain's state; a
 * flush gives the batch's entries back to the front of the list and
 * records the used slot, each step committed by the old_* copies.
 */
static void test_inflight_record(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue_packed *q = t->record = record_new();
    struct tbuf b[3] = {
        { data_gpa(0), 51, false }, { data_gpa(1), 4096, false }, { data_gpa(2), 108, true },
    };
    struct tbuf one = { data_gpa(3), 64, true };
    struct vq_elem a, c;

    /* Left over from an earlier driver: a fresh record forgets it. */
    q->free_head = 5;
    q->desc[3].inflight = 1;
    g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, false), ==, 0);
    g_assert_cmpuint(q->free_head, ==, 0);
    g_assert_cmpuint(q->desc[3].inflight, ==, 0);
    g_assert_cmpuint(q->desc[QSZ - 1].next, ==, QSZ);
    g_assert_cmpuint(q->used_wrap_counter, ==, 1);

    drv_add(t, b, 3, 6);
    drv_add(t, &one, 1, 2);
    pop_into(t, &a, 0);
    for (unsigned k = 0; k < 3; k++) {
        g_assert_cmphex(q->desc[k].addr, ==, b[k].gpa);
        g_assert_cmpuint(q->desc[k].len, ==, b[k].len);
        g_assert_cmpuint(q->desc[k].id, ==, 6);
        g_assert_cmphex(q->desc[k].flags, ==, AVAIL | (k < 2 ? VRING_DESC_F_NEXT
                                                             : VRING_DESC_F_WRITE));
    }
    g_assert_cmpuint(a.inflight_entry, ==, 0);
    g_assert_cmpuint(q->desc[0].inflight, ==, 1);
    g_assert_cmpuint(q->desc[0].num, ==, 3);
    g_assert_cmpuint(q->desc[0].last, ==, 2);
    g_assert_cmpuint(q->desc[0].counter, ==, 1);
    g_assert_cmpuint(q->free_head, ==, 3);
    g_assert_cmpuint(q->old_free_head, ==, 3);

    pop_into(t, &c, 1);
    g_assert_cmpuint(c.inflight_entry, ==, 3);
    g_assert_cmpuint(q->desc[3].counter, ==, 2);
    g_assert_cmpuint(q->free_head, ==, 4);

    /* Filled, not flushed: the record does not move until the driver can see it. */
    vq_fill(&t->vq, &c, 5);
    g_assert_cmpuint(q->desc[3].inflight, ==, 1);
    g_assert_cmpuint(q->free_head, ==, 4);
    g_assert_cmpuint(q->used_idx, ==, 0);
    vq_flush(&t->vq);
    g_assert_cmpuint(q->desc[3].inflight, ==, 0);
    g_assert_cmpuint(q->free_head, ==, 3);
    g_assert_cmpuint(q->old_free_head, ==, 3);
    g_assert_cmpuint(q->desc[3].next, ==, 4);
    g_assert_cmpuint(q->used_idx, ==, 1);
    g_assert_cmpuint(q->old_used_idx, ==, 1);
    g_assert_cmpuint(q->old_used_wrap_counter, ==, 1);

    vq_push(&t->vq, &a, 0);
    g_assert_cmpuint(q->desc[0].inflight, ==, 0);
    g_assert_cmpuint(q->free_head, ==, 0);
    g_assert_cmpuint(q->desc[2].next, ==, 3);
    g_assert_cmpuint(q->used_idx, ==, 4);
    expect_used(t, 2, 5);
    expect_used(t, 6, 0);
    tguest_free(t);
}

/*
 * A restarted back-end resumes where the record says, not at QEMU's
 * stale base, and hands out what was in flight first, oldest first, from
 * the record's copies: a chain's own ring slots may hold used descriptors
 * by then.
 */
static void test_inflight_restart_resubmits(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;
    struct tbuf one = { data_gpa(12), 64, true };
    struct vq_elem e[3];

    drv_add_req(t, 1);                  /* slots 0-1 */
    drv_add_req(t, 4);                  /* slots 2-3 */
    drv_add(t, &one, 1, 5);             /* slot 4 */
    for (unsigned k = 0; k < 3; k++) {
        pop_into(t, &e[k], k);
    }
    vq_push(&t->vq, &e[2], 7);
    expect_used(t, 5, 7);
    g_assert_cmpuint(t->ring[0].id, ==, 5);       /* request 1's first descriptor is gone */
    /* The driver adds one more the old back-end never saw. */
    drv_add_req(t, 0);                  /* slots 5-6 */

    restart(t, q, 2);
    /* Used slot 1, avail slot 5, both in lap 1. */
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE | 5 | 1 << 16);
    g_assert_cmpuint(t->vq.inflight, ==, 2);
    pop_req(t, 1);
    e[0] = t->elem;
    pop_into(t, &e[1], 1);
    g_assert_cmpuint(e[1].head, ==, 4);
    pop_into(t, &e[2], 2);
    g_assert_cmpuint(e[2].head, ==, 0);
    /* The counter goes on after the old back-end's newest. */
    g_assert_cmpuint(q->desc[e[2].inflight_entry].counter, >, q->desc[e[1].inflight_entry].counter);
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, 3);

    vq_fill(&t->vq, &e[1], 14);
    vq_fill(&t->vq, &e[2], 10);
    vq_fill(&t->vq, &e[0], 11);
    vq_flush(&t->vq);
    expect_used(t, 4, 14);
    expect_used(t, 0, 10);
    expect_used(t, 1, 11);
    g_assert_false(drv_get_used(t, &(uint16_t){ 0 }, &(uint32_t){ 0 }));
    g_assert_cmpuint(t->vq.inflight, ==, 0);
    for (unsigned i = 0; i < QSZ; i++) {
        g_assert_cmpuint(q->desc[i].inflight, ==, 0);
    }
    tguest_free(t);
}

/*
 * The old back-end died with a batch filled but not flushed: the driver
 * saw none of it, so its chains are in flight again; and the used
 * descriptors it wrote (all of a batch but the first have their flags)
 * are not read by the driver as completions when it gets there.
 */
static void test_inflight_restart_rolls_back_unpublished(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;
    struct tbuf one[2] = { { data_gpa(12), 64, true }, { data_gpa(13), 64, true } };
    struct vq_elem e[3];

    drv_add_req(t, 1);                  /* slots 0-1 */
    drv_add(t, &one[0], 1, 2);          /* slot 2 */
    drv_add(t, &one[1], 1, 3);          /* slot 3 */
    for (unsigned k = 0; k < 3; k++) {
        pop_into(t, &e[k], k);
    }
    vq_fill(&t->vq, &e[2], 1);          /* slot 0, its flags held back */
    vq_fill(&t->vq, &e[1], 2);          /* slot 1, flags written */

    restart(t, q, 3);
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE | 4);
    g_assert_false(drv_get_used(t, &(uint16_t){ 0 }, &(uint32_t){ 0 }));
    for (unsigned k = 0; k < 3; k++) {
        pop_into(t, &e[k], k);
        g_assert_cmpuint(e[k].head, ==, k + 1);
    }
    /* One slot used: the driver looks at slot 1 next, where the dead back-end wrote. */
    vq_push(&t->vq, &e[2], 9);
    expect_used(t, 3, 9);
    g_assert_false(drv_get_used(t, &(uint16_t){ 0 }, &(uint32_t){ 0 }));
    vq_push(&t->vq, &e[0], 8);
    expect_used(t, 1, 8);
    vq_push(&t->vq, &e[1], 7);
    expect_used(t, 2, 7);
    g_assert_false(drv_get_used(t, &(uint16_t){ 0 }, &(uint32_t){ 0 }));
    tguest_free(t);
}

/*
 * The old back-end died in vq_flush after publishing the batch, before
 * unmarking its chains and committing the old_* copies: the driver saw
 * the batch, so it stays completed.
 */
static void test_inflight_restart_commits_published(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;
    struct tbuf one = { data_gpa(12), 64, true };
    struct vq_elem a, b;
    uint16_t old_free_head;

    drv_add_req(t, 1);                  /* slots 0-1 */
    drv_add(t, &one, 1, 2);             /* slot 2 */
    pop_into(t, &a, 0);
    pop_into(t, &b, 1);
    old_free_head = q->old_free_head;
    vq_push(&t->vq, &b, 6);
    q->desc[b.inflight_entry].inflight = 1;
    q->old_free_head = old_free_head;
    q->old_used_idx = 0;

    restart(t, q, 1);
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE | 3 | 1 << 16);
    g_assert_cmpuint(q->desc[b.inflight_entry].inflight, ==, 0);
    expect_used(t, 2, 6);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 1);
    g_assert_cmpint(pop(t), ==, 0);
    vq_push(&t->vq, &t->elem, 3);
    expect_used(t, 1, 3);
    tguest_free(t);
}

/*
 * The old back-end died in vq_pop after marking the chain, before moving
 * the free list's head past it: that pop never happened, and the chain is
 * popped from the ring again, once.
 */
static void test_inflight_restart_after_torn_pop(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;
    struct tbuf one = { data_gpa(12), 64, true };

    drv_add_req(t, 1);
    drv_add(t, &one, 1, 2);
    g_assert_cmpint(pop(t), ==, 1);
    vq_push(&t->vq, &t->elem, 4);
    expect_used(t, 1, 4);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(q->desc[t->elem.inflight_entry].inflight, ==, 1);
    q->free_head = q->old_free_head = t->elem.inflight_entry;

    restart(t, q, 0);
    g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE | 2 | 2 << 16);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 2);
    g_assert_cmpint(pop(t), ==, 0);
    g_assert_cmpuint(t->vq.inflight, ==, 1);
    tguest_free(t);
}

/* vq_unpop gives the entries back, whether the chain came from the ring or the record. */
static void test_inflight_unpop(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;

    drv_add_req(t, 3);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(q->free_head, ==, 2);
    vq_unpop(&t->vq);
    g_assert_cmpuint(q->free_head, ==, 0);
    g_assert_cmpuint(q->old_free_head, ==, 0);
    g_assert_cmpuint(q->desc[0].inflight, ==, 0);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.inflight_entry, ==, 0);

    restart(t, q, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    vq_unpop(&t->vq);
    g_assert_cmpuint(q->desc[0].inflight, ==, 1);
    g_assert_cmpint(pop(t), ==, 1);
    g_assert_cmpuint(t->elem.head, ==, 3);
    g_assert_cmpint(pop(t), ==, 0);
    tguest_free(t);
}

/* What a record can say that does not hold together, each breaking one rule. */
static void corrupt_used_slot(struct vhost_user_inflight_queue_packed *q)
{
    q->used_idx = q->old_used_idx = QSZ;
}

static void corrupt_wrap_counter(struct vhost_user_inflight_queue_packed *q)
{
    q->old_used_wrap_counter = 7;
}

static void corrupt_free_list_loops(struct vhost_user_inflight_queue_packed *q)
{
    q->desc[q->old_free_head].next = q->old_free_head;
}

static void corrupt_chain_too_long(struct vhost_user_inflight_queue_packed *q)
{
    q->desc[0].num = QSZ + 1;
}

static void corrupt_chain_link(struct vhost_user_inflight_queue_packed *q)
{
    q->desc[0].next = 999;
}

static void corrupt_chain_end(struct vhost_user_inflight_queue_packed *q)
{
    q->desc[0].last = 7;
}

static void corrupt_chains_share(struct vhost_user_inflight_queue_packed *q)
{
    q->desc[2].next = 1;            /* the second chain's into the first one's */
}

static void corrupt_chain_on_free_list(struct vhost_user_inflight_queue_packed *q)
{
    q->desc[7].next = 1;            /* the free list's end into the first chain */
}

/*
 * A record that does not hold together (the area came from a previous
 * process, and is shared) gets a warning and a fresh start at the
 * front-end's base, never a wild index.
 */
static void test_inflight_garbage_starts_afresh(void)
{
    void (*const corrupt[])(struct vhost_user_inflight_queue_packed *) = {
        corrupt_used_slot, corrupt_wrap_counter, corrupt_free_list_loops,
        corrupt_chain_too_long, corrupt_chain_link, corrupt_chain_end, corrupt_chains_share,
        corrupt_chain_on_free_list,
    };

    for (unsigned c = 0; c < G_N_ELEMENTS(corrupt); c++) {
        struct tguest *t = tguest_tracked();
        struct vhost_user_inflight_queue_packed *q = t->record;

        drv_add_req(t, 1);              /* entries 0-1 */
        drv_add_req(t, 2);              /* entries 2-3 */
        g_assert_cmpint(pop(t), ==, 1);
        g_assert_cmpint(pop(t), ==, 1);
        corrupt[c](q);
        tguest_setup(t, 0, FRESH_BASE);
        expect_failure("*" VQ_NAME ": the inflight area's record of this packed ring does "
                       "not hold together*");
        g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, true), ==, 0);
        g_test_assert_expected_messages();
        g_assert_cmphex(vq_get_base(&t->vq), ==, FRESH_BASE);
        g_assert_cmpuint(t->vq.inflight, ==, 0);
        g_assert_cmpuint(t->vq.resubmit_num, ==, 0);
        g_assert_cmpuint(q->free_head, ==, 0);
        g_assert_cmpuint(q->desc[0].inflight, ==, 0);
        /* Tracked afresh: the ring's chains are popped from the ring. */
        g_assert_cmpint(pop(t), ==, 1);
        g_assert_cmpuint(t->elem.head, ==, 1);
        g_assert_cmpuint(q->desc[0].inflight, ==, 1);
        tguest_free(t);
    }
}

/*
 * A driver that makes more descriptors available than the ring has slots
 * (a slot whose request is still in flight, in the next lap) finds no
 * entry to record it in: the queue breaks, as for any malformed ring.
 */
static void test_inflight_more_than_the_ring(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;
    struct tbuf one = { data_gpa(0), 16, false };

    for (uint16_t i = 0; i < QSZ; i++) {
        drv_add(t, &one, 1, i);
        g_assert_cmpint(pop(t), ==, 1);
    }
    g_assert_cmpuint(q->free_head, ==, QSZ);
    t->ndescs[0] = 0;
    drv_add(t, &one, 1, 0);
    expect_failure("*no free entry in the inflight area*");
    g_assert_cmpint(pop(t), ==, -ENOSPC);
    g_test_assert_expected_messages();
    g_assert_true(t->vq.broken);
    tguest_free(t);
}

/* The layouts are not interchangeable. */
static void test_inflight_layouts(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue *split =
        g_malloc0(sizeof(*split) + QSZ * sizeof(split->desc[0]));
    struct vhost_user_inflight_queue_packed *q = t->record = record_new();

    split->desc_num = QSZ;
    expect_failure("*split layout of the inflight area cannot track a packed ring*");
    g_assert_cmpint(vq_set_inflight(&t->vq, split, false), ==, -EINVAL);
    g_test_assert_expected_messages();
    q->desc_num = QSZ * 2;
    expect_failure("*packed inflight region has 16 descriptors, packed ring has 8*");
    g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, true), ==, -EINVAL);
    g_test_assert_expected_messages();
    g_assert_null(t->vq.inflight_packed);
    g_free(split);
    tguest_free(t);
}

static void drop_message(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                         gpointer data)
{
}

/* What the driver wrote into a request's writable buffer: the device answers it as the length. */
static uint32_t ticket(const struct vq_elem *e)
{
    return *(const uint32_t *)e->in_sg[0].iov_base;
}

/* Reads every used descriptor the device published: each must carry its request's ticket. */
static unsigned reap(struct tguest *t, const uint32_t *tickets)
{
    unsigned n = 0;
    uint16_t id;
    uint32_t len;

    while (drv_get_used(t, &id, &len)) {
        g_assert_cmpuint(len, ==, tickets[id]);
        n++;
    }
    return n;
}

/*
 * Laps of chains of one to three slots completed out of order, some
 * batches left unflushed, and the back-end killed every few rounds,
 * wherever it stands: the driver gets every request back exactly once,
 * each answered with its own ticket (an id is used again and again: a
 * stale or repeated completion would carry an older one).
 */
static void test_inflight_restarts_anywhere(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;
    struct vq_elem held[QSZ];
    uint32_t tickets[QSZ];
    unsigned nheld = 0, added = 0, done = 0, slots = 0, restarts = 0;
    /* Each restart says where it resumes and what it resubmits: 84 lines of noise here. */
    guint quiet = g_log_set_handler("vhost-scsi", G_LOG_LEVEL_MESSAGE, drop_message, NULL);

    for (unsigned round = 0; round < 300; round++) {
        uint16_t id;

        /* Two more requests where ids and slots allow. */
        for (unsigned a = 0; a < 2; a++) {
            unsigned n = 1 + (round + a) % 3;
            struct tbuf b[3];

            id = (uint16_t)((2 * round + a) % QSZ);
            if (t->ndescs[id] != 0 || slots + n > QSZ) {
                continue;
            }
            b[0] = (struct tbuf){ data_gpa(0), 16, false };
            b[1] = (struct tbuf){ data_gpa(1), 8, false };
            b[2] = (struct tbuf){ data_gpa(id + 2), 32, true };
            tickets[id] = 1000 + added;
            *(uint32_t *)host_of(t, data_gpa(id + 2)) = tickets[id];
            drv_add(t, b + 3 - n, n, id);
            slots += n;
            added++;
        }
        while (nheld < QSZ && vq_pop(&t->vq, &held[nheld], t->iov + 8 * nheld, 8) == 1) {
            nheld++;
        }
        /*
         * Complete the newer half, newest first; flush two rounds in
         * three, and each one alone right after a restart, so that the
         * driver looks at every next slot.
         */
        for (unsigned k = (nheld + 1) / 2; k > 0; k--) {
            vq_fill(&t->vq, &held[nheld - 1], ticket(&held[nheld - 1]));
            nheld--;
            if (round % 7 == 0) {
                vq_flush(&t->vq);
                done += reap(t, tickets);
            }
        }
        if (round % 3) {
            vq_flush(&t->vq);
        }
        done += reap(t, tickets);
        slots = 0;
        for (unsigned i = 0; i < QSZ; i++) {
            slots += t->ndescs[i];
        }
        if (round % 7 == 6) {
            /* Whatever it held or had filled is the new one's to find in the record. */
            tguest_setup(t, 0, FRESH_BASE);
            g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, true), ==, 0);
            nheld = 0;
            restarts++;
        }
    }
    while (vq_pop(&t->vq, &held[nheld], t->iov + 8 * nheld, 8) == 1) {
        nheld++;
    }
    while (nheld > 0) {
        nheld--;
        vq_push(&t->vq, &held[nheld], ticket(&held[nheld]));
    }
    done += reap(t, tickets);
    g_assert_false(vq_has_avail(&t->vq));
    g_log_remove_handler("vhost-scsi", quiet);
    g_assert_cmpuint(restarts, ==, 42);
    g_assert_cmpuint(added, >=, 100);
    g_assert_cmpuint(done, ==, added);
    for (unsigned i = 0; i < QSZ; i++) {
        g_assert_cmpuint(t->ndescs[i], ==, 0);
        g_assert_cmpuint(q->desc[i].inflight, ==, 0);
    }
    tguest_free(t);
}

/*
 * --- shared memory is read once: a front-end rewriting the record ---
 *
 * The restore checks the record and the resubmitted chains come from
 * what it checked: the front-end rewriting the shared area afterwards, or
 * all along, changes neither.
 */

/* The record is rewritten the moment the restore returns: the chain handed out is the one checked. */
static void test_read_once_record_rewritten_after_restore(void)
{
    struct tguest *t = tguest_tracked();
    struct vhost_user_inflight_queue_packed *q = t->record;

    drv_add_req(t, 1);                  /* slots 0-1 */
    g_assert_cmpint(pop(t), ==, 1);
    restart(t, q, 1);
    for (unsigned i = 0; i < QSZ; i++) {
        q->desc[i].num = QSZ;
        q->desc[i].next = (uint16_t)i;
        q->desc[i].addr = HOLE_GPA;
        q->desc[i].len = 1;
        q->desc[i].flags = VRING_DESC_F_WRITE;
    }
    pop_req(t, 1);
    g_assert_false(t->vq.broken);
    tguest_free(t);
}

#define RO_ROUNDS 2000

/*
 * Rewrites a few entries and the head of the record per pass with values
 * that often make a record that holds together (chains of one entry that
 * end where they start, buffers in guest memory), sometimes one that does
 * not.
 */
static void scramble_record(void *shared, GRand *rand)
{
    struct vhost_user_inflight_queue_packed *q = shared;

    for (unsigned k = 0; k < 4; k++) {
        unsigned i = g_rand_int_range(rand, 0, QSZ);
        struct vhost_user_inflight_desc_packed *d = &q->desc[i];
        bool plain = g_rand_int_range(rand, 0, 4) != 0;

        __atomic_store_n(&d->inflight, (uint8_t)g_rand_boolean(rand), __ATOMIC_RELAXED);
        __atomic_store_n(&d->num, (uint16_t)(plain ? 1 : g_rand_int_range(rand, 0, 4)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&d->last, (uint16_t)(plain ? i : (unsigned)g_rand_int_range(rand, 0, QSZ)),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&d->next, (uint16_t)g_rand_int_range(rand, 0, QSZ + 1),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&d->counter, (uint64_t)g_rand_int(rand), __ATOMIC_RELAXED);
        __atomic_store_n(&d->addr, data_gpa(g_rand_int_range(rand, 0, 16)), __ATOMIC_RELAXED);
        __atomic_store_n(&d->len, (uint32_t)g_rand_int_range(rand, 0, 4096), __ATOMIC_RELAXED);
        __atomic_store_n(&d->flags, (uint16_t)(g_rand_boolean(rand) ? VRING_DESC_F_WRITE : 0),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&d->id, (uint16_t)g_rand_int_range(rand, 0, QSZ), __ATOMIC_RELAXED);
    }
    __atomic_store_n(&q->free_head, (uint16_t)g_rand_int_range(rand, 0, QSZ + 1),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&q->old_free_head, (uint16_t)g_rand_int_range(rand, 0, QSZ + 1),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&q->used_idx, (uint16_t)g_rand_int_range(rand, 0, QSZ), __ATOMIC_RELAXED);
    __atomic_store_n(&q->old_used_idx, (uint16_t)g_rand_int_range(rand, 0, QSZ),
                     __ATOMIC_RELAXED);
}

static void count_warning(const gchar *domain, GLogLevelFlags level, const gchar *msg,
                          gpointer counter)
{
    (*(unsigned *)counter)++;
}

/* Ring slots from the used slot to the avail slot, across a lap. */
static unsigned slots_in_flight(const struct virtqueue *vq)
{
    return vq->avail_wrap == vq->used_wrap ? (unsigned)(vq->last_avail_idx - vq->used_idx)
                                           : vq->last_avail_idx + vq->num - vq->used_idx;
}

/*
 * Restores from a record the front-end rewrites all the while, then pops
 * what it resubmits: every chain lies in guest memory, and unless the
 * queue breaks cleanly, the chains take exactly the slots the restore
 * placed the avail slot past.
 */
static void test_read_once_record_rewritten_during_restore(void)
{
    struct tguest *t = tguest_new(0);
    struct vhost_user_inflight_queue_packed *q = t->record = record_new();
    unsigned warnings = 0, chains = 0, broken = 0;
    guint quiet = g_log_set_handler("vhost-scsi", G_LOG_LEVEL_MESSAGE, drop_message, NULL);
    guint warned = g_log_set_handler("vhost-scsi", G_LOG_LEVEL_WARNING, count_warning, &warnings);
    struct shared_writer *w;

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    w = shared_writer_start(scramble_record, q);
    for (unsigned round = 0; round < RO_ROUNDS; round++) {
        unsigned slots = 0, resubmits;

        tguest_setup(t, 0, FRESH_BASE);
        g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, true), ==, 0);
        resubmits = t->vq.resubmit_num;
        g_assert_cmpuint(t->vq.inflight, ==, resubmits);
        g_assert_cmpuint(slots_in_flight(&t->vq), <=, QSZ);
        for (unsigned k = 0; k < resubmits; k++) {
            int r = pop(t);

            g_assert_cmpint(r, !=, 0);
            if (!vq_pop_result_sane(&t->vq, r)) {
                break;
            }
            slots += t->elem.ndescs;
            vq_assert_chain_in_guest(&t->mem, &t->elem, VQ_MAX_SG);
        }
        if (!t->vq.broken) {
            g_assert_cmpuint(slots, ==, slots_in_flight(&t->vq));
        }
        chains += resubmits;
        broken += t->vq.broken;
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; %u chains resubmitted, %u "
                   "queues broken, %u warnings in %d rounds", shared_writer_stop(w), chains,
                   broken, warnings, RO_ROUNDS);
    g_log_remove_handler("vhost-scsi", warned);
    g_log_remove_handler("vhost-scsi", quiet);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
    tguest_free(t);
}

/* Rewrites the free list's links and the chains' last entries a running queue follows. */
static void scramble_tracking(void *shared, GRand *rand)
{
    struct vhost_user_inflight_queue_packed *q = shared;
    unsigned i = g_rand_int_range(rand, 0, QSZ);

    __atomic_store_n(&q->desc[i].next, (uint16_t)g_rand_int_range(rand, 0, 2 * QSZ),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&q->desc[i].last, (uint16_t)g_rand_int(rand), __ATOMIC_RELAXED);
}

/*
 * While the queue runs with tracking, the front-end rewrites the links it
 * follows: each request is popped and completed as the driver posted it,
 * or the queue breaks cleanly (a link out of the area: no free entry).
 */
static void test_read_once_tracking_rewritten_while_running(void)
{
    struct vhost_user_inflight_queue_packed *q = record_new();
    unsigned warnings = 0, served = 0, broken = 0;
    guint warned = g_log_set_handler("vhost-scsi", G_LOG_LEVEL_WARNING, count_warning, &warnings);
    struct shared_writer *w;

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    w = shared_writer_start(scramble_tracking, q);
    for (unsigned round = 0; round < RO_ROUNDS / 4; round++) {
        struct tguest *t = tguest_new(0);
        struct vq_elem e[3];
        unsigned n = 0;

        g_assert_cmpint(vq_set_inflight_packed(&t->vq, q, false), ==, 0);
        for (uint16_t id = 0; id < 3; id++) {
            drv_add_req(t, id);
        }
        for (; n < 3; n++) {
            int r = vq_pop(&t->vq, &e[n], t->iov + 8 * n, 8);

            if (r < 0) {
                g_assert_cmpint(r, ==, -ENOSPC);
                g_assert_true(t->vq.broken);
                break;
            }
            g_assert_cmpint(r, ==, 1);
            g_assert_cmpuint(e[n].head, ==, n);
            g_assert_cmpuint(e[n].ndescs, ==, 2);
            g_assert_true(e[n].out_sg[0].iov_base == host_of(t, data_gpa(2 * n)));
        }
        for (unsigned k = n; k-- > 0;) {
            vq_fill(&t->vq, &e[k], 10 + k);
        }
        vq_flush(&t->vq);
        for (unsigned k = n; !t->vq.broken && k-- > 0;) {
            expect_used(t, (uint16_t)k, 10 + k);
        }
        served += t->vq.broken ? 0 : n;
        broken += t->vq.broken;
        tguest_free(t);
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; %u requests served, %u queues "
                   "broken", shared_writer_stop(w), served, broken);
    g_assert_cmpuint(warnings, ==, broken);
    g_log_remove_handler("vhost-scsi", warned);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
    g_free(q);
}

/*
 * Rewrites ring slots (address, length, id and flags, mostly available
 * in the first lap, sometimes indirect) and indirect table entries with
 * mostly plausible, sometimes hostile values.
 */
static void scramble_packed_ring(void *shared, GRand *rand)
{
    struct tguest *t = shared;
    struct vring_packed_desc *table = (void *)(t->ram + INDIRECT_OFF);
    struct vring_packed_desc *d = &t->ring[g_rand_int_range(rand, 0, QSZ)];
    struct vring_packed_desc *e = &table[g_rand_int_range(rand, 0, 8)];
    bool to_table = g_rand_int_range(rand, 0, 8) == 0;
    uint64_t addr = g_rand_int_range(rand, 0, 4) ? data_gpa(g_rand_int_range(rand, 0, 16))
                                                 : ((uint64_t)g_rand_int(rand) << 32 |
                                                    g_rand_int(rand));
    uint16_t flags = (uint16_t)g_rand_int_range(rand, 0, 4) |
                     (g_rand_int_range(rand, 0, 4) ? AVAIL : USED);

    __atomic_store_n(&d->addr, to_table ? RAM_GPA + INDIRECT_OFF : addr, __ATOMIC_RELAXED);
    __atomic_store_n(&d->len, (uint32_t)(to_table ? 16 * g_rand_int_range(rand, 0, 6)
                                                  : g_rand_int_range(rand, 0, 0x3000)),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&d->id, (uint16_t)g_rand_int_range(rand, 0, QSZ), __ATOMIC_RELAXED);
    __atomic_store_n(&d->flags, (uint16_t)(to_table ? (flags & ~VRING_DESC_F_NEXT) |
                                                      VRING_DESC_F_INDIRECT : flags),
                     __ATOMIC_RELEASE);
    __atomic_store_n(&e->addr, addr, __ATOMIC_RELAXED);
    __atomic_store_n(&e->len, (uint32_t)g_rand_int_range(rand, 0, 0x3000), __ATOMIC_RELAXED);
    __atomic_store_n(&e->flags, (uint16_t)g_rand_int_range(rand, 0, 8), __ATOMIC_RELAXED);
}

/*
 * The device pops from a ring the guest keeps rewriting: each pop yields
 * a chain of at most the ring's slots inside guest memory and the
 * caller's iovecs, or reports an empty ring, or breaks the queue once.
 */
static void test_read_once_ring_rewritten_during_pop(void)
{
    struct tguest *t = tguest_new(F_INDIRECT);
    unsigned warnings = 0, popped = 0, broken = 0;
    guint warned = g_log_set_handler("vhost-scsi", G_LOG_LEVEL_WARNING, count_warning, &warnings);
    struct shared_writer *w;

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    w = shared_writer_start(scramble_packed_ring, t);
    for (unsigned round = 0; round < RO_ROUNDS; round++) {
        unsigned max_iov = 1 + round % 11, before = warnings;

        tguest_setup(t, F_INDIRECT, FRESH_BASE);
        for (unsigned k = 0; k < QSZ + 2; k++) {
            if (!vq_pop_result_sane(&t->vq, vq_pop(&t->vq, &t->elem, t->iov, max_iov))) {
                break;
            }
            popped++;
            g_assert_cmpuint(t->elem.ndescs, >=, 1);
            g_assert_cmpuint(t->elem.ndescs, <=, QSZ);
            vq_assert_chain_in_guest(&t->mem, &t->elem, max_iov);
        }
        g_assert_cmpuint(warnings - before, ==, t->vq.broken ? 1 : 0);
        broken += t->vq.broken;
    }
    g_test_message("%" G_GUINT64_FORMAT " passes of the writer; %u chains popped, %u queues "
                   "broken in %d rounds", shared_writer_stop(w), popped, broken, RO_ROUNDS);
    g_log_remove_handler("vhost-scsi", warned);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
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
    g_test_add_func("/virtqueue-packed/inflight/pop-records-flush-frees", test_inflight_record);
    g_test_add_func("/virtqueue-packed/inflight/restart-resubmits-oldest-first-and-resumes",
                    test_inflight_restart_resubmits);
    g_test_add_func("/virtqueue-packed/inflight/restart-rolls-back-an-unpublished-batch",
                    test_inflight_restart_rolls_back_unpublished);
    g_test_add_func("/virtqueue-packed/inflight/restart-commits-a-published-batch",
                    test_inflight_restart_commits_published);
    g_test_add_func("/virtqueue-packed/inflight/restart-after-a-torn-pop",
                    test_inflight_restart_after_torn_pop);
    g_test_add_func("/virtqueue-packed/inflight/unpop", test_inflight_unpop);
    g_test_add_func("/virtqueue-packed/inflight/garbage-record-starts-afresh",
                    test_inflight_garbage_starts_afresh);
    g_test_add_func("/virtqueue-packed/inflight/more-in-flight-than-the-ring-breaks-it",
                    test_inflight_more_than_the_ring);
    g_test_add_func("/virtqueue-packed/inflight/layouts-not-interchangeable",
                    test_inflight_layouts);
    g_test_add_func("/virtqueue-packed/inflight/restarts-anywhere-lose-and-repeat-nothing",
                    test_inflight_restarts_anywhere);
    g_test_add_func("/virtqueue-packed/read-once/record-rewritten-after-restore",
                    test_read_once_record_rewritten_after_restore);
    g_test_add_func("/virtqueue-packed/read-once/record-rewritten-during-restore",
                    test_read_once_record_rewritten_during_restore);
    g_test_add_func("/virtqueue-packed/read-once/ring-rewritten-during-pop",
                    test_read_once_ring_rewritten_during_pop);
    g_test_add_func("/virtqueue-packed/read-once/tracking-rewritten-while-running",
                    test_read_once_tracking_rewritten_while_running);
    g_test_add_func("/virtqueue-packed/log/used-descriptors-mark-the-ring",
                    test_log_marks_ring);
    return g_test_run();
}
