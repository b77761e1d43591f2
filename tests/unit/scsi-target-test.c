/*
 * Specification of the SCSI target (hw/scsi/scsi-target.c): the LUN table
 * it owns; the answers that are the target's rather than a LUN's (REPORT
 * LUNS to any LUN of a port, with its select report field and allocation
 * length; INQUIRY and REQUEST SENSE to an absent LUN; every other command
 * to an absent LUN left to the transport); and the I_T nexus, one per
 * initiator connection, with the unit attentions of each of its LUNs:
 * POWER ON once per nexus, a device reset and an I_T NEXUS RESET only for
 * the nexus they happen to, a LOGICAL UNIT RESET once for every nexus that
 * existed, each LUN's state found by its id.  Commands go to RAM LUNs,
 * which complete inside the call; their CDBs, data and sense are built and
 * decoded by libiscsi (tests/scsi-cmd.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-target.h"

#define MiB (1024 * 1024)

struct result {
    int ret;                  /* scsi_nexus_exec's */
    unsigned completions;     /* complete() calls */
    uint8_t status;
    uint8_t sense_len;
    uint8_t sense[SCSI_SENSE_MAX];
    uint64_t in_xfer;
    uint8_t cdb[SC_CDB_MAX];  /* what was sent, for sc_datain_decode */
    unsigned cdb_len;
};

static void record_completion(struct scsi_cmd *cmd)
{
    struct result *r = cmd->opaque;

    r->completions++;
    r->status = cmd->status;
    r->sense_len = cmd->sense_len;
    memcpy(r->sense, cmd->sense, sizeof(r->sense));
    r->in_xfer = cmd->data_in_xfer;
}

static struct result exec_cdb(struct scsi_nexus *nx, unsigned port, unsigned lun, bool wlun,
                              const uint8_t *cdb, unsigned cdb_len, uint8_t *buf, size_t len)
{
    struct result r = { .cdb_len = cdb_len };
    struct iovec iov = { buf, len };
    struct scsi_cmd cmd = { .cdb = r.cdb, .cdb_len = cdb_len, .complete = record_completion,
                            .opaque = &r };

    g_assert_cmpuint(cdb_len, <=, SC_CDB_MAX);
    memcpy(r.cdb, cdb, MIN(cdb_len, SC_CDB_MAX));
    if (buf) {
        cmd.data_in = &iov;
        cmd.data_in_cnt = 1;
    }
    r.ret = scsi_nexus_exec(nx, port, lun, wlun, &cmd);
    return r;
}

/* Executes the CDB libiscsi built in task (which this frees). */
static struct result exec(struct scsi_nexus *nx, unsigned port, unsigned lun, bool wlun,
                          struct scsi_task *task, uint8_t *buf, size_t len)
{
    uint8_t cdb[SC_CDB_MAX];
    unsigned n = sc_cdb(task, cdb);

    return exec_cdb(nx, port, lun, wlun, cdb, n, buf, len);
}

static struct result tur(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    return exec(nx, port, lun, false, scsi_cdb_testunitready(), NULL, 0);
}

static struct result report_luns(struct scsi_nexus *nx, unsigned port, unsigned lun, bool wlun,
                                 uint8_t select, uint32_t alloc, uint8_t *buf, size_t len)
{
    return exec(nx, port, lun, wlun, scsi_reportluns_cdb(select, (int)alloc), buf, len);
}

/* libiscsi's decoding of the data r's command read into buf; valid until sc_datain_free(d). */
static void *decoded(struct sc_datain *d, const struct result *r, const uint8_t *buf)
{
    void *v = sc_datain_decode(d, r->cdb, r->cdb_len, buf, r->in_xfer);

    g_assert_nonnull(v);
    return v;
}

static void assert_good(const struct result *r)
{
    g_assert_cmpint(r->ret, ==, 0);
    g_assert_cmpuint(r->completions, ==, 1);
    g_assert_cmphex(r->status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(r->sense_len, ==, 0);
}

/* CHECK CONDITION with fixed-format sense of key and code (ASC << 8 | ASCQ), no INFORMATION. */
static struct sc_sense assert_sense(const struct result *r, unsigned key, unsigned code)
{
    struct sc_sense s;

    g_assert_cmpint(r->ret, ==, 0);
    g_assert_cmpuint(r->completions, ==, 1);
    g_assert_cmphex(r->status, ==, SAM_STAT_CHECK_CONDITION);
    s = sc_fixed_sense(r->sense, r->sense_len);
    g_assert_false(s.info_valid);
    g_assert_cmphex(s.key, ==, key);
    g_assert_cmphex(s.code, ==, code);
    return s;
}

static void assert_ua(const struct result *r, unsigned code)
{
    assert_sense(r, SCSI_SENSE_UNIT_ATTENTION, code);
}

/*
 * libiscsi decodes the first level of each 8-byte REPORT LUNS entry: a
 * single-level LUN leaves the other six bytes zero.
 */
static void assert_single_level(const uint8_t *buf, const struct scsi_reportluns_list *l)
{
    for (uint32_t i = 0; i < l->num; i++) {
        g_assert_cmphex(scsi_get_uint64(buf + 8 + 8 * i) & 0xffffffffffffULL, ==, 0);
    }
}

static struct scsi_lun *ram_lun(const char *name)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    return scsi_lun_new(be, name, NULL, NULL);
}

/* Port 0: LUNs 300, 0, 1 (added out of order); port 3: LUN 5; nothing on port 1. */
static struct scsi_target *target_new(void)
{
    struct scsi_target *t = scsi_target_new("t");

    g_assert_cmpint(scsi_target_add_lun(t, 0, 300, ram_lun("0:300")), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(t, 0, 0, ram_lun("0:0")), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(t, 0, 1, ram_lun("0:1")), ==, 0);
    g_assert_cmpint(scsi_target_add_lun(t, 3, 5, ram_lun("3:5")), ==, 0);
    return t;
}

/* Takes the power-on unit attention of every LUN, so later ones show alone. */
static void settle(struct scsi_nexus *nx)
{
    static const unsigned ids[][2] = { { 0, 0 }, { 0, 1 }, { 0, 300 }, { 3, 5 } };

    for (unsigned i = 0; i < G_N_ELEMENTS(ids); i++) {
        struct result r = tur(nx, ids[i][0], ids[i][1]);

        assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    }
}

/* ---- the LUN table ----------------------------------------------------- */

static void test_lun_table(void)
{
    struct scsi_target *t = target_new();
    struct scsi_lun *refused;

    g_assert_cmpuint(scsi_target_lun_count(t), ==, 4);
    g_assert_cmpstr(scsi_lun_name(scsi_target_lun(t, 0, 300)), ==, "0:300");
    g_assert_cmpstr(scsi_lun_name(scsi_target_lun(t, 3, 5)), ==, "3:5");
    g_assert_null(scsi_target_lun(t, 0, 2));
    g_assert_null(scsi_target_lun(t, 256, 0));
    /* In (port, LUN) order, whatever the order they were added in. */
    g_assert_cmpstr(scsi_lun_name(scsi_target_lun_at(t, 0)), ==, "0:0");
    g_assert_cmpstr(scsi_lun_name(scsi_target_lun_at(t, 2)), ==, "0:300");
    g_assert_cmpstr(scsi_lun_name(scsi_target_lun_at(t, 3)), ==, "3:5");
    g_assert_null(scsi_target_lun_at(t, 4));
    g_assert_true(scsi_target_has_port(t, 0));
    g_assert_true(scsi_target_has_port(t, 3));
    g_assert_false(scsi_target_has_port(t, 1));

    /* A refused LUN stays the caller's (ASan reports a leak if it was kept, or a double free). */
    refused = ram_lun("dup");
    g_assert_cmpint(scsi_target_add_lun(t, 0, 0, refused), ==, -EEXIST);
    g_assert_cmpint(scsi_target_add_lun(t, 256, 0, refused), ==, -EINVAL);
    g_assert_cmpint(scsi_target_add_lun(t, 0, 16384, refused), ==, -EINVAL);
    scsi_lun_free(refused);
    g_assert_cmpint(scsi_target_add_lun(t, 0, 16383, ram_lun("0:16383")), ==, 0);
    /* Changes with initiators connected: scsi-target-live-test.c. */
    scsi_target_free_luns(t);
}

/* ---- REPORT LUNS --------------------------------------------------------- */

static void test_report_luns_contents(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *nx = scsi_target_nexus_new(t, "A");
    struct scsi_reportluns_list *l;
    struct sc_datain d;
    uint8_t buf[64];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = report_luns(nx, 0, 0, false, 0, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 32);
    l = decoded(&d, &r, buf);
    g_assert_cmpint(sc_datain_full_size(&d), ==, 32);             /* LUN LIST LENGTH 24 */
    g_assert_cmphex(scsi_get_uint32(buf + 4), ==, 0);            /* reserved */
    g_assert_cmpuint(l->num, ==, 3);
    g_assert_cmphex(l->luns[0], ==, 0);                           /* LUN 0 */
    g_assert_cmphex(l->luns[1], ==, 0x0001);                      /* peripheral: LUN 1 */
    g_assert_cmphex(l->luns[2], ==, 0x412c);                      /* flat space: LUN 300 */
    assert_single_level(buf, l);
    sc_datain_free(&d);

    /* The same list, to an absent LUN and to the REPORT LUNS well-known LUN. */
    memset(buf, 0xee, sizeof(buf));
    r = report_luns(nx, 0, 9, false, 0, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    g_assert_cmpuint(l->num, ==, 3);
    g_assert_cmphex(l->luns[2], ==, 0x412c);
    assert_single_level(buf, l);
    sc_datain_free(&d);
    r = report_luns(nx, 0, 0, true, 2, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    g_assert_cmpuint(l->num, ==, 3);
    sc_datain_free(&d);

    /* Each port lists its own LUNs only. */
    r = report_luns(nx, 3, 5, false, 0, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    l = decoded(&d, &r, buf);
    g_assert_cmpuint(l->num, ==, 1);
    g_assert_cmphex(l->luns[0], ==, 0x0005);
    assert_single_level(buf, l);
    sc_datain_free(&d);

    /* Well-known LUNs only: there are none to list. */
    r = report_luns(nx, 0, 0, false, 1, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 8);
    l = decoded(&d, &r, buf);
    g_assert_cmpuint(l->num, ==, 0);
    sc_datain_free(&d);

    /* Not a unit attention's business (SPC-4 5.14): the next TUR still sees it. */
    r = tur(nx, 0, 0);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    scsi_target_nexus_free(nx);
    scsi_target_free_luns(t);
}

static void test_report_luns_allocation_length(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *nx = scsi_target_nexus_new(t, "A");
    struct sc_datain d;
    struct sc_sense s;
    uint8_t buf[64];
    struct result r;

    /* Truncated to the allocation length; the list length still tells all. */
    r = report_luns(nx, 0, 0, false, 0, 16, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 16);
    decoded(&d, &r, buf);
    g_assert_cmpint(sc_datain_full_size(&d), ==, 32);
    sc_datain_free(&d);
    /* ... and to the buffer. */
    r = report_luns(nx, 0, 0, false, 0, sizeof(buf), buf, 20);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 20);

    /* SPC-4: fewer than 16 bytes is an invalid field (byte 6, bit 7). */
    r = report_luns(nx, 0, 0, false, 0, 15, buf, sizeof(buf));
    s = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
    g_assert_true(s.sksv && s.in_cdb && s.bit_valid);
    g_assert_cmpuint(s.bit, ==, 7);
    g_assert_cmpuint(s.field, ==, 6);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    /* An unknown SELECT REPORT (byte 2). */
    r = report_luns(nx, 0, 0, false, 3, sizeof(buf), buf, sizeof(buf));
    s = assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB);
    g_assert_true(s.sksv && s.in_cdb);
    g_assert_cmpuint(s.field, ==, 2);
    scsi_target_nexus_free(nx);
    scsi_target_free_luns(t);
}

/* ---- absent LUNs and ports ---------------------------------------------- */

/* INQUIRY data of no logical unit: qualifier 011b, type 1Fh. */
static void assert_no_lun(enum scsi_inquiry_peripheral_qualifier q,
                          enum scsi_inquiry_peripheral_device_type type)
{
    g_assert_cmpint(q, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_NOT_SUPPORTED);
    g_assert_cmpint(type, ==, SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_UNKNOWN);
}

static void test_absent_lun(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *nx = scsi_target_nexus_new(t, "A");
    struct scsi_inquiry_standard *std;
    struct scsi_inquiry_unit_serial_number *usn;
    struct sc_datain d;
    struct sc_sense s;
    uint8_t rs[SC_CDB_MAX], buf[96];
    unsigned rs_len = sc_cdb_request_sense(rs, false, 18);
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = exec(nx, 0, 2, false, scsi_cdb_inquiry(0, 0, 96), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 36);
    std = decoded(&d, &r, buf);
    assert_no_lun(std->qualifier, std->device_type);
    g_assert_cmpint(std->version, ==, 0x06);                      /* SPC-4 */
    g_assert_cmpint(std->response_data_format, ==, 2);
    g_assert_false(std->normaca || std->hisup);
    g_assert_cmpint(std->additional_length, ==, 31);
    g_assert_cmpstr(std->vendor_identification, ==, "");         /* no identity */
    sc_datain_free(&d);

    /* VPD: an empty page, same qualifier. */
    r = exec(nx, 0, 2, false, scsi_cdb_inquiry(1, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, 96),
             buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4);
    usn = decoded(&d, &r, buf);
    assert_no_lun(usn->qualifier, usn->device_type);
    g_assert_cmphex(usn->pagecode, ==, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER);
    g_assert_cmpstr(usn->usn, ==, "");
    sc_datain_free(&d);

    /* The well-known LUN is no logical unit either. */
    r = exec(nx, 0, 0, true, scsi_cdb_inquiry(0, 0, 96), buf, sizeof(buf));
    assert_good(&r);
    std = decoded(&d, &r, buf);
    assert_no_lun(std->qualifier, std->device_type);
    sc_datain_free(&d);

    /* REQUEST SENSE: LOGICAL UNIT NOT SUPPORTED, as data with GOOD status. */
    r = exec_cdb(nx, 0, 2, false, rs, rs_len, buf, sizeof(buf));
    assert_good(&r);
    s = sc_fixed_sense(buf, r.in_xfer);
    g_assert_false(s.info_valid);
    g_assert_cmphex(s.key, ==, SCSI_SENSE_ILLEGAL_REQUEST);
    g_assert_cmphex(s.code, ==, SCSI_SENSE_ASCQ_LOGICAL_UNIT_NOT_SUPPORTED);

    /* Anything else is the transport's to answer: the command is not touched. */
    r = exec(nx, 0, 2, false, scsi_cdb_read10(0, 0, 512, 0, 0, 0, 0, 0), buf, sizeof(buf));
    g_assert_cmpint(r.ret, ==, -ENODEV);
    g_assert_cmpuint(r.completions, ==, 0);
    r = tur(nx, 0, 16384);
    g_assert_cmpint(r.ret, ==, -ENODEV);
    g_assert_cmpuint(r.completions, ==, 0);

    /* A port that serves nothing answers nothing, not even REPORT LUNS. */
    r = report_luns(nx, 1, 0, false, 0, sizeof(buf), buf, sizeof(buf));
    g_assert_cmpint(r.ret, ==, -ENXIO);
    g_assert_cmpuint(r.completions, ==, 0);
    r = exec(nx, 1, 0, false, scsi_cdb_inquiry(0, 0, 96), buf, sizeof(buf));
    g_assert_cmpint(r.ret, ==, -ENXIO);
    r = tur(nx, 256, 0);
    g_assert_cmpint(r.ret, ==, -ENXIO);

    /* An absent LUN has no unit attentions: LUN 0 still has its own. */
    r = tur(nx, 0, 0);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    scsi_target_nexus_free(nx);
    scsi_target_free_luns(t);
}

/* ---- unit attentions per nexus ------------------------------------------ */

static void test_power_on_once_per_nexus(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *a = scsi_target_nexus_new(t, "A");
    struct scsi_nexus *b;
    struct result r;

    r = tur(a, 0, 1);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    r = tur(a, 0, 1);
    assert_good(&r);
    /* Kept per LUN and found by id: LUN 300, beside it in the table, still has its own. */
    r = tur(a, 0, 300);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    r = tur(a, 0, 300);
    assert_good(&r);

    /* A nexus that connects later has just seen every LUN power on. */
    b = scsi_target_nexus_new(t, "B");
    r = tur(b, 0, 1);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    r = tur(b, 0, 1);
    assert_good(&r);
    r = tur(a, 0, 1);
    assert_good(&r);

    /* A device reset of A is a bus reset for A alone. */
    scsi_nexus_reset(a);
    r = tur(b, 0, 1);
    assert_good(&r);
    r = tur(a, 0, 1);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    r = tur(a, 3, 5);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    r = tur(a, 0, 1);
    assert_good(&r);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    scsi_target_free_luns(t);
}

static void test_nexus_loss(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *a = scsi_target_nexus_new(t, "A");
    struct scsi_nexus *b = scsi_target_nexus_new(t, "B");
    struct result r;

    settle(a);
    settle(b);
    /* A's I_T NEXUS RESET to port 0: A's nexus to port 0's LUNs was lost, no other. */
    scsi_nexus_loss(a, 0);
    r = tur(a, 0, 0);
    assert_ua(&r, SCSI_SENSE_ASCQ_NEXUS_LOSS);
    r = tur(a, 0, 0);
    assert_good(&r);
    r = tur(a, 0, 300);
    assert_ua(&r, SCSI_SENSE_ASCQ_NEXUS_LOSS);
    r = tur(a, 3, 5);
    assert_good(&r);
    r = tur(b, 0, 0);
    assert_good(&r);
    r = tur(b, 0, 300);
    assert_good(&r);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    scsi_target_free_luns(t);
}

static void test_lun_reset_every_nexus(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *a = scsi_target_nexus_new(t, "A");
    struct scsi_nexus *b = scsi_target_nexus_new(t, "B");
    struct scsi_nexus *c;
    struct result r;

    settle(a);
    settle(b);
    /* A condition of the LUN itself: once to every nexus that existed. */
    scsi_lun_set_ua(scsi_target_lun(t, 0, 1), SCSI_UA_LUN_RESET);
    c = scsi_target_nexus_new(t, "C");
    r = tur(a, 0, 1);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_DEVICE_RESET_FUNCTION_OCCURED);
    r = tur(a, 0, 1);
    assert_good(&r);
    r = tur(b, 0, 1);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_DEVICE_RESET_FUNCTION_OCCURED);
    r = tur(a, 0, 0);
    assert_good(&r);
    /* C came later: its power-on covers the reset, which it never sees. */
    r = tur(c, 0, 1);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    r = tur(c, 0, 1);
    assert_good(&r);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    scsi_target_nexus_free(c);
    scsi_target_free_luns(t);
}

/* ---- nexus lifetime ------------------------------------------------------ */

static void test_nexus_lifetime(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *a, *b;
    struct result r;

    g_assert_cmpuint(scsi_target_nexus_count(t), ==, 0);
    a = scsi_target_nexus_new(t, "A");
    b = scsi_target_nexus_new(t, "B");
    g_assert_cmpstr(scsi_nexus_name(a), ==, "A");
    g_assert_cmpuint(scsi_target_nexus_count(t), ==, 2);
    settle(a);
    scsi_target_nexus_free(a);
    g_assert_cmpuint(scsi_target_nexus_count(t), ==, 1);
    /* The other nexus is untouched by A's departure. */
    r = tur(b, 0, 0);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    /* A reconnecting initiator is a new nexus: power-on again. */
    a = scsi_target_nexus_new(t, "A");
    r = tur(a, 0, 0);
    assert_ua(&r, SCSI_SENSE_ASCQ_BUS_RESET);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    g_assert_cmpuint(scsi_target_nexus_count(t), ==, 0);
    scsi_target_nexus_free(NULL);
    /* Freed with no nexus left: ASan checks the LUNs and tables go with it. */
    scsi_target_free_luns(t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/scsi-target/luns/table", test_lun_table);
    g_test_add_func("/scsi-target/report-luns/contents", test_report_luns_contents);
    g_test_add_func("/scsi-target/report-luns/allocation-length",
                    test_report_luns_allocation_length);
    g_test_add_func("/scsi-target/absent-lun", test_absent_lun);
    g_test_add_func("/scsi-target/ua/power-on-once-per-nexus", test_power_on_once_per_nexus);
    g_test_add_func("/scsi-target/ua/nexus-loss-this-nexus-only", test_nexus_loss);
    g_test_add_func("/scsi-target/ua/lun-reset-every-nexus", test_lun_reset_every_nexus);
    g_test_add_func("/scsi-target/nexus/lifetime", test_nexus_lifetime);
    return g_test_run();
}
