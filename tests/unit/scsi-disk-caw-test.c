/*
 * Specification of COMPARE AND WRITE (hw/scsi/scsi-disk-caw.c) and of the
 * write range lock under it (hw/scsi/scsi-disk-range.c): equal data is
 * replaced, unequal data is left alone and reported as MISCOMPARE with the
 * offset of the first differing byte of the data-out in INFORMATION (a
 * read that writes nothing into the buffer, null with fill=none, compares
 * as zeros, not as stale heap); zero blocks do nothing; ranges past the end, lengths past Block Limits'
 * MAXIMUM COMPARE AND WRITE LENGTH, short data-out buffers, WRPROTECT,
 * reserved bits and a read-only LUN are refused (field pointers where the
 * fault is a field).  With the backend's completions deferred: a write,
 * WRITE SAME or UNMAP to blocks a COMPARE AND WRITE holds reaches the
 * backend only after it, a COMPARE AND WRITE waits for a write in flight
 * to its blocks, writes elsewhere are not held up, and two racing on one
 * block are serialised, so the second compares against the first's data.
 * ORWRITE (16) ORs the data-out into the blocks, across more than one
 * bounce chunk, with the same refusals, and under the same exclusive
 * range: it waits for a COMPARE AND WRITE on its blocks.  WRITE ATOMIC (16)
 * writes, reports and enforces Block Limits' atomic fields (the physical
 * block as alignment and granularity), refuses an atomic boundary, and an
 * overlapping READ or WRITE waits for it, as it waits for a READ in flight.
 * The harness is scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

/* COMPARE AND WRITE of n blocks at lba: verify data, then write data, in out. */
static unsigned caw_cdb(uint64_t lba, uint32_t n, bool fua, uint8_t cdb[SC_CDB_MAX])
{
    unsigned len = sc_cdb(scsi_cdb_compareandwrite(lba, 2 * n * BS, BS, 0, 0, fua, 0, 0), cdb);

    g_assert_cmpuint(cdb[13], ==, n);   /* libiscsi's length is the data-out's, both halves */
    return len;
}

static struct result caw(struct scsi_lun *lun, uint64_t lba, uint32_t n, const uint8_t *verify,
                         const uint8_t *write)
{
    g_autofree uint8_t *out = g_malloc(2 * (size_t)n * BS + 1);
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = caw_cdb(lba, n, false, cdb);

    memcpy(out, verify, (size_t)n * BS);
    memcpy(out + (size_t)n * BS, write, (size_t)n * BS);
    return run_cdb(lun, cdb, len, out, 2 * (size_t)n * BS, NULL, 0);
}

static void write_blocks(struct scsi_lun *lun, uint64_t lba, uint32_t n, const uint8_t *buf)
{
    struct result r = RUN_OUT(lun, scsi_cdb_write16(lba, n * BS, BS, 0, 0, 0, 0, 0), buf,
                              (size_t)n * BS);

    assert_good(&r);
}

static void test_match_writes(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t a[4 * BS], b[4 * BS], rd[4 * BS];
    struct result r;

    fill_pattern(a, sizeof(a), 1);
    fill_pattern(b, sizeof(b), 2);
    write_blocks(lun, 10, 4, a);
    r = caw(lun, 10, 4, a, b);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 8 * BS);
    read_blocks(lun, 10, 4, rd);
    g_assert_true(memcmp(rd, b, sizeof(b)) == 0);
    scsi_lun_free(lun);
}

static void test_miscompare_reports_offset(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t a[2 * BS], v[2 * BS], b[2 * BS], rd[2 * BS];
    struct sc_sense s;
    struct result r;

    fill_pattern(a, sizeof(a), 3);
    fill_pattern(b, sizeof(b), 4);
    write_blocks(lun, 20, 2, a);
    /* The first difference is byte 5 of the second block. */
    memcpy(v, a, sizeof(v));
    v[BS + 5] ^= 0x01;
    v[BS + 9] ^= 0x01;
    r = caw(lun, 20, 2, v, b);
    s = assert_sense(&r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
    g_assert_true(s.info_valid);
    g_assert_cmpuint(s.info, ==, BS + 5);
    read_blocks(lun, 20, 2, rd);
    g_assert_true(memcmp(rd, a, sizeof(a)) == 0);   /* nothing written */

    /* At byte 0 the offset is 0, and still VALID. */
    memcpy(v, a, sizeof(v));
    v[0] ^= 0x80;
    r = caw(lun, 20, 2, v, b);
    s = assert_sense(&r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
    g_assert_true(s.info_valid);
    g_assert_cmpuint(s.info, ==, 0);
    scsi_lun_free(lun);
}

/*
 * A read that writes nothing into the bounce buffer (a null LUN with
 * fill=none) compares as zeros: equal verify data is GOOD, and a
 * MISCOMPARE's offset is that of the first byte differing from zeros,
 * never one decided by what the daemon's heap held before.
 */
static void test_unwritten_read_compares_as_zeros(void)
{
    struct scsi_lun *lun = nofill_lun(MiB, BS);
    uint8_t v[2 * BS] = { 0 }, b[2 * BS];
    struct sc_sense s;
    struct result r;

    fill_pattern(b, sizeof(b), 6);
    dirty_heap(sizeof(v));
    r = caw(lun, 4, 2, v, b);
    assert_good(&r);

    v[BS + 3] = 0x40;
    dirty_heap(sizeof(v));
    r = caw(lun, 4, 2, v, b);
    s = assert_sense(&r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
    g_assert_true(s.info_valid);
    g_assert_cmpuint(s.info, ==, BS + 3);
    scsi_lun_free(lun);
}

static void test_zero_blocks_do_nothing(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t a[BS], rd[BS], cdb[SC_CDB_MAX];
    unsigned len = caw_cdb(30, 1, false, cdb);
    struct result r;

    fill_pattern(a, sizeof(a), 5);
    write_blocks(lun, 30, 1, a);
    cdb[13] = 0;
    r = run_cdb(lun, cdb, len, NULL, 0, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 0);
    read_blocks(lun, 30, 1, rd);
    g_assert_true(memcmp(rd, a, sizeof(a)) == 0);
    scsi_lun_free(lun);
}

static void test_refusals(void)
{
    struct scsi_lun *lun = ram_lun();
    uint64_t nb = 8 * MiB / BS;
    g_autofree uint8_t *buf = g_malloc0(2 * 256 * BS);
    uint8_t cdb[SC_CDB_MAX];
    unsigned len;
    struct result r;

    /* Past the end, by one block; and a zero length naming no block. */
    r = caw(lun, nb - 1, 2, buf, buf);
    assert_lba_out_of_range(&r);
    len = caw_cdb(nb, 1, false, cdb);
    cdb[13] = 0;
    r = run_cdb(lun, cdb, len, NULL, 0, NULL, 0);
    assert_lba_out_of_range(&r);
    /* The last block is fine. */
    r = caw(lun, nb - 1, 1, buf, buf);
    assert_good(&r);

    /* 255 blocks is the most; a data-out short of both halves is refused. */
    r = caw(lun, 0, 255, buf, buf);
    assert_good(&r);
    len = caw_cdb(0, 4, false, cdb);
    r = run_cdb(lun, cdb, len, buf, 7 * BS, NULL, 0);
    assert_field(&r, true, 13, 7);

    /* WRPROTECT: no protection information. */
    len = caw_cdb(0, 1, false, cdb);
    cdb[1] |= 0x20;
    r = run_cdb(lun, cdb, len, buf, 2 * BS, NULL, 0);
    assert_field(&r, true, 1, 7);
    /* Reserved bits, as SBC-3 places them: byte 1 bits 2 and 0, bytes 10 to 12. */
    len = caw_cdb(0, 1, false, cdb);
    cdb[1] |= 0x04;
    r = run_cdb(lun, cdb, len, buf, 2 * BS, NULL, 0);
    assert_field(&r, true, 1, 2);
    len = caw_cdb(0, 1, false, cdb);
    cdb[11] = 0x41;
    r = run_cdb(lun, cdb, len, buf, 2 * BS, NULL, 0);
    assert_field(&r, true, 11, 6);
    /* DPO, FUA and the group number are fields: accepted. */
    len = caw_cdb(0, 1, true, cdb);
    cdb[1] |= 0x10;
    cdb[14] = 0x1f;
    r = run_cdb(lun, cdb, len, buf, 2 * BS, NULL, 0);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_read_only(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    uint8_t buf[2 * BS] = { 0 };
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, BS, &be, NULL), ==, 0);
    be->read_only = true;
    lun = ready(scsi_lun_new(be, "test:ro", NULL, NULL));
    r = caw(lun, 0, 1, buf, buf + BS);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    scsi_lun_free(lun);
}

/* Block Limits: the length, and a backend's smaller transfer limit lowers it. */
static void test_block_limits(void)
{
    struct scsi_lun *lun = ram_lun();
    struct scsi_inquiry_block_limits *bl;
    g_autofree uint8_t *buf = g_malloc0(2 * 129 * BS);
    struct sc_datain d;
    uint8_t vbuf[64];
    struct spy *s;
    struct result r;

    bl = VPD_LIMITS(lun, vbuf, &d);
    g_assert_cmpuint(bl->max_cmp, ==, 255);
    sc_datain_free(&d);
    scsi_lun_free(lun);

    lun = spy_lun_with(false, 64 * KiB, &s);
    bl = VPD_LIMITS(lun, vbuf, &d);
    g_assert_cmpuint(bl->max_cmp, ==, 128);
    sc_datain_free(&d);
    r = caw(lun, 0, 129, buf, buf);
    assert_field(&r, true, 13, 7);
    r = caw(lun, 0, 128, buf, buf);
    assert_good(&r);
    g_assert_cmpuint(s->max_len, ==, 64 * KiB);
    scsi_lun_free(lun);
}

/* FUA, or the write cache off, make the write durable as for WRITE. */
static void test_fua(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t buf[2 * BS] = { 0 }, cdb[SC_CDB_MAX];
    unsigned len = caw_cdb(0, 1, true, cdb);
    struct result r;

    r = run_cdb(lun, cdb, len, buf, sizeof(buf), NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 1);
    r = caw(lun, 0, 1, buf, buf + BS);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 1);
    scsi_lun_free(lun);
}

/* ---- the write range lock --------------------------------------------- */

struct caw_cmd {
    struct pending_cmd p;
    uint8_t out[2 * BS];
};

static void start_caw(struct caw_cmd *c, struct scsi_lun *lun, uint64_t lba, const uint8_t *verify,
                      const uint8_t *write)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned len = caw_cdb(lba, 1, false, cdb);

    memcpy(c->p.cdb, cdb, len);
    memcpy(c->out, verify, BS);
    memcpy(c->out + BS, write, BS);
    start_cdb(&c->p, lun, NULL, c->p.cdb, len, c->out, sizeof(c->out), NULL, 0);
}

static unsigned pending(struct spy *s)
{
    return g_queue_get_length(&s->pending);
}

static void test_write_waits_for_caw(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t a[2 * BS], b[BS], w[2 * BS], other[BS], rd[2 * BS];
    struct caw_cmd c;
    struct pending_cmd pw, po, pws, pu;
    uint8_t unmap[24] = { 0, 22, 0, 16 };
    struct result r;

    fill_pattern(a, sizeof(a), 6);
    fill_pattern(b, sizeof(b), 7);
    fill_pattern(w, sizeof(w), 8);
    fill_pattern(other, sizeof(other), 9);
    write_blocks(lun, 40, 2, a);
    s->defer = true;

    start_caw(&c, lun, 41, a + BS, b);
    g_assert_cmpuint(pending(s), ==, 1);                  /* its read */
    /* Overlapping: a WRITE of 40..41, WRITE SAME of 41, UNMAP of 41: none submitted. */
    start(&pw, lun, scsi_cdb_write10(40, sizeof(w), BS, 0, 0, 0, 0, 0), w, sizeof(w), NULL, 0);
    start(&pws, lun, scsi_cdb_writesame16(0, 0, 0, 41, 0, 1, BS), other, BS, NULL, 0);
    unmap[8 + 7] = 41;      /* LBA 41 */
    unmap[8 + 11] = 1;      /* one block */
    start(&pu, lun, scsi_cdb_unmap(0, 0, sizeof(unmap)), unmap, sizeof(unmap), NULL, 0);
    g_assert_cmpuint(pending(s), ==, 1);
    /* Elsewhere: goes at once. */
    start(&po, lun, scsi_cdb_write10(100, BS, BS, 0, 0, 0, 0, 0), other, BS, NULL, 0);
    g_assert_cmpuint(pending(s), ==, 2);
    g_assert_cmpuint(s->ops[BACKEND_WRITE], ==, 2);     /* the set-up write and this one */

    spy_run_one(s);                                       /* CAW's read: it compares, writes */
    g_assert_cmpuint(pending(s), ==, 2);
    g_assert_cmpint(c.p.completions, ==, 0);
    spy_run_newest(s);                                    /* CAW's write */
    g_assert_cmpint(c.p.completions, ==, 1);
    r = result_of(&c.p.cmd);
    assert_good(&r);
    /* Now the three waiters are submitted. */
    g_assert_cmpuint(pending(s), ==, 4);
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    g_assert_cmpint(pw.completions, ==, 1);
    g_assert_cmpint(pws.completions, ==, 1);
    g_assert_cmpint(pu.completions, ==, 1);
    g_assert_cmpint(po.completions, ==, 1);
    r = result_of(&pw.cmd);
    assert_good(&r);
    read_blocks(lun, 40, 1, rd);
    g_assert_true(memcmp(rd, w, BS) == 0);                /* the later WRITE won over CAW's data */
    scsi_lun_free(lun);
}

static void test_caw_waits_for_write(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t a[BS], w[BS], b[BS], rd[BS];
    struct caw_cmd c;
    struct pending_cmd pw;
    struct result r;

    fill_pattern(a, sizeof(a), 10);
    fill_pattern(w, sizeof(w), 11);
    fill_pattern(b, sizeof(b), 12);
    write_blocks(lun, 50, 1, a);
    s->defer = true;
    start(&pw, lun, scsi_cdb_write16(50, BS, BS, 0, 0, 0, 0, 0), w, BS, NULL, 0);
    g_assert_cmpuint(pending(s), ==, 1);
    /* Expects the new data: it must not read before the write has landed. */
    start_caw(&c, lun, 50, w, b);
    g_assert_cmpuint(pending(s), ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_READ], ==, 0);
    spy_run_one(s);                                       /* the WRITE */
    g_assert_cmpint(pw.completions, ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_READ], ==, 1);
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    g_assert_cmpint(c.p.completions, ==, 1);
    r = result_of(&c.p.cmd);
    assert_good(&r);
    read_blocks(lun, 50, 1, rd);
    g_assert_true(memcmp(rd, b, BS) == 0);
    scsi_lun_free(lun);
}

/*
 * Two COMPARE AND WRITEs expecting the same data: with their reads both in
 * the backend at once, both would see it and both write (a lost update).
 * Serialised, the second compares against the first's data and fails.
 */
static void test_racing_caws_serialise(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t a[BS], b[BS], c2[BS], rd[BS];
    struct caw_cmd x, y, z;
    struct result r;

    fill_pattern(a, sizeof(a), 13);
    fill_pattern(b, sizeof(b), 14);
    fill_pattern(c2, sizeof(c2), 15);
    write_blocks(lun, 60, 1, a);
    s->defer = true;
    start_caw(&x, lun, 60, a, b);
    start_caw(&y, lun, 60, a, c2);
    start_caw(&z, lun, 61, a, c2);                        /* another block: not held up */
    g_assert_cmpuint(pending(s), ==, 2);
    g_assert_cmpuint(s->ops[BACKEND_READ], ==, 2);
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    g_assert_cmpint(x.p.completions, ==, 1);
    g_assert_cmpint(y.p.completions, ==, 1);
    g_assert_cmpint(z.p.completions, ==, 1);
    r = result_of(&x.p.cmd);
    assert_good(&r);
    r = result_of(&y.p.cmd);
    assert_sense(&r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
    read_blocks(lun, 60, 1, rd);
    g_assert_true(memcmp(rd, b, BS) == 0);
    scsi_lun_free(lun);
}

/* Statistics count it as a write, with both halves of its data-out. */
static void test_counted_as_write(void)
{
    struct scsi_lun *lun = ram_lun();
    struct io_stats_snapshot st = { 0 };
    uint8_t buf[BS] = { 0 };
    struct result r = caw(lun, 0, 1, buf, buf);

    assert_good(&r);
    scsi_lun_stats(lun, &st);
    g_assert_cmpuint(st.c[IO_WRITE].ops, ==, 1);
    g_assert_cmpuint(st.c[IO_WRITE].bytes, ==, 2 * BS);
    scsi_lun_free(lun);
}

/* ---- ORWRITE (16) ------------------------------------------------------ */

static void test_orwrite(void)
{
    struct scsi_lun *lun = ram_lun();
    uint32_t n = 3 * 1024 * 1024 / BS;      /* three 1 MiB bounce chunks */
    g_autofree uint8_t *a = g_malloc(n * BS), *b = g_malloc(n * BS), *rd = g_malloc(n * BS);
    uint8_t cdb[SC_CDB_MAX];
    unsigned len;
    struct result r;

    fill_pattern(a, n * BS, 30);
    fill_pattern(b, n * BS, 31);
    r = RUN_OUT(lun, scsi_cdb_write16(100, n * BS, BS, 0, 0, 0, 0, 0), a, n * BS);
    assert_good(&r);
    r = RUN_OUT(lun, scsi_cdb_orwrite(100, n * BS, BS, 0, 0, 0, 0, 0), b, n * BS);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, (uint64_t)n * BS);
    r = RUN_IN(lun, scsi_cdb_read16(100, n * BS, BS, 0, 0, 0, 0, 0), rd, n * BS);
    assert_good(&r);
    for (uint64_t i = 0; i < (uint64_t)n * BS; i++) {
        if (rd[i] != (a[i] | b[i])) {
            g_error("byte %" G_GUINT64_FORMAT ": %02x, not %02x | %02x", i, rd[i], a[i], b[i]);
        }
    }

    /* Zero blocks: nothing; past the end; short data-out; ORPROTECT; reserved bit 2. */
    r = RUN(lun, scsi_cdb_orwrite(0, 0, BS, 0, 0, 0, 0, 0));
    assert_good(&r);
    r = RUN_OUT(lun, scsi_cdb_orwrite(8 * MiB / BS - 1, 2 * BS, BS, 0, 0, 0, 0, 0), b, 2 * BS);
    assert_lba_out_of_range(&r);
    len = sc_cdb(scsi_cdb_orwrite(0, 2 * BS, BS, 0, 0, 0, 0, 0), cdb);
    r = run_cdb(lun, cdb, len, b, BS, NULL, 0);
    assert_field(&r, true, 10, 7);
    cdb[1] = 0x20;
    r = run_cdb(lun, cdb, len, b, 2 * BS, NULL, 0);
    assert_field(&r, true, 1, 7);
    cdb[1] = 0x04;
    r = run_cdb(lun, cdb, len, b, 2 * BS, NULL, 0);
    assert_field(&r, true, 1, 2);
    scsi_lun_free(lun);

    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, BS, &be, NULL), ==, 0);
    be->read_only = true;
    lun = ready(scsi_lun_new(be, "test:ro", NULL, NULL));
    r = RUN_OUT(lun, scsi_cdb_orwrite(0, BS, BS, 0, 0, 0, 0, 0), b, BS);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    scsi_lun_free(lun);
}

/* ORWRITE's read and write are one step under the lock: a COMPARE AND WRITE's write cannot split them. */
static void test_orwrite_waits_for_caw(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t a[BS], b[BS], o[BS], rd[BS];
    struct caw_cmd c;
    struct pending_cmd po;

    memset(a, 0x01, sizeof(a));
    memset(b, 0x02, sizeof(b));
    memset(o, 0x40, sizeof(o));
    write_blocks(lun, 70, 1, a);
    s->defer = true;
    start_caw(&c, lun, 70, a, b);
    start(&po, lun, scsi_cdb_orwrite(70, BS, BS, 0, 0, 0, 0, 0), o, BS, NULL, 0);
    g_assert_cmpuint(pending(s), ==, 1);                  /* only the CAW's read */
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    g_assert_cmpint(c.p.completions, ==, 1);
    g_assert_cmpint(po.completions, ==, 1);
    read_blocks(lun, 70, 1, rd);
    g_assert_cmphex(rd[0], ==, 0x42);                     /* CAW's data, then the OR */
    g_assert_cmphex(rd[BS - 1], ==, 0x42);
    scsi_lun_free(lun);
}

/* ---- WRITE ATOMIC (16) -------------------------------------------------- */

static struct result write_atomic(struct scsi_lun *lun, uint64_t lba, uint32_t n,
                                  const uint8_t *data)
{
    return RUN_OUT(lun, scsi_cdb_writeatomic16(lba, n * BS, BS, 0, 0, 0, 0), data,
                   (size_t)n * BS);
}

static void test_write_atomic(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *big = g_malloc0(2049 * BS);
    struct scsi_inquiry_block_limits *bl;
    uint8_t a[8 * BS], rd[8 * BS], vbuf[64], cdb[SC_CDB_MAX];
    struct sc_datain d;
    struct result r;
    unsigned len;

    bl = VPD_LIMITS(lun, vbuf, &d);
    g_assert_cmpuint(vbuf[2] << 8 | vbuf[3], ==, 0x3c);
    g_assert_cmpuint(bl->max_atomic_xfer_len, ==, MiB / BS);
    g_assert_cmpuint(bl->atomic_align, ==, 1);
    g_assert_cmpuint(bl->atomic_gran, ==, 1);
    g_assert_cmpuint(bl->max_atomic_tl_with_atomic_boundary, ==, 0);
    g_assert_cmpuint(bl->max_atomic_boundary_size, ==, 0);
    sc_datain_free(&d);

    fill_pattern(a, sizeof(a), 21);
    r = write_atomic(lun, 10, 8, a);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, sizeof(a));
    read_blocks(lun, 10, 8, rd);
    g_assert_true(memcmp(rd, a, sizeof(a)) == 0);
    r = write_atomic(lun, 10, 0, NULL);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 0);

    /* Longer than MAXIMUM ATOMIC TRANSFER LENGTH; the largest goes. */
    r = write_atomic(lun, 0, 2049, big);
    assert_field(&r, true, 12, 7);
    r = write_atomic(lun, 0, 2048, big);
    assert_good(&r);
    r = write_atomic(lun, 8 * MiB / BS - 1, 2, a);
    assert_lba_out_of_range(&r);
    r = run(lun, scsi_cdb_writeatomic16(0, 2 * BS, BS, 0, 0, 0, 0), a, BS, NULL, 0);
    assert_field(&r, true, 12, 7);                       /* short data-out */
    r = run(lun, scsi_cdb_writeatomic16(0, BS, BS, 1, 0, 0, 0), a, BS, NULL, 0);
    assert_field(&r, true, 1, 7);                        /* WRPROTECT */
    len = sc_cdb(scsi_cdb_writeatomic16(0, BS, BS, 0, 0, 0, 0), cdb);
    cdb[11] = 1;                                         /* an ATOMIC BOUNDARY */
    r = run_cdb(lun, cdb, len, a, BS, NULL, 0);
    assert_field(&r, true, 10, 7);
    scsi_lun_backend(lun)->read_only = true;
    r = write_atomic(lun, 0, 1, a);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    scsi_lun_free(lun);
}

/* On 4 KiB physical blocks an atomic write is whole, aligned physical blocks. */
static void test_write_atomic_alignment(void)
{
    struct scsi_lun *lun = ram_lun();
    struct scsi_inquiry_block_limits *bl;
    uint8_t a[16 * BS], vbuf[64];
    struct sc_datain d;
    struct result r;

    scsi_lun_backend(lun)->phys_block_size = 4096;
    bl = VPD_LIMITS(lun, vbuf, &d);
    g_assert_cmpuint(bl->atomic_align, ==, 8);
    g_assert_cmpuint(bl->atomic_gran, ==, 8);
    g_assert_cmpuint(bl->max_atomic_xfer_len, ==, MiB / BS);
    sc_datain_free(&d);
    fill_pattern(a, sizeof(a), 22);
    r = write_atomic(lun, 4, 8, a);
    assert_field(&r, true, 2, 7);                        /* misaligned */
    r = write_atomic(lun, 8, 4, a);
    assert_field(&r, true, 12, 7);                       /* not whole granules */
    r = write_atomic(lun, 8, 12, a);
    assert_field(&r, true, 12, 7);
    r = write_atomic(lun, 8, 16, a);
    assert_good(&r);
    scsi_lun_free(lun);
}

/*
 * Atomic against reads and writes: an overlapping READ or WRITE waits for
 * it (the READ must not see half of it), one elsewhere does not; and it
 * waits for a READ in flight to its blocks.
 */
static void test_write_atomic_excludes(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t a[8 * BS], old[8 * BS], rd[8 * BS], far[BS], w[BS];
    struct pending_cmd pa, pr, pw, pf, pa2;
    struct result r;

    fill_pattern(a, sizeof(a), 23);
    fill_pattern(old, sizeof(old), 24);
    fill_pattern(w, sizeof(w), 25);
    write_blocks(lun, 40, 8, old);
    s->defer = true;
    start(&pa, lun, scsi_cdb_writeatomic16(40, sizeof(a), BS, 0, 0, 0, 0), a, sizeof(a),
          NULL, 0);
    g_assert_cmpuint(pending(s), ==, 1);
    start(&pr, lun, scsi_cdb_read16(44, sizeof(rd), BS, 0, 0, 0, 0, 0), NULL, 0, rd,
          sizeof(rd));
    start(&pw, lun, scsi_cdb_write16(41, BS, BS, 0, 0, 0, 0, 0), w, BS, NULL, 0);
    g_assert_cmpuint(pending(s), ==, 1);                 /* both wait */
    start(&pf, lun, scsi_cdb_read16(100, BS, BS, 0, 0, 0, 0, 0), NULL, 0, far, BS);
    g_assert_cmpuint(pending(s), ==, 2);                 /* elsewhere: at once */
    spy_run_one(s);                                      /* the atomic write */
    g_assert_cmpint(pa.completions, ==, 1);
    r = result_of(&pa.cmd);
    assert_good(&r);
    g_assert_cmpuint(pending(s), ==, 3);                 /* the waiters go now */
    s->defer = false;
    while (spy_run_pending(s)) {
    }
    g_assert_cmpint(pr.completions + pw.completions + pf.completions, ==, 3);
    r = result_of(&pr.cmd);
    assert_good(&r);
    g_assert_true(memcmp(rd, a + 4 * BS, 4 * BS) == 0);  /* all of the atomic write */

    /* A READ in flight holds an overlapping atomic write back until it completes. */
    s->defer = true;
    start(&pr, lun, scsi_cdb_read16(40, BS, BS, 0, 0, 0, 0, 0), NULL, 0, rd, BS);
    g_assert_cmpuint(pending(s), ==, 1);
    start(&pa2, lun, scsi_cdb_writeatomic16(40, sizeof(old), BS, 0, 0, 0, 0), old,
          sizeof(old), NULL, 0);
    g_assert_cmpuint(pending(s), ==, 1);
    spy_run_one(s);
    g_assert_cmpint(pr.completions, ==, 1);
    g_assert_true(memcmp(rd, a, BS) == 0);               /* read before the write */
    g_assert_cmpuint(pending(s), ==, 1);                 /* now the atomic write */
    spy_run_one(s);
    g_assert_cmpint(pa2.completions, ==, 1);
    r = result_of(&pa2.cmd);
    assert_good(&r);
    s->defer = false;
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/caw/match-writes", test_match_writes);
    g_test_add_func("/scsi-disk/caw/miscompare-offset", test_miscompare_reports_offset);
    g_test_add_func("/scsi-disk/caw/unwritten-read-compares-as-zeros",
                    test_unwritten_read_compares_as_zeros);
    g_test_add_func("/scsi-disk/caw/zero-blocks", test_zero_blocks_do_nothing);
    g_test_add_func("/scsi-disk/caw/refusals", test_refusals);
    g_test_add_func("/scsi-disk/caw/read-only", test_read_only);
    g_test_add_func("/scsi-disk/caw/block-limits", test_block_limits);
    g_test_add_func("/scsi-disk/caw/fua", test_fua);
    g_test_add_func("/scsi-disk/caw/counted-as-write", test_counted_as_write);
    g_test_add_func("/scsi-disk/range-lock/write-waits-for-caw", test_write_waits_for_caw);
    g_test_add_func("/scsi-disk/range-lock/caw-waits-for-write", test_caw_waits_for_write);
    g_test_add_func("/scsi-disk/range-lock/racing-caws-serialise", test_racing_caws_serialise);
    g_test_add_func("/scsi-disk/orwrite/ors", test_orwrite);
    g_test_add_func("/scsi-disk/range-lock/orwrite-waits-for-caw", test_orwrite_waits_for_caw);
    g_test_add_func("/scsi-disk/write-atomic/writes-and-refusals", test_write_atomic);
    g_test_add_func("/scsi-disk/write-atomic/alignment", test_write_atomic_alignment);
    g_test_add_func("/scsi-disk/range-lock/write-atomic-excludes", test_write_atomic_excludes);

    return g_test_run();
}
