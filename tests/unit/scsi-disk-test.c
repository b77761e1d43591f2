/*
 * Specification of the dispatch of the SCSI block device emulation
 * (hw/scsi/scsi-disk.c): the LUN object refuses a backend it cannot
 * serve; the checks every command shares (an unknown opcode, NACA in the
 * control byte, a CDB shorter than its opcode's) refuse a command before
 * any family sees it; REPORT SUPPORTED OPERATION CODES describes the
 * command table, which follows the backend (no UNMAP without discard);
 * random CDBs with random buffers always complete once, with a defined
 * status and well-formed sense, never beyond their buffers; and every
 * command is counted once in the LUN's statistics, by class.  The
 * command families have programs of their own (scsi-disk-rw-test.c,
 * scsi-disk-provisioning-test.c, scsi-disk-inquiry-test.c,
 * scsi-disk-mode-test.c), as do unit attentions (scsi-ua-test.c), the I/O
 * engine and drains (scsi-disk-drain-test.c) and the backends
 * (backend-test.c); scsi-disk-fixture.h is the harness they share.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

static void test_invalid_opcode_and_control_byte(void)
{
    struct scsi_lun *lun = ram_lun();
    /* Hand-built: an unassigned opcode, and a READ(16) opcode in a 6-byte CDB buffer. */
    static const uint8_t bogus[6] = { NO_SUCH_OPCODE };
    static const uint8_t short_cdb[6] = { SCSI_OPCODE_READ16 };
    uint8_t naca[SC_CDB_MAX];
    unsigned naca_len = sc_cdb(scsi_cdb_testunitready(), naca);
    struct result r;

    r = run_cdb(lun, bogus, sizeof(bogus), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    naca[naca_len - 1] |= 0x04;     /* NACA in the control byte: libiscsi never sets it */
    r = run_cdb(lun, naca, naca_len, NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    /* A 16-byte opcode in a 6-byte CDB buffer must not be read past its end. */
    r = run_cdb(lun, short_cdb, sizeof(short_cdb), NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_lun_refuses_bad_geometry(void)
{
    g_autoptr(GError) err = NULL;
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    be->block_size = 520;       /* a backend bug: not a power of two */
    g_assert_null(scsi_lun_new(be, "test:bad", NULL, &err));   /* and be is closed */
    g_assert_error(err, VS_ERROR, EINVAL);
    g_assert_cmpstr(err->message, ==, "cannot serve 1048576 bytes in 520-byte blocks as a SCSI "
                    "disk");
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

static struct result rsoc(struct scsi_lun *lun, bool rctd, int options, uint8_t op, uint16_t sa,
                          uint8_t *buf, uint32_t len)
{
    return RUN_IN(lun, scsi_cdb_report_supported_opcodes(rctd, options, op, sa, len), buf, len);
}

/* The descriptor of (op, sa) in an all-commands list, or NULL. */
static const struct scsi_command_descriptor *
find_descriptor(const struct scsi_report_supported_op_codes *l, uint8_t op, uint16_t sa)
{
    for (int i = 0; i < l->num_descriptors; i++) {
        const struct scsi_command_descriptor *d = &l->descriptors[i];

        if (d->opcode == op && (!d->servactv || d->sa == sa)) {
            return d;
        }
    }
    return NULL;
}

static void test_rsoc_all(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[2048];
    struct result r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0, buf, sizeof(buf));
    const struct scsi_report_supported_op_codes *l;
    const struct scsi_command_descriptor *d;
    struct sc_datain dd;

    assert_good(&r);
    l = decoded(&dd, &r, buf);
    g_assert_cmpint(sc_datain_full_size(&dd), ==, r.in_xfer);
    g_assert_cmpuint(4 + 8 * l->num_descriptors, ==, r.in_xfer);   /* 8 bytes each */
    d = find_descriptor(l, SCSI_OPCODE_READ16, 0);
    g_assert_nonnull(d);
    g_assert_false(d->ctdp);
    g_assert_cmpuint(d->cdb_len, ==, 16);
    d = find_descriptor(l, SCSI_OPCODE_SERVICE_ACTION_IN, SCSI_READCAPACITY16);
    g_assert_nonnull(d);
    g_assert_true(d->servactv);
    g_assert_nonnull(find_descriptor(l, SCSI_OPCODE_UNMAP, 0));
    g_assert_null(find_descriptor(l, NO_SUCH_OPCODE, 0));
    sc_datain_free(&dd);

    /* RCTD: every descriptor carries a 12-byte timeouts descriptor. */
    r = rsoc(lun, true, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0, buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&dd, &r, buf);
    g_assert_cmpuint(4 + 20 * l->num_descriptors, ==, r.in_xfer);
    for (int i = 0; i < l->num_descriptors; i++) {
        g_assert_true(l->descriptors[i].ctdp);
        g_assert_cmpuint(l->descriptors[i].to.descriptor_length, ==, 10);
    }
    g_assert_nonnull(find_descriptor(l, SCSI_OPCODE_READ16, 0));
    sc_datain_free(&dd);
    scsi_lun_free(lun);
}

static void test_rsoc_one(void)
{
    struct scsi_lun *lun = ram_lun();
    const struct scsi_report_supported_op_codes_one_command *one;
    struct sc_datain d;
    uint8_t buf[64];
    struct result r;

    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_READ16, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 16);
    one = decoded(&d, &r, buf);
    g_assert_cmpuint(one->support, ==, 3);                  /* supported, standard */
    g_assert_cmpuint(one->cdb_length, ==, 16);
    g_assert_cmphex(one->cdb_usage_data[0], ==, SCSI_OPCODE_READ16);  /* opcode first */
    g_assert_cmphex(one->cdb_usage_data[1] & 0x08, ==, 0x08);         /* FUA is looked at */
    sc_datain_free(&d);

    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, NO_SUCH_OPCODE, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4);
    one = decoded(&d, &r, buf);
    g_assert_cmpuint(one->support, ==, 1);                  /* not supported */
    sc_datain_free(&d);

    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_SERVICEACTION, SCSI_OPCODE_SERVICE_ACTION_IN,
             SCSI_READCAPACITY16, buf, sizeof(buf));
    assert_good(&r);
    one = decoded(&d, &r, buf);
    g_assert_cmpuint(one->support, ==, 3);
    g_assert_cmphex(one->cdb_usage_data[0], ==, SCSI_OPCODE_SERVICE_ACTION_IN);
    g_assert_cmphex(one->cdb_usage_data[1], ==, SCSI_READCAPACITY16);
    sc_datain_free(&d);

    r = rsoc(lun, true, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_WRITE_SAME16, 0, buf,
             sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4 + 16 + 12);
    one = decoded(&d, &r, buf);
    g_assert_true(one->ctdp);
    g_assert_cmpuint(one->support, ==, 3);
    sc_datain_free(&d);

    /* Option 1 on a command with service actions, option 2 on one without, option 5. */
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_SERVICE_ACTION_IN, 0, buf,
             sizeof(buf));
    assert_invalid_cdb(&r);
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_SERVICEACTION, SCSI_OPCODE_READ16, 0, buf,
             sizeof(buf));
    assert_invalid_cdb(&r);
    r = rsoc(lun, false, 5, SCSI_OPCODE_READ16, 0, buf, sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_rsoc_follows_backend(void)
{
    struct lun_backend *be;
    struct scsi_lun *lun;
    const struct scsi_report_supported_op_codes *l;
    struct sc_datain d;
    uint8_t buf[2048];
    struct result r;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    be->can_discard = false;
    lun = ready(scsi_lun_new(be, "test:thick", NULL, NULL));
    /* No discard, no UNMAP: neither listed nor reported as supported. */
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPCODE, SCSI_OPCODE_UNMAP, 0, buf, 64);
    assert_good(&r);
    g_assert_cmpuint(((const struct scsi_report_supported_op_codes_one_command *)
                      decoded(&d, &r, buf))->support, ==, 1);
    sc_datain_free(&d);
    r = rsoc(lun, false, SCSI_REPORT_SUPPORTING_OPS_ALL, 0, 0, buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    g_assert_null(find_descriptor(l, SCSI_OPCODE_UNMAP, 0));
    g_assert_nonnull(find_descriptor(l, SCSI_OPCODE_WRITE_SAME16, 0));
    sc_datain_free(&d);
    scsi_lun_free(lun);
}

/* ---- robustness -------------------------------------------------------- */

/*
 * Random CDBs (mostly valid opcodes with random fields) and random buffer
 * sizes: every command completes once, with a defined status, well-formed
 * sense, and never transfers more than the buffers hold (ASan checks the
 * rest).
 */
static void drop_log(const gchar *domain, GLogLevelFlags level, const gchar *msg, gpointer opaque)
{
}

static void test_random_cdbs(void)
{
    static const uint8_t ops[] = {
        SCSI_OPCODE_TESTUNITREADY, SC_OPCODE_REQUEST_SENSE, SCSI_OPCODE_READ6, SC_OPCODE_WRITE6,
        SCSI_OPCODE_INQUIRY, SCSI_OPCODE_MODESELECT6, SCSI_OPCODE_MODESENSE6,
        SCSI_OPCODE_STARTSTOPUNIT, SCSI_OPCODE_PREVENTALLOW, SCSI_OPCODE_READCAPACITY10,
        SCSI_OPCODE_READ10, SCSI_OPCODE_WRITE10, SCSI_OPCODE_WRITE_VERIFY10, SCSI_OPCODE_VERIFY10,
        SCSI_OPCODE_SYNCHRONIZECACHE10, SCSI_OPCODE_WRITE_SAME10, SCSI_OPCODE_UNMAP,
        SCSI_OPCODE_MODESELECT10, SCSI_OPCODE_MODESENSE10, SCSI_OPCODE_READ16,
        SCSI_OPCODE_WRITE16, SCSI_OPCODE_WRITE_VERIFY16, SCSI_OPCODE_VERIFY16,
        SCSI_OPCODE_SYNCHRONIZECACHE16, SCSI_OPCODE_WRITE_SAME16, SCSI_OPCODE_SERVICE_ACTION_IN,
        SCSI_OPCODE_REPORTLUNS, SCSI_OPCODE_MAINTENANCE_IN, SCSI_OPCODE_READ12, SCSI_OPCODE_WRITE12,
    };
    struct scsi_lun *luns[2] = { ram_lun(), null_lun(MiB, 4096) };
    g_autofree uint8_t *out = g_malloc(64 * 1024);
    g_autofree uint8_t *in = g_malloc(64 * 1024);
    unsigned iterations = g_test_slow() ? 200000 : 20000;
    /* Thousands of "unsupported opcode" debug lines would bury the TAP log. */
    guint quiet = g_log_set_handler(G_LOG_DOMAIN, G_LOG_LEVEL_DEBUG | G_LOG_LEVEL_MESSAGE,
                                    drop_log, NULL);

    for (unsigned it = 0; it < iterations; it++) {
        struct scsi_lun *lun = luns[it & 1];
        uint8_t cdb[16];
        size_t out_len = 0, in_len = 0;
        struct pending_cmd p;

        for (unsigned i = 0; i < sizeof(cdb); i++) {
            cdb[i] = (uint8_t)g_test_rand_int();
        }
        if (g_test_rand_int_range(0, 4)) {
            cdb[0] = ops[g_test_rand_int_range(0, sizeof(ops))];
        }
        /* Keep lengths small enough that most commands get past the checks. */
        switch (g_test_rand_int_range(0, 3)) {
        case 0:
            cdb[2] = cdb[3] = cdb[4] = cdb[5] = 0;
            cdb[6] = cdb[7] = cdb[10] = cdb[11] = 0;
            cdb[12] &= 0x01;
            break;
        case 1:
            cdb[7] = 0;
            cdb[10] = cdb[11] = cdb[12] = 0;
            break;
        }
        cdb[g_test_rand_int_range(5, 16)] &= ~0x04;   /* mostly no NACA */
        if (g_test_rand_bit()) {
            out_len = (size_t)g_test_rand_int_range(0, 64 * 1024);
            fill_pattern(out, out_len, it);
            if (g_test_rand_bit()) {
                memset(out, 0, out_len);
            }
        } else {
            in_len = (size_t)g_test_rand_int_range(0, 64 * 1024);
        }
        start_cdb(&p, lun, NULL, cdb, g_test_rand_int_range(1, 17), out_len ? out : NULL,
                  out_len, in_len ? in : NULL, in_len);
        g_assert_cmpint(p.completions, ==, 1);
        g_assert_cmpuint(p.cmd.data_in_xfer, <=, in_len);
        g_assert_cmpuint(p.cmd.data_out_xfer, <=, out_len);
        switch (p.cmd.status) {
        case SAM_STAT_GOOD:
        /* A random PRE-FETCH of a range the ram or null LUN holds in memory. */
        case SAM_STAT_CONDITION_MET:
        /* A random RESERVE(6)/(10) holds the LUN: PERSISTENT RESERVE IN/OUT then conflict. */
        case SAM_STAT_RESERVATION_CONFLICT:
            g_assert_cmpuint(p.cmd.sense_len, ==, 0);
            break;
        case SAM_STAT_CHECK_CONDITION:
            sc_fixed_sense(p.cmd.sense, p.cmd.sense_len);
            break;
        default:
            g_assert_not_reached();
        }
    }
    g_log_remove_handler(G_LOG_DOMAIN, quiet);
    g_assert_cmpuint(scsi_lun_inflight(luns[0]), ==, 0);
    scsi_lun_free(luns[0]);
    scsi_lun_free(luns[1]);
}

/*
 * Reads, writes and the rest are counted apart, with the bytes they moved;
 * a refused command is an error, a unit attention is not; each command's
 * latency is in the histogram, and done_ns tells the transport when it
 * finished.
 */
static void test_stats_by_class(void)
{
    struct scsi_lun *lun = new_ram(1 * MiB, BS);
    uint8_t buf[4096] = { 0 };
    struct io_stats_snapshot s = { 0 };
    uint64_t before = io_stats_now_ns(), hist = 0;
    struct pending_cmd p;
    uint8_t cdb[SC_CDB_MAX];
    unsigned n;
    struct result r;

    /* The power-on unit attention: CHECK CONDITION, but not an error. */
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, 0x2900);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    r = RUN_OUT(lun, scsi_cdb_write16(0, 4096, BS, 0, 0, 0, 0, 0), buf, 4096);
    assert_good(&r);
    r = RUN_OUT(lun, scsi_cdb_write10(8, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_good(&r);
    read_blocks(lun, 0, 2, buf);
    /* Past the end: refused, an error of its class, nothing moved. */
    r = RUN_IN(lun, scsi_cdb_read16(1 * MiB / BS, 1024, BS, 0, 0, 0, 0, 0), buf, 1024);
    assert_lba_out_of_range(&r);
    n = sc_cdb(scsi_cdb_read10(0, 512, BS, 0, 0, 0, 0, 0), cdb);
    start_cdb(&p, lun, NULL, cdb, n, NULL, 0, buf, 512);
    g_assert_cmpint(p.completions, ==, 1);
    g_assert_cmpuint(p.cmd.done_ns, >=, before);
    g_assert_cmpuint(p.cmd.done_ns, <=, io_stats_now_ns());

    scsi_lun_stats(lun, &s);
    g_assert_cmpuint(s.c[IO_READ].ops, ==, 3);
    g_assert_cmpuint(s.c[IO_READ].bytes, ==, 1024 + 512);
    g_assert_cmpuint(s.c[IO_READ].errors, ==, 1);
    g_assert_cmpuint(s.c[IO_WRITE].ops, ==, 2);
    g_assert_cmpuint(s.c[IO_WRITE].bytes, ==, 4096 + 1024);
    g_assert_cmpuint(s.c[IO_WRITE].errors, ==, 0);
    g_assert_cmpuint(s.c[IO_OTHER].ops, ==, 2);
    g_assert_cmpuint(s.c[IO_OTHER].errors, ==, 0);
    for (unsigned b = 0; b < LAT_HIST_BUCKETS; b++) {
        hist += s.c[IO_READ].hist[b];
    }
    g_assert_cmpuint(hist, ==, 3);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/cdb/invalid-opcode", test_invalid_opcode_and_control_byte);
    g_test_add_func("/scsi-disk/rsoc/all", test_rsoc_all);
    g_test_add_func("/scsi-disk/rsoc/one", test_rsoc_one);
    g_test_add_func("/scsi-disk/rsoc/follows-backend", test_rsoc_follows_backend);
    g_test_add_func("/scsi-disk/robustness/random-cdbs", test_random_cdbs);
    g_test_add_func("/scsi-disk/lun/refuses-bad-geometry", test_lun_refuses_bad_geometry);
    g_test_add_func("/scsi-disk/stats/counted-by-class", test_stats_by_class);

    return g_test_run();
}
