/*
 * Building a command's result: fixed-format sense data (with field
 * pointers for ILLEGAL REQUEST) and data-in replies truncated to the
 * allocation length.  The bottom of the disk emulation: every command
 * family calls it, it calls nothing above it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"

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
