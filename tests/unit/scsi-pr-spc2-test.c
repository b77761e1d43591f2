/*
 * RESERVE(6)/(10) and RELEASE(6)/(10) (hw/scsi/scsi-disk-pr.c,
 * scsi-pr.c): alone, the SPC-2 reservation of the whole LUN by one nexus,
 * which others may only inquire past (and RELEASE, to no effect), under
 * which PERSISTENT RESERVE IN/OUT conflict for everyone, and which a
 * LOGICAL UNIT RESET ends; with persistent reservations in play, the
 * SPC-3 5.6.3 rules REPORT CAPABILITIES announces with CRH: the holder and
 * the registrants of an RO/AR reservation get GOOD with nothing changed,
 * everyone else RESERVATION CONFLICT, as does anyone while registrations
 * exist without a reservation.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"
#include "scsi-pr-fixture.h"

static uint8_t legacy(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t op)
{
    uint8_t cdb[10] = { op };

    return run_as(lun, it, cdb, op >= 0x50 ? 10 : 6, NULL, 0, NULL, 0).status;
}

#define RESERVE6 0x16
#define RELEASE6 0x17
#define RESERVE10 0x56
#define RELEASE10 0x57

static uint8_t inquiry(struct scsi_lun *lun, const struct scsi_it_id *it)
{
    uint8_t cdb[6] = { 0x12, 0, 0, 0, 36, 0 };
    uint8_t buf[36];

    return run_as(lun, it, cdb, sizeof(cdb), NULL, 0, buf, sizeof(buf)).status;
}

static void test_alone(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t buf[16];

    g_assert_cmpuint(legacy(lun, &PR_A, RESERVE6), ==, GOOD);
    g_assert_cmpuint(legacy(lun, &PR_A, RESERVE10), ==, GOOD);     /* again, its own */
    g_assert_cmpuint(read10(lun, &PR_A), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_A), ==, GOOD);
    /* Another nexus: reads, writes, even TEST UNIT READY conflict; INQUIRY passes. */
    g_assert_cmpuint(read10(lun, &PR_B), ==, CONFLICT);
    g_assert_cmpuint(write10(lun, &PR_B), ==, CONFLICT);
    g_assert_cmpuint(tur(lun, &PR_B), ==, CONFLICT);
    g_assert_cmpuint(inquiry(lun, &PR_B), ==, GOOD);
    g_assert_cmpuint(legacy(lun, &PR_B, RESERVE10), ==, CONFLICT);
    /* Its RELEASE is GOOD and releases nothing. */
    g_assert_cmpuint(legacy(lun, &PR_B, RELEASE6), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_B), ==, CONFLICT);
    /* Persistent reservation commands conflict for everybody (SPC-2 5.5.1). */
    g_assert_cmpuint(pr_in(lun, &PR_A, 0, buf, sizeof(buf)).status, ==, CONFLICT);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, CONFLICT);
    /* The holder's RELEASE(10) ends it. */
    g_assert_cmpuint(legacy(lun, &PR_A, RELEASE10), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_B), ==, GOOD);
    g_assert_cmpuint(legacy(lun, &PR_B, RESERVE6), ==, GOOD);
    g_assert_cmpuint(read10(lun, &PR_A), ==, CONFLICT);
    scsi_lun_free(lun);
}

static void test_lun_reset_releases(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[6] = { 0 };
    struct result r;

    g_assert_cmpuint(legacy(lun, &PR_A, RESERVE6), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_B), ==, CONFLICT);
    g_test_expect_message("vhost-scsi", G_LOG_LEVEL_MESSAGE,
                          "*LOGICAL UNIT RESET releases the reservation of iqn.2026-12.test:a");
    scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
    g_test_assert_expected_messages();
    r = run_as(lun, &PR_B, cdb, 6, NULL, 0, NULL, 0);
    assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, 0x2903);          /* the reset, reported */
    g_assert_cmpuint(write10(lun, &PR_B), ==, GOOD);
    scsi_lun_free(lun);
}

static void test_refused_fields(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t third[10] = { RESERVE10, 0x10 }, longid[10] = { RESERVE10, 0x02 };
    uint8_t extent[6] = { RESERVE6, 0x01 };
    struct result r;

    r = run_as(lun, &PR_A, third, 10, NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    r = run_as(lun, &PR_A, longid, 10, NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    r = run_as(lun, &PR_A, extent, 6, NULL, 0, NULL, 0);
    assert_invalid_cdb(&r);
    g_assert_cmpuint(write10(lun, &PR_B), ==, GOOD);               /* nothing reserved */
    scsi_lun_free(lun);
}

/* Per persistent state: what RESERVE and RELEASE get from A (holder), B (registrant), C. */
static void test_with_persistent(void)
{
    static const struct {
        uint8_t type;              /* 0: registrations only */
        uint8_t a, b, c;
    } rows[] = {
        { 0, CONFLICT, CONFLICT, CONFLICT },
        { 1, GOOD, CONFLICT, CONFLICT },
        { 3, GOOD, CONFLICT, CONFLICT },
        { 5, GOOD, GOOD, CONFLICT },
        { 6, GOOD, GOOD, CONFLICT },
        { 7, GOOD, GOOD, CONFLICT },
        { 8, GOOD, GOOD, CONFLICT },
    };
    const uint8_t ops[] = { RESERVE6, RESERVE10, RELEASE6, RELEASE10 };

    for (unsigned i = 0; i < G_N_ELEMENTS(rows); i++) {
        struct scsi_lun *lun = ram_lun();
        uint8_t buf[8];

        g_test_message("type %u", rows[i].type);
        g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
        g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
        if (rows[i].type) {
            g_assert_cmpuint(pr_out(lun, &PR_A, 1, rows[i].type, 0xa, 0), ==, GOOD);
        }
        for (unsigned o = 0; o < G_N_ELEMENTS(ops); o++) {
            g_assert_cmpuint(legacy(lun, &PR_A, ops[o]), ==, rows[i].a);
            g_assert_cmpuint(legacy(lun, &PR_B, ops[o]), ==, rows[i].b);
            g_assert_cmpuint(legacy(lun, &PR_C, ops[o]), ==, rows[i].c);
            /* Nothing changed: no SPC-2 reservation, the persistent one as it was. */
            g_assert_cmpuint(pr_in(lun, &PR_D, 1, buf, sizeof(buf)).status, ==, GOOD);
            g_assert_cmpuint(get32(buf + 4), ==, rows[i].type ? 16 : 0);
            g_assert_cmpuint(inquiry(lun, &PR_D), ==, GOOD);
        }
        /* CRH is announced. */
        g_assert_cmpuint(pr_in(lun, &PR_D, 2, buf, sizeof(buf)).status, ==, GOOD);
        g_assert_cmphex(buf[2] & 0x10, ==, 0x10);
        scsi_lun_free(lun);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pr-spc2/alone", test_alone);
    g_test_add_func("/pr-spc2/lun-reset-releases", test_lun_reset_releases);
    g_test_add_func("/pr-spc2/refused-fields", test_refused_fields);
    g_test_add_func("/pr-spc2/with-persistent", test_with_persistent);
    return g_test_run();
}
