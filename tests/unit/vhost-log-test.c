/*
 * Specification of the dirty log's bit arithmetic (hw/virtio/vhost-log.c):
 * which bits a write of guest memory sets, at page and region edges, for
 * ranges that span regions, for addresses near 2^64, and what happens
 * when the bitmap is shorter than guest memory — it is never written past.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "guest-mem.h"
#include "shared-writer.h"
#include "vhost-log.h"

#define LOG_BYTES 64            /* 512 pages: 2 MiB of guest address space */
#define GUARD 16                /* bytes after the bitmap that must stay untouched */

struct tlog {
    uint8_t buf[LOG_BYTES + GUARD];
    struct vhost_log log;
};

static void tlog_init(struct tlog *t, uint64_t size)
{
    memset(t->buf, 0, sizeof(t->buf));
    t->log = (struct vhost_log) { .bits = t->buf, .size = size };
}

static bool page_marked(const struct tlog *t, uint64_t page)
{
    return t->buf[page / 8] & (1u << (page % 8));
}

static unsigned marked(const struct tlog *t)
{
    unsigned n = 0;

    for (size_t i = 0; i < sizeof(t->buf); i++) {
        n += (unsigned)__builtin_popcount(t->buf[i]);
    }
    return n;
}

static void assert_guard_clean(const struct tlog *t)
{
    for (unsigned i = 0; i < GUARD; i++) {
        g_assert_cmpuint(t->buf[LOG_BYTES + i], ==, 0);
    }
}

static void test_one_byte_marks_its_page(void)
{
    struct tlog t;

    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_gpa(&t.log, 0x3000, 1);
    g_assert_true(page_marked(&t, 3));
    g_assert_cmpuint(marked(&t), ==, 1);
    /* Bit p % 8 of byte p / 8, as QEMU reads it. */
    g_assert_cmphex(t.buf[0], ==, 1u << 3);
    vhost_log_mark_gpa(&t.log, 0x9fff, 1);
    g_assert_cmphex(t.buf[1], ==, 1u << 1);
    g_assert_cmpuint(t.log.missed, ==, 0);
}

static void test_zero_length_marks_nothing(void)
{
    struct tlog t;

    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_gpa(&t.log, 0x5000, 0);
    g_assert_cmpuint(marked(&t), ==, 0);
}

static void test_page_boundaries(void)
{
    struct tlog t;

    tlog_init(&t, LOG_BYTES);
    /* The last byte of page 4 and the first of page 5: two pages. */
    vhost_log_mark_gpa(&t.log, 0x4fff, 2);
    g_assert_true(page_marked(&t, 4) && page_marked(&t, 5));
    g_assert_cmpuint(marked(&t), ==, 2);

    /* Exactly one page, aligned: one bit, not two. */
    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_gpa(&t.log, 0x8000, VHOST_LOG_PAGE);
    g_assert_cmpuint(marked(&t), ==, 1);
    g_assert_true(page_marked(&t, 8));

    /* 64 KiB from the middle of a page: 17 pages, across a byte of the bitmap. */
    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_gpa(&t.log, 0x6800, 0x10000);
    g_assert_cmpuint(marked(&t), ==, 17);
    for (uint64_t p = 6; p <= 22; p++) {
        g_assert_true(page_marked(&t, p));
    }
}

static void test_short_log_is_never_written_past(void)
{
    struct tlog t;

    tlog_init(&t, 2);   /* pages 0..15 */
    vhost_log_mark_gpa(&t.log, 14 * VHOST_LOG_PAGE, 4 * VHOST_LOG_PAGE);
    g_assert_true(page_marked(&t, 14) && page_marked(&t, 15));
    g_assert_cmpuint(marked(&t), ==, 2);
    /* Pages 16 and 17 have no bit: counted, not written. */
    g_assert_cmpuint(t.log.missed, ==, 2);
    for (size_t i = 2; i < sizeof(t.buf); i++) {
        g_assert_cmpuint(t.buf[i], ==, 0);
    }
}

/* A front-end syncing the log: each pass takes every byte's bits and clears them. */
struct log_sync {
    struct tlog *t;
    uint8_t collected[LOG_BYTES];   /* the bits the front-end took (its thread only) */
};

static void sync_log(void *shared, GRand *rand)
{
    struct log_sync *s = shared;

    for (unsigned i = 0; i < LOG_BYTES; i++) {
        s->collected[i] |= __atomic_exchange_n(&s->t->buf[i], 0, __ATOMIC_ACQ_REL);
    }
}

/*
 * The front-end reads and clears the bitmap while we mark it: marking
 * never reads the bitmap back (one atomic OR per page), so no mark is
 * lost between the two, none lands past the bitmap, and every page
 * marked is either taken by the front-end or still set.
 */
static void test_marks_survive_a_concurrent_sync(void)
{
    struct tlog t;
    struct log_sync s = { .t = &t };
    struct shared_writer *w;

    tlog_init(&t, LOG_BYTES);
    w = shared_writer_start(sync_log, &s);
    for (unsigned round = 0; round < 2000; round++) {
        uint64_t page = round % (8 * LOG_BYTES);

        vhost_log_mark_gpa(&t.log, page * VHOST_LOG_PAGE, 1);
    }
    g_test_message("%" G_GUINT64_FORMAT " syncs while marking", shared_writer_stop(w));
    for (unsigned i = 0; i < LOG_BYTES; i++) {
        g_assert_cmphex(s.collected[i] | t.buf[i], ==, 0xff);
    }
    assert_guard_clean(&t);
    g_assert_cmpuint(t.log.missed, ==, 0);
}

static void test_huge_addresses(void)
{
    struct tlog t;

    tlog_init(&t, LOG_BYTES);
    /* A range that would wrap ends at the last page; nothing is marked. */
    vhost_log_mark_gpa(&t.log, UINT64_MAX - 10, 100);
    vhost_log_mark_gpa(&t.log, UINT64_MAX, UINT64_MAX);
    vhost_log_mark_gpa(&t.log, 1ull << 63, 1ull << 62);
    g_assert_cmpuint(marked(&t), ==, 0);
    g_assert_cmpuint(t.log.missed, >, 0);
    assert_guard_clean(&t);
    /* From page 0 to the end of the address space: every bit, none past. */
    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_gpa(&t.log, 0, UINT64_MAX);
    g_assert_cmpuint(marked(&t), ==, LOG_BYTES * 8);
    assert_guard_clean(&t);
}

/* Two regions of guest memory around a hole, as QEMU's PCI hole makes them. */
struct tmem {
    struct guest_mem mem;
    uint8_t lo[0x40000], hi[0x20000];
};

#define LO_GPA 0x0ull
#define HI_GPA 0x100000ull

static void tmem_init(struct tmem *m)
{
    struct guest_mem_region lo = {
        .gpa = LO_GPA, .size = sizeof(m->lo), .uva = 0x10000000, .host = m->lo, .fd = -1,
    };
    struct guest_mem_region hi = {
        .gpa = HI_GPA, .size = sizeof(m->hi), .uva = 0x20000000, .host = m->hi, .fd = -1,
    };

    guest_mem_init(&m->mem);
    g_assert_cmpint(guest_mem_add(&m->mem, &lo), ==, 0);
    g_assert_cmpint(guest_mem_add(&m->mem, &hi), ==, 0);
}

static void test_size_for_a_memory_table(void)
{
    struct tmem *m = g_new0(struct tmem, 1);
    struct guest_mem empty;
    struct tlog t;

    guest_mem_init(&empty);
    g_assert_cmpuint(vhost_log_size_for(&empty), ==, 0);
    tmem_init(m);
    /* The highest byte is HI_GPA + 128 KiB - 1: page 287, so 36 bytes. */
    g_assert_cmpuint(vhost_log_size_for(&m->mem), ==, 36);
    tlog_init(&t, 36);
    g_assert_true(vhost_log_covers(&t.log, &m->mem));
    tlog_init(&t, 35);
    g_assert_false(vhost_log_covers(&t.log, &m->mem));
    t.log.bits = NULL;
    t.log.size = 1000;
    g_assert_false(vhost_log_covers(&t.log, &m->mem));
    g_free(m);
}

static void test_host_bytes_map_to_their_guest_pages(void)
{
    struct tmem *m = g_new0(struct tmem, 1);
    struct tlog t;

    tmem_init(m);
    tlog_init(&t, LOG_BYTES);
    /* The last byte of the low region and the first of the high one. */
    vhost_log_mark_host(&t.log, &m->mem, m->lo + sizeof(m->lo) - 1, 1);
    vhost_log_mark_host(&t.log, &m->mem, m->hi, 1);
    g_assert_true(page_marked(&t, sizeof(m->lo) / VHOST_LOG_PAGE - 1));
    g_assert_true(page_marked(&t, HI_GPA / VHOST_LOG_PAGE));
    g_assert_cmpuint(marked(&t), ==, 2);
    g_assert_cmpuint(t.log.missed, ==, 0);

    /* Bytes outside guest memory name no page: counted, nothing marked. */
    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_host(&t.log, &m->mem, t.buf, 8);
    g_assert_cmpuint(marked(&t), ==, 0);
    g_assert_cmpuint(t.log.missed, ==, 1);
    g_free(m);
}

static void test_a_chain_that_spans_regions(void)
{
    struct tmem *m = g_new0(struct tmem, 1);
    struct iovec iov[2] = {
        { m->lo + sizeof(m->lo) - 0x800, 0x800 },
        { m->hi, 0x1800 },
    };
    struct tlog t;

    tmem_init(m);
    /* A chain's buffers, split at the region edge as guest_mem_gpa_iov splits them. */
    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_iov(&t.log, &m->mem, iov, 2);
    g_assert_true(page_marked(&t, sizeof(m->lo) / VHOST_LOG_PAGE - 1));
    g_assert_true(page_marked(&t, HI_GPA / VHOST_LOG_PAGE));
    g_assert_true(page_marked(&t, HI_GPA / VHOST_LOG_PAGE + 1));
    g_assert_cmpuint(marked(&t), ==, 3);

    /*
     * The two regions lie back to back in our address space but not in
     * the guest's: one host range across the edge still marks each byte
     * at its own guest address.
     */
    tlog_init(&t, LOG_BYTES);
    vhost_log_mark_host(&t.log, &m->mem, iov[0].iov_base, 0x2000);
    g_assert_true(page_marked(&t, sizeof(m->lo) / VHOST_LOG_PAGE - 1));
    g_assert_true(page_marked(&t, HI_GPA / VHOST_LOG_PAGE));
    g_assert_true(page_marked(&t, HI_GPA / VHOST_LOG_PAGE + 1));
    g_assert_cmpuint(marked(&t), ==, 3);
    g_assert_cmpuint(t.log.missed, ==, 0);
    g_free(m);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-log/one-byte-marks-its-page", test_one_byte_marks_its_page);
    g_test_add_func("/vhost-log/zero-length-marks-nothing", test_zero_length_marks_nothing);
    g_test_add_func("/vhost-log/page-boundaries", test_page_boundaries);
    g_test_add_func("/vhost-log/short-log-is-never-written-past",
                    test_short_log_is_never_written_past);
    g_test_add_func("/vhost-log/huge-addresses", test_huge_addresses);
    g_test_add_func("/vhost-log/read-once/marks-survive-a-concurrent-sync",
                    test_marks_survive_a_concurrent_sync);
    g_test_add_func("/vhost-log/size-for-a-memory-table", test_size_for_a_memory_table);
    g_test_add_func("/vhost-log/host-bytes-map-to-their-guest-pages",
                    test_host_bytes_map_to_their_guest_pages);
    g_test_add_func("/vhost-log/a-chain-that-spans-regions", test_a_chain_that_spans_regions);
    return g_test_run();
}
