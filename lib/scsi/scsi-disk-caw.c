/*
 * COMPARE AND WRITE (SBC-3 5.2): reads NUMBER OF LOGICAL BLOCKS blocks,
 * compares them with the first half of the data-out and, if they are
 * equal, writes the second half over them; otherwise it ends with
 * MISCOMPARE and the offset of the first differing byte in INFORMATION.
 * The whole sequence holds its range of the LUN's write range lock
 * exclusively (scsi-disk-range.c), so no write from any thread or
 * front-end lands between the read and the write: that is what a cluster
 * file system's on-disk lock built on it relies on.  The read and the
 * write are one backend request each, bounced through buffers of at most
 * MAXIMUM COMPARE AND WRITE LENGTH blocks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

enum { CAW_READ, CAW_COMPARE, CAW_WRITTEN };

static int caw_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    uint64_t len = st->chunk_blocks * lun->bs;

    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    switch (st->state) {
    case CAW_READ:
        sd_bio_init(lun, cmd, BACKEND_READ, st->lba * lun->bs, len, sd_op_bio_done);
        st->iov = (struct iovec) { .iov_base = st->buf, .iov_len = len };
        cmd->bio.iov = &st->iov;
        cmd->bio.iovcnt = 1;
        st->state = CAW_COMPARE;
        return STEP_SUBMIT;
    case CAW_COMPARE:
        cmd->data_out_xfer = 2 * len;
        if (memcmp(st->buf, st->expect, len) != 0) {
            uint32_t i = 0;

            while (st->buf[i] == st->expect[i]) {
                i++;
            }
            /* INFORMATION: the offset in the data-out of the first byte that differed. */
            sd_set_sense_info(cmd, SCSI_SC_MISCOMPARE_DURING_VERIFY, i);
            return STEP_DONE;
        }
        sd_bio_init(lun, cmd, BACKEND_WRITE, st->lba * lun->bs, len, sd_op_bio_done);
        cmd->bio.fua = st->fua;
        st->iov = (struct iovec) { .iov_base = st->block, .iov_len = len };
        cmd->bio.iov = &st->iov;
        cmd->bio.iovcnt = 1;
        st->state = CAW_WRITTEN;
        return STEP_SUBMIT;
    default:
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
}

int sd_exec_compare_and_write(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint64_t lba = ld64(cdb + 2);
    uint32_t n = cdb[13];
    uint64_t len = (uint64_t)n * lun->bs;
    struct op_state *st;

    if (cdb[1] & 0xe0) {
        return invalid_cdb(cmd, 1, 7);   /* WRPROTECT: no protection information */
    }
    if (lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    if (n > sd_max_caw_blocks(lun)) {
        return invalid_cdb(cmd, 13, 7);  /* past MAXIMUM COMPARE AND WRITE LENGTH */
    }
    if (n == 0) {
        cmd->status = SAM_STAT_GOOD;     /* SBC-3: nothing read or written, no error */
        return EXEC_DONE;
    }
    if (sd_data_out_size(cmd) < 2 * len) {
        return invalid_cdb(cmd, 13, 7);  /* the verify and write data do not fit */
    }
    st = sd_op_new(cmd, caw_step);
    st->lba = lba;
    st->chunk_blocks = n;
    st->fua = sd_write_needs_fua(lun, cdb[1] & 0x08);
    st->buf = g_malloc(len);
    st->expect = g_malloc(len);
    st->block = g_malloc(len);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, st->expect, len);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, len, st->block, len);
    st->state = CAW_READ;
    return sd_op_start_range(lun, cmd, st, lba, n, true);
}
