/*
 * REGISTER AND MOVE and the parameter-list flags of PERSISTENT RESERVE
 * OUT (hw/scsi/scsi-disk-pr.c, scsi-pr.c): the holder moves its
 * reservation, type and all, to the nexus an iSCSI (format 00b or 01b) or
 * SAS TransportID names on its own target, registering it with the
 * service action key and, with UNREG, leaving itself; what may not move
 * (not the holder, no reservation, an all-registrants one, to itself) and
 * each malformed list field, refused with its field pointer.  SPEC_I_PT
 * and ALL_TG_PT are refused where SPC-4 gives them a meaning we do not
 * offer, and ignored where it gives them none; a move with APTPL is in
 * the state file a restart reads.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "scsi-cmd.h"
#include "scsi-disk.h"
#include "scsi-disk-fixture.h"
#include "scsi-pr-fixture.h"

#define MOVE 7
static const struct scsi_it_id E = { "iqn.2026-12.test:e", "ctrl", 1 };

/* An iSCSI TransportID of format (0 or 1) for name into t; its length. */
static unsigned iscsi_tid(uint8_t *t, const char *name, unsigned format)
{
    g_autofree char *s = format ? g_strdup_printf("%s,i,0x00023d000001", name) : g_strdup(name);
    unsigned n = (unsigned)strlen(s) + 1, len = (n + 3) & ~3u;

    if (len < 20) {
        len = 20;
    }
    memset(t, 0, 4 + len);
    t[0] = (uint8_t)(format << 6 | 0x05);
    t[2] = (uint8_t)(len >> 8);
    t[3] = (uint8_t)len;
    memcpy(t + 4, s, n - 1);
    return 4 + len;
}

/* REGISTER AND MOVE from it: keys, UNREG/APTPL (byte 17), rtpi, a TransportID of tid_len. */
static struct result move(struct scsi_lun *lun, const struct scsi_it_id *it, uint64_t key,
                          uint64_t sa_key, uint8_t flags, uint16_t rtpi, const uint8_t *tid,
                          unsigned tid_len, unsigned claimed_len)
{
    uint8_t p[24 + 256] = { 0 };
    unsigned plen = 24 + tid_len;
    uint8_t cdb[10] = { 0x5f, MOVE, 0, 0, 0, (uint8_t)(plen >> 24), (uint8_t)(plen >> 16),
                        (uint8_t)(plen >> 8), (uint8_t)plen, 0 };

    put64(p, key);
    put64(p + 8, sa_key);
    p[17] = flags;
    p[18] = (uint8_t)(rtpi >> 8);
    p[19] = (uint8_t)rtpi;
    p[20] = (uint8_t)(claimed_len >> 24);
    p[21] = (uint8_t)(claimed_len >> 16);
    p[22] = (uint8_t)(claimed_len >> 8);
    p[23] = (uint8_t)claimed_len;
    memcpy(p + 24, tid, tid_len);
    return run_as(lun, it, cdb, sizeof(cdb), p, plen, NULL, 0);
}

/* A and B registered, A holding type. */
static struct scsi_lun *held(uint8_t type)
{
    struct scsi_lun *lun = ram_lun();

    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_B, 0, 0, 0, 0xb), ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, type, 0xa, 0), ==, GOOD);
    return lun;
}

static void assert_holder(struct scsi_lun *lun, uint64_t key, uint8_t type)
{
    uint8_t buf[32];
    struct result r = pr_in(lun, &PR_D, 1, buf, sizeof(buf));

    assert_good(&r);
    g_assert_cmpuint(get32(buf + 4), ==, 16);
    g_assert_cmphex(get64(buf + 8), ==, key);
    g_assert_cmpuint(buf[21], ==, type);
}

static void test_move_iscsi(void)
{
    for (unsigned format = 0; format <= 1; format++) {
        struct scsi_lun *lun = held(5);
        uint8_t tid[256], buf[64];
        unsigned n = iscsi_tid(tid, E.initiator, format);
        struct result r;

        g_test_message("iSCSI TransportID format %u", format);
        r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
        g_assert_cmpuint(get32(buf), ==, 2);
        r = move(lun, &PR_A, 0xa, 0xe, 0, 1, tid, n, n);
        assert_good(&r);
        /* E holds it now, of the same type, under the key it was given. */
        assert_holder(lun, 0xe, 5);
        r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
        g_assert_cmpuint(get32(buf), ==, 3);
        g_assert_cmpuint(get32(buf + 4), ==, 24);                 /* A, B and E */
        g_assert_cmpuint(write10(lun, &E), ==, GOOD);
        g_assert_cmpuint(write10(lun, &PR_A), ==, GOOD);          /* still a registrant */
        g_assert_cmpuint(write10(lun, &PR_D), ==, CONFLICT);
        /* E moves it on to B (already registered: B's key becomes the new one), leaving. */
        n = iscsi_tid(tid, PR_B.initiator, 0);
        r = move(lun, &E, 0xe, 0xbb, 0x02, 1, tid, n, n);
        assert_good(&r);
        assert_holder(lun, 0xbb, 5);
        r = pr_in(lun, &PR_D, 0, buf, sizeof(buf));
        g_assert_cmpuint(get32(buf + 4), ==, 16);                 /* A and B: E is gone */
        g_assert_cmpuint(write10(lun, &E), ==, CONFLICT);
        scsi_lun_free(lun);
    }
}

static void test_move_sas(void)
{
    struct scsi_lun *lun = held(3);
    uint8_t tid[24] = { 0x06 };

    put64(tid + 4, 0x5001405000000003ull);                 /* C's naa. name, port 2 */
    {
        struct result r = move(lun, &PR_A, 0xa, 0xc, 0, 2, tid, 24, 24);

        assert_good(&r);
    }
    assert_holder(lun, 0xc, 3);
    g_assert_cmpuint(read10(lun, &PR_C), ==, GOOD);
    g_assert_cmpuint(read10(lun, &PR_A), ==, CONFLICT);    /* Exclusive Access */
    scsi_lun_free(lun);
}

static void test_move_refused(void)
{
    uint8_t tid[256], bad[256];
    unsigned n = iscsi_tid(tid, E.initiator, 0);
    struct scsi_lun *lun;
    struct result r;

    /* Nothing to move: INVALID FIELD IN CDB. */
    lun = ram_lun();
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, tid, n, n);
    assert_invalid_cdb(&r);
    scsi_lun_free(lun);
    /* An all-registrants reservation has no one holder to move. */
    lun = held(7);
    g_assert_cmpuint(move(lun, &PR_A, 0xa, 0xe, 0, 1, tid, n, n).status, ==, CONFLICT);
    scsi_lun_free(lun);

    lun = held(5);
    /* Only the holder, under its key. */
    g_assert_cmpuint(move(lun, &PR_B, 0xb, 0xe, 0, 1, tid, n, n).status, ==, CONFLICT);
    g_assert_cmpuint(move(lun, &PR_D, 0, 0xe, 0, 1, tid, n, n).status, ==, CONFLICT);
    g_assert_cmpuint(move(lun, &PR_A, 0x9, 0xe, 0, 1, tid, n, n).status, ==, CONFLICT);
    /* The parameter list, field by field. */
    r = move(lun, &PR_A, 0xa, 0, 0, 1, tid, n, n);
    assert_param_field(&r, 8, -1);                               /* key 0 */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, tid, n, n + 4);
    assert_param_field(&r, 20, -1);                              /* length disagrees */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 0, tid, n, n);
    assert_param_field(&r, 18, -1);                              /* port 0 */
    r = move(lun, &PR_A, 0xa, 0xe, 0x01, 1, tid, n, n);
    assert_param_field(&r, 17, 0);                               /* APTPL, no state file */
    memcpy(bad, tid, n);
    bad[0] = 0x00;                                               /* Fibre Channel */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, bad, n, n);
    assert_param_field(&r, 24, 3);
    bad[0] = 0x85;                                               /* iSCSI, format 10b */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, bad, n, n);
    assert_param_field(&r, 24, 7);
    memcpy(bad, tid, n);
    memset(bad + 4, 'x', n - 4);                                 /* no NUL */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, bad, n, n);
    assert_param_field(&r, 28, -1);
    memcpy(bad, tid, n);
    bad[3] += 1;                                                 /* not a multiple of 4 */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, bad, n, n);
    assert_param_field(&r, 26, -1);
    n = iscsi_tid(bad, "", 1);                                   /* ",i,0x" with no name */
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, bad, n, n);
    assert_param_field(&r, 28, -1);
    /* To itself. */
    n = iscsi_tid(bad, PR_A.initiator, 0);
    r = move(lun, &PR_A, 0xa, 0xe, 0, 1, bad, n, n);
    assert_param_field(&r, 24, -1);
    /* None of it moved anything. */
    assert_holder(lun, 0xa, 5);
    scsi_lun_free(lun);
}

/* With APTPL in its byte 17, a move is kept in the state file like any change. */
static void test_move_persisted(void)
{
    g_autofree char *dir = g_dir_make_tmp("pr-move-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "lun.pr", NULL);
    struct scsi_lun *lun = ram_lun();
    uint8_t tid[256];
    unsigned n = iscsi_tid(tid, E.initiator, 0);
    struct result r;

    g_assert_cmpint(scsi_lun_set_pr_file(lun, path, NULL), ==, 0);
    g_assert_cmpuint(pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, 0x01).status, ==, GOOD);
    g_assert_cmpuint(pr_out(lun, &PR_A, 1, 5, 0xa, 0), ==, GOOD);
    r = move(lun, &PR_A, 0xa, 0xe, 0x03, 1, tid, n, n);       /* UNREG, APTPL */
    assert_good(&r);
    scsi_lun_free(lun);
    lun = ram_lun();
    g_assert_cmpint(scsi_lun_set_pr_file(lun, path, NULL), ==, 0);
    assert_holder(lun, 0xe, 5);
    g_assert_cmpuint(write10(lun, &E), ==, GOOD);
    g_assert_cmpuint(write10(lun, &PR_A), ==, CONFLICT);      /* it left */
    scsi_lun_free(lun);
    g_assert_cmpint(unlink(path), ==, 0);
    g_assert_cmpint(rmdir(dir), ==, 0);
}

static void test_flags(void)
{
    struct scsi_lun *lun = ram_lun();
    uint8_t cdb[10] = { 0x5f, 0, 0, 0, 0, 0, 0, 0, 28, 0 };
    uint8_t p[28] = { 0 };
    struct result r;

    /* SPEC_I_PT with its TransportIDs: not offered (SIP_C 0), refused as a field, not a length. */
    put64(p + 8, 0xa);
    p[20] = 0x08;
    r = run_as(lun, &PR_A, cdb, sizeof(cdb), p, sizeof(p), NULL, 0);
    assert_param_field(&r, 20, 3);
    /* ALL_TG_PT on REGISTER: not offered (ATP_C 0). */
    r = pr_out_flags(lun, &PR_A, 0, 0, 0, 0xa, 0x04);
    assert_param_field(&r, 20, 2);
    g_assert_cmpuint(pr_out(lun, &PR_A, 0, 0, 0, 0xa), ==, GOOD);
    /* ... and meaningless to RESERVE, which ignores it. */
    r = pr_out_flags(lun, &PR_A, 1, 1, 0xa, 0, 0x04);
    assert_good(&r);
    /* SPEC_I_PT on anything but REGISTER is refused too. */
    r = pr_out_flags(lun, &PR_A, 2, 1, 0xa, 0, 0x08);
    assert_param_field(&r, 20, 3);
    scsi_lun_free(lun);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/pr-move/iscsi", test_move_iscsi);
    g_test_add_func("/pr-move/sas", test_move_sas);
    g_test_add_func("/pr-move/refused", test_move_refused);
    g_test_add_func("/pr-move/persisted", test_move_persisted);
    g_test_add_func("/pr-move/flags", test_flags);
    return g_test_run();
}
