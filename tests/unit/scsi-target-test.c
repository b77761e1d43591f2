/*
 * Specification of the SCSI target (lib/scsi/scsi-target.c): the LUN table
 * it owns; the answers that are the target's rather than a LUN's (REPORT
 * LUNS to any LUN of a port, with its select report field and allocation
 * length; INQUIRY and REQUEST SENSE to an absent LUN; every other command
 * to an absent LUN left to the transport); and the I_T nexus, one per
 * initiator connection, with the unit attentions of each of its LUNs:
 * POWER ON once per nexus, a device reset and an I_T NEXUS RESET only for
 * the nexus they happen to, a LOGICAL UNIT RESET once for every nexus that
 * existed, each LUN's state found by its id.  Commands go to RAM LUNs,
 * which complete inside the call.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-target.h"

#define MiB (1024 * 1024)

struct result {
    int ret;                  /* scsi_nexus_exec's */
    unsigned completions;     /* complete() calls */
    uint8_t status;
    uint8_t sense_len;
    uint8_t sense[SCSI_SENSE_MAX];
    uint64_t in_xfer;
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
    struct result r = { 0 };
    struct iovec iov = { buf, len };
    struct scsi_cmd cmd = { .cdb = cdb, .cdb_len = cdb_len, .complete = record_completion,
                            .opaque = &r };

    if (buf) {
        cmd.data_in = &iov;
        cmd.data_in_cnt = 1;
    }
    r.ret = scsi_nexus_exec(nx, port, lun, wlun, &cmd);
    return r;
}

static struct result tur(struct scsi_nexus *nx, unsigned port, unsigned lun)
{
    static const uint8_t cdb[6] = { 0x00 };

    return exec_cdb(nx, port, lun, false, cdb, sizeof(cdb), NULL, 0);
}

static struct result report_luns(struct scsi_nexus *nx, unsigned port, unsigned lun, bool wlun,
                                 uint8_t select, uint32_t alloc, uint8_t *buf, size_t len)
{
    uint8_t cdb[12] = { 0xa0, 0, select };

    cdb[6] = alloc >> 24;
    cdb[7] = alloc >> 16;
    cdb[8] = alloc >> 8;
    cdb[9] = alloc;
    return exec_cdb(nx, port, lun, wlun, cdb, sizeof(cdb), buf, len);
}

static void assert_good(const struct result *r)
{
    g_assert_cmpint(r->ret, ==, 0);
    g_assert_cmpuint(r->completions, ==, 1);
    g_assert_cmphex(r->status, ==, SAM_STAT_GOOD);
    g_assert_cmpuint(r->sense_len, ==, 0);
}

static void assert_sense(const struct result *r, uint8_t key, uint8_t asc, uint8_t ascq)
{
    g_assert_cmpint(r->ret, ==, 0);
    g_assert_cmpuint(r->completions, ==, 1);
    g_assert_cmphex(r->status, ==, SAM_STAT_CHECK_CONDITION);
    g_assert_cmpuint(r->sense_len, ==, 18);
    g_assert_cmphex(r->sense[0], ==, 0x70);
    g_assert_cmphex(r->sense[2] & 0xf, ==, key);
    g_assert_cmphex(r->sense[12], ==, asc);
    g_assert_cmphex(r->sense[13], ==, ascq);
}

static void assert_ua(const struct result *r, uint8_t asc, uint8_t ascq)
{
    assert_sense(r, SENSE_UNIT_ATTENTION, asc, ascq);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static struct scsi_lun *ram_lun(const char *name)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(MiB, 512, &be), ==, 0);
    return scsi_lun_new(be, name, NULL);
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

        assert_ua(&r, 0x29, 0x00);
    }
}

/* ---- the LUN table ----------------------------------------------------- */

static void test_lun_table(void)
{
    struct scsi_target *t = target_new();

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

    /* A refused LUN is freed by the call (ASan would report a leak). */
    g_assert_cmpint(scsi_target_add_lun(t, 0, 0, ram_lun("dup")), ==, -EEXIST);
    g_assert_cmpint(scsi_target_add_lun(t, 256, 0, ram_lun("port")), ==, -EINVAL);
    g_assert_cmpint(scsi_target_add_lun(t, 0, 16384, ram_lun("lun")), ==, -EINVAL);
    g_assert_cmpint(scsi_target_add_lun(t, 0, 16383, ram_lun("0:16383")), ==, 0);
    /* Changes with initiators connected: scsi-target-live-test.c. */
    scsi_target_free(t);
}

/* ---- REPORT LUNS --------------------------------------------------------- */

static void test_report_luns_contents(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *nx = scsi_target_nexus_new(t, "A");
    uint8_t buf[64];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = report_luns(nx, 0, 0, false, 0, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be32(buf), ==, 24);
    g_assert_cmpuint(be32(buf + 4), ==, 0);
    g_assert_cmpuint(r.in_xfer, ==, 32);
    g_assert_cmphex(be64(buf + 8), ==, 0);                        /* LUN 0 */
    g_assert_cmphex(be64(buf + 16), ==, 0x0001000000000000ULL);   /* peripheral: LUN 1 */
    g_assert_cmphex(be64(buf + 24), ==, 0x412c000000000000ULL);   /* flat space: LUN 300 */

    /* The same list, to an absent LUN and to the REPORT LUNS well-known LUN. */
    memset(buf, 0xee, sizeof(buf));
    r = report_luns(nx, 0, 9, false, 0, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be32(buf), ==, 24);
    g_assert_cmphex(be64(buf + 24), ==, 0x412c000000000000ULL);
    r = report_luns(nx, 0, 0, true, 2, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be32(buf), ==, 24);

    /* Each port lists its own LUNs only. */
    r = report_luns(nx, 3, 5, false, 0, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be32(buf), ==, 8);
    g_assert_cmphex(be64(buf + 8), ==, 0x0005000000000000ULL);

    /* Well-known LUNs only: there are none to list. */
    r = report_luns(nx, 0, 0, false, 1, sizeof(buf), buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(be32(buf), ==, 0);
    g_assert_cmpuint(r.in_xfer, ==, 8);

    /* Not a unit attention's business (SPC-4 5.14): the next TUR still sees it. */
    r = tur(nx, 0, 0);
    assert_ua(&r, 0x29, 0x00);
    scsi_target_nexus_free(nx);
    scsi_target_free(t);
}

static void test_report_luns_allocation_length(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *nx = scsi_target_nexus_new(t, "A");
    uint8_t buf[64];
    struct result r;

    /* Truncated to the allocation length; the list length still tells all. */
    r = report_luns(nx, 0, 0, false, 0, 16, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 16);
    g_assert_cmpuint(be32(buf), ==, 24);
    /* ... and to the buffer. */
    r = report_luns(nx, 0, 0, false, 0, sizeof(buf), buf, 20);
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 20);

    /* SPC-4: fewer than 16 bytes is an invalid field (byte 6). */
    r = report_luns(nx, 0, 0, false, 0, 15, buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    g_assert_cmphex(r.sense[15], ==, 0xcf);
    g_assert_cmpuint(r.sense[17], ==, 6);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    /* An unknown SELECT REPORT (byte 2). */
    r = report_luns(nx, 0, 0, false, 3, sizeof(buf), buf, sizeof(buf));
    assert_sense(&r, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
    g_assert_cmpuint(r.sense[17], ==, 2);
    scsi_target_nexus_free(nx);
    scsi_target_free(t);
}

/* ---- absent LUNs and ports ---------------------------------------------- */

static void test_absent_lun(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *nx = scsi_target_nexus_new(t, "A");
    uint8_t inq[6] = { 0x12, 0, 0, 0, 96, 0 }, rs[6] = { 0x03, 0, 0, 0, 18, 0 };
    uint8_t rd[10] = { 0x28 }, buf[96];
    struct result r;

    memset(buf, 0xee, sizeof(buf));
    r = exec_cdb(nx, 0, 2, false, inq, 6, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 36);
    g_assert_cmphex(buf[0], ==, 0x7f);            /* qualifier 011b, type 1Fh */
    g_assert_cmphex(buf[2], ==, 0x06);            /* SPC-4 */
    g_assert_cmphex(buf[3], ==, 0x02);
    g_assert_cmpuint(buf[4], ==, 31);
    g_assert_cmphex(buf[8], ==, 0);               /* no identity */

    inq[1] = 0x01;                                /* VPD: an empty page, same qualifier */
    inq[2] = 0x80;
    r = exec_cdb(nx, 0, 2, false, inq, 6, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 4);
    g_assert_cmphex(buf[0], ==, 0x7f);
    g_assert_cmphex(buf[1], ==, 0x80);

    /* The well-known LUN is no logical unit either. */
    inq[1] = 0;
    inq[2] = 0;
    r = exec_cdb(nx, 0, 0, true, inq, 6, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmphex(buf[0], ==, 0x7f);

    /* REQUEST SENSE: LOGICAL UNIT NOT SUPPORTED, as data with GOOD status. */
    r = exec_cdb(nx, 0, 2, false, rs, 6, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 18);
    g_assert_cmphex(buf[0], ==, 0x70);
    g_assert_cmphex(buf[2], ==, SENSE_ILLEGAL_REQUEST);
    g_assert_cmphex(buf[12], ==, 0x25);
    g_assert_cmphex(buf[13], ==, 0x00);

    /* Anything else is the transport's to answer: the command is not touched. */
    r = exec_cdb(nx, 0, 2, false, rd, 10, buf, sizeof(buf));
    g_assert_cmpint(r.ret, ==, -ENODEV);
    g_assert_cmpuint(r.completions, ==, 0);
    r = tur(nx, 0, 16384);
    g_assert_cmpint(r.ret, ==, -ENODEV);
    g_assert_cmpuint(r.completions, ==, 0);

    /* A port that serves nothing answers nothing, not even REPORT LUNS. */
    r = report_luns(nx, 1, 0, false, 0, sizeof(buf), buf, sizeof(buf));
    g_assert_cmpint(r.ret, ==, -ENXIO);
    g_assert_cmpuint(r.completions, ==, 0);
    r = exec_cdb(nx, 1, 0, false, inq, 6, buf, sizeof(buf));
    g_assert_cmpint(r.ret, ==, -ENXIO);
    r = tur(nx, 256, 0);
    g_assert_cmpint(r.ret, ==, -ENXIO);

    /* An absent LUN has no unit attentions: LUN 0 still has its own. */
    r = tur(nx, 0, 0);
    assert_ua(&r, 0x29, 0x00);
    scsi_target_nexus_free(nx);
    scsi_target_free(t);
}

/* ---- unit attentions per nexus ------------------------------------------ */

static void test_power_on_once_per_nexus(void)
{
    struct scsi_target *t = target_new();
    struct scsi_nexus *a = scsi_target_nexus_new(t, "A");
    struct scsi_nexus *b;
    struct result r;

    r = tur(a, 0, 1);
    assert_ua(&r, 0x29, 0x00);
    r = tur(a, 0, 1);
    assert_good(&r);
    /* Kept per LUN and found by id: LUN 300, beside it in the table, still has its own. */
    r = tur(a, 0, 300);
    assert_ua(&r, 0x29, 0x00);
    r = tur(a, 0, 300);
    assert_good(&r);

    /* A nexus that connects later has just seen every LUN power on. */
    b = scsi_target_nexus_new(t, "B");
    r = tur(b, 0, 1);
    assert_ua(&r, 0x29, 0x00);
    r = tur(b, 0, 1);
    assert_good(&r);
    r = tur(a, 0, 1);
    assert_good(&r);

    /* A device reset of A is a bus reset for A alone. */
    scsi_nexus_reset(a);
    r = tur(b, 0, 1);
    assert_good(&r);
    r = tur(a, 0, 1);
    assert_ua(&r, 0x29, 0x00);
    r = tur(a, 3, 5);
    assert_ua(&r, 0x29, 0x00);
    r = tur(a, 0, 1);
    assert_good(&r);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    scsi_target_free(t);
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
    assert_ua(&r, 0x29, 0x07);
    r = tur(a, 0, 0);
    assert_good(&r);
    r = tur(a, 0, 300);
    assert_ua(&r, 0x29, 0x07);
    r = tur(a, 3, 5);
    assert_good(&r);
    r = tur(b, 0, 0);
    assert_good(&r);
    r = tur(b, 0, 300);
    assert_good(&r);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    scsi_target_free(t);
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
    assert_ua(&r, 0x29, 0x03);
    r = tur(a, 0, 1);
    assert_good(&r);
    r = tur(b, 0, 1);
    assert_ua(&r, 0x29, 0x03);
    r = tur(a, 0, 0);
    assert_good(&r);
    /* C came later: its power-on covers the reset, which it never sees. */
    r = tur(c, 0, 1);
    assert_ua(&r, 0x29, 0x00);
    r = tur(c, 0, 1);
    assert_good(&r);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    scsi_target_nexus_free(c);
    scsi_target_free(t);
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
    assert_ua(&r, 0x29, 0x00);
    /* A reconnecting initiator is a new nexus: power-on again. */
    a = scsi_target_nexus_new(t, "A");
    r = tur(a, 0, 0);
    assert_ua(&r, 0x29, 0x00);
    scsi_target_nexus_free(a);
    scsi_target_nexus_free(b);
    g_assert_cmpuint(scsi_target_nexus_count(t), ==, 0);
    scsi_target_nexus_free(NULL);
    /* Freed with no nexus left: ASan checks the LUNs and tables go with it. */
    scsi_target_free(t);
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
