/*
 * Specification of the provisioning commands
 * (hw/scsi/scsi-disk-provisioning.c): WRITE SAME (10) and (16) replicate
 * one block across more than one bounce buffer and nothing beside it, turn
 * zeros (with UNMAP, or NDOB) into one backend WRITE ZEROES, and refuse a
 * zero length (WSNZ), a range past the end (checked first), a data-out
 * that is not one logical block and ANCHOR, on 512-byte, 4Kn and 512e
 * LUNs; UNMAP
 * checks its whole parameter list first (its lengths, the advertised
 * limits, ranges past the end or wrapping), ignores a trailing partial
 * descriptor, discards the ranges, which read back as zeros, and is not
 * supported on a backend that cannot discard.  One command's work is
 * bounded: at most 1M blocks (Block Limits says so, and one more is
 * refused with a field pointer), sent to the backend in chunks of at most
 * 64k blocks, and on an I/O thread the thread is yielded between chunks
 * a backend completed inside submit(); a backend that works inside
 * submit() (ram, null) gets pieces of 16 KiB, READs of more included, and
 * a command of pieces starts deferred.  The harness is
 * scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "iothread.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

/* ---- WRITE SAME -------------------------------------------------------- */

static void test_write_same_replicates_block(void)
{
    struct scsi_lun *lun = ram_lun();
    const uint32_t n = 5000;                  /* > one 1 MiB bounce chunk */
    g_autofree uint8_t *rd = g_malloc((n + 2) * 512);
    uint8_t blk[512];
    struct result r;

    fill_pattern(blk, sizeof(blk), 13);
    r = write_same16(lun, false, false, 100, n, blk, sizeof(blk));
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 512);
    read_blocks(lun, 99, n + 2, rd);
    for (uint32_t i = 1; i <= n; i++) {
        g_assert_true(memcmp(rd + i * 512, blk, 512) == 0);
    }
    for (int i = 0; i < 512; i++) {             /* neighbours untouched */
        g_assert_cmphex(rd[i], ==, 0);
        g_assert_cmphex(rd[(n + 1) * 512 + i], ==, 0);
    }

    /* WRITE SAME(10) too. */
    fill_pattern(blk, sizeof(blk), 14);
    r = RUN_OUT(lun, scsi_cdb_writesame10(0, 0, 0, 7, 0, 3, BS), blk, sizeof(blk));
    assert_good(&r);
    read_blocks(lun, 7, 3, rd);
    g_assert_true(memcmp(rd + 1024, blk, 512) == 0);
    scsi_lun_free(lun);
}

static void test_write_same_zeroes_and_unmap(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t blk[512], zero[512] = { 0 }, rd[4 * 512];
    struct result r;

    memset(blk, 0x3c, sizeof(blk));
    r = write_same16(lun, false, false, 10, 4, blk, sizeof(blk));
    assert_good(&r);

    /* UNMAP bit with zero data: one WRITE ZEROES, no data written. */
    unsigned writes = s->ops[BACKEND_WRITE];
    r = write_same16(lun, true, false, 10, 2, zero, sizeof(zero));
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 1);
    g_assert_cmpuint(s->ops[BACKEND_WRITE], ==, writes);
    read_blocks(lun, 10, 4, rd);
    g_assert_cmphex(rd[0], ==, 0);
    g_assert_cmphex(rd[1023], ==, 0);
    g_assert_cmphex(rd[1024], ==, 0x3c);

    /* NDOB: no data-out buffer, zeros. */
    r = write_same16(lun, true, false, 12, 2, NULL, 0);
    assert_good(&r);
    read_blocks(lun, 10, 4, rd);
    g_assert_cmphex(rd[1024], ==, 0);
    g_assert_cmphex(rd[2047], ==, 0);
    scsi_lun_free(lun);
}

static void test_write_same_invalid(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t blk[512] = { 1 };
    struct result r;

    r = write_same16(lun, false, false, 0, 0, blk, 512);      /* WSNZ: zero length refused */
    assert_invalid_cdb(&r);
    r = write_same16(lun, false, false, 8 * MiB / 512 - 1, 2, blk, 512);
    assert_lba_out_of_range(&r);
    r = write_same16(lun, false, false, 0, 1, blk, 100);      /* no whole block of data-out */
    assert_invalid_cdb(&r);
    r = write_same16(lun, false, true, 0, 1, blk, 512);       /* ANCHOR */
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

/* WRITE SAME (10) or (16) of n blocks at lba with len bytes of data-out (NDOB: none asked). */
static struct result write_same(struct scsi_lun *lun, const struct geometry *g, bool sixteen,
                                bool unmap, uint64_t lba, uint32_t n, const uint8_t *data,
                                size_t len)
{
    return run(lun, sixteen ? scsi_cdb_writesame16(0, 0, unmap, lba, 0, n, data ? g->bs : 0)
                            : scsi_cdb_writesame10(0, 0, unmap, (uint32_t)lba, 0, (uint16_t)n,
                                                   g->bs),
               data, len, NULL, 0);
}

/*
 * SBC-3 5.42/5.43: the data-out of WRITE SAME is one logical block.  A
 * buffer of any other size (half a block, a block and a byte, two blocks
 * as libiscsi's WriteSame10/16 InvalidDataOutSize sends, a 512-byte
 * block to a 4Kn LUN) is ILLEGAL REQUEST, INVALID FIELD IN CDB, as LIO's
 * fileio and iblock answer (SBC-3 names no code; PARAMETER LIST LENGTH
 * ERROR is for a parameter list, which this data is not): no CDB field is
 * wrong, so no field pointer (SKSV 0), and nothing is transferred or
 * written, with the UNMAP bit or without.  With NDOB (16) no data is
 * transferred: a buffer sent anyway stays untransferred and zeros are
 * written.
 */
static void test_write_same_data_out_one_block(gconstpointer data)
{
    const struct geometry *g = data;
    struct scsi_lun *lun = geometry_lun(g, 8 * MiB);
    const size_t bs = g->bs;
    const size_t wrong[] = { 2 * bs, bs + 1, 512 + (bs == 512 ? 4096 : 0), bs - 1, bs / 2 };
    g_autofree uint8_t *blk = g_malloc(2 * bs + 4096), *old = g_malloc(4 * bs);
    g_autofree uint8_t *rd = g_malloc(4 * bs);
    struct result r;

    fill_pattern(old, 4 * bs, 21);
    r = RUN_OUT(lun, scsi_cdb_write16(8, 4 * bs, (int)bs, 0, 0, 0, 0, 0), old, 4 * bs);
    assert_good(&r);
    fill_pattern(blk, 2 * bs + 4096, 22);
    for (int sixteen = 0; sixteen <= 1; sixteen++) {
        for (int unmap = 0; unmap <= 1; unmap++) {
            for (unsigned i = 0; i < G_N_ELEMENTS(wrong); i++) {
                struct sc_sense sn;

                r = write_same(lun, g, sixteen, unmap, 8, 4, blk, wrong[i]);
                read_lbas(lun, g->bs, 8, 4, rd);
                g_assert_true(memcmp(rd, old, 4 * bs) == 0);
                g_assert_cmpuint(r.out_xfer, ==, 0);
                sn = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST,
                                  SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
                g_assert_false(sn.sksv);
            }
        }
        /* Exactly one block: written to every block of the range. */
        blk[0] ^= 0xff;
        r = write_same(lun, g, sixteen, false, 8, 4, blk, bs);
        assert_good(&r);
        g_assert_cmpuint(r.out_xfer, ==, bs);
        read_lbas(lun, g->bs, 8, 4, rd);
        for (unsigned b = 0; b < 4; b++) {
            g_assert_true(memcmp(rd + b * bs, blk, bs) == 0);
        }
        memcpy(old, rd, 4 * bs);
    }
    /* NDOB (and UNMAP) with a buffer anyway: nothing transferred, zeros written. */
    r = write_same(lun, g, true, true, 8, 2, NULL, 0);
    assert_good(&r);
    r = run(lun, scsi_cdb_writesame16(0, 0, 1, 10, 0, 2, 0), blk, bs, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, 0);
    read_lbas(lun, g->bs, 8, 4, rd);
    for (size_t i = 0; i < 4 * bs; i++) {
        g_assert_cmphex(rd[i], ==, 0);
    }
    scsi_lun_free(lun);
}

/*
 * SBC-3 5.42: NUMBER OF LOGICAL BLOCKS zero means "to the end of the
 * medium" unless Block Limits' WSNZ is one.  WSNZ is one here (see
 * docs/design.md, Commands): zero is INVALID FIELD IN CDB with the field
 * pointer on NUMBER OF LOGICAL BLOCKS and nothing is written.  The range
 * is checked first, as libiscsi's WriteSame10/16 0blocks expect: a
 * starting LBA past the last block is LOGICAL BLOCK ADDRESS OUT OF RANGE
 * whatever the length (one past the end, 2^31, all ones).
 */
static void test_write_same_zero_blocks(gconstpointer data)
{
    const struct geometry *g = data;
    struct scsi_lun *lun = geometry_lun(g, 8 * MiB);
    const uint64_t nb = 8 * MiB / g->bs;
    const uint64_t past[] = { nb, nb + 1, 0x80000000u, 0xffffffffu };
    g_autofree uint8_t *blk = g_malloc(g->bs), *rd = g_malloc(g->bs);
    uint8_t b0[64];
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain d;
    struct result r;

    bl = VPD_LIMITS(lun, b0, &d);
    g_assert_cmpint(bl->wsnz, ==, 1);
    sc_datain_free(&d);
    memset(blk, 0x77, g->bs);
    for (int sixteen = 0; sixteen <= 1; sixteen++) {
        r = write_same(lun, g, sixteen, false, 0, 0, blk, g->bs);
        assert_field(&r, true, sixteen ? 10 : 7, 7);
        r = write_same(lun, g, sixteen, false, nb - 1, 0, blk, g->bs);
        assert_field(&r, true, sixteen ? 10 : 7, 7);
        for (unsigned i = 0; i < G_N_ELEMENTS(past); i++) {
            r = write_same(lun, g, sixteen, false, past[i], 0, blk, g->bs);
            assert_lba_out_of_range(&r);
        }
        r = write_same(lun, g, true, false, UINT64_MAX, 0, blk, g->bs);
        assert_lba_out_of_range(&r);
    }
    read_lbas(lun, g->bs, 0, 1, rd);
    g_assert_cmphex(rd[0], ==, 0);
    read_lbas(lun, g->bs, nb - 1, 1, rd);
    g_assert_cmphex(rd[g->bs - 1], ==, 0);
    scsi_lun_free(lun);
}

/* ---- UNMAP ------------------------------------------------------------- */

static size_t unmap_list(uint8_t *p, const uint64_t (*d)[2], unsigned n)
{
    memset(p, 0, 8 + 16 * n);
    scsi_set_uint16(p, (uint16_t)(6 + 16 * n));       /* UNMAP DATA LENGTH */
    scsi_set_uint16(p + 2, (uint16_t)(16 * n));       /* BLOCK DESCRIPTOR DATA LENGTH */
    for (unsigned i = 0; i < n; i++) {
        scsi_set_uint64(p + 8 + 16 * i, d[i][0]);
        scsi_set_uint32(p + 16 + 16 * i, (uint32_t)d[i][1]);
    }
    return 8 + 16 * n;
}

static struct result unmap(struct scsi_lun *lun, const uint8_t *list, size_t plen, size_t buflen)
{
    return RUN_OUT(lun, scsi_cdb_unmap(0, 0, (uint16_t)plen), list, buflen);
}

static void test_unmap_then_read_zeros(void)
{
    struct scsi_lun *lun = ram_lun();
    g_autofree uint8_t *w = g_malloc(64 * 512);
    g_autofree uint8_t *rd = g_malloc(64 * 512);
    static const uint64_t d[][2] = { { 8, 16 }, { 40, 3 }, { 60, 0 } };
    uint8_t list[8 + 16 * 3];
    size_t plen = unmap_list(list, d, 3);
    struct result r;

    memset(w, 0xab, 64 * 512);
    r = RUN_OUT(lun, scsi_cdb_write16(0, 64 * BS, BS, 0, 0, 0, 0, 0), w, 64 * 512);
    assert_good(&r);

    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, plen);
    read_blocks(lun, 0, 64, rd);
    for (uint32_t b = 0; b < 64; b++) {
        bool unmapped = (b >= 8 && b < 24) || (b >= 40 && b < 43);

        for (int i = 0; i < 512; i += 97) {
            g_assert_cmphex(rd[b * 512 + i], ==, unmapped ? 0 : 0xab);
        }
    }
    scsi_lun_free(lun);
}

static void test_unmap_bad_lengths(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint64_t d[][2] = { { 0, 1 }, { 2, 1 } };
    uint8_t list[8 + 16 * 2 + 8], bad[sizeof(list)];
    size_t plen = unmap_list(list, d, 2);
    struct result r;

    /* Block descriptor data length runs past the parameter list. */
    memcpy(bad, list, plen);
    bad[3] = 48;
    r = unmap(lun, bad, plen, plen);
    assert_invalid_param(&r);

    /* UNMAP DATA LENGTH does not cover the descriptors. */
    memcpy(bad, list, plen);
    bad[1] = 6;
    r = unmap(lun, bad, plen, plen);
    assert_invalid_param(&r);

    /* A parameter list too short for the header. */
    r = unmap(lun, list, 7, plen);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_PARAMETER_LIST_LENGTH_ERROR);

    /* Data-out shorter than the parameter list length. */
    r = unmap(lun, list, plen, plen - 1);
    assert_invalid_cdb(&r);

    /* A descriptor beyond the capacity. */
    static const uint64_t far[][2] = { { 8 * MiB / 512 - 1, 2 } };
    plen = unmap_list(bad, far, 1);
    r = unmap(lun, bad, plen, plen);
    assert_lba_out_of_range(&r);
    static const uint64_t wrap[][2] = { { UINT64_MAX, 2 } };
    plen = unmap_list(bad, wrap, 1);
    r = unmap(lun, bad, plen, plen);
    assert_lba_out_of_range(&r);

    /* Zero parameter list length: nothing to do. */
    r = unmap(lun, list, 0, 0);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_unmap_limits(void)
{
    struct scsi_lun *lun = null_lun(1ULL << 40, 512);
    uint8_t vpd_b0[64];
    uint32_t max_lbas, max_descs;
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain dd;
    struct result r;

    bl = VPD_LIMITS(lun, vpd_b0, &dd);
    max_lbas = bl->max_unmap;
    max_descs = bl->max_unmap_bdc;
    sc_datain_free(&dd);

    /* One descriptor too many. */
    g_autofree uint64_t (*d)[2] = g_malloc0_n(max_descs + 1, sizeof(*d));
    g_autofree uint8_t *list = g_malloc(8 + 16 * (max_descs + 1));
    for (uint32_t i = 0; i <= max_descs; i++) {
        d[i][0] = i;
        d[i][1] = 1;
    }
    size_t plen = unmap_list(list, (const uint64_t (*)[2])d, max_descs + 1);
    r = unmap(lun, list, plen, plen);
    assert_invalid_param(&r);
    plen = unmap_list(list, (const uint64_t (*)[2])d, max_descs);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);

    /* More LBAs than the advertised maximum, split over two descriptors. */
    const uint64_t big[2][2] = { { 0, max_lbas }, { (uint64_t)max_lbas + 10, 1 } };
    plen = unmap_list(list, big, 2);
    r = unmap(lun, list, plen, plen);
    assert_invalid_param(&r);
    plen = unmap_list(list, big, 1);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_unmap_partial_descriptor_ignored(void)
{
    struct scsi_lun *lun = ram_lun();
    static const uint64_t d[][2] = { { 4, 1 }, { 5, 1 } };
    uint8_t list[8 + 32], blk[512], rd[2 * 512];
    size_t plen = unmap_list(list, d, 2);
    struct result r;

    memset(blk, 0x11, sizeof(blk));
    r = write_same16(lun, false, false, 4, 2, blk, 512);
    assert_good(&r);
    /* SBC-3: a trailing incomplete descriptor is ignored, not an error. */
    list[3] = 16 + 8;
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    read_blocks(lun, 4, 2, rd);
    g_assert_cmphex(rd[0], ==, 0);
    g_assert_cmphex(rd[512], ==, 0x11);
    scsi_lun_free(lun);
}

static void test_unmap_unsupported_without_discard(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    static const uint64_t d[][2] = { { 0, 1 } };
    uint8_t list[24];
    size_t plen = unmap_list(list, d, 1);
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    be->can_discard = false;
    lun = ready(scsi_lun_new(be, "test:thick", NULL, NULL));
    r = unmap(lun, list, plen, plen);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    scsi_lun_free(lun);
}

/* ---- the work of one command is bounded --------------------------------- */

/* At most 1M blocks per UNMAP or WRITE SAME, 128 UNMAP descriptors. */
#define WORK_CAP_BLOCKS 0x100000u
#define WORK_CAP_DESCS 128u
/* At most 64k blocks and 1 MiB per backend range request. */
#define RANGE_REQUEST_BYTES (1u * MiB)
/* A backend that works inside submit() (ram, null) gets pieces of this. */
#define INLINE_PIECE_BYTES (16u * KiB)

static void test_block_limits_bound_one_command(void)
{
    struct scsi_lun *lun = null_lun(1ULL << 40, 512);
    uint8_t vpd_b0[64];
    uint32_t max_ws, max_lbas, max_descs;
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain dd;
    struct sc_sense sn;
    struct result r;

    bl = VPD_LIMITS(lun, vpd_b0, &dd);
    max_ws = (uint32_t)bl->max_ws_len;
    max_lbas = bl->max_unmap;
    max_descs = bl->max_unmap_bdc;
    sc_datain_free(&dd);
    g_assert_cmpuint(max_ws, >, 0);
    g_assert_cmpuint(max_ws, <=, WORK_CAP_BLOCKS);
    g_assert_cmpuint(max_lbas, >, 0);
    g_assert_cmpuint(max_lbas, <=, WORK_CAP_BLOCKS);
    g_assert_cmpuint(max_descs, >, 0);
    g_assert_cmpuint(max_descs, <=, WORK_CAP_DESCS);

    /* WRITE SAME at the advertised maximum runs; one block more is refused. */
    r = write_same16(lun, true, false, 0, max_ws, NULL, 0);
    assert_good(&r);
    r = write_same16(lun, true, false, 0, max_ws + 1, NULL, 0);
    sn = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
    g_assert_true(sn.sksv && sn.in_cdb);
    g_assert_cmpuint(sn.field, ==, 10);          /* NUMBER OF LOGICAL BLOCKS */

    /*
     * UNMAP: the field pointer names the NUMBER OF LOGICAL BLOCKS of the
     * descriptor that takes the total past the maximum (the second here).
     */
    const uint64_t over[3][2] = { { 0, max_lbas - 1 }, { max_lbas, 2 }, { 2ULL * max_lbas, 1 } };
    uint8_t list[8 + 16 * 3];
    size_t plen = unmap_list(list, over, 3);
    r = unmap(lun, list, plen, plen);
    sn = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST,
                      SCSI_SENSE_ASCQ_INVALID_FIELD_IN_PARAMETER_LIST);
    g_assert_true(sn.sksv && !sn.in_cdb);
    g_assert_cmpuint(sn.field, ==, 8 + 16 + 8);
    const uint64_t at_cap[2][2] = { { 0, max_lbas - 1 }, { max_lbas, 1 } };
    plen = unmap_list(list, at_cap, 2);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    scsi_lun_free(lun);
}

/* A large UNMAP or zeroing WRITE SAME reaches the backend in range chunks. */
static void test_large_ranges_go_in_chunks(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun_sized(1ULL << 30, false, 0, &s);
    uint8_t blk[512], rd[3 * 512];
    struct result r;

    /* 1M blocks of zeros: requests of 1 MiB each. */
    r = write_same16(lun, true, false, 0, WORK_CAP_BLOCKS, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, WORK_CAP_BLOCKS / (RANGE_REQUEST_BYTES / 512));
    g_assert_cmpuint(s->max_range_len, ==, RANGE_REQUEST_BYTES);

    /* UNMAP of 100000 + 5 + 0 blocks: the first range in 1 MiB pieces, one for the second. */
    fill_pattern(blk, sizeof(blk), 3);
    for (uint64_t lba = 99999; lba <= 100000; lba++) {
        r = RUN_OUT(lun, scsi_cdb_write16(lba, BS, BS, 0, 0, 0, 0, 0), blk, sizeof(blk));
        assert_good(&r);
    }
    s->max_range_len = 0;
    const uint64_t d[3][2] = { { 0, 100000 }, { 200000, 5 }, { 300000, 0 } };
    uint8_t list[8 + 16 * 3];
    size_t plen = unmap_list(list, d, 3);
    r = unmap(lun, list, plen, plen);
    assert_good(&r);
    const unsigned per_request = RANGE_REQUEST_BYTES / 512;
    g_assert_cmpuint(s->ops[BACKEND_DISCARD], ==, (100000 + per_request - 1) / per_request + 1);
    g_assert_cmpuint(s->max_range_len, ==, RANGE_REQUEST_BYTES);
    read_blocks(lun, 99999, 2, rd);
    g_assert_cmphex(rd[0], ==, 0);                               /* the range's last block */
    g_assert_true(memcmp(rd + 512, blk, 512) == 0);              /* its neighbour kept */
    scsi_lun_free(lun);
}

/*
 * On an I/O thread, a backend that completes inside submit() does not
 * hold the thread for the whole command: work the thread was given while
 * the command ran (a probe it posted itself, as a virtqueue's next
 * request would arrive) runs before the command completes, with only a
 * few of its chunks done.
 */
struct yield_probe {
    struct scsi_lun *lun;
    struct spy *spy;
    struct iothread *t;
    struct pending_cmd p;
    uint8_t list[8 + 16];
    uint8_t *buf;                   /* BACKEND_READ: the data-in */
    enum backend_op op;
    int completions_at_probe;
    unsigned chunks_at_exec, chunks_at_probe;
    bool done;                      /* read on the thread only */
};

static void probe_between_chunks(void *opaque)
{
    struct yield_probe *y = opaque;

    y->completions_at_probe = y->p.completions;
    y->chunks_at_probe = y->spy->ops[y->op];
}

static void start_large_on_thread(void *opaque)
{
    struct yield_probe *y = opaque;
    struct scsi_task *task;
    unsigned n;

    if (y->op == BACKEND_WRITE_ZEROES) {
        task = scsi_cdb_writesame16(0, 0, 1, 0, 0, WORK_CAP_BLOCKS, 0);
    } else if (y->op == BACKEND_READ) {
        task = scsi_cdb_read16(0, MiB, 512, 0, 0, 0, 0, 0);
        y->p.in = (struct iovec){ y->buf, MiB };
    } else {
        const uint64_t d[1][2] = { { 0, WORK_CAP_BLOCKS } };
        size_t plen = unmap_list(y->list, d, 1);

        task = scsi_cdb_unmap(0, 0, (uint16_t)plen);
        y->p.out = (struct iovec){ y->list, plen };
    }
    n = sc_cdb(task, y->p.cdb);
    /* As start() does, but on this thread like the daemon's (scsi_cmd.thread). */
    y->p.cmd = (struct scsi_cmd){ .cdb = y->p.cdb, .cdb_len = n, .thread = y->t,
                                  .complete = count_completion, .opaque = &y->p };
    if (y->p.out.iov_len) {
        y->p.cmd.data_out = &y->p.out;
        y->p.cmd.data_out_cnt = 1;
    }
    if (y->p.in.iov_len) {
        y->p.cmd.data_in = &y->p.in;
        y->p.cmd.data_in_cnt = 1;
    }
    scsi_lun_exec(y->lun, &y->p.cmd);
    y->chunks_at_exec = y->spy->ops[y->op];
    iothread_post(y->t, probe_between_chunks, y);
}

static void read_done(void *opaque)
{
    struct yield_probe *y = opaque;

    y->done = y->p.completions > 0;
}

/*
 * works_inline: the backend works inside submit() (ram, null), so the
 * command goes in pieces of INLINE_PIECE_BYTES and does no backend work
 * inside its exec (its first piece is deferred too): popping it costs a
 * queue's turn nothing but its set-up.
 */
static void large_command_yields(enum backend_op op, bool works_inline)
{
    struct yield_probe y = { .op = op };
    gint64 deadline = g_get_monotonic_time() + DRAIN_TIMEOUT_US;
    uint64_t bytes = op == BACKEND_READ ? MiB : WORK_CAP_BLOCKS * 512ull;
    const unsigned chunks = bytes / (works_inline ? INLINE_PIECE_BYTES : RANGE_REQUEST_BYTES);
    g_autofree uint8_t *buf = g_malloc(MiB);

    y.buf = buf;
    y.lun = spy_lun_sized(1ULL << 30, false, 0, &y.spy);
    y.spy->be.works_inline = works_inline;
    y.t = iothread_new("t-yield", 1, 0);
    g_assert_cmpint(iothread_start(y.t), ==, 0);
    iothread_run_sync(y.t, start_large_on_thread, &y);
    while (iothread_run_sync(y.t, read_done, &y), !y.done) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    g_assert_cmpint(y.completions_at_probe, ==, 0);
    g_assert_cmpuint(y.chunks_at_exec, ==, works_inline ? 0 : 1);
    g_assert_cmpuint(y.chunks_at_probe, <, chunks);
    g_assert_cmpint(y.p.completions, ==, 1);
    struct result r = result_of(&y.p.cmd);
    assert_good(&r);
    g_assert_cmpuint(y.spy->ops[op], ==, chunks);
    if (op == BACKEND_READ) {
        g_assert_cmpuint(y.p.cmd.data_in_xfer, ==, MiB);
    }
    iothread_free(y.t);
    scsi_lun_free(y.lun);
}

static void test_write_same_yields_the_thread(void)
{
    large_command_yields(BACKEND_WRITE_ZEROES, false);
}

static void test_unmap_yields_the_thread(void)
{
    large_command_yields(BACKEND_DISCARD, false);
}

static void test_inline_write_same_in_pieces(void)
{
    large_command_yields(BACKEND_WRITE_ZEROES, true);
}

static void test_inline_unmap_in_pieces(void)
{
    large_command_yields(BACKEND_DISCARD, true);
}

static void test_inline_read_in_pieces(void)
{
    large_command_yields(BACKEND_READ, true);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/write-same/replicate", test_write_same_replicates_block);
    g_test_add_func("/scsi-disk/write-same/zeroes", test_write_same_zeroes_and_unmap);
    g_test_add_func("/scsi-disk/write-same/invalid", test_write_same_invalid);
    add_geometry_tests("/scsi-disk/write-same/data-out-one-block",
                       test_write_same_data_out_one_block);
    add_geometry_tests("/scsi-disk/write-same/zero-blocks", test_write_same_zero_blocks);
    g_test_add_func("/scsi-disk/unmap/read-zeros", test_unmap_then_read_zeros);
    g_test_add_func("/scsi-disk/unmap/bad-lengths", test_unmap_bad_lengths);
    g_test_add_func("/scsi-disk/unmap/limits", test_unmap_limits);
    g_test_add_func("/scsi-disk/unmap/partial-descriptor", test_unmap_partial_descriptor_ignored);
    g_test_add_func("/scsi-disk/unmap/unsupported", test_unmap_unsupported_without_discard);
    g_test_add_func("/scsi-disk/work-bound/block-limits", test_block_limits_bound_one_command);
    g_test_add_func("/scsi-disk/work-bound/chunks", test_large_ranges_go_in_chunks);
    g_test_add_func("/scsi-disk/work-bound/write-same-yields", test_write_same_yields_the_thread);
    g_test_add_func("/scsi-disk/work-bound/unmap-yields", test_unmap_yields_the_thread);
    g_test_add_func("/scsi-disk/work-bound/inline/write-same", test_inline_write_same_in_pieces);
    g_test_add_func("/scsi-disk/work-bound/inline/unmap", test_inline_unmap_in_pieces);
    g_test_add_func("/scsi-disk/work-bound/inline/read", test_inline_read_in_pieces);

    return g_test_run();
}
