/*
 * SCSI block device emulation (SPC-4 / SBC-3) for one logical unit, the
 * top of the emulation: the LUN object and its identity, the command table
 * (which REPORT SUPPORTED OPERATION CODES describes), and the dispatch that
 * checks what every command shares (CDB length, NACA, a pending unit
 * attention) and hands the command to its family: scsi-disk-rw.c,
 * scsi-disk-provisioning.c, scsi-disk-inquiry.c, scsi-disk-mode.c,
 * scsi-disk-xcopy.c and the others of scsi-disk-ops.h.  Those
 * call only down, into the I/O engine, drain accounting, unit attentions
 * and sense helpers of scsi-disk-int.h, never each other or this file.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <endian.h>
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

/* ---- command table ----------------------------------------------------- */

static int exec_good(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* A command table entry, also what REPORT SUPPORTED OPERATION CODES reports. */
#define F_UA_PASS  0x01   /* executes despite a pending unit attention */
#define F_DISCARD  0x02   /* supported only if the backend can discard */
#define F_MEDIUM   0x04   /* reads or writes blocks: refused after a failed SANITIZE */
#define F_SANITIZE 0x08   /* supported only where the LUN spec says sanitize=on */

struct op_desc {
    uint8_t opcode;
    bool has_sa;
    uint16_t sa;
    uint8_t cdb_len;
    uint8_t flags;
    sd_exec_fn *fn;
    /*
     * CDB usage data (SPC-4 6.35.3): opcode, then every bit of a field the
     * command decodes (acted on, accepted as a no-op, or checked for the
     * only value it takes, e.g. RDPROTECT 0), the service action field
     * holding its value; GROUP NUMBER is accepted and ignored (no grouping
     * function: nothing is collected), as DPO is.  Reserved and obsolete
     * bits are 0 and refused.
     */
    uint8_t usage[16];
};

static sd_exec_fn exec_rsoc;

/* Indexed by opcode; empty slots (fn == NULL) are unsupported opcodes. */
static const struct op_desc sd_op_table[256] = {
    [OP_TEST_UNIT_READY] = { OP_TEST_UNIT_READY, false, 0, 6, 0, exec_good,
      { 0x00, 0, 0, 0, 0, 0x04 } },
    [OP_REQUEST_SENSE] = { OP_REQUEST_SENSE, false, 0, 6, F_UA_PASS, sd_exec_request_sense,
      { 0x03, 0x01, 0, 0, 0xff, 0x04 } },
    [OP_READ_6] = { OP_READ_6, false, 0, 6, F_MEDIUM, sd_exec_read,
      { 0x08, 0x1f, 0xff, 0xff, 0xff, 0x04 } },
    [OP_WRITE_6] = { OP_WRITE_6, false, 0, 6, F_MEDIUM, sd_exec_write,
      { 0x0a, 0x1f, 0xff, 0xff, 0xff, 0x04 } },
    [OP_INQUIRY] = { OP_INQUIRY, false, 0, 6, F_UA_PASS, sd_exec_inquiry,
      { 0x12, 0x01, 0xff, 0xff, 0xff, 0x04 } },   /* CMDDT is obsolete */
    [OP_MODE_SELECT_6] = { OP_MODE_SELECT_6, false, 0, 6, 0, sd_exec_mode_select,
      { 0x15, 0x11, 0, 0, 0xff, 0x04 } },
    [PR_OP_RESERVE_6] = { PR_OP_RESERVE_6, false, 0, 6, 0, sd_exec_reserve_release,
      { 0x16, 0, 0, 0, 0, 0x04 } },
    [PR_OP_RELEASE_6] = { PR_OP_RELEASE_6, false, 0, 6, 0, sd_exec_reserve_release,
      { 0x17, 0, 0, 0, 0, 0x04 } },
    [OP_MODE_SENSE_6] = { OP_MODE_SENSE_6, false, 0, 6, 0, sd_exec_mode_sense,
      { 0x1a, 0x08, 0xff, 0xff, 0xff, 0x04 } },
    [OP_START_STOP_UNIT] = { OP_START_STOP_UNIT, false, 0, 6, 0, sd_exec_start_stop,
      { 0x1b, 0x01, 0, 0, 0xf5, 0x04 } },
    [OP_PREVENT_ALLOW] = { OP_PREVENT_ALLOW, false, 0, 6, 0, exec_good,
      { 0x1e, 0, 0, 0, 0x03, 0x04 } },
    [OP_READ_CAPACITY_10] = { OP_READ_CAPACITY_10, false, 0, 10, 0, sd_exec_read_capacity_10,
      { 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0x04 } },
    [OP_READ_10] = { OP_READ_10, false, 0, 10, F_MEDIUM, sd_exec_read,
      { 0x28, 0xfa, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_WRITE_10] = { OP_WRITE_10, false, 0, 10, F_MEDIUM, sd_exec_write,
      { 0x2a, 0xfa, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_WRITE_VERIFY_10] = { OP_WRITE_VERIFY_10, false, 0, 10, F_MEDIUM, sd_exec_write_verify,
      { 0x2e, 0xf6, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_VERIFY_10] = { OP_VERIFY_10, false, 0, 10, F_MEDIUM, sd_exec_verify,
      { 0x2f, 0xf6, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_PRE_FETCH_10] = { OP_PRE_FETCH_10, false, 0, 10, F_MEDIUM, sd_exec_pre_fetch,
      { 0x34, 0x02, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_SYNC_CACHE_10] = { OP_SYNC_CACHE_10, false, 0, 10, F_MEDIUM, sd_exec_sync_cache,
      { 0x35, 0x06, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_READ_DEFECT_DATA_10] = { OP_READ_DEFECT_DATA_10, false, 0, 10, 0,
      sd_exec_read_defect_data, { 0x37, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [OP_WRITE_SAME_10] = { OP_WRITE_SAME_10, false, 0, 10, F_MEDIUM, sd_exec_write_same,
      { 0x41, 0xfe, 0xff, 0xff, 0xff, 0xff, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_UNMAP] = { OP_UNMAP, false, 0, 10, F_DISCARD | F_MEDIUM, sd_exec_unmap,
      { 0x42, 0x01, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0x04 } },
    [OP_SANITIZE] = { OP_SANITIZE, true, SANITIZE_OVERWRITE, 10, F_SANITIZE,
      sd_exec_sanitize, { 0x48, 0xa1, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [OP_MODE_SELECT_10] = { OP_MODE_SELECT_10, false, 0, 10, 0, sd_exec_mode_select,
      { 0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [PR_OP_RESERVE_10] = { PR_OP_RESERVE_10, false, 0, 10, 0, sd_exec_reserve_release,
      { 0x56, 0x12, 0, 0, 0, 0, 0, 0, 0, 0x04 } },
    [PR_OP_RELEASE_10] = { PR_OP_RELEASE_10, false, 0, 10, 0, sd_exec_reserve_release,
      { 0x57, 0x12, 0, 0, 0, 0, 0, 0, 0, 0x04 } },
    [OP_MODE_SENSE_10] = { OP_MODE_SENSE_10, false, 0, 10, 0, sd_exec_mode_sense,
      { 0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [OP_PR_IN] = { OP_PR_IN, false, 0, 10, 0, sd_exec_pr_in,
                   { 0x5e, 0x1f, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x04 } },
    [OP_PR_OUT] = { OP_PR_OUT, false, 0, 10, 0, sd_exec_pr_out,
                    { 0x5f, 0x1f, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x04 } },
    [OP_EXTENDED_COPY] = { OP_EXTENDED_COPY, true, XCOPY_SA_LID1, 16, 0,
      sd_exec_extended_copy,
      { 0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_RECEIVE_COPY_RESULTS] = { OP_RECEIVE_COPY_RESULTS, true, RCR_SA_COPY_STATUS, 16,
      0, sd_exec_receive_copy_results,
      { 0x84, 0x00, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_READ_16] = { OP_READ_16, false, 0, 16, F_MEDIUM, sd_exec_read,
      { 0x88, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_COMPARE_AND_WRITE] = { OP_COMPARE_AND_WRITE, false, 0, 16, F_MEDIUM,
      sd_exec_compare_and_write,
      { 0x89, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0, 0, 0, 0xff, 0x1f, 0x04 } },
    [OP_WRITE_16] = { OP_WRITE_16, false, 0, 16, F_MEDIUM, sd_exec_write,
      { 0x8a, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_ORWRITE_16] = { OP_ORWRITE_16, false, 0, 16, F_MEDIUM, sd_exec_orwrite,
      { 0x8b, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_WRITE_VERIFY_16] = { OP_WRITE_VERIFY_16, false, 0, 16, F_MEDIUM, sd_exec_write_verify,
      { 0x8e, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_VERIFY_16] = { OP_VERIFY_16, false, 0, 16, F_MEDIUM, sd_exec_verify,
      { 0x8f, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_PRE_FETCH_16] = { OP_PRE_FETCH_16, false, 0, 16, F_MEDIUM, sd_exec_pre_fetch,
      { 0x90, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_SYNC_CACHE_16] = { OP_SYNC_CACHE_16, false, 0, 16, F_MEDIUM, sd_exec_sync_cache,
      { 0x91, 0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_WRITE_SAME_16] = { OP_WRITE_SAME_16, false, 0, 16, F_MEDIUM, sd_exec_write_same,
      { 0x93, 0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_WRITE_ATOMIC_16] = { OP_WRITE_ATOMIC_16, false, 0, 16, F_MEDIUM,
      sd_exec_write_atomic,
      { 0x9c, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_SERVICE_ACTION_IN_16] = { OP_SERVICE_ACTION_IN_16, true, SAI_READ_CAPACITY_16, 16, 0, sd_exec_read_capacity_16,
      { 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_MAINTENANCE_IN] = { OP_MAINTENANCE_IN, true, MI_REPORT_SUPPORTED_OPCODES, 12, 0, exec_rsoc,
      { 0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_READ_12] = { OP_READ_12, false, 0, 12, F_MEDIUM, sd_exec_read,
      { 0xa8, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_WRITE_12] = { OP_WRITE_12, false, 0, 12, F_MEDIUM, sd_exec_write,
      { 0xaa, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_WRITE_VERIFY_12] = { OP_WRITE_VERIFY_12, false, 0, 12, F_MEDIUM, sd_exec_write_verify,
      { 0xae, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_VERIFY_12] = { OP_VERIFY_12, false, 0, 12, F_MEDIUM, sd_exec_verify,
      { 0xaf, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x04 } },
    [OP_READ_DEFECT_DATA_12] = { OP_READ_DEFECT_DATA_12, false, 0, 12, 0,
      sd_exec_read_defect_data,
      { 0xb7, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
};

/* Further service actions of the opcodes above that have them (the table holds one each). */
static const struct op_desc sd_sa_table[] = {
    { OP_SERVICE_ACTION_IN_16, true, SAI_GET_LBA_STATUS, 16, F_MEDIUM,
      sd_exec_get_lba_status,
      { 0x9e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    /* The LIST IDENTIFIER names no copy here: taken, and ignored, rather than refused. */
    { OP_RECEIVE_COPY_RESULTS, true, RCR_SA_OPERATING_PARAMETERS, 16, 0,
      sd_exec_receive_copy_results,
      { 0x84, 0x03, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_SANITIZE, true, SANITIZE_BLOCK_ERASE, 10, F_SANITIZE, sd_exec_sanitize,
      { 0x48, 0xa2, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    { OP_SANITIZE, true, SANITIZE_EXIT_FAILURE_MODE, 10, F_SANITIZE,
      sd_exec_sanitize, { 0x48, 0x9f, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
};

static bool sd_opcode_has_sa(uint8_t opcode)
{
    return opcode == OP_SERVICE_ACTION_IN_16 || opcode == OP_MAINTENANCE_IN ||
           opcode == OP_EXTENDED_COPY || opcode == OP_RECEIVE_COPY_RESULTS ||
           opcode == OP_SANITIZE;
}

static bool sd_op_supported(const struct scsi_lun *lun, const struct op_desc *d)
{
    return (!(d->flags & F_DISCARD) || lun->be->can_discard) &&
           (!(d->flags & F_SANITIZE) || lun->be->allow_sanitize);
}

static const struct op_desc *sd_find_op(uint8_t opcode, uint16_t sa)
{
    const struct op_desc *d = &sd_op_table[opcode];

    if (!d->fn) {
        return NULL;
    }
    if (d->has_sa && d->sa != sa) {
        for (unsigned i = 0; i < G_N_ELEMENTS(sd_sa_table); i++) {
            if (sd_sa_table[i].opcode == opcode && sd_sa_table[i].sa == sa) {
                return &sd_sa_table[i];
            }
        }
        return NULL;
    }
    return d;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

/* Command timeouts descriptor: 30 s recommended, no nominal figure. */
static uint8_t *put_timeouts(uint8_t *p)
{
    memset(p, 0, 12);
    st16(p, 10);
    st32(p + 8, 30);
    return p + 12;
}

static int exec_rsoc(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool rctd = cdb[2] & 0x80;
    unsigned options = cdb[2] & 0x07;
    uint8_t req_op = cdb[3];
    uint16_t req_sa = ld16(cdb + 4);
    uint32_t alloc = ld32(cdb + 6);
    uint8_t b[4 + 64 * 20];   /* up to 64 commands, with timeouts */
    uint8_t *p = b;
    const struct op_desc *d = NULL;

    if (options == 0) {
        p += 4;
        for (unsigned i = 0; i < G_N_ELEMENTS(sd_op_table) + G_N_ELEMENTS(sd_sa_table); i++) {
            d = i < G_N_ELEMENTS(sd_op_table) ? &sd_op_table[i]
                                              : &sd_sa_table[i - G_N_ELEMENTS(sd_op_table)];
            if (!d->fn || !sd_op_supported(lun, d)) {
                continue;
            }
            g_assert(p + 20 <= b + sizeof(b));   /* the table outgrew b */
            memset(p, 0, 8);
            p[0] = d->opcode;
            st16(p + 2, d->sa);
            p[5] = (rctd ? 0x02 : 0) | (d->has_sa ? 0x01 : 0);
            st16(p + 6, d->cdb_len);
            p += 8;
            if (rctd) {
                p = put_timeouts(p);
            }
        }
        st32(b, (uint32_t)(p - b - 4));
        return sd_reply(cmd, b, (size_t)(p - b), alloc);
    }
    switch (options) {
    case 1:     /* by opcode: wrong for commands with service actions */
        if (sd_opcode_has_sa(req_op)) {
            return invalid_cdb(cmd, 2, 2);
        }
        d = sd_find_op(req_op, 0);
        break;
    case 2:     /* by opcode and service action */
        if (!sd_opcode_has_sa(req_op)) {
            return invalid_cdb(cmd, 2, 2);
        }
        d = sd_find_op(req_op, req_sa);
        break;
    case 3:     /* either, as the opcode says */
        d = sd_find_op(req_op, sd_opcode_has_sa(req_op) ? req_sa : 0);
        break;
    default:
        return invalid_cdb(cmd, 2, 2);
    }
    if (d && !sd_op_supported(lun, d)) {
        d = NULL;
    }
    memset(b, 0, 4);
    b[1] = (rctd ? 0x80 : 0) | (d ? 0x03 : 0x01);   /* SUPPORT: 011b / 001b */
    p = b + 4;
    if (d) {
        st16(b + 2, d->cdb_len);
        memcpy(p, d->usage, d->cdb_len);
        p += d->cdb_len;
        if (rctd) {
            p = put_timeouts(p);
        }
    }
    return sd_reply(cmd, b, (size_t)(p - b), alloc);
}

/* ---- dispatch ---------------------------------------------------------- */

/*
 * True when no bit outside d's usage data is set in bytes 1 .. cdb_len-2
 * of the CDB, tested sixteen bytes at a time: the byte loop in dispatch
 * was a tenth of a polled READ's instructions.  False also when the
 * caller's buffer is too short for the wide reads; dispatch then walks the
 * bytes, which it does anyway to name the first bad bit.
 */
static inline bool cdb_reserved_clear(const struct scsi_cmd *cmd, const struct op_desc *d)
{
    uint64_t c[2], u[2], keep[2];
    unsigned last = d->cdb_len - 1u;   /* the control byte, checked on its own */

    G_STATIC_ASSERT(sizeof(d->usage) == sizeof(c));
    if (cmd->cdb_len < sizeof(c) || d->cdb_len < 2 || d->cdb_len > sizeof(c)) {
        return false;
    }
    memcpy(c, cmd->cdb, sizeof(c));
    memcpy(u, d->usage, sizeof(u));
    /* Byte k of the CDB is byte k % 8 of word k / 8 once read little-endian. */
    keep[0] = last >= 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * last)) - 1;
    keep[1] = last <= 8 ? 0 : (UINT64_C(1) << (8 * (last - 8))) - 1;
    keep[0] &= ~UINT64_C(0xff);        /* the opcode */
    return !(((le64toh(c[0]) & ~le64toh(u[0])) & keep[0]) |
             ((le64toh(c[1]) & ~le64toh(u[1])) & keep[1]));
}

static int dispatch(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const struct op_desc *d;
    uint8_t opcode;
    int ua;

    if (cmd->cdb_len == 0 || !cmd->cdb) {
        return sd_sense_done(cmd, SCSI_SC_INVALID_OPCODE);
    }
    opcode = cmd->cdb[0];

    /*
     * SPC-4 5.14: INQUIRY, REPORT LUNS and REQUEST SENSE do not see the UA;
     * every other command, even an unsupported one, reports it first.
     */
    if (sd_ua_maybe_pending(lun, cmd) &&
        !(sd_op_table[opcode].flags & F_UA_PASS) && opcode != OP_REPORT_LUNS &&
        (ua = sd_take_ua(lun, cmd)) >= 0) {
        return sd_sense_done(cmd, sd_ua_sense[ua]);
    }
    if (scsi_pr_restricts(lun->pr)) {
        static const struct scsi_it_id own = { "", "", 0 };
        enum scsi_sc pr_ua;

        switch (scsi_pr_check(lun->pr, cmd->it.initiator ? &cmd->it : &own, cmd->cdb,
                              cmd->cdb_len, &pr_ua)) {
        case SCSI_PR_CONFLICT:
            cmd->status = SAM_STAT_RESERVATION_CONFLICT;
            return EXEC_DONE;
        case SCSI_PR_UA:
            return sd_sense_done(cmd, pr_ua);
        case SCSI_PR_ALLOW:
            break;
        }
    }

    if (sd_opcode_has_sa(opcode)) {
        /* A SANITIZE nobody opted in to is not there at all, not a bad service action. */
        if (opcode == OP_SANITIZE && !lun->be->allow_sanitize) {
            return sd_sense_done(cmd, SCSI_SC_INVALID_OPCODE);
        }
        if (cmd->cdb_len < 2 || !(d = sd_find_op(opcode, cmd->cdb[1] & 0x1f))) {
            return invalid_cdb(cmd, 1, 4);   /* unsupported service action */
        }
    } else {
        d = sd_find_op(opcode, 0);
    }
    if (!d || !sd_op_supported(lun, d)) {
        /* REPORT LUNS lands here only if the transport did not intercept it. */
        g_debug("%s: unsupported opcode 0x%02x", lun->name, opcode);
        return sd_sense_done(cmd, SCSI_SC_INVALID_OPCODE);
    }
    if (cmd->cdb_len < d->cdb_len) {
        return invalid_cdb(cmd, cmd->cdb_len - 1, 7);
    }
    if (cmd->cdb[d->cdb_len - 1] & 0x04) {
        return invalid_cdb(cmd, d->cdb_len - 1, 2);   /* NACA: not supported */
    }
    /*
     * Every CDB bit outside the usage data is refused with a field pointer
     * to it (SPC-4 leaves checking reserved bits to the device server), so
     * a bit we would silently not honour never passes.  Byte 0 is the
     * opcode, the last the control byte (checked above).  Before the
     * command's own checks: a reserved bit is reported as itself.
     */
    if (!cdb_reserved_clear(cmd, d)) {
        for (unsigned i = 1; i + 1 < d->cdb_len; i++) {
            uint8_t bad = cmd->cdb[i] & ~d->usage[i];

            if (bad) {
                return invalid_cdb(cmd, i, 31 - __builtin_clz(bad));
            }
        }
    }
    /*
     * One load while no SANITIZE has run; the gate refuses what must wait
     * for it.  After the CDB checks: a malformed CDB is refused as such
     * whatever the LUN is doing.
     */
    if (sd_sanitize_state(lun) != SD_SANITIZE_IDLE) {
        int r = sd_sanitize_gate(lun, cmd, d->flags & F_UA_PASS, d->flags & F_MEDIUM);

        if (r >= 0) {
            return r;
        }
    }
    return d->fn(lun, cmd);
}

void scsi_lun_stats(struct scsi_lun *lun, struct io_stats_snapshot *out)
{
    io_stats_read(&lun->stats, out);
}

static void exec_admitted(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    if (dispatch(lun, cmd) == EXEC_DONE) {
        sd_cmd_finish(cmd);
    }
    /* Otherwise the backend completion finishes cmd, perhaps already has. */
}

void scsi_lun_exec(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    enum io_class cls = scsi_cdb_class(cmd->cdb, cmd->cdb_len);

    sd_cmd_begin(lun, cmd, cls);
    if (sd_qos_admit(lun, cmd, cls, exec_admitted)) {
        exec_admitted(lun, cmd);
    }
}

/* ---- life cycle -------------------------------------------------------- */

/* FNV-1a: stable across runs, so a LUN keeps its identifiers. */
static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* Copies src as printable ASCII (VPD pages must be), at most max chars. */
static void copy_ascii(char *dst, const char *src, size_t max)
{
    size_t i;

    for (i = 0; i < max && src[i]; i++) {
        dst[i] = g_ascii_isprint(src[i]) ? src[i] : '_';
    }
    dst[i] = '\0';
}

/* Takes vendor and product from the device behind a pass-through backend. */
static void inherit_identity(struct scsi_lun *lun)
{
    uint8_t b[96] = { 0 };
    char field[17];
    int n = lun->be->ops->passthrough_inquiry(lun->be, b, sizeof(b));

    if (n < 32) {
        g_message("%s: no INQUIRY data from %s (%s); using our own identity", lun->name,
                  lun->be->name, n < 0 ? g_strerror(-n) : "too short");
        return;
    }
    memcpy(field, b + 8, 8);
    field[8] = '\0';
    g_strchomp(field);
    copy_ascii(lun->vendor, field, sizeof(lun->vendor) - 1);
    memcpy(field, b + 16, 16);
    field[16] = '\0';
    g_strchomp(field);
    copy_ascii(lun->product, field, sizeof(lun->product) - 1);
}

struct scsi_lun *scsi_lun_new(struct lun_backend *be, const char *name,
                              const struct scsi_lun_info *info, GError **err)
{
    struct scsi_lun *lun;
    uint64_t h;

    /* Geometry the SCSI layer can describe: 512..4096-byte blocks, >= 1 block. */
    if (be->block_size < 512 || be->block_size > 4096 ||
        (be->block_size & (be->block_size - 1)) || be->size < be->block_size) {
        vs_error_set(err, -EINVAL, "cannot serve %" PRIu64 " bytes in %" PRIu32 "-byte blocks "
                     "as a SCSI disk", be->size, be->block_size);
        backend_close(be);
        return NULL;
    }
    lun = g_new0(struct scsi_lun, 1);
    lun->be = be;
    lun->name = g_strdup(name ? name : be->name);
    log_limit_init(&lun->log_limit, lun->name, LOG_LIMIT_BURST, LOG_LIMIT_PER_SEC);
    lun->bs = be->block_size;
    lun->nb_blocks = be->size / be->block_size;
    pthread_mutex_init(&lun->lock, NULL);
    pthread_cond_init(&lun->drain_cond, NULL);
    lun->pr = scsi_pr_new(lun->name, &lun->log_limit);
    sd_inflight_init(lun);
    atomic_init(&lun->wce, be->write_cache);
    atomic_init(&lun->sanitize_state, SD_SANITIZE_IDLE);
    atomic_init(&lun->sanitize_progress, 0);
    atomic_init(&lun->sanitize_ause, false);
    atomic_init(&lun->ua_events, 0);
    for (unsigned i = 0; i < SCSI_UA_COUNT; i++) {
        atomic_init(&lun->ua_gen[i], 0);
    }
    scsi_ua_init(&lun->own_ua, lun);
    io_stats_init(&lun->stats);
    sd_qos_init(lun);
    sd_range_init(lun);

    copy_ascii(lun->vendor, "VHOSTSCS", sizeof(lun->vendor) - 1);
    if (be->ops && be->ops->passthrough_inquiry) {
        inherit_identity(lun);
    }
    if (info && info->vendor) {
        copy_ascii(lun->vendor, info->vendor, sizeof(lun->vendor) - 1);
    }
    if (info && info->product) {
        copy_ascii(lun->product, info->product, sizeof(lun->product) - 1);
    } else if (!lun->product[0]) {
        g_autofree char *up = g_ascii_strup(be->ops && be->ops->name ? be->ops->name : "virtual", -1);
        g_autofree char *prod = g_strdup_printf("%s DISK", up);

        copy_ascii(lun->product, prod, sizeof(lun->product) - 1);
    }
    if (info && info->serial && info->serial[0]) {
        copy_ascii(lun->serial, info->serial, sizeof(lun->serial) - 1);
    } else {
        g_autofree char *s = g_strdup_printf("VHS%013" PRIx64,
                                             (uint64_t)(fnv1a(0xcbf29ce484222325ULL, lun->name) &
                                                        0xfffffffffffffULL));

        copy_ascii(lun->serial, s, sizeof(lun->serial) - 1);
    }
    if (info && info->naa_id) {
        h = info->naa_id;
    } else {
        h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ULL, lun->vendor), lun->product), lun->serial);
    }
    lun->naa = 0x5ULL << 60 | (h & ((1ULL << 60) - 1));
    return lun;
}

void scsi_lun_free(struct scsi_lun *lun)
{
    if (!lun) {
        return;
    }
    if (scsi_lun_inflight(lun)) {
        g_warning("%s: freed with %u commands in flight; draining", lun->name,
                  scsi_lun_inflight(lun));
        sd_drain_sync(lun);
    }
    backend_close(lun->be);
    scsi_pr_free(lun->pr);
    pthread_mutex_destroy(&lun->lock);
    pthread_cond_destroy(&lun->drain_cond);
    io_stats_destroy(&lun->stats);
    sd_qos_free(lun);
    sd_range_free(lun);
    sd_inflight_free(lun);
    sd_xcopy_free(lun);
    log_limit_end(&lun->log_limit);
    g_free(lun->name);
    g_free(lun);
}

int scsi_lun_resize(struct scsi_lun *lun, uint64_t size, GError **err)
{
    int ret = backend_resize(lun->be, size, err);

    if (ret < 0) {
        return ret;
    }
    if (backend_size(lun->be) / lun->bs == sd_nb_blocks(lun)) {
        return 0;
    }
    /* The backend takes the new blocks first, so no command sees them early. */
    __atomic_store_n(&lun->nb_blocks, backend_size(lun->be) / lun->bs, __ATOMIC_RELAXED);
    scsi_lun_set_ua(lun, SCSI_UA_CAPACITY_CHANGED);
    g_message("%s: %" PRIu64 " blocks of %" PRIu32 " bytes", lun->name, sd_nb_blocks(lun),
              lun->bs);
    return 0;
}

struct lun_backend *scsi_lun_backend(struct scsi_lun *lun)
{
    return lun->be;
}

const char *scsi_lun_name(const struct scsi_lun *lun)
{
    return lun->name;
}

uint64_t scsi_lun_naa(const struct scsi_lun *lun)
{
    return lun->naa;
}
