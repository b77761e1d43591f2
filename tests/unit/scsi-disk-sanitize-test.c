/*
 * Specification of SANITIZE (hw/scsi/scsi-disk-sanitize.c): offered only
 * where the LUN opted in (otherwise INVALID COMMAND OPERATION CODE and not
 * listed); OVERWRITE writes the initialization pattern to every block,
 * OVERWRITE COUNT passes inverted between passes with INVERT; BLOCK ERASE
 * deallocates where discarded blocks read back as zeros, else writes
 * zeroes (and zeros when the backend cannot), reads back zeros with GOOD
 * as VPD B1h's WABEREQ 01b says (512-byte, 4Kn and 512e LUNs alike);
 * CRYPTOGRAPHIC ERASE and bad
 * parameter lists are refused with field pointers, a read-only LUN with
 * WRITE PROTECTED.  With the backend's completions deferred: while it
 * runs, TEST UNIT READY and media access get NOT READY, SANITIZE IN
 * PROGRESS with a progress indication that grows, REQUEST SENSE reports
 * it and INQUIRY runs; IMMED answers at once, without it the command ends
 * with the erase; the erase goes to the backend a bounded piece at a
 * time.  After a failure medium access gets MEDIUM ERROR, SANITIZE COMMAND
 * FAILED until a sanitize succeeds, or EXIT FAILURE MODE when AUSE was set.
 * The harness is scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

#define LUN_BLOCKS (8 * MiB / BS)
#define SC_ASCQ_SANITIZE_COMMAND_FAILED 0x3103

static struct scsi_lun *opt_in(struct scsi_lun *lun)
{
    scsi_lun_backend(lun)->allow_sanitize = true;
    return lun;
}

/* The OVERWRITE parameter list: INVERT, count passes of pattern (len bytes). */
static size_t overwrite_params(uint8_t *p, bool inv, unsigned count, const uint8_t *pat,
                               size_t len)
{
    p[0] = (inv ? 0x80 : 0) | (uint8_t)count;
    p[1] = 0;
    p[2] = (uint8_t)(len >> 8);
    p[3] = (uint8_t)len;
    memcpy(p + 4, pat, len);
    return 4 + len;
}

static struct result sanitize(struct scsi_lun *lun, bool immed, bool ause, int sa,
                              const uint8_t *params, size_t plen)
{
    return run(lun, scsi_cdb_sanitize(immed, ause, sa, (int)plen), params, plen, NULL, 0);
}

static struct result tur(struct scsi_lun *lun)
{
    return RUN(lun, scsi_cdb_testunitready());
}

/* NOT READY, SANITIZE IN PROGRESS; returns the progress indication. */
static unsigned assert_in_progress(const struct result *r)
{
    assert_sense(r, SCSI_SENSE_NOT_READY, SCSI_SENSE_ASCQ_SANITIZE_IN_PROGRESS);
    g_assert_cmphex(r->sense[15] & 0x80, ==, 0x80);   /* SKSV */
    return (unsigned)r->sense[16] << 8 | r->sense[17];
}

static void test_needs_opt_in(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[2048];
    const struct scsi_report_supported_op_codes *l;
    struct sc_datain d;
    struct result r;
    bool seen[32] = { false };

    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0,
                                                      sizeof(buf)), buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    for (int i = 0; i < l->num_descriptors; i++) {
        g_assert_cmphex(l->descriptors[i].opcode, !=, SCSI_OPCODE_SANITIZE);
    }
    sc_datain_free(&d);

    opt_in(lun);
    r = RUN_IN(lun, scsi_cdb_report_supported_opcodes(0, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0,
                                                      sizeof(buf)), buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    for (int i = 0; i < l->num_descriptors; i++) {
        if (l->descriptors[i].opcode == SCSI_OPCODE_SANITIZE) {
            g_assert_true(l->descriptors[i].servactv);
            g_assert_cmpuint(l->descriptors[i].cdb_len, ==, 10);
            g_assert_cmpuint(l->descriptors[i].sa, <, 32);
            seen[l->descriptors[i].sa] = true;
        }
    }
    sc_datain_free(&d);
    g_assert_true(seen[SCSI_SANITIZE_OVERWRITE]);
    g_assert_true(seen[SCSI_SANITIZE_BLOCK_ERASE]);
    g_assert_true(seen[SCSI_SANITIZE_EXIT_FAILURE_MODE]);
    g_assert_false(seen[SCSI_SANITIZE_CRYPTO_ERASE]);
    scsi_lun_free(lun);
}

/* Every block holds pat repeated from the block's start (inverted with inv). */
static void assert_pattern(struct scsi_lun *lun, const uint8_t *pat, size_t len, bool inv)
{
    g_autofree uint8_t *rd = g_malloc(256 * BS);

    for (uint64_t lba = 0; lba < LUN_BLOCKS; lba += 256) {
        read_blocks(lun, lba, 256, rd);
        for (size_t i = 0; i < 256 * BS; i++) {
            uint8_t want = pat[(i % BS) % len];

            if (rd[i] != (inv ? (uint8_t)~want : want)) {
                g_error("block %" G_GUINT64_FORMAT " byte %zu: %02x", lba + i / BS, i % BS,
                        rd[i]);
            }
        }
    }
}

static void test_overwrite(void)
{
    struct scsi_lun *lun = opt_in(ram_lun());
    static const uint8_t pat[3] = { 0xa5, 0x3c, 0x01 };   /* does not divide a block */
    uint8_t p[4 + BS], junk[4 * BS];
    struct result r;
    size_t n;

    fill_pattern(junk, sizeof(junk), 9);
    r = RUN_OUT(lun, scsi_cdb_write16(100, sizeof(junk), BS, 0, 0, 0, 0, 0), junk, sizeof(junk));
    assert_good(&r);
    n = overwrite_params(p, false, 1, pat, sizeof(pat));
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_good(&r);
    g_assert_cmpuint(r.out_xfer, ==, n);
    assert_pattern(lun, pat, sizeof(pat), false);

    /* Two passes, inverted between them: the second pass's inverse stays. */
    n = overwrite_params(p, true, 2, pat, sizeof(pat));
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_good(&r);
    assert_pattern(lun, pat, sizeof(pat), true);
    /* Three: pattern, inverse, pattern. */
    n = overwrite_params(p, true, 3, pat, sizeof(pat));
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_good(&r);
    assert_pattern(lun, pat, sizeof(pat), false);
    r = tur(lun);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_block_erase(void)
{
    struct spy *s;
    struct scsi_lun *lun = opt_in(spy_lun(false, &s));
    static const uint8_t zero[1] = { 0 };
    uint8_t junk[8 * BS];
    struct result r;

    fill_pattern(junk, sizeof(junk), 3);
    r = RUN_OUT(lun, scsi_cdb_write16(7, sizeof(junk), BS, 0, 0, 0, 0, 0), junk, sizeof(junk));
    assert_good(&r);
    /* ram deallocates to zeros: DISCARD, a range chunk at a time. */
    g_assert_true(s->be.can_discard && s->be.discard_zeroes);
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_DISCARD], ==, 8);   /* 8 MiB in 1 MiB pieces */
    g_assert_cmpuint(s->max_range_len, <=, MiB);
    assert_pattern(lun, zero, 1, false);

    /* Discards that may not read back as zeros are not an erase: WRITE ZEROES. */
    s->be.discard_zeroes = false;
    r = RUN_OUT(lun, scsi_cdb_write16(7, sizeof(junk), BS, 0, 0, 0, 0, 0), junk, sizeof(junk));
    assert_good(&r);
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->ops[BACKEND_DISCARD], ==, 8);
    g_assert_cmpuint(s->ops[BACKEND_WRITE_ZEROES], ==, 8);
    assert_pattern(lun, zero, 1, false);

    /* And a backend without WRITE ZEROES gets zeros written. */
    r = RUN_OUT(lun, scsi_cdb_write16(7, sizeof(junk), BS, 0, 0, 0, 0, 0), junk, sizeof(junk));
    assert_good(&r);
    s->fail_op = BACKEND_WRITE_ZEROES;
    s->fail_ret = -EOPNOTSUPP;
    s->plain_writes = 0;
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_good(&r);
    g_assert_cmpuint(s->plain_writes, ==, 8);
    assert_pattern(lun, zero, 1, false);
    scsi_lun_free(lun);
}

/* The Block Device Characteristics VPD page's WABEREQ and WACEREQ. */
static void write_after_erase(struct scsi_lun *lun, int *wabereq, int *wacereq)
{
    uint8_t buf[64];
    struct scsi_inquiry_block_device_characteristics *bdc;
    struct sc_datain d;

    bdc = VPD_CHARACTERISTICS(lun, buf, &d);
    *wabereq = bdc->wabereq;
    *wacereq = bdc->wacereq;
    sc_datain_free(&d);
}

/*
 * SBC-3 6.6.2 (Block Device Characteristics VPD page): WABEREQ says what
 * a read of a block a SANITIZE BLOCK ERASE erased returns: 00b not
 * specified (only where BLOCK ERASE is not offered: libiscsi's
 * Sanitize.BlockErase fails a device that offers it with 00b), 01b GOOD
 * status, 10b/11b MEDIUM ERROR.  Every erase here (discard to zeros,
 * WRITE ZEROES, zeros written) reads back as zeros with GOOD: 01b, and
 * the read after the erase shows it.  WACEREQ is 00b: CRYPTOGRAPHIC ERASE
 * is not offered.
 */
static void test_write_after_erase_required(gconstpointer data)
{
    const struct geometry *g = data;
    struct scsi_lun *lun = geometry_lun(g, 8 * MiB);
    g_autofree uint8_t *junk = g_malloc(16 * g->bs), *rd = g_malloc(16 * g->bs);
    int wabereq, wacereq;
    struct result r;

    write_after_erase(lun, &wabereq, &wacereq);
    g_assert_cmpint(wabereq, ==, 0);
    g_assert_cmpint(wacereq, ==, 0);

    opt_in(lun);
    write_after_erase(lun, &wabereq, &wacereq);
    g_assert_cmpint(wabereq, ==, 1);
    g_assert_cmpint(wacereq, ==, 0);
    fill_pattern(junk, 16 * g->bs, 31);
    r = RUN_OUT(lun, scsi_cdb_write16(3, 16 * g->bs, (int)g->bs, 0, 0, 0, 0, 0), junk,
                16 * g->bs);
    assert_good(&r);
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_good(&r);
    /* WABEREQ 01b: GOOD, and the data the erase left, zeros. */
    read_lbas(lun, g->bs, 3, 16, rd);
    for (size_t i = 0; i < 16 * g->bs; i++) {
        g_assert_cmphex(rd[i], ==, 0);
    }
    scsi_lun_free(lun);
}

/* INVALID FIELD IN CDB / PARAMETER LIST at byte, bit; the SKS byte's reserved bits clear. */
static void assert_field_only(const struct result *r, bool in_cdb, unsigned byte, int bit)
{
    assert_field(r, in_cdb, byte, bit);
    g_assert_cmphex(r->sense[15] & 0x30, ==, 0);
}

/*
 * SBC-3 5.30 SANITIZE OVERWRITE with reserved fields set, as libiscsi's
 * Sanitize.OverwriteReserved and an SG_IO initiator send it (OVERWRITE
 * COUNT 1, a one-block pattern of AAh, PARAMETER LIST LENGTH a block + 4),
 * with IMMED and without: a reserved CDB bit (byte 1 bit 6, any bit of
 * bytes 2 to 6) is INVALID FIELD IN CDB, a reserved bit of the parameter
 * list (byte 1) or a TEST value INVALID FIELD IN PARAMETER LIST, each in
 * 18 bytes of fixed-format sense (70h, ADDITIONAL SENSE LENGTH 10) whose
 * sense-key specific bytes hold SKSV, C/D (1: the CDB), BPV and the field
 * pointer to the byte and bit.  Checked before anything is erased: no
 * GOOD first with IMMED, no block written, no sanitize begun or failed
 * (TEST UNIT READY is GOOD, REQUEST SENSE says NO SENSE).  The same list
 * with nothing reserved set then overwrites.
 */
static void test_overwrite_reserved(gconstpointer data)
{
    const struct geometry *g = data;
    struct scsi_lun *lun = opt_in(geometry_lun(g, 8 * MiB));
    const size_t bs = g->bs, plen = bs + 4;
    g_autofree uint8_t *p = g_malloc(plen), *pat = g_malloc(bs);
    g_autofree uint8_t *junk = g_malloc(4 * bs), *rd = g_malloc(4 * bs);
    uint8_t cdb[SC_CDB_MAX], rs[SC_CDB_MAX], sense[18];
    struct result r;
    unsigned len;

    fill_pattern(junk, 4 * bs, 51);
    r = RUN_OUT(lun, scsi_cdb_write16(0, 4 * bs, (int)bs, 0, 0, 0, 0, 0), junk, 4 * bs);
    assert_good(&r);
    memset(pat, 0xaa, bs);
    for (int immed = 0; immed <= 1; immed++) {
        len = sc_cdb(scsi_cdb_sanitize(immed, 0, SCSI_SANITIZE_OVERWRITE, (int)plen), cdb);
        overwrite_params(p, false, 1, pat, bs);
        cdb[1] |= 0x40;
        r = run_cdb(lun, cdb, len, p, plen, NULL, 0);
        assert_field_only(&r, true, 1, 6);
        g_assert_cmpuint(r.out_xfer, ==, 0);
        cdb[1] &= ~0x40;
        for (unsigned byte = 2; byte <= 6; byte++) {
            for (int bit = 0; bit < 8; bit++) {
                cdb[byte] = (uint8_t)(1u << bit);
                r = run_cdb(lun, cdb, len, p, plen, NULL, 0);
                assert_field_only(&r, true, byte, bit);
            }
            cdb[byte] = (uint8_t)byte;      /* libiscsi's value: the byte's number */
            r = run_cdb(lun, cdb, len, p, plen, NULL, 0);
            assert_field_only(&r, true, byte, 31 - __builtin_clz(byte));
            cdb[byte] = 0;
        }
        for (int bit = 0; bit < 8; bit++) {
            p[1] = (uint8_t)(1u << bit);
            r = run_cdb(lun, cdb, len, p, plen, NULL, 0);
            assert_field_only(&r, false, 1, bit);
        }
        p[1] = 0;
        for (unsigned test = 1; test <= 3; test++) {
            p[0] = (uint8_t)(test << 5 | 1);
            r = run_cdb(lun, cdb, len, p, plen, NULL, 0);
            assert_field_only(&r, false, 0, 6);
        }
        read_lbas(lun, g->bs, 0, 4, rd);
        g_assert_true(memcmp(rd, junk, 4 * bs) == 0);
        r = tur(lun);
        assert_good(&r);
        r = run_cdb(lun, rs, sc_cdb_request_sense(rs, false, sizeof(sense)), NULL, 0, sense,
                    sizeof(sense));
        assert_good(&r);
        g_assert_cmphex(sense[2] & 0x0f, ==, SCSI_SENSE_NO_SENSE);
        g_assert_cmphex(sense[12], ==, 0);
    }
    overwrite_params(p, false, 1, pat, bs);
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, plen);
    assert_good(&r);
    read_lbas(lun, g->bs, 0, 4, rd);
    for (size_t i = 0; i < 4 * bs; i++) {
        g_assert_cmphex(rd[i], ==, 0xaa);
    }
    scsi_lun_free(lun);
}

static void test_refusals(void)
{
    struct scsi_lun *lun = opt_in(ram_lun());
    static const uint8_t pat[4] = { 1, 2, 3, 4 };
    uint8_t p[8 + BS], cdb[SC_CDB_MAX];
    struct result r;
    unsigned len;
    size_t n;

    r = sanitize(lun, false, false, SCSI_SANITIZE_CRYPTO_ERASE, NULL, 0);
    assert_field(&r, true, 1, 4);
    /* OVERWRITE: a parameter list of 0, of no pattern, or longer than a block's. */
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, NULL, 0);
    assert_field(&r, true, 7, 7);
    n = overwrite_params(p, false, 1, pat, 0);
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_field(&r, true, 7, 7);
    memset(p + 4, 0x5a, BS + 1);
    n = overwrite_params(p, false, 1, p + 4, BS + 1);
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_field(&r, true, 7, 7);
    /* BLOCK ERASE and EXIT FAILURE MODE take no parameter list. */
    n = overwrite_params(p, false, 1, pat, sizeof(pat));
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, p, n);
    assert_field(&r, true, 7, 7);
    r = sanitize(lun, false, false, SCSI_SANITIZE_EXIT_FAILURE_MODE, p, n);
    assert_field(&r, true, 7, 7);
    /* The parameter list's fields. */
    n = overwrite_params(p, false, 0, pat, sizeof(pat));
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_field(&r, false, 0, 4);   /* OVERWRITE COUNT 0 */
    n = overwrite_params(p, false, 1, pat, sizeof(pat));
    p[0] |= 0x20;
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_field(&r, false, 0, 6);   /* TEST */
    n = overwrite_params(p, false, 1, pat, sizeof(pat));
    p[1] = 0x10;
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_field(&r, false, 1, 4);   /* reserved */
    n = overwrite_params(p, false, 1, pat, sizeof(pat));
    p[3] = 3;                        /* the pattern is not the rest of the list */
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    assert_field(&r, false, 2, 7);
    /* Data-out shorter than the parameter list length. */
    n = overwrite_params(p, false, 1, pat, sizeof(pat));
    r = run(lun, scsi_cdb_sanitize(0, 0, SCSI_SANITIZE_OVERWRITE, (int)n), p, n - 1, NULL, 0);
    assert_field(&r, true, 7, 7);
    /* Reserved CDB bits. */
    len = sc_cdb(scsi_cdb_sanitize(0, 0, SCSI_SANITIZE_BLOCK_ERASE, 0), cdb);
    cdb[1] |= 0x40;
    r = run_cdb(lun, cdb, len, NULL, 0, NULL, 0);
    assert_field(&r, true, 1, 6);
    cdb[1] &= ~0x40;
    cdb[4] = 0x01;
    r = run_cdb(lun, cdb, len, NULL, 0, NULL, 0);
    assert_field(&r, true, 4, 0);
    /* Nothing ran: the LUN serves. */
    r = tur(lun);
    assert_good(&r);

    /* A read-only LUN. */
    scsi_lun_backend(lun)->read_only = true;
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_sense(&r, SCSI_SENSE_DATA_PROTECTION, SCSI_SENSE_ASCQ_WRITE_PROTECTED);
    scsi_lun_free(lun);
}

/* While it runs: the answers, the progress, IMMED. */
static void test_in_progress(void)
{
    struct spy *s;
    struct scsi_lun *lun = opt_in(spy_lun(true, &s));
    struct pending_cmd p = { 0 };
    uint8_t buf[256], cdb[SC_CDB_MAX];
    unsigned len, last = 0, progress;
    struct result r;

    s->defer = true;
    r = sanitize(lun, true, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_good(&r);                             /* IMMED: answered at once */
    g_assert_cmpuint(g_queue_get_length(&s->pending), ==, 1);   /* one piece at a time */
    r = tur(lun);
    g_assert_cmpuint(assert_in_progress(&r), ==, 0);
    r = RUN_IN(lun, scsi_cdb_read16(0, BS, BS, 0, 0, 0, 0, 0), buf, BS);
    assert_in_progress(&r);
    r = RUN_OUT(lun, scsi_cdb_write16(0, BS, BS, 0, 0, 0, 0, 0), buf, BS);
    assert_in_progress(&r);
    r = sanitize(lun, false, false, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_in_progress(&r);                      /* a second one waits its turn */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, sizeof(buf)), buf, sizeof(buf));
    assert_good(&r);
    len = sc_cdb_request_sense(cdb, false, 18);
    r = run_cdb(lun, cdb, len, NULL, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 18);
    g_assert_cmphex(buf[2] & 0x0f, ==, SCSI_SENSE_NOT_READY);
    g_assert_cmphex(buf[12] << 8 | buf[13], ==, SCSI_SENSE_ASCQ_SANITIZE_IN_PROGRESS);
    g_assert_cmphex(buf[15] & 0x80, ==, 0x80);

    for (unsigned piece = 1; piece <= 8; piece++) {
        spy_run_one(s);
        r = tur(lun);
        progress = assert_in_progress(&r);
        g_assert_cmpuint(progress, >, last);
        g_assert_cmpuint(progress, ==, MIN(piece * 0x2000u, 0xffffu));
        last = progress;
    }
    /* The last piece done, the flush (the backend has a write cache) ends it. */
    g_assert_cmpuint(s->ops[BACKEND_FLUSH], ==, 1);
    spy_run_one(s);
    g_assert_true(g_queue_is_empty(&s->pending));
    r = tur(lun);
    assert_good(&r);

    /* Without IMMED the command itself lasts as long as the erase. */
    start(&p, lun, scsi_cdb_sanitize(0, 0, SCSI_SANITIZE_BLOCK_ERASE, 0), NULL, 0, NULL, 0);
    g_assert_cmpint(p.completions, ==, 0);
    r = tur(lun);
    assert_in_progress(&r);
    while (p.completions == 0) {
        g_assert_cmpuint(spy_run_pending(s), >, 0);
    }
    r = result_of(&p.cmd);
    assert_good(&r);
    r = tur(lun);
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_failure_mode(void)
{
    struct spy *s;
    struct scsi_lun *lun = opt_in(spy_lun(false, &s));
    static const uint8_t pat[2] = { 0xff, 0x00 };
    uint8_t p[8], buf[BS];
    struct result r;
    size_t n = overwrite_params(p, false, 1, pat, sizeof(pat));

    /* A write error ends it, and leaves the LUN in failure mode. */
    s->fail_op = BACKEND_WRITE;
    s->fail_ret = -EIO;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "test:spy: SANITIZE OVERWRITE*");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*write at byte 0 failed*");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "test:spy: SANITIZE failed*");
    r = sanitize(lun, false, false, SCSI_SANITIZE_OVERWRITE, p, n);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_WRITE_ERROR);
    s->fail_op = -1;
    r = RUN_IN(lun, scsi_cdb_read16(0, BS, BS, 0, 0, 0, 0, 0), buf, BS);
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_SANITIZE_COMMAND_FAILED);
    r = tur(lun);
    assert_good(&r);                             /* not a medium access */
    /* Without AUSE only a sanitize that succeeds leaves failure mode. */
    r = sanitize(lun, false, false, SCSI_SANITIZE_EXIT_FAILURE_MODE, NULL, 0);
    assert_field(&r, true, 1, 4);
    r = sanitize(lun, false, true, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    assert_good(&r);
    r = RUN_IN(lun, scsi_cdb_read16(0, BS, BS, 0, 0, 0, 0, 0), buf, BS);
    assert_good(&r);

    /* With AUSE, EXIT FAILURE MODE leaves it. */
    s->fail_op = BACKEND_DISCARD;
    s->fail_ret = -EIO;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "test:spy: SANITIZE BLOCK ERASE*");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*discard at byte 0 failed*");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "test:spy: SANITIZE failed*");
    r = sanitize(lun, false, true, SCSI_SANITIZE_BLOCK_ERASE, NULL, 0);
    g_test_assert_expected_messages();
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_WRITE_ERROR);
    s->fail_op = -1;
    r = RUN_OUT(lun, scsi_cdb_write16(0, BS, BS, 0, 0, 0, 0, 0), buf, BS);
    assert_sense(&r, SCSI_SENSE_MEDIUM_ERROR, SC_ASCQ_SANITIZE_COMMAND_FAILED);
    r = sanitize(lun, false, false, SCSI_SANITIZE_EXIT_FAILURE_MODE, NULL, 0);
    assert_good(&r);
    r = RUN_OUT(lun, scsi_cdb_write16(0, BS, BS, 0, 0, 0, 0, 0), buf, BS);
    assert_good(&r);
    /* Outside failure mode it has nothing to do. */
    r = sanitize(lun, false, false, SCSI_SANITIZE_EXIT_FAILURE_MODE, NULL, 0);
    assert_good(&r);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scsi-disk/sanitize/needs-opt-in", test_needs_opt_in);
    g_test_add_func("/scsi-disk/sanitize/overwrite", test_overwrite);
    g_test_add_func("/scsi-disk/sanitize/block-erase", test_block_erase);
    add_geometry_tests("/scsi-disk/sanitize/write-after-erase-required",
                       test_write_after_erase_required);
    g_test_add_func("/scsi-disk/sanitize/refusals", test_refusals);
    add_geometry_tests("/scsi-disk/sanitize/overwrite-reserved", test_overwrite_reserved);
    g_test_add_func("/scsi-disk/sanitize/in-progress", test_in_progress);
    g_test_add_func("/scsi-disk/sanitize/failure-mode", test_failure_mode);
    return g_test_run();
}
