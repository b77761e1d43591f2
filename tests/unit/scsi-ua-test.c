/*
 * Specification of unit attentions (hw/scsi/scsi-ua.c) as the dispatch
 * (scsi-disk.c) and REQUEST SENSE (scsi-disk-inquiry.c) report them: a
 * condition is reported once, to the next command of any kind but INQUIRY
 * (even to an unknown opcode, before it is refused); conditions belong to
 * an I_T nexus (each sees its own power-on, a LUN-wide one is reported
 * once to each, one raised for a nexus only to it, a nexus that comes
 * later inherits nothing); a power-on covers a reset; of commands racing
 * on several threads through one nexus exactly one reports it; and
 * REQUEST SENSE returns the pending one as its data and clears it.  The
 * harness is scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdatomic.h>
#include <string.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"

static void test_ua_power_on_reported_once(void)
{
    struct scsi_lun *lun = new_ram(MiB, 512);
    uint8_t buf[96];
    struct result r;

    /* INQUIRY passes through a pending UA without consuming it. */
    r = RUN_IN(lun, scsi_cdb_inquiry(0, 0, 96), buf, sizeof(buf));
    assert_good(&r);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_ua_reported_to_any_command(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[512];
    /* Hand-built: libiscsi builds no CDB for an unassigned opcode. */
    static const uint8_t bogus[6] = { NO_SUCH_OPCODE };
    struct result r;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    r = RUN_IN(lun, scsi_cdb_read10(0, BS, BS, 0, 0, 0, 0, 0), buf, sizeof(buf));
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_DEVICE_RESET_FUNCTION_OCCURED);
    g_assert_cmpuint(r.in_xfer, ==, 0);
    r = RUN_IN(lun, scsi_cdb_read10(0, BS, BS, 0, 0, 0, 0, 0), buf, sizeof(buf));
    assert_good(&r);
    /* Even an unknown opcode reports the UA first. */
    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    r = run_cdb(lun, bogus, sizeof(bogus), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    r = run_cdb(lun, bogus, sizeof(bogus), NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE);
    scsi_lun_free(lun);
}

/* A TEST UNIT READY sent through one I_T nexus's unit-attention state. */
static struct result tur_as(struct scsi_lun *lun, struct scsi_ua_state *ua)
{
    struct pending_cmd p;

    start_as(&p, lun, ua, scsi_cdb_testunitready(), NULL, 0, NULL, 0);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

/* code (ASC << 8 | ASCQ) is reported once to nexus ua, then nothing. */
static void assert_ua_once(struct scsi_lun *lun, struct scsi_ua_state *ua, unsigned code)
{
    struct result r = tur_as(lun, ua);

    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, code);
    r = tur_as(lun, ua);
    assert_good(&r);
}

/*
 * Unit attentions belong to an I_T nexus (one front-end connection): each
 * sees its own power-on, a LUN-wide condition is reported once to every
 * nexus, one raised for a single nexus only to it, and a nexus that
 * appears later does not inherit what happened before it.
 */
static void test_ua_per_nexus(void)
{
    struct scsi_lun *lun = ram_lun();      /* the LUN's own nexus: power-on consumed */
    struct scsi_ua_state a, b, late;
    struct result r;

    scsi_ua_init(&a, lun);
    scsi_ua_init(&b, lun);
    assert_ua_once(lun, &a, SCSI_SENSE_ASCQ_BUS_RESET);
    assert_ua_once(lun, &b, SCSI_SENSE_ASCQ_BUS_RESET);   /* a consuming its own left b's */

    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    assert_ua_once(lun, &a, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    assert_ua_once(lun, &b, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_CAPACITY_DATA_HAS_CHANGED);

    scsi_ua_set(&b, SCSI_UA_NEXUS_LOSS);
    r = tur_as(lun, &a);
    assert_good(&r);
    assert_ua_once(lun, &b, SCSI_SENSE_ASCQ_NEXUS_LOSS);

    scsi_lun_set_ua(lun, SCSI_UA_REPORTED_LUNS_CHANGED);
    scsi_ua_init(&late, lun);
    assert_ua_once(lun, &late, SCSI_SENSE_ASCQ_BUS_RESET);
    assert_ua_once(lun, &a, SC_ASCQ_REPORTED_LUNS_DATA_HAS_CHANGED);
    scsi_lun_free(lun);
}

struct ua_race {
    struct scsi_lun *lun;
    struct scsi_ua_state *ua;
    atomic_int reports;
};

static gpointer ua_race_thread(gpointer opaque)
{
    struct ua_race *u = opaque;

    for (int i = 0; i < 200; i++) {
        struct result r = tur_as(u->lun, u->ua);

        if (r.status != SAM_STAT_GOOD) {
            g_assert_cmpuint(sc_sense_of(r.sense, r.sense_len).key, ==, SCSI_SENSE_UNIT_ATTENTION);
            atomic_fetch_add(&u->reports, 1);
        }
    }
    return NULL;
}

/* Commands racing on several threads through one nexus: exactly one reports it. */
static void test_ua_reported_once_across_threads(void)
{
    struct scsi_lun *lun = ram_lun();
    struct scsi_ua_state ua;
    struct ua_race u = { .lun = lun, .ua = &ua };
    GThread *th[4];

    scsi_ua_init(&ua, lun);
    for (int round = 0; round < 50; round++) {
        atomic_store(&u.reports, 0);
        scsi_lun_set_ua(lun, round & 1 ? SCSI_UA_LUN_RESET : SCSI_UA_CAPACITY_CHANGED);
        for (unsigned i = 0; i < G_N_ELEMENTS(th); i++) {
            th[i] = g_thread_new("ua", ua_race_thread, &u);
        }
        for (unsigned i = 0; i < G_N_ELEMENTS(th); i++) {
            g_thread_join(th[i]);
        }
        /* round 0 also has the nexus's power-on, which covers a reset only */
        g_assert_cmpint(atomic_load(&u.reports), ==, round == 0 ? 2 : 1);
    }
    scsi_lun_free(lun);
}

static void test_ua_power_on_covers_reset(void)
{
    struct scsi_lun *lun = ram_lun();
    struct result r;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    scsi_lun_set_ua(lun, SCSI_UA_POWER_ON);
    scsi_lun_set_ua(lun, SCSI_UA_REPORTED_LUNS_CHANGED);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SCSI_SENSE_ASCQ_BUS_RESET);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, SC_ASCQ_REPORTED_LUNS_DATA_HAS_CHANGED);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);
    scsi_lun_free(lun);
}

static void test_request_sense_returns_and_clears_ua(void)
{
    struct scsi_lun *lun = new_ram(MiB, 512);
    uint8_t cdb[SC_CDB_MAX], buf[252];
    unsigned n = sc_cdb_request_sense(cdb, false, 252);
    struct sc_sense s;
    struct result r;

    memset(buf, 0xaa, sizeof(buf));
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(r.in_xfer, ==, 18);
    s = sc_fixed_sense(buf, r.in_xfer);
    g_assert_cmphex(s.key, ==, SCSI_SENSE_UNIT_ATTENTION);
    g_assert_cmphex(s.code, ==, SCSI_SENSE_ASCQ_BUS_RESET);

    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_good(&r);
    s = sc_fixed_sense(buf, r.in_xfer);
    g_assert_cmphex(s.key, ==, SCSI_SENSE_NO_SENSE);
    g_assert_cmphex(s.code, ==, SCSI_SENSE_ASCQ_NO_ADDL_SENSE);
    r = RUN(lun, scsi_cdb_testunitready());
    assert_good(&r);

    /* Descriptor format is not offered. */
    n = sc_cdb_request_sense(cdb, true, 252);
    r = run_cdb(lun, cdb, n, NULL, 0, buf, sizeof(buf));
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

struct worker {
    struct scsi_lun *lun;
    unsigned id;
    unsigned ua_seen;
};

static gpointer io_thread(gpointer opaque)
{
    struct worker *w = opaque;
    uint8_t wbuf[1024], rbuf[1024];

    for (unsigned i = 0; i < 2000; i++) {
        uint32_t lba = w->id * 4096 + (i % 2000) * 2;
        struct pending_cmd p;

        fill_pattern(wbuf, sizeof(wbuf), w->id * 7919 + i);
        start(&p, w->lun, scsi_cdb_write10(lba, sizeof(wbuf), BS, 0, 0, 0, 0, 0), wbuf,
              sizeof(wbuf), NULL, 0);
        g_assert_cmpint(p.completions, ==, 1);
        if (p.cmd.status == SAM_STAT_CHECK_CONDITION) {
            g_assert_cmphex(sc_fixed_sense(p.cmd.sense, p.cmd.sense_len).key, ==,
                            SCSI_SENSE_UNIT_ATTENTION);
            w->ua_seen++;
            continue;
        }
        g_assert_cmphex(p.cmd.status, ==, SAM_STAT_GOOD);
        start(&p, w->lun, scsi_cdb_read10(lba, sizeof(rbuf), BS, 0, 0, 0, 0, 0), NULL, 0, rbuf,
              sizeof(rbuf));
        if (p.cmd.status == SAM_STAT_CHECK_CONDITION) {
            w->ua_seen++;
            continue;
        }
        g_assert_true(memcmp(wbuf, rbuf, sizeof(rbuf)) == 0);
    }
    return NULL;
}

static void test_concurrent_io_and_unit_attention(void)
{
    struct scsi_lun *lun = ram_lun();
    struct worker w[4];
    GThread *t[4];
    unsigned seen = 0;

    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    for (unsigned i = 0; i < 4; i++) {
        w[i] = (struct worker){ .lun = lun, .id = i };
        t[i] = g_thread_new("io", io_thread, &w[i]);
    }
    for (unsigned i = 0; i < 4; i++) {
        g_thread_join(t[i]);
        seen += w[i].ua_seen;
    }
    /* Exactly one command, on whichever thread, saw the UA. */
    g_assert_cmpuint(seen, ==, 1);
    g_assert_cmpuint(scsi_lun_inflight(lun), ==, 0);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/ua/power-on-reported-once", test_ua_power_on_reported_once);
    g_test_add_func("/scsi-disk/ua/reported-to-any-command", test_ua_reported_to_any_command);
    g_test_add_func("/scsi-disk/ua/per-nexus", test_ua_per_nexus);
    g_test_add_func("/scsi-disk/ua/reported-once-across-threads",
                    test_ua_reported_once_across_threads);
    g_test_add_func("/scsi-disk/ua/power-on-covers-reset", test_ua_power_on_covers_reset);
    g_test_add_func("/scsi-disk/ua/request-sense-returns-and-clears",
                    test_request_sense_returns_and_clears_ua);
    g_test_add_func("/scsi-disk/ua/concurrent-io", test_concurrent_io_and_unit_attention);

    return g_test_run();
}
