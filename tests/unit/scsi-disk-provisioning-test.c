/*
 * Specification of the provisioning commands
 * (lib/scsi/scsi-disk-provisioning.c): WRITE SAME (10) and (16) replicate
 * one block across more than one bounce buffer and nothing beside it, turn
 * zeros (with UNMAP, or NDOB) into one backend WRITE ZEROES, and refuse a
 * zero length, a range past the end, a short data-out and ANCHOR; UNMAP
 * checks its whole parameter list first (its lengths, the advertised
 * limits, ranges past the end or wrapping), ignores a trailing partial
 * descriptor, discards the ranges, which read back as zeros, and is not
 * supported on a backend that cannot discard.  The harness is
 * scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
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

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    be->can_discard = false;
    lun = ready(scsi_lun_new(be, "test:thick", NULL));
    r = unmap(lun, list, plen, plen);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/write-same/replicate", test_write_same_replicates_block);
    g_test_add_func("/scsi-disk/write-same/zeroes", test_write_same_zeroes_and_unmap);
    g_test_add_func("/scsi-disk/write-same/invalid", test_write_same_invalid);
    g_test_add_func("/scsi-disk/unmap/read-zeros", test_unmap_then_read_zeros);
    g_test_add_func("/scsi-disk/unmap/bad-lengths", test_unmap_bad_lengths);
    g_test_add_func("/scsi-disk/unmap/limits", test_unmap_limits);
    g_test_add_func("/scsi-disk/unmap/partial-descriptor", test_unmap_partial_descriptor_ignored);
    g_test_add_func("/scsi-disk/unmap/unsupported", test_unmap_unsupported_without_discard);

    return g_test_run();
}
