/*
 * Specification of the block I/O commands (hw/scsi/scsi-disk-rw.c): READ
 * and WRITE (6), (10), (12) and (16) read back what was written, on one
 * medium, a 6-byte transfer length of 0 meaning 256 blocks and a 10-byte
 * one transferring nothing, and a null LUN reads zeros; every CDB field is
 * checked where it enters (LBA ranges past the end or wrapping 2^64, the
 * transfer length cap and a backend's own transfer limit, data buffers
 * shorter than the CDB says, a read-only LUN); FUA reaches the backend,
 * and with the write cache off every write is FUA; SYNCHRONIZE CACHE and
 * stopping the unit flush; VERIFY checks the range or compares (BYTCHK 1
 * and 3) through a bounded buffer, which a read that writes nothing into
 * it (null, fill=none) leaves cleared, so it compares as zeros; WRITE AND
 * VERIFY writes FUA.  The
 * harness is scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

/* ---- READ / WRITE ------------------------------------------------------ */

static void test_write_read_back_all_sizes(void)
{
    struct scsi_lun *lun = ready(new_ram(64 * MiB, 512));   /* LBAs past 16 bits */
    uint8_t w[4096], rd[4096];
    /* Hand-built: libiscsi has a READ(6) builder but no WRITE(6) one. */
    static const uint8_t w6[6] = { SC_OPCODE_WRITE6, 0x01, 0x02, 0x03, 2, 0 };   /* LBA 0x10203 */
    uint32_t last = 64 * MiB / 512 - 2;
    struct result r;

    /* WRITE(6) / READ(6) */
    fill_pattern(w, 1024, 1);
    r = run_cdb(lun, w6, sizeof(w6), w, 1024, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 1024);
    r = RUN_IN(lun, scsi_cdb_read6(0x10203, 1024, BS), rd, 1024);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 1024);
    g_assert_true(memcmp(w, rd, 1024) == 0);

    /* WRITE(10) / READ(16) on the same blocks: one medium. */
    fill_pattern(w, 4096, 2);
    r = RUN_OUT(lun, scsi_cdb_write10(100, 4096, BS, 0, 0, 0, 0, 0), w, 4096);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(100, 4096, BS, 0, 0, 0, 0, 0), rd, 4096);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 4096) == 0);

    /* WRITE(12) / READ(12) at the last blocks of the LUN. */
    fill_pattern(w, 1024, 3);
    r = RUN_OUT(lun, scsi_cdb_write12(last, 1024, BS, 0, 0, 0, 0, 0), w, 1024);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read12(last, 1024, BS, 0, 0, 0, 0, 0), rd, 1024);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 1024) == 0);

    /* WRITE(16) / READ(10) */
    fill_pattern(w, 512, 4);
    r = RUN_OUT(lun, scsi_cdb_write16(7, 512, BS, 0, 0, 0, 0, 0), w, 512);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read10(7, 512, BS, 0, 0, 0, 0, 0), rd, 512);
    assert_good(&r);
    g_assert_true(memcmp(w, rd, 512) == 0);
    scsi_lun_free(lun);
}

static void test_rw6_zero_length_means_256(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *buf = g_malloc(256 * 512);
    uint8_t r6[SC_CDB_MAX];
    /* libiscsi writes 256 blocks as TRANSFER LENGTH 0, which is the point here. */
    unsigned n = sc_cdb(scsi_cdb_read6(0, 256 * BS, BS), r6);
    struct result r;

    g_assert_cmpuint(r6[4], ==, 0);
    r = run_cdb(lun, r6, n, NULL, 0, buf, 256 * 512);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 256 * 512);
    /* With a 255-block buffer the 256-block read is refused. */
    r = run_cdb(lun, r6, n, NULL, 0, buf, 255 * 512);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_rw10_zero_length_transfers_nothing(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    r = RUN(lun, scsi_cdb_read10(5, 0, BS, 0, 0, 0, 0, 0));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    r = RUN(lun, scsi_cdb_write10(5, 0, BS, 0, 0, 0, 0, 0));
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_read_into_larger_scattered_buffer(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t w[12 * 512], rd[16][512];
    struct iovec iov[16];
    struct pending_cmd p;

    fill_pattern(w, sizeof(w), 5);
    struct result r = RUN_OUT(lun, scsi_cdb_write10(40, sizeof(w), BS, 0, 0, 0, 0, 0), w,
                              sizeof(w));
    assert_good(&r);

    /* 16 pieces, 12 blocks wanted: more pieces than the command's slice array. */
    memset(rd, 0xee, sizeof(rd));
    for (int i = 0; i < 16; i++) {
        iov[i].iov_base = rd[i];
        iov[i].iov_len = 512;
    }
    memset(&p, 0, sizeof(p));
    p.cmd.cdb_len = sc_cdb(scsi_cdb_read10(40, sizeof(w), BS, 0, 0, 0, 0, 0), p.cdb);
    p.cmd.cdb = p.cdb;
    p.cmd.data_in = iov;
    p.cmd.data_in_cnt = 16;
    p.cmd.complete = count_completion;
    p.cmd.opaque = &p;
    scsi_lun_exec(lun, &p.cmd);
    g_assert_cmpint(p.completions, ==, 1);
    g_assert_cmphex(p.cmd.status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(p.cmd.data_in_xfer, ==, sizeof(w));
    for (int i = 0; i < 12; i++) {
        g_assert_true(memcmp(rd[i], w + i * 512, 512) == 0);
    }
    g_assert_cmphex(rd[12][0], ==, 0xee);   /* nothing past the transfer */
    scsi_lun_free(lun);
}

static void test_lba_out_of_range(void)
{
    struct scsi_lun *lun = ram_lun();
    uint64_t nb = 8 * MiB / 512;
    uint8_t buf[1024];
    struct result r;

    /* Runs one block past the end. */
    r = RUN_IN(lun, scsi_cdb_read16(nb - 1, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);

    /* Zero length, LBA past the end. */
    r = RUN(lun, scsi_cdb_read16(nb, 0, BS, 0, 0, 0, 0, 0));
    assert_lba_out_of_range(&r);

    /* LBA + length wraps 2^64. */
    r = RUN_IN(lun, scsi_cdb_read16(UINT64_MAX, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);
    r = RUN_OUT(lun, scsi_cdb_write16(UINT64_MAX - 1, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);

    /* Exactly the last blocks: fine. */
    r = RUN_IN(lun, scsi_cdb_read16(nb - 2, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_transfer_length_cap(void)
{
    struct scsi_lun *lun = null_lun(1ULL << 30, 512);
    uint32_t max = 0xffff;      /* QEMU's vhost-user-scsi max_sectors: 32 MiB less a block */
    g_autofree uint8_t *buf = g_malloc(32 * MiB + 512);
    struct result r;

    r = RUN_IN(lun, scsi_cdb_read16(0, max * BS, BS, 0, 0, 0, 0, 0), buf, 32 * MiB + 512);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(0, (max + 1) * BS, BS, 0, 0, 0, 0, 0), buf, 32 * MiB + 512);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/*
 * A backend whose device takes at most 64 KiB per command (a remote LUN's
 * Block Limits): the LUN reports that limit, refuses a bigger READ as the
 * remote would, and splits its own bounce-buffer I/O to fit.
 */
static void test_backend_transfer_limit(void)
{
    struct spy *s;
    struct scsi_lun *lun;
    g_autofree uint8_t *buf = g_malloc0(128 * KiB);
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain d;
    uint8_t vbuf[64], blk[512];
    struct result r;

    lun = spy_lun_with(false, 64 * KiB, &s);
    bl = VPD_LIMITS(lun, vbuf, &d);
    g_assert_cmpint(sc_datain_full_size(&d), ==, 64);
    g_assert_cmpuint(bl->max_xfer_len, ==, 128);              /* blocks */
    g_assert_cmpuint(bl->opt_xfer_len, <=, 128);              /* optimal <= max */
    sc_datain_free(&d);
    r = RUN_IN(lun, scsi_cdb_read16(0, 128 * BS, BS, 0, 0, 0, 0, 0), buf, 128 * KiB);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(0, 129 * BS, BS, 0, 0, 0, 0, 0), buf, 128 * KiB);
    assert_invalid_cdb(&r);
    memset(blk, 0xa5, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 4000, BS), blk, 512);   /* 2 MB */
    assert_good(&r);
    g_assert_cmpuint(s->max_len, ==, 64 * KiB);
    scsi_lun_free(lun);
}

static void test_short_buffers(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[1024 + 16];
    struct result r;

    /* A write whose data-out is shorter than the CDB says is refused. */
    r = RUN_OUT(lun, scsi_cdb_write10(0, 1024, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_invalid_cdb(&r);
    g_assert_cmpuint(r.out_xfer, ==, 0);

    /* A read is refused rather than written past the buffer. */
    memset(buf, 0xee, sizeof(buf));
    r = RUN_IN(lun, scsi_cdb_read10(0, 1024, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_invalid_cdb(&r);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    g_assert_cmphex(buf[0], ==, 0xee);

    /* No buffer at all. */
    r = RUN(lun, scsi_cdb_read10(0, 1024, BS, 0, 0, 0, 0, 0));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_write_protected(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    struct scsi_mode_sense *ms;
    struct sc_datain d;
    uint8_t buf[512] = { 0 }, msbuf[255];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    be->read_only = true;
    lun = ready(scsi_lun_new(be, "test:ro", NULL, NULL));

    r = RUN_OUT(lun, scsi_cdb_write10(0, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 1, 0, 0, 1, BS), buf, 512);   /* UNMAP */
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    r = RUN_IN(lun, scsi_cdb_read10(0, 512, BS, 0, 0, 0, 0, 0), buf, 512);
    assert_good(&r);

    /* MODE SENSE header: WP set in the device-specific parameter. */
    r = RUN_IN(lun, scsi_cdb_modesense6(0, SCSI_MODESENSE_PC_CURRENT, SCSI_MODEPAGE_RETURN_ALL_PAGES,
                                        0, 255), msbuf, sizeof(msbuf));
    assert_good(&r);
    ms = decoded(&d, &r, msbuf);
    g_assert_cmphex(ms->device_specific_parameter & 0x80, ==, 0x80);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

static void test_null_backend(void)
{
    struct scsi_lun *lun = null_lun(MiB, 4096);
    uint8_t w[4096], rd[4096];
    struct result r;

    memset(w, 0x5a, sizeof(w));
    r = RUN_OUT(lun, scsi_cdb_write10(3, 4096, 4096, 0, 0, 0, 0, 0), w, sizeof(w));
    assert_good(&r);
    memset(rd, 0xee, sizeof(rd));
    r = RUN_IN(lun, scsi_cdb_read10(3, 4096, 4096, 0, 0, 0, 0, 0), rd, sizeof(rd));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4096);
    for (size_t i = 0; i < sizeof(rd); i++) {
        g_assert_cmphex(rd[i], ==, 0);
    }
    scsi_lun_free(lun);
}

/* ---- FUA and the write cache ------------------------------------------- */

static struct scsi_task *write10(uint32_t lba, bool fua, bool dpo)
{
    return scsi_cdb_write10(lba, 512, BS, 0, dpo, fua, 0, 0);
}

static void test_fua_and_write_cache(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[512] = { 1 }, blk[512];
    struct result r;

    g_assert_true(get_wce(lun));              /* initially the backend's cache */
    r = RUN_OUT(lun, write10(0, false, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 1);
    r = RUN_OUT(lun, write10(0, true, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 1);
    r = RUN_OUT(lun, write10(0, false, true), w, 512);     /* DPO alone: ignored */
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 2);

    /* Turning WCE off flushes the cache and makes every write FUA. */
    set_wce(lun, false);
    g_assert_false(get_wce(lun));
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);
    r = RUN_OUT(lun, write10(0, false, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 2);
    g_assert_cmpuint(s->plain_writes, ==, 2);

    /* WRITE SAME too: FUA copies, or a FLUSH after zeroing. */
    memset(blk, 9, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 2, BS), blk, sizeof(blk));
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 3);
    memset(blk, 0, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame16(0, 0, 0, 0, 0, 2, BS), blk, sizeof(blk));
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 2);

    set_wce(lun, true);
    g_assert_true(get_wce(lun));
    r = RUN_OUT(lun, write10(0, false, false), w, 512);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 3);

    /* SYNCHRONIZE CACHE(10) and (16) flush. */
    r = RUN(lun, scsi_cdb_synchronizecache10(0, 0, 0, 0));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_synchronizecache16(0, 0, 0, 0));
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 4);
    scsi_lun_free(lun);
}

static void test_sync_cache_range(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    r = RUN(lun, scsi_cdb_synchronizecache16(8 * MiB / 512, 0, 0, 0));
    assert_lba_out_of_range(&r);
    r = RUN(lun, scsi_cdb_synchronizecache10(10, 20, 0, 1));    /* IMMED, a range */
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_start_stop_and_prevent_allow(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    struct result r;

    r = RUN(lun, scsi_cdb_startstopunit(0, 0, 0, 0, 0, 0));     /* stop */
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);   /* stopping writes the cache back */
    r = RUN(lun, scsi_cdb_startstopunit(0, 0, 0, 0, 0, 1));     /* start */
    assert_good(&r);
    r = RUN(lun, scsi_cdb_preventallow(1));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_preventallow(0));
    assert_good(&r);
    scsi_lun_free(lun);
}

/* ---- VERIFY, WRITE AND VERIFY ------------------------------------------ */

/*
 * The CDB of task with BYTCHK (byte 1, bits 2-1) set to bytchk: libiscsi's
 * VERIFY and WRITE AND VERIFY builders set it to 0 or 1 only.
 */
static unsigned with_bytchk(struct scsi_task *task, unsigned bytchk, uint8_t cdb[SC_CDB_MAX])
{
    unsigned n = sc_cdb(task, cdb);

    cdb[1] = (uint8_t)((cdb[1] & ~0x06) | (bytchk & 3) << 1);
    return n;
}

static void assert_miscompare(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
}

static void test_verify(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *w = g_malloc(3000 * 512);
    uint8_t blk[512], cdb[SC_CDB_MAX];
    unsigned n;
    struct sc_sense s;
    struct result r;

    fill_pattern(w, 3000 * 512, 9);
    r = RUN_OUT(lun, scsi_cdb_write16(1000, 3000 * BS, BS, 0, 0, 0, 0, 0), w, 3000 * 512);
    assert_good(&r);

    /* BYTCHK=0: range check only. */
    r = RUN(lun, scsi_cdb_verify10(1000, 3000 * BS, 0, 0, 0, BS));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_verify10(8 * MiB / 512, BS, 0, 0, 0, BS));
    assert_lba_out_of_range(&r);

    /* BYTCHK=1: compares across more than one bounce chunk. */
    n = sc_cdb(scsi_cdb_verify16(1000, 3000 * BS, 0, 0, 1, BS), cdb);
    r = run_cdb(lun, cdb, n, w, 3000 * 512, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 3000 * 512);

    /* A mismatch in the second chunk: MISCOMPARE, INFORMATION = its offset. */
    w[2500 * 512 + 17] ^= 0xff;
    r = run_cdb(lun, cdb, n, w, 3000 * 512, NULL, 0);
    assert_miscompare(&r);
    s = sc_sense_of(r.sense, r.sense_len);
    g_assert_true(s.info_valid);
    g_assert_cmpuint(s.info, ==, 2500 * 512 + 17);

    /* Data-out shorter than the range. */
    r = run_cdb(lun, cdb, n, w, 512, NULL, 0);
    assert_invalid_cdb(&r);

    /* BYTCHK=3: one block compared against each block of the range. */
    memset(blk, 0x77, sizeof(blk));
    r = RUN_OUT(lun, scsi_cdb_writesame10(0, 0, 0, 50, 0, 10, BS), blk, 512);
    assert_good(&r);
    n = with_bytchk(scsi_cdb_verify10(50, 10 * BS, 0, 0, 1, BS), 3, cdb);
    r = run_cdb(lun, cdb, n, blk, 512, NULL, 0);
    assert_good(&r);
    n = with_bytchk(scsi_cdb_verify10(50, 11 * BS, 0, 0, 1, BS), 3, cdb);
    r = run_cdb(lun, cdb, n, blk, 512, NULL, 0);
    assert_miscompare(&r);

    /* BYTCHK=2 is reserved. */
    n = with_bytchk(scsi_cdb_verify10(50, BS, 0, 0, 1, BS), 2, cdb);
    r = run_cdb(lun, cdb, n, blk, 512, NULL, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/*
 * A read that writes nothing into the bounce buffer (a null LUN with
 * fill=none) compares as zeros, and a MISCOMPARE's offset is that of the
 * first data-out byte that differs from them, never one decided by what
 * the daemon's heap held before.
 */
static void test_verify_unwritten_read_compares_as_zeros(void)
{
    struct scsi_lun *lun = nofill_lun(MiB, BS);
    uint8_t out[8 * BS] = { 0 }, cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(scsi_cdb_verify16(16, sizeof(out), 0, 0, 1, BS), cdb);
    struct sc_sense s;
    struct result r;

    dirty_heap(sizeof(out));
    r = run_cdb(lun, cdb, n, out, sizeof(out), NULL, 0);
    assert_good(&r);

    out[5 * BS + 7] = 0x01;
    dirty_heap(sizeof(out));
    r = run_cdb(lun, cdb, n, out, sizeof(out), NULL, 0);
    assert_miscompare(&r);
    s = sc_sense_of(r.sense, r.sense_len);
    g_assert_true(s.info_valid);
    g_assert_cmpuint(s.info, ==, 5 * BS + 7);

    /* BYTCHK=3: the one block against each block of the range. */
    n = with_bytchk(scsi_cdb_verify16(16, sizeof(out), 0, 0, 1, BS), 3, cdb);
    dirty_heap(sizeof(out));
    r = run_cdb(lun, cdb, n, out, BS, NULL, 0);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_write_and_verify(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[1024], rd[1024], cdb[SC_CDB_MAX];
    unsigned n;
    struct result r;

    fill_pattern(w, sizeof(w), 11);
    r = RUN_OUT(lun, scsi_cdb_writeverify10(20, sizeof(w), BS, 0, 0, 1, 0), w, sizeof(w));
    assert_good(&r);                          /* BYTCHK=1 */
    r = RUN_OUT(lun, scsi_cdb_writeverify16(22, sizeof(w), BS, 0, 0, 0, 0), w, sizeof(w));
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 2);     /* verified means on the medium */
    r = RUN_IN(lun, scsi_cdb_read16(22, sizeof(rd), BS, 0, 0, 0, 0, 0), rd, sizeof(rd));
    assert_good(&r);
    g_assert_true(memcmp(w, rd, sizeof(w)) == 0);
    /* BYTCHK=3: not for this command. */
    n = with_bytchk(scsi_cdb_writeverify10(20, sizeof(w), BS, 0, 0, 1, 0), 3, cdb);
    r = run_cdb(lun, cdb, n, w, sizeof(w), NULL, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/rw/read-back-all-sizes", test_write_read_back_all_sizes);
    g_test_add_func("/scsi-disk/rw/6-byte-zero-is-256", test_rw6_zero_length_means_256);
    g_test_add_func("/scsi-disk/rw/zero-length", test_rw10_zero_length_transfers_nothing);
    g_test_add_func("/scsi-disk/rw/scattered-larger-buffer", test_read_into_larger_scattered_buffer);
    g_test_add_func("/scsi-disk/rw/lba-out-of-range", test_lba_out_of_range);
    g_test_add_func("/scsi-disk/rw/transfer-cap", test_transfer_length_cap);
    g_test_add_func("/scsi-disk/rw/backend-transfer-limit", test_backend_transfer_limit);
    g_test_add_func("/scsi-disk/rw/short-buffers", test_short_buffers);
    g_test_add_func("/scsi-disk/rw/write-protected", test_write_protected);
    g_test_add_func("/scsi-disk/rw/null-backend", test_null_backend);
    g_test_add_func("/scsi-disk/cache/fua-and-wce", test_fua_and_write_cache);
    g_test_add_func("/scsi-disk/cache/sync-range", test_sync_cache_range);
    g_test_add_func("/scsi-disk/start-stop-prevent-allow", test_start_stop_and_prevent_allow);
    g_test_add_func("/scsi-disk/verify/bytchk", test_verify);
    g_test_add_func("/scsi-disk/verify/unwritten-read-compares-as-zeros",
                    test_verify_unwritten_read_compares_as_zeros);
    g_test_add_func("/scsi-disk/verify/write-and-verify", test_write_and_verify);

    return g_test_run();
}
