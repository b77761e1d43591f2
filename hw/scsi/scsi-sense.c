/*
 * Sense data and CDB fields for the SCSI disk emulation and the target:
 * the table of named sense conditions (the key, ASC and ASCQ of each, and
 * the condition of each unit attention), fixed-format sense building, the
 * field-pointer answers, replies truncated to the allocation length, and
 * the LBA / transfer length decoding shared by the block commands.  The
 * bottom layer: it calls nothing in the disk emulation.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "iov.h"
#include "scsi-sense.h"

struct sense_code {
    uint8_t key, asc, ascq;
};

/* The named conditions of scsi-sense.h. */
static const struct sense_code sense_table[SCSI_SC_COUNT] = {
    [SCSI_SC_NO_SENSE] = { SENSE_NO_SENSE, 0x00, 0x00 },
    [SCSI_SC_LUN_NOT_READY] = { SENSE_NOT_READY, 0x04, 0x00 },
    [SCSI_SC_SANITIZE_IN_PROGRESS] = { SENSE_NOT_READY, 0x04, 0x1b },
    [SCSI_SC_WRITE_ERROR] = { SENSE_MEDIUM_ERROR, 0x0c, 0x00 },
    [SCSI_SC_UNRECOVERED_READ_ERROR] = { SENSE_MEDIUM_ERROR, 0x11, 0x00 },
    [SCSI_SC_SANITIZE_FAILED] = { SENSE_MEDIUM_ERROR, 0x31, 0x03 },
    [SCSI_SC_INTERNAL_TARGET_FAILURE] = { SENSE_HARDWARE_ERROR, 0x44, 0x00 },
    [SCSI_SC_PARAM_LIST_LENGTH_ERROR] = { SENSE_ILLEGAL_REQUEST, 0x1a, 0x00 },
    [SCSI_SC_INVALID_OPCODE] = { SENSE_ILLEGAL_REQUEST, 0x20, 0x00 },
    [SCSI_SC_LBA_OUT_OF_RANGE] = { SENSE_ILLEGAL_REQUEST, 0x21, 0x00 },
    [SCSI_SC_INVALID_FIELD_IN_CDB] = { SENSE_ILLEGAL_REQUEST, 0x24, 0x00 },
    [SCSI_SC_LUN_NOT_SUPPORTED] = { SENSE_ILLEGAL_REQUEST, 0x25, 0x00 },
    [SCSI_SC_INVALID_FIELD_IN_PARAM_LIST] = { SENSE_ILLEGAL_REQUEST, 0x26, 0x00 },
    [SCSI_SC_INVALID_RELEASE_OF_PR] = { SENSE_ILLEGAL_REQUEST, 0x26, 0x04 },
    [SCSI_SC_TOO_MANY_TARGET_DESCS] = { SENSE_ILLEGAL_REQUEST, 0x26, 0x06 },
    [SCSI_SC_TOO_MANY_SEGMENT_DESCS] = { SENSE_ILLEGAL_REQUEST, 0x26, 0x08 },
    [SCSI_SC_UNSUPPORTED_SEGMENT_DESC] = { SENSE_ILLEGAL_REQUEST, 0x26, 0x09 },
    [SCSI_SC_UNSUPPORTED_TARGET_DESC] = { SENSE_ILLEGAL_REQUEST, 0x26, 0x07 },
    [SCSI_SC_UNEXPECTED_INEXACT_SEGMENT] = { SENSE_COPY_ABORTED, 0x26, 0x0a },
    [SCSI_SC_OPERATION_IN_PROGRESS] = { SENSE_ILLEGAL_REQUEST, 0x00, 0x16 },
    [SCSI_SC_INSUFFICIENT_RESOURCES] = { SENSE_ILLEGAL_REQUEST, 0x55, 0x03 },
    [SCSI_SC_INSUFFICIENT_REG_RESOURCES] = { SENSE_ILLEGAL_REQUEST, 0x55, 0x04 },
    [SCSI_SC_SAVING_PARAMS_UNSUPPORTED] = { SENSE_ILLEGAL_REQUEST, 0x39, 0x00 },
    [SCSI_SC_POWER_ON_RESET] = { SENSE_UNIT_ATTENTION, 0x29, 0x00 },
    [SCSI_SC_BUS_DEVICE_RESET] = { SENSE_UNIT_ATTENTION, 0x29, 0x03 },
    [SCSI_SC_NEXUS_LOSS] = { SENSE_UNIT_ATTENTION, 0x29, 0x07 },
    [SCSI_SC_CAPACITY_CHANGED] = { SENSE_UNIT_ATTENTION, 0x2a, 0x09 },
    [SCSI_SC_RESERVATIONS_PREEMPTED] = { SENSE_UNIT_ATTENTION, 0x2a, 0x03 },
    [SCSI_SC_RESERVATIONS_RELEASED] = { SENSE_UNIT_ATTENTION, 0x2a, 0x04 },
    [SCSI_SC_REGISTRATIONS_PREEMPTED] = { SENSE_UNIT_ATTENTION, 0x2a, 0x05 },
    [SCSI_SC_REPORTED_LUNS_CHANGED] = { SENSE_UNIT_ATTENTION, 0x3f, 0x0e },
    [SCSI_SC_WRITE_PROTECTED] = { SENSE_DATA_PROTECT, 0x27, 0x00 },
    [SCSI_SC_SPACE_ALLOC_FAILED] = { SENSE_DATA_PROTECT, 0x27, 0x07 },
    [SCSI_SC_COPY_ABORTED] = { SENSE_COPY_ABORTED, 0x00, 0x00 },
    [SCSI_SC_UNREACHABLE_COPY_TARGET] = { SENSE_COPY_ABORTED, 0x08, 0x04 },
    [SCSI_SC_COPY_TARGET_UNREACHABLE] = { SENSE_COPY_ABORTED, 0x0d, 0x02 },
    [SCSI_SC_COPY_INVALID_FIELD] = { SENSE_COPY_ABORTED, 0x26, 0x00 },
    [SCSI_SC_MISCOMPARE_DURING_VERIFY] = { SENSE_MISCOMPARE, 0x1d, 0x00 },
};

const enum scsi_sc sd_ua_sense[SCSI_UA_COUNT] = {
    [SCSI_UA_POWER_ON] = SCSI_SC_POWER_ON_RESET,
    [SCSI_UA_LUN_RESET] = SCSI_SC_BUS_DEVICE_RESET,
    [SCSI_UA_NEXUS_LOSS] = SCSI_SC_NEXUS_LOSS,
    [SCSI_UA_CAPACITY_CHANGED] = SCSI_SC_CAPACITY_CHANGED,
    [SCSI_UA_REPORTED_LUNS_CHANGED] = SCSI_SC_REPORTED_LUNS_CHANGED,
};

static const struct sense_code *sense_code(enum scsi_sc sc)
{
    g_assert((unsigned)sc < SCSI_SC_COUNT);
    return &sense_table[sc];
}

/* Fixed format (response code 70h), 10 additional bytes. */
static void fill_fixed(uint8_t *s, uint8_t key, uint8_t asc, uint8_t ascq)
{
    memset(s, 0, FIXED_SENSE_LEN);
    s[0] = 0x70;
    s[2] = key & 0xf;
    s[7] = FIXED_SENSE_LEN - 8;
    s[12] = asc;
    s[13] = ascq;
}

void sd_sense_asc(enum scsi_sc sc, uint8_t *asc, uint8_t *ascq)
{
    *asc = sense_code(sc)->asc;
    *ascq = sense_code(sc)->ascq;
}

void sd_fill_fixed_sense(uint8_t *s, enum scsi_sc sc)
{
    const struct sense_code *c = sense_code(sc);

    fill_fixed(s, c->key, c->asc, c->ascq);
}

/* Any sense: the SCSI layer's own come through sd_set_sense(), a remote device's as it came. */
void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
    fill_fixed(cmd->sense, key, asc, ascq);
    cmd->sense_len = FIXED_SENSE_LEN;
    cmd->status = SAM_STAT_CHECK_CONDITION;
}

void sd_set_sense(struct scsi_cmd *cmd, enum scsi_sc sc)
{
    const struct sense_code *c = sense_code(sc);

    scsi_cmd_set_sense(cmd, c->key, c->asc, c->ascq);
}

/*
 * ILLEGAL REQUEST with a field pointer (SKSV): INVALID FIELD IN CDB or IN
 * PARAMETER LIST.  bit < 0 means no bit pointer.
 */
int sd_field_error(struct scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit)
{
    sd_set_sense(cmd, in_cdb ? SCSI_SC_INVALID_FIELD_IN_CDB : SCSI_SC_INVALID_FIELD_IN_PARAM_LIST);
    cmd->sense[15] = 0x80 | (in_cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | (bit & 7) : 0);
    st16(cmd->sense + 16, (uint16_t)byte);
    return EXEC_DONE;
}

void sd_set_sense_info(struct scsi_cmd *cmd, enum scsi_sc sc, uint32_t info)
{
    sd_set_sense(cmd, sc);
    cmd->sense[0] |= 0x80;      /* VALID: INFORMATION is set */
    st32(cmd->sense + 3, info);
}

void sd_fill_progress_sense(uint8_t *s, enum scsi_sc sc, uint16_t progress)
{
    sd_fill_fixed_sense(s, sc);
    s[15] = 0x80;               /* SKSV: the progress indication is valid */
    st16(s + 16, progress);
}

int sd_sense_done(struct scsi_cmd *cmd, enum scsi_sc sc)
{
    sd_set_sense(cmd, sc);
    return EXEC_DONE;
}

/* Copies a reply of len bytes, truncated to the allocation length and buffer. */
int sd_reply(struct scsi_cmd *cmd, const void *buf, size_t len, size_t alloc)
{
    size_t n = MIN(len, alloc);

    cmd->data_in_xfer = cmd->data_in ? iov_from_buf(cmd->data_in, cmd->data_in_cnt, 0, buf, n) : 0;
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* ---- CDB fields -------------------------------------------------------- */

void sd_decode_lba_len(const uint8_t *cdb, uint64_t *lba, uint32_t *n, unsigned *len_byte)
{
    switch (cdb[0]) {
    case OP_READ_6:
    case OP_WRITE_6:
        *lba = (uint64_t)(cdb[1] & 0x1f) << 16 | ld16(cdb + 2);
        *n = cdb[4] ? cdb[4] : 256;
        *len_byte = 4;
        break;
    case OP_READ_12:
    case OP_WRITE_12:
    case OP_WRITE_VERIFY_12:
    case OP_VERIFY_12:
        *lba = ld32(cdb + 2);
        *n = ld32(cdb + 6);
        *len_byte = 6;
        break;
    case OP_READ_16:
    case OP_WRITE_16:
    case OP_WRITE_VERIFY_16:
    case OP_VERIFY_16:
    case OP_SYNC_CACHE_16:
    case OP_WRITE_SAME_16:
    case OP_PRE_FETCH_16:
        *lba = ld64(cdb + 2);
        *n = ld32(cdb + 10);
        *len_byte = 10;
        break;
    default:    /* the 10-byte forms */
        *lba = ld32(cdb + 2);
        *n = ld16(cdb + 7);
        *len_byte = 7;
        break;
    }
}
