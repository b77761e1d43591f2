/*
 * Persistent reservations as tables (hw/scsi/scsi-pr.c through the LUN's
 * dispatch): every PERSISTENT RESERVE OUT service action, from the
 * holder, a registrant and an unregistered nexus, under no reservation,
 * under each one-holder type and under each all-registrants type, with
 * the status or sense it gets, how PRgeneration moves, the registrations
 * and the reservation it leaves and the unit attentions it owes; and the
 * access a non-holder has under each type, command by command, as SPC-4
 * table 63 (5.14.2; SPC-3 table 31) and SBC-3 table 13 give it.
 *
 * Every case starts from the same state: A registered with key Ah, B
 * with Bh, C not registered, PRgeneration 2, and (unless the case is
 * "no reservation") A holding a reservation of the type under test.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <string.h>

#include <glib.h>

#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"
#include "scsi-pr-fixture.h"

enum { HOLDER, REGISTRANT, OTHER };
static const struct scsi_it_id *const role_it[] = { &PR_A, &PR_B, &PR_C };
static const uint64_t role_key[] = { 0xa, 0xb, 0 };
static const char *const role_name[] = { "holder", "registrant", "unregistered" };

/* The reservation a case starts under. */
enum held { NONE, ONE, ALL };
static const uint8_t one_types[] = { 1, 3, 5, 6 };
static const uint8_t all_types[] = { 7, 8 };

/* Stand-ins in a row for the type under test (T) and one that differs from it (T2). */
#define T 0xf0
#define T2 0xf1

/* The outcome of a case. */
#define CHECK_INVALID_CDB 0x2400
#define CHECK_INVALID_PARAM 0x2600
#define CHECK_INVALID_RELEASE 0x2604

/* Unit attentions a case owes; REL_RO: RESERVATIONS RELEASED under the registrants types only. */
#define RES_PREEMPTED 0x2a03
#define RES_RELEASED 0x2a04
#define REG_PREEMPTED 0x2a05
#define REL_RO 0x1

struct pr_case {
    enum held held;
    int role;
    uint8_t sa, type;
    uint64_t key_delta;        /* added to the caller's own key (a wrong key) */
    uint64_t sa_key;
    uint8_t status;            /* GOOD, CONFLICT, or CHECK CONDITION: */
    unsigned check;            /* ... its ILLEGAL REQUEST code */
    int gen;                   /* PRgeneration after, less before */
    uint64_t keys[3];          /* READ KEYS after, in order, 0-terminated */
    uint8_t res_type;          /* READ RESERVATION after: 0 none, T, T2 or a type */
    uint64_t res_key;          /* ... and its key (0 for the all-registrants types) */
    unsigned ua[3];            /* owed to A, B, C after */
};

#define CC SAM_STAT_CHECK_CONDITION
enum { REG = 0, RES = 1, REL = 2, CLR = 3, PRE = 4, PAA = 5, RAI = 6 };

static const struct pr_case cases[] = {
    /* ---- no reservation: A and B are registrants alike ---- */
    { NONE, REGISTRANT, REG, 0, 0, 0xbb, GOOD, 0, 1, { 0xa, 0xbb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, REG, 0, 1, 0xbb, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, REG, 0, 0, 0, GOOD, 0, 1, { 0xa }, 0, 0, { 0 } },
    { NONE, OTHER, REG, 0, 0, 0xc, GOOD, 0, 1, { 0xa, 0xb, 0xc }, 0, 0, { 0 } },
    { NONE, OTHER, REG, 0, 0x99, 0xc, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, OTHER, REG, 0, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, RAI, 0, 0x99, 0xbb, GOOD, 0, 1, { 0xa, 0xbb }, 0, 0, { 0 } },
    { NONE, OTHER, RAI, 0, 0x99, 0xc, GOOD, 0, 1, { 0xa, 0xb, 0xc }, 0, 0, { 0 } },
    { NONE, REGISTRANT, RES, 5, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, 5, 0xb, { 0 } },
    { NONE, REGISTRANT, RES, 5, 1, 0, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, RES, 2, 0, 0, CC, CHECK_INVALID_CDB, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, RES, 0x15, 0, 0, CC, CHECK_INVALID_CDB, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, OTHER, RES, 5, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, REL, 5, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, OTHER, REL, 5, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, CLR, 0, 0, 0, GOOD, 0, 1, { 0 }, 0, 0, { RES_PREEMPTED, 0, 0 } },
    { NONE, OTHER, CLR, 0, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, PRE, 5, 0, 0xa, GOOD, 0, 1, { 0xb }, 0, 0, { REG_PREEMPTED, 0, 0 } },
    { NONE, REGISTRANT, PAA, 5, 0, 0xa, GOOD, 0, 1, { 0xb }, 0, 0, { REG_PREEMPTED, 0, 0 } },
    { NONE, REGISTRANT, PRE, 5, 0, 0x77, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, REGISTRANT, PRE, 5, 0, 0, CC, CHECK_INVALID_PARAM, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, OTHER, PRE, 5, 0, 0xa, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },
    { NONE, OTHER, PAA, 5, 0, 0xa, CONFLICT, 0, 0, { 0xa, 0xb }, 0, 0, { 0 } },

    /* ---- A holds a one-holder reservation (WE, EA, WE-RO, EA-RO) ---- */
    { ONE, HOLDER, REG, 0, 0, 0xaa, GOOD, 0, 1, { 0xaa, 0xb }, T, 0xaa, { 0 } },
    { ONE, HOLDER, RAI, 0, 0x99, 0xaa, GOOD, 0, 1, { 0xaa, 0xb }, T, 0xaa, { 0 } },
    /* Unregistering releases it; under RO types B is told. */
    { ONE, HOLDER, REG, 0, 0, 0, GOOD, 0, 1, { 0xb }, 0, 0, { 0, REL_RO, 0 } },
    { ONE, HOLDER, RES, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, HOLDER, RES, T2, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, HOLDER, RES, 2, 0, 0, CC, CHECK_INVALID_CDB, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, HOLDER, REL, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, 0, 0, { 0, REL_RO, 0 } },
    { ONE, HOLDER, REL, T, 1, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, HOLDER, REL, T2, 0, 0, CC, CHECK_INVALID_RELEASE, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, HOLDER, CLR, 0, 0, 0, GOOD, 0, 1, { 0 }, 0, 0, { 0, RES_PREEMPTED, 0 } },
    { ONE, HOLDER, PRE, T, 0, 0xb, GOOD, 0, 1, { 0xa }, T, 0xa, { 0, REG_PREEMPTED, 0 } },
    { ONE, HOLDER, PAA, T, 0, 0xb, GOOD, 0, 1, { 0xa }, T, 0xa, { 0, REG_PREEMPTED, 0 } },
    /* Preempting itself changes the type; B, still registered, loses the old one. */
    { ONE, HOLDER, PRE, T2, 0, 0xa, GOOD, 0, 1, { 0xa, 0xb }, T2, 0xa,
      { 0, RES_RELEASED, 0 } },
    { ONE, REGISTRANT, REG, 0, 0, 0xbb, GOOD, 0, 1, { 0xa, 0xbb }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, REG, 0, 0, 0, GOOD, 0, 1, { 0xa }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, RES, T, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, REL, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, CLR, 0, 0, 0, GOOD, 0, 1, { 0 }, 0, 0, { RES_PREEMPTED, 0, 0 } },
    /* The fence: B takes A's reservation, of the type B names. */
    { ONE, REGISTRANT, PRE, T, 0, 0xa, GOOD, 0, 1, { 0xb }, T, 0xb, { REG_PREEMPTED, 0, 0 } },
    { ONE, REGISTRANT, PRE, T2, 0, 0xa, GOOD, 0, 1, { 0xb }, T2, 0xb, { REG_PREEMPTED, 0, 0 } },
    { ONE, REGISTRANT, PAA, T, 0, 0xa, GOOD, 0, 1, { 0xb }, T, 0xb, { REG_PREEMPTED, 0, 0 } },
    { ONE, REGISTRANT, PRE, T, 1, 0xa, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, PRE, T, 0, 0x77, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, PRE, T, 0, 0, CC, CHECK_INVALID_PARAM, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, REGISTRANT, PRE, 2, 0, 0xa, CC, CHECK_INVALID_CDB, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, OTHER, REG, 0, 0, 0xc, GOOD, 0, 1, { 0xa, 0xb, 0xc }, T, 0xa, { 0 } },
    { ONE, OTHER, REG, 0, 0x99, 0xc, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, OTHER, RAI, 0, 0x99, 0xc, GOOD, 0, 1, { 0xa, 0xb, 0xc }, T, 0xa, { 0 } },
    { ONE, OTHER, RES, T, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, OTHER, REL, T, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, OTHER, CLR, 0, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, OTHER, PRE, T, 0, 0xa, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },
    { ONE, OTHER, PAA, T, 0, 0xa, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0xa, { 0 } },

    /* ---- an all-registrants reservation: A and B both hold it ---- */
    { ALL, HOLDER, REG, 0, 0, 0xaa, GOOD, 0, 1, { 0xaa, 0xb }, T, 0, { 0 } },
    { ALL, HOLDER, REG, 0, 0, 0, GOOD, 0, 1, { 0xb }, T, 0, { 0 } },
    { ALL, HOLDER, RES, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, HOLDER, RES, T2, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, HOLDER, REL, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, 0, 0, { 0, RES_RELEASED, 0 } },
    { ALL, HOLDER, REL, T2, 0, 0, CC, CHECK_INVALID_RELEASE, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, HOLDER, CLR, 0, 0, 0, GOOD, 0, 1, { 0 }, 0, 0, { 0, RES_PREEMPTED, 0 } },
    /* A key names registrations only: the reservation stays with the rest. */
    { ALL, HOLDER, PRE, T, 0, 0xb, GOOD, 0, 1, { 0xa }, T, 0, { 0, REG_PREEMPTED, 0 } },
    { ALL, HOLDER, PAA, T, 0, 0xb, GOOD, 0, 1, { 0xa }, T, 0, { 0, REG_PREEMPTED, 0 } },
    /* Key 0: everybody else goes, the preempter holds a reservation of the new type. */
    { ALL, HOLDER, PRE, 1, 0, 0, GOOD, 0, 1, { 0xa }, 1, 0xa, { 0, REG_PREEMPTED, 0 } },
    { ALL, REGISTRANT, RES, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, REGISTRANT, REL, T, 0, 0, GOOD, 0, 0, { 0xa, 0xb }, 0, 0, { RES_RELEASED, 0, 0 } },
    { ALL, REGISTRANT, REG, 0, 0, 0, GOOD, 0, 1, { 0xa }, T, 0, { 0 } },
    { ALL, REGISTRANT, PRE, T, 0, 0xa, GOOD, 0, 1, { 0xb }, T, 0, { REG_PREEMPTED, 0, 0 } },
    { ALL, REGISTRANT, PAA, 5, 0, 0, GOOD, 0, 1, { 0xb }, 5, 0xb, { REG_PREEMPTED, 0, 0 } },
    { ALL, REGISTRANT, CLR, 0, 0, 0, GOOD, 0, 1, { 0 }, 0, 0, { RES_PREEMPTED, 0, 0 } },
    { ALL, OTHER, REG, 0, 0, 0xc, GOOD, 0, 1, { 0xa, 0xb, 0xc }, T, 0, { 0 } },
    { ALL, OTHER, RES, T, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, OTHER, REL, T, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, OTHER, CLR, 0, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, OTHER, PRE, T, 0, 0, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
    { ALL, OTHER, PAA, T, 0, 0xa, CONFLICT, 0, 0, { 0xa, 0xb }, T, 0, { 0 } },
};

static const char *const sa_name[] = { "REGISTER", "RESERVE", "RELEASE", "CLEAR", "PREEMPT",
                                       "PREEMPT AND ABORT", "REGISTER AND IGNORE" };

static uint8_t resolve(uint8_t type, uint8_t held)
{
    if (type == T) {
        return held;
    }
    if (type == T2) {
        return held == 1 ? 3 : 1;
    }
    return type;
}

static bool ro_type(uint8_t type)
{
    return type >= 5;
}

/* A and B registered, PRgeneration 2, A holding a reservation of type held (0: none). */
static struct scsi_lun *setup(uint8_t held)
{
    struct scsi_lun *lun = ram_lun();

    g_assert_cmpuint(pr_out(lun, &PR_A, REG, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, REG, 0, 0, 0xb), ==, GOOD);
    if (held) {
        g_assert_cmpuint(pr_out(lun, &PR_A, RES, held, 0xa, 0), ==, GOOD);
    }
    return lun;
}

static void run_case(const struct pr_case *c, uint8_t held)
{
    struct scsi_lun *lun = setup(held);
    const struct scsi_it_id *it = role_it[c->role];
    uint8_t buf[64];
    struct result r;
    unsigned n = 0;

    g_test_message("%s from the %s, type %u, key %#" PRIx64 "+%" PRIu64 ", sa key %#" PRIx64
                   ", under %s%u", sa_name[c->sa], role_name[c->role],
                   resolve(c->type, held), role_key[c->role], c->key_delta, c->sa_key,
                   held ? "type " : "no reservation ", held);
    r = pr_out_flags(lun, it, c->sa, resolve(c->type, held), role_key[c->role] + c->key_delta,
                     c->sa_key, 0);
    g_assert_cmphex(r.status, ==, c->status);
    if (c->status == CC) {
        assert_sense(&r, SCSI_SENSE_ILLEGAL_REQUEST, c->check);
    }
    /* READ KEYS: PRgeneration and the keys, in order. */
    r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
    assert_good(&r);
    g_assert_cmpuint(get32(buf), ==, 2 + c->gen);
    while (n < 3 && c->keys[n]) {
        n++;
    }
    g_assert_cmpuint(get32(buf + 4), ==, 8 * n);
    for (unsigned i = 0; i < n; i++) {
        g_assert_cmphex(get64(buf + 8 + 8 * i), ==, c->keys[i]);
    }
    /* READ RESERVATION. */
    r = pr_in(lun, &PR_D, 1, buf, sizeof(buf));
    assert_good(&r);
    if (c->res_type) {
        g_assert_cmpuint(get32(buf + 4), ==, 16);
        g_assert_cmphex(get64(buf + 8), ==, c->res_key);
        g_assert_cmphex(buf[21], ==, resolve(c->res_type, held));
    } else {
        g_assert_cmpuint(get32(buf + 4), ==, 0);
    }
    /* The unit attentions owed, each once. */
    for (int who = HOLDER; who <= OTHER; who++) {
        unsigned ua = c->ua[who];

        if (ua == REL_RO) {
            ua = ro_type(held) ? RES_RELEASED : 0;
        }
        assert_owed(lun, role_it[who], ua);
        assert_owed(lun, role_it[who], 0);
    }
    scsi_lun_free(lun);
}

static void test_service_actions(void)
{
    unsigned ran = 0;

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        const struct pr_case *c = &cases[i];

        switch (c->held) {
        case NONE:
            run_case(c, 0);
            ran++;
            break;
        case ONE:
            for (unsigned t = 0; t < G_N_ELEMENTS(one_types); t++, ran++) {
                run_case(c, one_types[t]);
            }
            break;
        case ALL:
            for (unsigned t = 0; t < G_N_ELEMENTS(all_types); t++, ran++) {
                run_case(c, all_types[t]);
            }
            break;
        }
    }
    g_test_message("%u cases", ran);
}

/* ---- access of non-holders, command by command -------------------------- */

/* Which roles (holder, registrant, unregistered) a command class lets through, per type. */
enum access { FREE, READS, WRITES };
static const uint8_t type_order[] = { 1, 3, 5, 6, 7, 8 };
static const char *const allowed[3][6] = {
    /*           WE     EA     WE-RO  EA-RO  WE-AR  EA-AR */
    [FREE] = { "yyy", "yyy", "yyy", "yyy", "yyy", "yyy" },
    [READS] = { "yyy", "ynn", "yyy", "yyn", "yyy", "yyn" },
    [WRITES] = { "ynn", "ynn", "yyn", "yyn", "yyn", "yyn" },
};

struct access_case {
    const char *name;
    uint8_t cdb[16];
    unsigned len;
    enum access access;
};

static const struct access_case commands[] = {
    /* SPC-4 table 63: allowed under every type. */
    { "INQUIRY", { 0x12, 0, 0, 0, 36, 0 }, 6, FREE },
    { "REPORT LUNS", { 0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 12, FREE },
    { "REQUEST SENSE", { 0x03, 0, 0, 0, 18, 0 }, 6, FREE },
    { "TEST UNIT READY", { 0x00 }, 6, FREE },
    { "LOG SENSE", { 0x4d, 0, 0, 0, 0, 0, 0, 0, 64, 0 }, 10, FREE },
    { "PERSISTENT RESERVE IN", { 0x5e, 0, 0, 0, 0, 0, 0, 0, 64, 0 }, 10, FREE },
    { "REPORT TARGET PORT GROUPS", { 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 12, FREE },
    { "READ MEDIA SERIAL NUMBER", { 0xab, 0x01, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 12, FREE },
    /* SBC-3 table 13. */
    { "READ CAPACITY(10)", { 0x25 }, 10, FREE },
    { "READ CAPACITY(16)", { 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0 }, 16, FREE },
    { "PREVENT ALLOW (allow)", { 0x1e, 0, 0, 0, 0, 0 }, 6, FREE },
    { "START STOP UNIT (start)", { 0x1b, 0, 0, 0, 1, 0 }, 6, FREE },
    /* Allowed under Write Exclusive, a conflict under Exclusive Access. */
    { "READ(6)", { 0x08, 0, 0, 0, 1, 0 }, 6, READS },
    { "READ(10)", { 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10, READS },
    { "READ(12)", { 0xa8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 12, READS },
    { "READ(16)", { 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, READS },
    { "VERIFY(10)", { 0x2f, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10, READS },
    { "VERIFY(12)", { 0xaf, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 12, READS },
    { "VERIFY(16)", { 0x8f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, READS },
    { "MODE SENSE(6)", { 0x1a, 0, 0x3f, 0, 64, 0 }, 6, READS },
    { "MODE SENSE(10)", { 0x5a, 0, 0x3f, 0, 0, 0, 0, 0, 64, 0 }, 10, READS },
    { "REPORT SUPPORTED OPERATION CODES", { 0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 12,
      READS },
    { "GET LBA STATUS", { 0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0 }, 16, READS },
    { "READ BUFFER", { 0x3c, 0x02, 0, 0, 0, 0, 0, 0, 64, 0 }, 10, READS },
    { "RECEIVE DIAGNOSTIC RESULTS", { 0x1c, 0, 0, 0, 64, 0 }, 6, READS },
    { "READ DEFECT DATA(10)", { 0x37, 0, 0, 0, 0, 0, 0, 0, 4, 0 }, 10, READS },
    { "READ DEFECT DATA(12)", { 0xb7, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0 }, 12, READS },
    { "PRE-FETCH(10)", { 0x34, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10, READS },
    { "PRE-FETCH(16)", { 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, READS },
    { "SECURITY PROTOCOL IN", { 0xa2, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 12, READS },
    /* Conflicts for every non-holder but the registrants of RO and AR types. */
    { "WRITE(6)", { 0x0a, 0, 0, 0, 1, 0 }, 6, WRITES },
    { "WRITE(10)", { 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10, WRITES },
    { "WRITE(12)", { 0xaa, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 12, WRITES },
    { "WRITE(16)", { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, WRITES },
    { "WRITE AND VERIFY(10)", { 0x2e, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10, WRITES },
    { "WRITE AND VERIFY(12)", { 0xae, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 12, WRITES },
    { "WRITE AND VERIFY(16)", { 0x8e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16,
      WRITES },
    { "WRITE SAME(10)", { 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0 }, 10, WRITES },
    { "WRITE SAME(16)", { 0x93, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, WRITES },
    { "UNMAP", { 0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0 }, 10, WRITES },
    { "COMPARE AND WRITE", { 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, WRITES },
    { "ORWRITE", { 0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0 }, 16, WRITES },
    { "SYNCHRONIZE CACHE(10)", { 0x35 }, 10, WRITES },
    { "SYNCHRONIZE CACHE(16)", { 0x91 }, 16, WRITES },
    { "MODE SELECT(6)", { 0x15, 0x10, 0, 0, 0, 0 }, 6, WRITES },
    { "MODE SELECT(10)", { 0x55, 0x10, 0, 0, 0, 0, 0, 0, 0, 0 }, 10, WRITES },
    { "LOG SELECT", { 0x4c, 0x02, 0, 0, 0, 0, 0, 0, 0, 0 }, 10, WRITES },
    { "PREVENT ALLOW (prevent)", { 0x1e, 0, 0, 0, 1, 0 }, 6, WRITES },
    { "START STOP UNIT (stop)", { 0x1b, 0, 0, 0, 0, 0 }, 6, WRITES },
    { "FORMAT UNIT", { 0x04 }, 6, WRITES },
    { "WRITE BUFFER", { 0x3b, 0x02 }, 10, WRITES },
    { "SEND DIAGNOSTIC", { 0x1d, 0x04 }, 6, WRITES },
    { "EXTENDED COPY", { 0x83 }, 16, WRITES },
    { "RECEIVE COPY RESULTS", { 0x84, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0 }, 16,
      WRITES },
    { "SANITIZE", { 0x48, 0x01 }, 10, WRITES },
    { "WRITE LONG(10)", { 0x3f }, 10, WRITES },
    { "an opcode nobody assigned", { NO_SUCH_OPCODE }, 16, WRITES },
};

static void test_access_table(void)
{
    unsigned ran = 0;

    for (unsigned t = 0; t < G_N_ELEMENTS(type_order); t++) {
        struct scsi_lun *lun = setup(type_order[t]);

        for (unsigned i = 0; i < G_N_ELEMENTS(commands); i++) {
            const struct access_case *c = &commands[i];

            for (int who = HOLDER; who <= OTHER; who++, ran++) {
                static uint8_t in[4 * BS];
                uint8_t out[4 * BS] = { 0 };
                bool yes = allowed[c->access][t][who] == 'y';
                struct result r = run_as(lun, role_it[who], c->cdb, c->len, out, BS, in,
                                         sizeof(in));

                g_test_message("%s from the %s under type %u: %s", c->name, role_name[who],
                               type_order[t], yes ? "runs" : "conflicts");
                if (yes) {
                    g_assert_cmphex(r.status, !=, CONFLICT);
                } else {
                    g_assert_cmphex(r.status, ==, CONFLICT);
                    g_assert_cmpuint(r.sense_len, ==, 0);
                }
            }
        }
        /* None of it changed the reservation or the registrations. */
        {
            uint8_t buf[32];
            struct result r = pr_in(lun, &PR_D, 1, buf, sizeof(buf));

            assert_good(&r);
            g_assert_cmphex(buf[21], ==, type_order[t]);
            r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
            g_assert_cmpuint(get32(buf + 4), ==, 16);
        }
        scsi_lun_free(lun);
    }
    g_test_message("%u command x type x role cases", ran);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pr-table/service-actions", test_service_actions);
    g_test_add_func("/pr-table/access", test_access_table);
    return g_test_run();
}
