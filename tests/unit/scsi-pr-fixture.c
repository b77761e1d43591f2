/*
 * The persistent-reservation tests' harness (scsi-pr-fixture.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "scsi-pr-fixture.h"

const struct scsi_it_id PR_A = { "iqn.2026-12.test:a", "ctrl", 1 };
const struct scsi_it_id PR_B = { "iqn.2026-12.test:b", "ctrl", 1 };
const struct scsi_it_id PR_C = { "naa.5001405000000003", "ctrl", 2 };
const struct scsi_it_id PR_D = { "iqn.2026-12.test:observer", "ctrl", 1 };

struct result run_as(struct scsi_lun *lun, const struct scsi_it_id *it, const uint8_t *cdb,
                     unsigned len, const void *out, size_t out_len, void *in, size_t in_len)
{
    struct pending_cmd p;

    memset(&p, 0, sizeof(p));
    p.cmd = (struct scsi_cmd) { .cdb = cdb, .cdb_len = len, .complete = count_completion,
                                .opaque = &p, .it = *it };
    if (out) {
        p.out = (struct iovec) { (void *)out, out_len };
        p.cmd.data_out = &p.out;
        p.cmd.data_out_cnt = 1;
    }
    if (in) {
        p.in = (struct iovec) { in, in_len };
        p.cmd.data_in = &p.in;
        p.cmd.data_in_cnt = 1;
    }
    scsi_lun_exec(lun, &p.cmd);
    g_assert_cmpint(p.completions, ==, 1);
    return result_of(&p.cmd);
}

void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8) {
        p[i] = (uint8_t)v;
    }
}

uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct result pr_out_flags(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t sa,
                           uint8_t type, uint64_t key, uint64_t sa_key, uint8_t flags)
{
    uint8_t cdb[10] = { 0x5f, sa, type, 0, 0, 0, 0, 0, 24, 0 };
    uint8_t p[24] = { 0 };

    put64(p, key);
    put64(p + 8, sa_key);
    p[20] = flags;
    return run_as(lun, it, cdb, sizeof(cdb), p, sizeof(p), NULL, 0);
}

uint8_t pr_out(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t sa, uint8_t type,
               uint64_t key, uint64_t sa_key)
{
    return pr_out_flags(lun, it, sa, type, key, sa_key, 0).status;
}

struct result pr_in(struct scsi_lun *lun, const struct scsi_it_id *it, uint8_t sa,
                    uint8_t *buf, uint16_t len)
{
    uint8_t cdb[10] = { 0x5e, sa, 0, 0, 0, 0, 0, (uint8_t)(len >> 8), (uint8_t)len, 0 };

    memset(buf, 0xee, len);
    return run_as(lun, it, cdb, sizeof(cdb), NULL, 0, buf, len);
}

uint8_t read10(struct scsi_lun *lun, const struct scsi_it_id *it)
{
    uint8_t cdb[10] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
    uint8_t buf[BS];

    return run_as(lun, it, cdb, sizeof(cdb), NULL, 0, buf, sizeof(buf)).status;
}

uint8_t write10(struct scsi_lun *lun, const struct scsi_it_id *it)
{
    uint8_t cdb[10] = { 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
    uint8_t buf[BS] = { 0 };

    return run_as(lun, it, cdb, sizeof(cdb), buf, sizeof(buf), NULL, 0).status;
}

uint8_t tur(struct scsi_lun *lun, const struct scsi_it_id *it)
{
    uint8_t cdb[6] = { 0 };

    return run_as(lun, it, cdb, sizeof(cdb), NULL, 0, NULL, 0).status;
}

void assert_owed(struct scsi_lun *lun, const struct scsi_it_id *it, unsigned code)
{
    uint8_t cdb[6] = { 0 };
    struct result r = run_as(lun, it, cdb, sizeof(cdb), NULL, 0, NULL, 0);

    if (code) {
        assert_sense(&r, SCSI_SENSE_UNIT_ATTENTION, code);
    } else {
        assert_good(&r);
    }
}

void assert_param_field(const struct result *r, unsigned byte, int bit)
{
    struct sc_sense s = assert_sense(r, SCSI_SENSE_ILLEGAL_REQUEST, 0x2600);

    g_assert_true(s.sksv);
    g_assert_false(s.in_cdb);
    g_assert_cmpuint(s.field, ==, byte);
    g_assert_cmpint(s.bit_valid ? (int)s.bit : -1, ==, bit);
}
