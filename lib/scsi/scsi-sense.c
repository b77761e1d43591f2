/*
 * Sense data and CDB fields for the SCSI disk emulation: the named sense
 * codes of the unit attentions, fixed-format sense building, the common
 * CHECK CONDITION answers, replies truncated to the allocation length, and
 * the LBA / transfer length decoding shared by the block commands.  The
 * bottom layer: it calls nothing in the disk emulation.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "iov.h"
#include "scsi-sense.h"

const uint8_t sd_ua_codes[SCSI_UA_COUNT][2] = {
    [SCSI_UA_POWER_ON] = { 0x29, 0x00 },
    [SCSI_UA_LUN_RESET] = { 0x29, 0x03 },
    [SCSI_UA_NEXUS_LOSS] = { 0x29, 0x07 },
    [SCSI_UA_CAPACITY_CHANGED] = { 0x2a, 0x09 },
    [SCSI_UA_REPORTED_LUNS_CHANGED] = { 0x3f, 0x0e },
};

void sd_fill_fixed_sense(uint8_t *s, uint8_t key, uint8_t asc, uint8_t ascq)
{
    memset(s, 0, FIXED_SENSE_LEN);
    s[0] = 0x70;
    s[2] = key & 0xf;
    s[7] = FIXED_SENSE_LEN - 8;
    s[12] = asc;
    s[13] = ascq;
}

void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
    sd_fill_fixed_sense(cmd->sense, key, asc, ascq);
    cmd->sense_len = FIXED_SENSE_LEN;
    cmd->status = SAM_STAT_CHECK_CONDITION;
}

/*
 * ILLEGAL REQUEST with a field pointer (SKSV): asc 24h for the CDB, 26h for
 * the parameter list.  bit < 0 means no bit pointer.
 */
int sd_field_error(struct scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit)
{
    scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, in_cdb ? 0x24 : 0x26, 0);
    cmd->sense[15] = 0x80 | (in_cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | (bit & 7) : 0);
    st16(cmd->sense + 16, (uint16_t)byte);
    return EXEC_DONE;
}

int sd_sense_done(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
    scsi_cmd_set_sense(cmd, key, asc, ascq);
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
