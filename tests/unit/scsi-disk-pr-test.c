/*
 * Specification of persistent reservations (hw/scsi/scsi-pr.c, decoded
 * by hw/scsi/scsi-disk-pr.c), played by three initiators A, B and C on
 * one LUN: registering and unregistering, each reservation type's access
 * rules for holders, registrants and others, RELEASE and CLEAR, PREEMPT
 * of a holder and of registrants, the unit attentions owed to those a
 * change affected, PRgeneration, READ KEYS / READ RESERVATION / REPORT
 * CAPABILITIES / READ FULL STATUS, and the refusals (bad lengths,
 * unsupported SPEC_I_PT / ALL_TG_PT, APTPL without a state file, wrong keys).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"
#include "scsi-pr-fixture.h"

/* A fresh LUN, its POWER ON consumed by each of A, B and C. */
static struct scsi_lun *pr_lun(void)
{
    return ram_lun();
}

static void test_register_and_read_keys(void)
{
    struct scsi_lun *lun = pr_lun();
    uint8_t buf[64];
    struct result r;

    r = pr_in(lun, &PR_A, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(get32(buf), ==, 0);          /* PRgeneration */
    g_assert_cmpuint(get32(buf + 4), ==, 0);      /* no keys */
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
    /* REGISTER from an unregistered nexus with a non-zero key: conflict. */
    g_assert_cmpuint(pr_out(lun, &PR_C, 0, 0, 0x99, 0xc), ==, CONFLICT);
    /* A registered nexus must name its key to change it ... */
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0x1, 0xaa), ==, CONFLICT);
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0xa, 0xaa), ==, GOOD);
    /* ... unless it registers and ignores the existing key. */
    g_assert_cmpuint(pr_out(lun, &PR_B, 6, 0, 0, 0xbb), ==, GOOD);
    r = pr_in(lun, &PR_A, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(get32(buf), ==, 4);
    g_assert_cmpuint(get32(buf + 4), ==, 16);
    g_assert_cmpuint(get64(buf + 8), ==, 0xaa);
    g_assert_cmpuint(get64(buf + 16), ==, 0xbb);
    /* Key 0 unregisters. */
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0xaa, 0), ==, GOOD);
    r = pr_in(lun, &PR_A, 0, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf + 4), ==, 8);
    g_assert_cmpuint(get64(buf + 8), ==, 0xbb);
    scsi_lun_free(lun);
}

/* Per type: [holder, registrant, other] x [read, write] allowed? */
static void test_access_by_type(void)
{
    static const struct {
        uint8_t type;
        bool reg_read, reg_write, other_read, other_write;
    } types[] = {
        { 1, true, false, true, false },     /* Write Exclusive */
        { 3, false, false, false, false },   /* Exclusive Access */
        { 5, true, true, true, false },      /* Write Exclusive, Registrants Only */
        { 6, true, true, false, false },     /* Exclusive Access, Registrants Only */
        { 7, true, true, true, false },      /* Write Exclusive, All Registrants */
        { 8, true, true, false, false },     /* Exclusive Access, All Registrants */
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(types); i++) {
        struct scsi_lun *lun = pr_lun();

        g_test_message("type %u", types[i].type);
        g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
        g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
        g_assert_cmpuint(pr_out(lun, &PR_A, 1, types[i].type, 0xa, 0), ==, GOOD);
        g_assert_cmpuint(read10(lun, &PR_A), ==, GOOD);
        g_assert_cmpuint(write10(lun, &PR_A), ==, GOOD);
        g_assert_cmpuint(read10(lun, &PR_B), ==, types[i].reg_read ? GOOD : CONFLICT);
        g_assert_cmpuint(write10(lun, &PR_B), ==, types[i].reg_write ? GOOD : CONFLICT);
        g_assert_cmpuint(read10(lun, &PR_C), ==, types[i].other_read ? GOOD : CONFLICT);
        g_assert_cmpuint(write10(lun, &PR_C), ==, types[i].other_write ? GOOD : CONFLICT);
        /* TEST UNIT READY passes every reservation (ALLOW COMMANDS 001b). */
        g_assert_cmpuint(tur(lun, &PR_C), ==, GOOD);
        /* Another reservation while one is held conflicts; the holder may repeat its own. */
        g_assert_cmpuint(pr_out(lun, &PR_B, 1, 1, 0xb, 0), ==, CONFLICT);
        g_assert_cmpuint(pr_out(lun, &PR_A, 1, types[i].type, 0xa, 0), ==, GOOD);
        scsi_lun_free(lun);
    }
}

static void test_reserve_needs_registration(void)
{
    struct scsi_lun *lun = pr_lun();
    struct result r;

    g_assert_cmpuint(pr_out(lun, &PR_C, 1, 1, 0, 0), ==, CONFLICT);
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 1, 0xb, 0), ==, CONFLICT);    /* wrong key */
    /* Type 2 does not exist; scope must be LU_SCOPE. */
    r = pr_out_flags(lun, &PR_A, 1, 2, 0xa, 0, 0);
    assert_invalid_cdb(&r);
    r = pr_out_flags(lun, &PR_A, 1, 0x11, 0xa, 0, 0);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_release_and_unit_attentions(void)
{
    struct scsi_lun *lun = pr_lun();
    struct result r;
    uint8_t buf[64];

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 5, 0xa, 0), ==, GOOD);
    /* RELEASE of another type is refused; by a non-holder it does nothing. */
    r = pr_out_flags(lun, &PR_A, 2, 1, 0xa, 0, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, 0x2604);
    g_assert_cmpuint(pr_out(lun, &PR_B, 2, 5, 0xb, 0), ==, GOOD);
    r = pr_in(lun, &PR_A, 1, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf + 4), ==, 16);
    g_assert_cmpuint(get64(buf + 8), ==, 0xa);
    g_assert_cmpuint(buf[21], ==, 5);
    g_assert_cmpuint(pr_out(lun, &PR_A, 2, 5, 0xa, 0), ==, GOOD);
    r = pr_in(lun, &PR_A, 1, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf + 4), ==, 0);
    /* B, a registrant, learns of it once (Registrants Only): RESERVATIONS RELEASED. */
    {
        uint8_t cdb[6] = { 0 };

        r = run_as(lun, &PR_B, cdb, 6, NULL, 0, NULL, 0);
        assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, 0x2a04);
    }
    g_assert_cmpuint(tur(lun, &PR_B), ==, GOOD);
    g_assert_cmpuint(tur(lun, &PR_A), ==, GOOD);
    scsi_lun_free(lun);
}

/* The fence of a cluster: B preempts A's key, A is out and told so. */
static void test_preempt_holder(void)
{
    struct scsi_lun *lun = pr_lun();
    uint8_t buf[64];
    struct result r;
    uint32_t gen;

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 5, 0xa, 0), ==, GOOD);
    r = pr_in(lun, &PR_B, 0, buf, sizeof(buf));
    gen = get32(buf);
    /* PREEMPT of a key nobody has: conflict; key 0 here: invalid field. */
    g_assert_cmpuint(pr_out(lun, &PR_B, 4, 5, 0xb, 0x77), ==, CONFLICT);
    r = pr_out_flags(lun, &PR_B, 4, 5, 0xb, 0, 0);
    assert_invalid_param(&r);
    g_assert_cmpuint(pr_out(lun, &PR_B, 5, 5, 0xb, 0xa), ==, GOOD);     /* PREEMPT AND ABORT */
    r = pr_in(lun, &PR_B, 0, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf), ==, gen + 1);
    g_assert_cmpuint(get32(buf + 4), ==, 8);
    g_assert_cmpuint(get64(buf + 8), ==, 0xb);
    r = pr_in(lun, &PR_B, 1, buf, sizeof(buf));
    g_assert_cmpuint(get64(buf + 8), ==, 0xb);                       /* B holds it now */
    {
        uint8_t cdb[6] = { 0 };

        r = run_as(lun, &PR_A, cdb, 6, NULL, 0, NULL, 0);
        assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, 0x2a05);                 /* REGISTRATIONS PREEMPTED */
    }
    g_assert_cmpuint(write10(lun, &PR_A), ==, CONFLICT);
    g_assert_cmpuint(write10(lun, &PR_B), ==, GOOD);
    g_assert_cmpuint(read10(lun, &PR_A), ==, GOOD);                     /* WE-RO: reads shared */
    scsi_lun_free(lun);
}

static void test_clear(void)
{
    struct scsi_lun *lun = pr_lun();
    uint8_t buf[64];
    struct result r;

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 3, 0xa, 0), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_C, 3, 0, 0, 0), ==, CONFLICT);      /* not registered */
    g_assert_cmpuint(pr_out(lun, &PR_B, 3, 0, 0xb, 0), ==, GOOD);
    r = pr_in(lun, &PR_B, 0, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf + 4), ==, 0);
    r = pr_in(lun, &PR_B, 1, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf + 4), ==, 0);
    {
        uint8_t cdb[6] = { 0 };

        r = run_as(lun, &PR_A, cdb, 6, NULL, 0, NULL, 0);
        assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, 0x2a03);                 /* RESERVATIONS PREEMPTED */
    }
    g_assert_cmpuint(write10(lun, &PR_C), ==, GOOD);
    scsi_lun_free(lun);
}

static void test_all_registrants_goes_with_the_last(void)
{
    struct scsi_lun *lun = pr_lun();
    uint8_t buf[64];
    struct result r;

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 7, 0xa, 0), ==, GOOD);
    r = pr_in(lun, &PR_A, 1, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(get64(buf + 8), ==, 0);        /* no one key holds it */
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0xa, 0), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_C), ==, CONFLICT);   /* B still holds it */
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0xb, 0), ==, GOOD);
    r = pr_in(lun, &PR_A, 1, buf, sizeof(buf));
    g_assert_cmpuint(get32(buf + 4), ==, 0);
    g_assert_cmpuint(write10(lun, &PR_C), ==, GOOD);
    scsi_lun_free(lun);
}

static void test_capabilities_and_full_status(void)
{
    struct scsi_lun *lun = pr_lun();
    uint8_t buf[256];
    struct result r;
    unsigned off, n;

    r = pr_in(lun, &PR_A, 2, buf, 8);
    assert_good(&r);
    g_assert_cmpuint(buf[1], ==, 8);
    g_assert_cmphex(buf[2] & 0x0d, ==, 0);      /* no SIP_C, ATP_C, PTPL_C */
    g_assert_cmphex(buf[4], ==, 0xea);
    g_assert_cmphex(buf[5], ==, 0x01);
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_C, 0, 0, 0, 0xc), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 1, 0xa, 0), ==, GOOD);
    r = pr_in(lun, &PR_A, 3, buf, sizeof(buf));
    assert_good(&r);
    n = get32(buf + 4);
    /* A: holder, iSCSI TransportID; C: SAS TransportID of its naa. name, port 2. */
    g_assert_cmpuint(get64(buf + 8), ==, 0xa);
    g_assert_cmphex(buf[8 + 12], ==, 0x01);
    g_assert_cmpuint(buf[8 + 13], ==, 1);
    g_assert_cmpuint(buf[8 + 19], ==, 1);
    g_assert_cmphex(buf[8 + 24], ==, 0x05);
    g_assert_cmpstr((const char *)buf + 8 + 28, ==, PR_A.initiator);
    off = 8 + 24 + get32(buf + 8 + 20);
    g_assert_cmpuint(get64(buf + off), ==, 0xc);
    g_assert_cmphex(buf[off + 12], ==, 0);
    g_assert_cmpuint(buf[off + 19], ==, 2);
    g_assert_cmphex(buf[off + 24], ==, 0x06);
    g_assert_cmphex(get64(buf + off + 28), ==, 0x5001405000000003ull);
    g_assert_cmpuint(off + 24 + 24, ==, 8 + n);
    /* The allocation length truncates, the lengths stay whole. */
    r = pr_in(lun, &PR_A, 3, buf, 8);
    g_assert_cmpuint(get32(buf + 4), ==, n);
    /* Unknown service action. */
    r = pr_in(lun, &PR_A, 9, buf, 8);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
}

static void test_refusals(void)
{
    struct scsi_lun *lun = pr_lun();
    uint8_t cdb[10] = { 0x5f, 0, 0, 0, 0, 0, 0, 0, 16, 0 };
    uint8_t p[24] = { 0 };
    struct result r;

    r = run_as(lun, &PR_A, cdb, sizeof(cdb), p, 16, NULL, 0);
    assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, 0x1a00);          /* PARAMETER LIST LENGTH ERROR */
    for (unsigned bit = 0; bit < 4; bit++) {
        if (bit == 1) {
            continue;
        }
        r = pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, (uint8_t)(1u << bit));
        assert_invalid_param(&r);                           /* APTPL, ALL_TG_PT, SPEC_I_PT */
    }
    r = pr_out_flags(lun, &PR_A, 8, 0, 0, 0xa, 0);             /* REPLACE LOST RESERVATION */
    assert_invalid_cdb(&r);
    r = pr_out_flags(lun, &PR_A, 0x1f, 0, 0, 0xa, 0);
    assert_invalid_cdb(&r);
    /* Nothing was registered by any of them. */
    {
        uint8_t buf[16];

        r = pr_in(lun, &PR_A, 0, buf, sizeof(buf));
        g_assert_cmpuint(get32(buf + 4), ==, 0);
    }
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pr/register-and-read-keys", test_register_and_read_keys);
    g_test_add_func("/pr/access-by-type", test_access_by_type);
    g_test_add_func("/pr/reserve-needs-registration", test_reserve_needs_registration);
    g_test_add_func("/pr/release-and-unit-attentions", test_release_and_unit_attentions);
    g_test_add_func("/pr/preempt-holder", test_preempt_holder);
    g_test_add_func("/pr/clear", test_clear);
    g_test_add_func("/pr/all-registrants-goes-with-the-last",
                    test_all_registrants_goes_with_the_last);
    g_test_add_func("/pr/capabilities-and-full-status", test_capabilities_and_full_status);
    g_test_add_func("/pr/refusals", test_refusals);
    return g_test_run();
}
