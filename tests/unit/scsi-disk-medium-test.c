/*
 * Specification of the SBC-3 commands that came with COMPARE AND WRITE,
 * besides it: VERIFY (12) and WRITE AND VERIFY (12) behave as their
 * (10) and (16) forms; PRE-FETCH (10) and (16) answer GOOD, never
 * CONDITION MET (SBC-3 keeps that for blocks held in a cache the device
 * controls; the page cache is the kernel's), on 512-byte, 4Kn and 512e
 * LUNs alike, whether or not the backend has a cache and however long the
 * range, and check the range; GET LBA STATUS reports ram's mapped and deallocated runs as
 * writes and unmaps change them, starting at the LBA asked for, truncated
 * to the allocation length, and everything mapped on a LUN without a map;
 * READ DEFECT DATA (10) and (12) return an empty list in the format asked
 * for; READ CAPACITY (16) reports the physical block exponent and Block
 * Limits the unmap granularity of the backend.  REPORT SUPPORTED OPERATION
 * CODES lists each new command, and for each, every CDB bit its usage data
 * leaves out is refused with a field pointer to that bit.  The harness is
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

/* ---- VERIFY (12), WRITE AND VERIFY (12) -------------------------------- */

static void test_verify12_and_write_verify12(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(true, &s);
    uint8_t w[4 * BS], v[4 * BS], rd[4 * BS];
    struct sc_sense sn;
    struct result r;

    fill_pattern(w, sizeof(w), 21);
    r = RUN_OUT(lun, scsi_cdb_writeverify12(30, sizeof(w), BS, 0, 0, 1, 0), w, sizeof(w));
    assert_good(&r);
    g_assert_cmpuint(s->fua_writes, ==, 1);
    read_blocks(lun, 30, 4, rd);
    g_assert_true(memcmp(rd, w, sizeof(w)) == 0);

    /* BYTCHK=1: equal, then a byte off in the third block. */
    r = RUN_OUT(lun, scsi_cdb_verify12(30, sizeof(w), 0, 0, 1, BS), w, sizeof(w));
    assert_good(&r);
    memcpy(v, w, sizeof(v));
    v[2 * BS + 3] ^= 0xff;
    r = RUN_OUT(lun, scsi_cdb_verify12(30, sizeof(v), 0, 0, 1, BS), v, sizeof(v));
    sn = assert_sense(&r, SCSI_SENSE_MISCOMPARE, SCSI_SENSE_ASCQ_MISCOMPARE_DURING_VERIFY);
    g_assert_cmpuint(sn.info, ==, 2 * BS + 3);

    /* Past the end; a zero length at the end; VRPROTECT. */
    r = RUN(lun, scsi_cdb_verify12(8 * MiB / BS - 1, 2 * BS, 0, 0, 0, BS));
    assert_lba_out_of_range(&r);
    r = RUN(lun, scsi_cdb_verify12(8 * MiB / BS, 0, 0, 0, 0, BS));
    assert_lba_out_of_range(&r);
    r = RUN(lun, scsi_cdb_verify12(0, 0, 0, 0, 0, BS));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_verify12(0, BS, 1, 0, 0, BS));
    assert_field(&r, true, 1, 7);
    scsi_lun_free(lun);

    /* Write protect. */
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, BS, &be, NULL), ==, 0);
    be->read_only = true;
    lun = ready(scsi_lun_new(be, "test:ro", NULL, NULL));
    r = RUN_OUT(lun, scsi_cdb_writeverify12(0, BS, BS, 0, 0, 0, 0), w, BS);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    memset(v, 0, BS);
    r = RUN_OUT(lun, scsi_cdb_verify12(0, BS, 0, 0, 1, BS), v, BS);
    assert_good(&r);                                     /* VERIFY only reads */
    scsi_lun_free(lun);
}

/* ---- PRE-FETCH --------------------------------------------------------- */

static void test_pre_fetch(void)
{
    struct scsi_lun *lun;
    struct spy *s;
    struct result r;

    for (unsigned i = 0; i < G_N_ELEMENTS(geometries); i++) {
        const struct geometry *g = &geometries[i];
        uint64_t nb = 8 * MiB / g->bs;

        g_test_message("%s", g->name);
        lun = ready(geometry_ram(g, "test:pre-fetch", 8 * MiB, NULL));
        /* ram holds every block in memory, yet no cache the LUN controls: GOOD, IMMED or not. */
        r = RUN(lun, scsi_cdb_prefetch10(10, 100, 0, 0));
        assert_good(&r);
        r = RUN(lun, scsi_cdb_prefetch10(10, 100, 1, 0));
        assert_good(&r);
        r = RUN(lun, scsi_cdb_prefetch16(10, 100, 0, 0));
        assert_good(&r);
        r = RUN(lun, scsi_cdb_prefetch16(10, 100, 1, 0));
        assert_good(&r);
        /* PREFETCH LENGTH 0: to the end of the LUN. */
        r = RUN(lun, scsi_cdb_prefetch16(nb - 1, 0, 0, 0));
        assert_good(&r);
        r = RUN(lun, scsi_cdb_prefetch10(0, 0, 0, 0));
        assert_good(&r);
        /* Past the end, and an LBA past it with length 0: LBA OUT OF RANGE. */
        r = RUN(lun, scsi_cdb_prefetch10((uint32_t)nb - 1, 2, 0, 0));
        assert_lba_out_of_range(&r);
        r = RUN(lun, scsi_cdb_prefetch16(nb, 0, 0, 0));
        assert_lba_out_of_range(&r);
        r = RUN(lun, scsi_cdb_prefetch16(nb - 1, 2, 1, 0));
        assert_lba_out_of_range(&r);
        scsi_lun_free(lun);
    }

    /* Reserved bits of byte 1. */
    {
        uint8_t cdb[SC_CDB_MAX];
        unsigned n = sc_cdb(scsi_cdb_prefetch10(0, 1, 0, 0), cdb);

        lun = ram_lun();
        cdb[1] |= 0x20;
        r = run_cdb(lun, cdb, n, NULL, 0, NULL, 0);
        assert_field(&r, true, 1, 5);
        scsi_lun_free(lun);
    }

    /* More than one command reads (a null LUN of 1 GiB, to its end): GOOD. */
    lun = null_lun(1ULL << 30, BS);
    r = RUN(lun, scsi_cdb_prefetch16(0, 0, 0, 0));
    assert_good(&r);
    scsi_lun_free(lun);

    /* A backend without a cache: GOOD, and nothing submitted. */
    lun = spy_lun(false, &s);
    r = RUN(lun, scsi_cdb_prefetch10(0, 8, 0, 0));
    assert_good(&r);
    for (unsigned i = 0; i < G_N_ELEMENTS(s->ops); i++) {
        g_assert_cmpuint(s->ops[i], ==, 0);
    }
    scsi_lun_free(lun);
}

/* ---- GET LBA STATUS ---------------------------------------------------- */

static struct scsi_get_lba_status *lba_status(struct scsi_lun *lun, uint64_t lba, uint32_t alloc,
                                              uint8_t *buf, struct sc_datain *d,
                                              struct result *r)
{
    *r = RUN_IN(lun, scsi_cdb_get_lba_status(lba, alloc), buf, alloc);
    assert_good(r);
    return decoded(d, r, buf);
}

static void assert_desc(const struct scsi_get_lba_status *st, unsigned i, uint64_t lba,
                        uint32_t n, enum scsi_provisioning_type type)
{
    g_assert_cmpuint(i, <, st->num_descriptors);
    g_assert_cmpuint(st->descriptors[i].lba, ==, lba);
    g_assert_cmpuint(st->descriptors[i].num_blocks, ==, n);
    g_assert_cmpint(st->descriptors[i].provisioning, ==, type);
}

static void test_get_lba_status_ram(void)
{
    struct scsi_lun *lun = ram_lun();
    uint64_t nb = 8 * MiB / BS;
    uint8_t buf[8 + 16 * 8], blk[BS];
    struct scsi_get_lba_status *st;
    struct sc_datain d;
    struct result r;

    /* Nothing written yet: one deallocated run to the end. */
    st = lba_status(lun, 0, sizeof(buf), buf, &d, &r);
    g_assert_cmpuint(st->num_descriptors, ==, 1);
    assert_desc(st, 0, 0, nb, SCSI_PROVISIONING_TYPE_DEALLOCATED);
    sc_datain_free(&d);

    /* A block written maps its 4 KiB page (blocks 16..23). */
    fill_pattern(blk, sizeof(blk), 22);
    r = RUN_OUT(lun, scsi_cdb_write10(18, BS, BS, 0, 0, 0, 0, 0), blk, BS);
    assert_good(&r);
    st = lba_status(lun, 0, sizeof(buf), buf, &d, &r);
    g_assert_cmpuint(st->num_descriptors, ==, 3);
    assert_desc(st, 0, 0, 16, SCSI_PROVISIONING_TYPE_DEALLOCATED);
    assert_desc(st, 1, 16, 8, SCSI_PROVISIONING_TYPE_MAPPED);
    assert_desc(st, 2, 24, nb - 24, SCSI_PROVISIONING_TYPE_DEALLOCATED);
    sc_datain_free(&d);

    /* From inside the mapped run: the first descriptor starts where asked. */
    st = lba_status(lun, 20, sizeof(buf), buf, &d, &r);
    assert_desc(st, 0, 20, 4, SCSI_PROVISIONING_TYPE_MAPPED);
    sc_datain_free(&d);

    /* Room for one descriptor: one comes, the length says so. */
    st = lba_status(lun, 0, 24, buf, &d, &r);
    g_assert_cmpuint(r.in_xfer, ==, 24);
    g_assert_cmpuint(st->num_descriptors, ==, 1);
    sc_datain_free(&d);

    /* Unmapping the page deallocates it again. */
    r = write_same16(lun, true, false, 16, 8, NULL, 0);
    assert_good(&r);
    st = lba_status(lun, 0, sizeof(buf), buf, &d, &r);
    g_assert_cmpuint(st->num_descriptors, ==, 1);
    assert_desc(st, 0, 0, nb, SCSI_PROVISIONING_TYPE_DEALLOCATED);
    sc_datain_free(&d);

    /* Past the end; a reserved bit (byte 14). */
    r = RUN_IN(lun, scsi_cdb_get_lba_status(nb, sizeof(buf)), buf, sizeof(buf));
    assert_lba_out_of_range(&r);
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(scsi_cdb_get_lba_status(0, sizeof(buf)), cdb);

    cdb[14] = 0x01;
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_field(&r, true, 14, 0);
    scsi_lun_free(lun);
}

static void test_get_lba_status_without_map(void)
{
    struct spy *s;
    struct scsi_lun *lun = spy_lun(false, &s);
    uint8_t buf[8 + 16 * 4];
    struct scsi_get_lba_status *st;
    struct sc_datain d;
    struct result r;

    /* The spy has no map: all mapped, never a guess of deallocated. */
    st = lba_status(lun, 100, sizeof(buf), buf, &d, &r);
    g_assert_cmpuint(st->num_descriptors, ==, 1);
    assert_desc(st, 0, 100, 8 * MiB / BS - 100, SCSI_PROVISIONING_TYPE_MAPPED);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

/*
 * SBC-3 5.7: the first LBA status descriptor starts at the STARTING
 * LOGICAL BLOCK ADDRESS, whatever the unit the device tracks allocation
 * in (here ram's 4 KiB pages: 8 blocks at 512 bytes, one physical block
 * of a 512e LUN, one block at 4Kn), so it may cover less than a physical
 * block; each next descriptor starts where the one before ended.  The
 * cases are libiscsi's GetLBAStatus.UnmapSingle: one 4 KiB extent
 * unmapped inside written blocks, then asked from every block around it.
 * (Its second half asks from LBA i + 1 and expects the first descriptor at
 * i + LBPPB, which SBC-3 contradicts on 512e: this follows SBC-3.)
 */
static void test_get_lba_status_starts_where_asked(gconstpointer data)
{
    const struct geometry *g = data;
    struct scsi_lun *lun = geometry_lun(g, 8 * MiB);
    const uint64_t ext = 4096 / g->bs, hole = 2 * ext, written = 6 * ext;
    uint8_t buf[8 + 16 * 4];
    g_autofree uint8_t *junk = g_malloc(written * g->bs);
    struct scsi_get_lba_status *st;
    struct sc_datain d;
    struct result r;

    fill_pattern(junk, written * g->bs, 41);
    r = RUN_OUT(lun, scsi_cdb_write16(0, (uint32_t)(written * g->bs), (int)g->bs, 0, 0, 0, 0,
                                      0), junk, written * g->bs);
    assert_good(&r);
    r = write_same16(lun, true, false, hole, (uint32_t)ext, NULL, 0);
    assert_good(&r);

    for (uint64_t s = 0; s < written + ext; s++) {
        bool in_hole = s >= hole && s < hole + ext;
        uint64_t end = s < hole ? hole : in_hole ? hole + ext : s < written ? written : 0;

        st = lba_status(lun, s, sizeof(buf), buf, &d, &r);
        g_assert_cmpuint(st->num_descriptors, >=, 1);
        g_assert_cmpuint(st->descriptors[0].lba, ==, s);
        g_assert_cmpint(st->descriptors[0].provisioning, ==,
                        in_hole || s >= written ? SCSI_PROVISIONING_TYPE_DEALLOCATED
                                                : SCSI_PROVISIONING_TYPE_MAPPED);
        if (end) {
            g_assert_cmpuint(st->descriptors[0].num_blocks, ==, end - s);
        }
        for (unsigned i = 1; i < st->num_descriptors; i++) {
            g_assert_cmpuint(st->descriptors[i].lba, ==,
                             st->descriptors[i - 1].lba + st->descriptors[i - 1].num_blocks);
            g_assert_cmpint(st->descriptors[i].provisioning, !=,
                            st->descriptors[i - 1].provisioning);
        }
        sc_datain_free(&d);

        /* Room for one descriptor only: the same first one. */
        st = lba_status(lun, s, 24, buf, &d, &r);
        g_assert_cmpuint(st->num_descriptors, ==, 1);
        g_assert_cmpuint(st->descriptors[0].lba, ==, s);
        sc_datain_free(&d);
    }
    scsi_lun_free(lun);
}

/* ---- READ DEFECT DATA -------------------------------------------------- */

static void test_read_defect_data(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[16];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = RUN_IN(lun, scsi_cdb_readdefectdata10(1, 1, 3, sizeof(buf)), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4);
    g_assert_cmphex(buf[1], ==, 0x10 | 0x08 | 3);       /* PLISTV, GLISTV, long block format */
    g_assert_cmpuint(buf[2] << 8 | buf[3], ==, 0);       /* DEFECT LIST LENGTH */

    /* libiscsi's READ DEFECT DATA (12) builder leaves byte 1 zero: set by hand. */
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(scsi_cdb_readdefectdata12(0, 1, 5, 0, sizeof(buf)), cdb);

    cdb[1] = 0x08 | 5;      /* REQ_GLIST, physical sector format */
    memset(buf, 0xee, sizeof(buf));
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 8);
    g_assert_cmphex(buf[1], ==, 0x08 | 5);
    for (unsigned i = 2; i < 8; i++) {
        g_assert_cmpuint(buf[i], ==, 0);
    }

    /* Cut to the allocation length. */
    r = RUN_IN(lun, scsi_cdb_readdefectdata10(1, 0, 0, 2), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 2);

    /* 111b is reserved. */
    r = RUN_IN(lun, scsi_cdb_readdefectdata10(1, 1, 7, sizeof(buf)), buf, sizeof(buf));
    assert_field(&r, true, 2, 2);
    cdb[1] = 0x10 | 0x08 | 7;
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_field(&r, true, 1, 2);
    scsi_lun_free(lun);
}

/* ---- geometry ---------------------------------------------------------- */

static void test_geometry(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    struct scsi_readcapacity16 *rc;
    struct scsi_inquiry_block_limits *bl;
    struct sc_datain d;
    uint8_t buf[64];
    struct result r;

    /* Default: one logical block per physical block, 4 KiB unmap granularity. */
    lun = ram_lun();
    r = RUN_IN(lun, scsi_cdb_readcapacity16(), buf, 32);
    rc = decoded(&d, &r, buf);
    g_assert_cmpuint(rc->lbppbe, ==, 0);
    g_assert_cmpuint(rc->lalba, ==, 0);
    sc_datain_free(&d);
    bl = VPD_LIMITS(lun, buf, &d);
    g_assert_cmpuint(bl->opt_unmap_gran, ==, 8);
    g_assert_true(bl->ugavalid);
    g_assert_cmpuint(bl->unmap_gran_align, ==, 0);
    sc_datain_free(&d);
    scsi_lun_free(lun);

    /* 512-byte blocks on 4 KiB physical ones, unmapped in 64 KiB. */
    g_assert_cmpint(backend_ram_new(8 * MiB, BS, &be, NULL), ==, 0);
    be->phys_block_size = 4096;
    be->discard_granularity = 64 * KiB;
    lun = ready(scsi_lun_new(be, "test:512e", NULL, NULL));
    r = RUN_IN(lun, scsi_cdb_readcapacity16(), buf, 32);
    rc = decoded(&d, &r, buf);
    g_assert_cmpuint(rc->lbppbe, ==, 3);
    g_assert_cmpuint(rc->block_length, ==, BS);
    g_assert_true(rc->lbpme);
    sc_datain_free(&d);
    bl = VPD_LIMITS(lun, buf, &d);
    g_assert_cmpuint(bl->opt_unmap_gran, ==, 128);
    sc_datain_free(&d);
    scsi_lun_free(lun);

    /* A physical block that is no power-of-two multiple is not reported. */
    g_assert_cmpint(backend_ram_new(8 * MiB, 4096, &be, NULL), ==, 0);
    be->phys_block_size = 512;
    lun = ready(scsi_lun_new(be, "test:odd", NULL, NULL));
    r = RUN_IN(lun, scsi_cdb_readcapacity16(), buf, 32);
    rc = decoded(&d, &r, buf);
    g_assert_cmpuint(rc->lbppbe, ==, 0);
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

static const struct { uint8_t op; uint16_t sa; bool has_sa; unsigned len; } new_cmds[] = {
    { SCSI_OPCODE_COMPARE_AND_WRITE, 0, false, 16 },
    { SCSI_OPCODE_ORWRITE, 0, false, 16 },
    { SCSI_OPCODE_PREFETCH10, 0, false, 10 },
    { SCSI_OPCODE_PREFETCH16, 0, false, 16 },
    { SCSI_OPCODE_READ_DEFECT_DATA10, 0, false, 10 },
    { SCSI_OPCODE_READ_DEFECT_DATA12, 0, false, 12 },
    { SCSI_OPCODE_VERIFY12, 0, false, 12 },
    { SCSI_OPCODE_WRITE_VERIFY12, 0, false, 12 },
    { SCSI_OPCODE_SERVICE_ACTION_IN, SCSI_GET_LBA_STATUS, true, 16 },
};

/*
 * Each new command is listed, and its usage data is what it checks: a CDB
 * with any one bit its usage data leaves out is refused, pointing at it.
 */
static void test_rsoc_usage_matches_refusals(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[2048];
    struct sc_datain d;
    struct result r;
    const struct scsi_report_supported_op_codes *all;

    r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0,
                                                      sizeof(buf)), buf, sizeof(buf));
    assert_good(&r);
    all = decoded(&d, &r, buf);
    for (unsigned c = 0; c < G_N_ELEMENTS(new_cmds); c++) {
        bool found = false;

        for (int i = 0; i < all->num_descriptors; i++) {
            const struct scsi_command_descriptor *e = &all->descriptors[i];

            if (e->opcode == new_cmds[c].op && (!e->servactv || e->sa == new_cmds[c].sa)) {
                g_assert_cmpint(e->servactv, ==, new_cmds[c].has_sa);
                g_assert_cmpuint(e->cdb_len, ==, new_cmds[c].len);
                found = true;
            }
        }
        g_assert_true(found);
    }
    sc_datain_free(&d);

    for (unsigned c = 0; c < G_N_ELEMENTS(new_cmds); c++) {
        const struct scsi_report_supported_op_codes_one_command *one;
        uint8_t usage[16], cdb[16];
        unsigned len = new_cmds[c].len;

        r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, new_cmds[c].has_sa
                                                              ? SCSI_REPORT_SUPPORTING_SERVICEACTION
                                                              : SCSI_REPORT_SUPPORTING_OPCODE,
                                                          new_cmds[c].op, new_cmds[c].sa, 64),
                   buf, 64);
        assert_good(&r);
        one = decoded(&d, &r, buf);
        g_assert_cmpuint(one->support, ==, 3);
        g_assert_cmpuint(one->cdb_length, ==, len);
        memcpy(usage, one->cdb_usage_data, len);
        sc_datain_free(&d);
        g_assert_cmphex(usage[0], ==, new_cmds[c].op);
        g_assert_cmphex(usage[len - 1], ==, 0x04);   /* NACA: the one control bit looked at */
        for (unsigned byte = 1; byte + 1 < len; byte++) {
            for (int bit = 0; bit < 8; bit++) {
                /* The service action field holds its value there, not a mask. */
                if ((usage[byte] & (1u << bit)) ||
                    (new_cmds[c].has_sa && byte == 1 && bit < 5)) {
                    continue;
                }
                memset(cdb, 0, sizeof(cdb));
                cdb[0] = new_cmds[c].op;
                cdb[1] = (uint8_t)new_cmds[c].sa;
                cdb[byte] |= (uint8_t)(1u << bit);
                r = run_cdb(lun, cdb, len, NULL, 0, buf, sizeof(buf));
                assert_field(&r, true, byte, bit);
            }
        }
    }
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/verify12/write-and-verify12", test_verify12_and_write_verify12);
    g_test_add_func("/scsi-disk/pre-fetch", test_pre_fetch);
    g_test_add_func("/scsi-disk/get-lba-status/ram", test_get_lba_status_ram);
    g_test_add_func("/scsi-disk/get-lba-status/without-map", test_get_lba_status_without_map);
    g_test_add_func("/scsi-disk/read-defect-data", test_read_defect_data);
    g_test_add_func("/scsi-disk/geometry", test_geometry);
    add_geometry_tests("/scsi-disk/get-lba-status/starts-where-asked",
                       test_get_lba_status_starts_where_asked);
    g_test_add_func("/scsi-disk/rsoc/usage-matches-refusals", test_rsoc_usage_matches_refusals);

    return g_test_run();
}
