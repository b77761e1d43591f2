/*
 * COMPARE AND WRITE raced through the real daemon: two front-ends (two I_T
 * nexuses), each with two request queues served by the daemon's two I/O
 * threads, send rounds of COMPARE AND WRITEs to one block, every one of a
 * round expecting the counter the block holds and writing it plus one.
 * Atomic means serialisable: in each round exactly one succeeds and the
 * others get MISCOMPARE (their compare saw the winner's data), so after R
 * rounds the counter is R and there were R successes, no lost update and
 * no double count.  Run on a ram LUN (completes inside submit, so races
 * are between threads) and on a file LUN (io_uring, completions later, so
 * commands of one thread interleave too).  Between rounds, plain WRITEs to
 * the neighbouring blocks run alongside, which the lock must not disturb.
 * WRITE ATOMIC (16) is raced the same way against READs: one front-end
 * writes runs of blocks each holding the writer's value, the other reads
 * the run meanwhile, and every READ must find one writer's run whole.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "proto-util.h"
#include "scsi-cmd.h"

#define BLOCK 512
#define ROUNDS 200
#define PER_FE 4            /* COMPARE AND WRITEs per front-end and round */
#define LBA 7

static struct pu_daemon d;

static void start_daemon(void)
{
    g_autofree char *file = NULL, *lun1 = NULL;
    int fd;

    pu_daemon_init(&d);
    file = g_build_filename(d.dir, "caw.img", NULL);
    fd = open(file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 16 << 20), ==, 0);
    close(fd);
    lun1 = g_strdup_printf("1=file:%s", file);
    const char *args[] = { "--lun", "0=ram:16M", "--lun", lun1, "--queues", "2", "--threads", "2",
                           NULL };
    pu_daemon_start(&d, args);
}

static uint64_t read_counter(struct vfe *fe, unsigned lun, uint8_t *buf)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(scsi_cdb_read16(LBA, BLOCK, BLOCK, 0, 0, 0, 0, 0), cdb);
    struct vfe_req r;

    pu_cmd(fe, lun, cdb, n, buf, BLOCK, true, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    g_assert_cmpuint(r.resp.status, ==, 0);
    return pu_get_be(buf, 8);
}

/* The block holding counter v: v, then a pattern of v, so a torn block is caught. */
static void block_of(uint8_t *p, uint64_t v)
{
    pu_pattern_fill(p, BLOCK, v, 0);
    pu_put_be(p, v, 8);
}

struct side {
    struct vfe *fe;
    struct vfe_req req[PER_FE + 2];
    uint8_t *buf[PER_FE + 2];
    struct pu_batch b;
};

static void side_init(struct side *s)
{
    s->fe = pu_connect(&d, 2);
    pu_make_ready(s->fe, 0);
    pu_make_ready(s->fe, 1);
    for (unsigned i = 0; i < PER_FE + 2; i++) {
        s->buf[i] = vfe_alloc(s->fe, 2 * BLOCK, 4096);
    }
}

/* Submits PER_FE COMPARE AND WRITEs of v -> v + 1 and two plain WRITEs beside the block. */
static void side_submit(struct side *s, unsigned lun, uint64_t v, unsigned round)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n;

    s->b.done = 0;
    for (unsigned i = 0; i < PER_FE + 2; i++) {
        struct vfe_req *r = &s->req[i];

        if (i < PER_FE) {
            n = sc_cdb(scsi_cdb_compareandwrite(LBA, 2 * BLOCK, BLOCK, 0, 0, 0, 0, 0), cdb);
            block_of(s->buf[i], v);
            block_of(s->buf[i] + BLOCK, v + 1);
            pu_req_prep(r, 0, lun, cdb, n, s->buf[i], 2 * BLOCK, false);
        } else {
            uint64_t lba = i == PER_FE ? LBA - 1 : LBA + 1;

            n = sc_cdb(scsi_cdb_write16(lba, BLOCK, BLOCK, 0, 0, 0, 0, 0), cdb);
            pu_pattern_fill(s->buf[i], BLOCK, round, lba * BLOCK);
            pu_req_prep(r, 0, lun, cdb, n, s->buf[i], BLOCK, false);
        }
        r->queue = i % 2;       /* both queues, so both of the daemon's threads */
        r->tag = round * 100 + i + 1;
        r->complete = pu_batch_done;
        r->opaque = &s->b;
        g_assert_cmpint(vfe_submit(s->fe, r), ==, 0);
    }
}

/* Waits for the round; returns how many COMPARE AND WRITEs succeeded. */
static unsigned side_collect(struct side *s)
{
    unsigned good = 0;

    pu_batch_wait(s->fe, &s->b, PER_FE + 2, PU_TIMEOUT_MS);
    for (unsigned i = 0; i < PER_FE + 2; i++) {
        const struct vfe_req *r = &s->req[i];

        g_assert_cmpuint(r->resp.response, ==, VIRTIO_SCSI_S_OK);
        if (r->resp.status == 0) {
            good += i < PER_FE;
            continue;
        }
        g_assert_cmpuint(i, <, PER_FE);   /* the plain writes always succeed */
        g_assert_cmpuint(r->resp.status, ==, 2);
        g_assert_cmpuint(pu_sense_of(&r->resp).key, ==, SCSI_SENSE_MISCOMPARE);
        g_assert_cmphex(pu_sense_of(&r->resp).code, ==, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
    }
    return good;
}

static void race_on(unsigned lun)
{
    struct side a, b;
    uint8_t *buf, *bbuf;
    uint8_t cdb[SC_CDB_MAX];
    unsigned n, successes = 0;
    struct vfe_req r;
    uint64_t v;

    side_init(&a);
    side_init(&b);
    buf = vfe_alloc(a.fe, BLOCK, 4096);
    bbuf = vfe_alloc(b.fe, BLOCK, 4096);
    block_of(buf, 0);
    n = sc_cdb(scsi_cdb_write16(LBA, BLOCK, BLOCK, 0, 0, 0, 0, 0), cdb);
    pu_cmd(a.fe, lun, cdb, n, buf, BLOCK, false, &r);
    g_assert_cmpuint(r.resp.status, ==, 0);

    for (unsigned round = 0; round < ROUNDS; round++) {
        unsigned good;

        v = read_counter(a.fe, lun, buf);
        g_assert_cmpuint(v, ==, successes);
        side_submit(&a, lun, v, round);
        side_submit(&b, lun, v, round);
        good = side_collect(&a) + side_collect(&b);
        g_assert_cmpuint(good, ==, 1);      /* every other one saw the winner's write */
        successes += good;
    }
    v = read_counter(b.fe, lun, bbuf);   /* as the other nexus sees it */
    g_assert_cmpuint(v, ==, ROUNDS);
    g_assert_cmpuint(v, ==, successes);
    /* The winner's whole block, not a mix of two writes. */
    uint8_t want[BLOCK];

    block_of(want, v);
    g_assert_true(memcmp(bbuf, want, BLOCK) == 0);
    vfe_close(a.fe);
    vfe_close(b.fe);
}

/* ---- WRITE ATOMIC against READ ----------------------------------------- */

#define ATOMIC_BLOCKS 64     /* 32 KiB: several pages, so a torn read can show */
#define ATOMIC_LBA 256
#define ATOMIC_ROUNDS 100

/* Submits PER_FE commands of s on both queues: atomic writes of values from v, or reads. */
static void atomic_submit(struct side *s, unsigned lun, bool write, uint64_t v, unsigned round)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n;

    s->b.done = 0;
    for (unsigned i = 0; i < PER_FE; i++) {
        struct vfe_req *r = &s->req[i];

        if (write) {
            n = sc_cdb(scsi_cdb_writeatomic16(ATOMIC_LBA, ATOMIC_BLOCKS * BLOCK, BLOCK, 0, 0, 0,
                                              0), cdb);
            for (unsigned blk = 0; blk < ATOMIC_BLOCKS; blk++) {
                block_of(s->buf[i] + blk * BLOCK, v + i);
            }
        } else {
            n = sc_cdb(scsi_cdb_read16(ATOMIC_LBA, ATOMIC_BLOCKS * BLOCK, BLOCK, 0, 0, 0, 0, 0),
                       cdb);
        }
        pu_req_prep(r, 0, lun, cdb, n, s->buf[i], ATOMIC_BLOCKS * BLOCK, !write);
        r->queue = i % 2;
        r->tag = round * 100 + i + 1;
        r->complete = pu_batch_done;
        r->opaque = &s->b;
        g_assert_cmpint(vfe_submit(s->fe, r), ==, 0);
    }
}

/* Every read found one value in all its blocks: some writer's run, whole. */
static void atomic_check_reads(struct side *s, uint64_t max)
{
    uint8_t want[BLOCK];

    pu_batch_wait(s->fe, &s->b, PER_FE, PU_TIMEOUT_MS);
    for (unsigned i = 0; i < PER_FE; i++) {
        uint64_t v = pu_get_be(s->buf[i], 8);

        g_assert_cmpuint(s->req[i].resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(s->req[i].resp.status, ==, 0);
        g_assert_cmpuint(v, <=, max);
        block_of(want, v);
        for (unsigned blk = 0; blk < ATOMIC_BLOCKS; blk++) {
            if (memcmp(s->buf[i] + blk * BLOCK, want, BLOCK) != 0) {
                g_error("read %u: block %u is not value %" G_GUINT64_FORMAT "'s: a torn atomic "
                        "write", i, blk, v);
            }
        }
    }
}

static void atomic_race_on(unsigned lun)
{
    struct side w, r;

    side_init(&w);
    side_init(&r);
    for (unsigned i = 0; i < PER_FE; i++) {
        w.buf[i] = vfe_alloc(w.fe, ATOMIC_BLOCKS * BLOCK, 4096);
        r.buf[i] = vfe_alloc(r.fe, ATOMIC_BLOCKS * BLOCK, 4096);
    }
    atomic_submit(&w, lun, true, 0, 0);
    pu_batch_wait(w.fe, &w.b, PER_FE, PU_TIMEOUT_MS);
    for (unsigned round = 1; round <= ATOMIC_ROUNDS; round++) {
        atomic_submit(&w, lun, true, (uint64_t)round * PER_FE, round);
        atomic_submit(&r, lun, false, 0, round);
        atomic_check_reads(&r, ((uint64_t)round + 1) * PER_FE);
        pu_batch_wait(w.fe, &w.b, PER_FE, PU_TIMEOUT_MS);
        for (unsigned i = 0; i < PER_FE; i++) {
            g_assert_cmpuint(w.req[i].resp.status, ==, 0);
        }
    }
    vfe_close(w.fe);
    vfe_close(r.fe);
}

static void test_atomic_ram(void)
{
    atomic_race_on(0);
}

static void test_atomic_file(void)
{
    atomic_race_on(1);
}

static void test_race_ram(void)
{
    race_on(0);
}

static void test_race_file(void)
{
    race_on(1);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    start_daemon();
    g_test_add_func("/caw-race/ram", test_race_ram);
    g_test_add_func("/caw-race/file", test_race_file);
    g_test_add_func("/caw-race/write-atomic-vs-read/ram", test_atomic_ram);
    g_test_add_func("/caw-race/write-atomic-vs-read/file", test_atomic_file);
    ret = g_test_run();
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
    return ret;
}
