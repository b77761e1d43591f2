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
 * MAXIMUM COMPARE AND WRITE LENGTH blocks.  ORWRITE (16) is the same
 * read-modify-write under the same exclusive range: each block becomes
 * what it held ORed with the data-out, chunk by chunk through a bounded
 * buffer, so no other write lands between a chunk's read and its write.
 * WRITE ATOMIC (16) (SBC-4 5.48) is one write request under the same
 * exclusive range: no write lands inside it and, since READ takes its
 * range shared, no read sees part of it; its limits are Block Limits'
 * atomic fields (scsi-disk-int.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

enum { CAW_READ, CAW_COMPARE, CAW_WRITTEN };

/* Points the command's bio at len bytes of buf for a read or a write at lba. */
static void bounce_bio(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st,
                       enum backend_op op, uint64_t lba, uint8_t *buf, uint64_t len)
{
    sd_bio_init(lun, cmd, op, lba * lun->bs, len, sd_op_bio_done);
    cmd->bio.fua = op == BACKEND_WRITE && st->fua;
    st->iov = (struct iovec) { .iov_base = buf, .iov_len = len };
    cmd->bio.iov = &st->iov;
    cmd->bio.iovcnt = 1;
}

static int caw_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    uint64_t len = st->chunk_blocks * lun->bs;

    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    switch (st->state) {
    case CAW_READ:
        bounce_bio(lun, cmd, st, BACKEND_READ, st->lba, st->buf, len);
        st->state = CAW_COMPARE;
        return STEP_SUBMIT;
    case CAW_COMPARE:
        cmd->data_out_xfer = 2 * len;
        if (memcmp(st->buf, st->expect, len) != 0) {
            uint32_t i = (uint32_t)sd_first_difference(st->buf, st->expect, len);

            /* INFORMATION: the offset in the data-out of the first byte that differed. */
            sd_set_sense_info(cmd, SCSI_SC_MISCOMPARE_DURING_VERIFY, i);
            return STEP_DONE;
        }
        bounce_bio(lun, cmd, st, BACKEND_WRITE, st->lba, st->block, len);
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
    /* Cleared: what the read leaves unwritten (fill=none) must not decide the compare. */
    st->buf = g_malloc0(len);
    st->expect = g_malloc(len);   /* both halves of the data-out, whose size was checked */
    st->block = g_malloc(len);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, st->expect, len);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, len, st->block, len);
    st->state = CAW_READ;
    return sd_op_start_range(lun, cmd, st, lba, n, true);
}

/* ---- ORWRITE (16) ------------------------------------------------------- */

enum { OR_READ, OR_WRITE };

static int orwrite_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    uint64_t len = cmd->bio.len;

    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    if (st->state == OR_WRITE) {
        /* The chunk was read into st->buf: OR the data-out into it and write it back. */
        if (iov_to_buf(cmd->data_out, cmd->data_out_cnt, st->done_bytes, st->expect, len) != len) {
            return sd_step_fail(lun, cmd, -EINVAL);   /* the size was checked up front */
        }
        for (uint64_t i = 0; i < len; i++) {
            st->buf[i] |= st->expect[i];
        }
        bounce_bio(lun, cmd, st, BACKEND_WRITE, st->lba, st->buf, len);
        st->lba += len / lun->bs;
        st->done_bytes += len;
        st->state = OR_READ;
        return STEP_SUBMIT;
    }
    if (st->remaining == 0) {
        cmd->status = SAM_STAT_GOOD;
        cmd->data_out_xfer = st->done_bytes;
        return STEP_DONE;
    }
    len = MIN(st->remaining, st->chunk_blocks) * lun->bs;
    bounce_bio(lun, cmd, st, BACKEND_READ, st->lba, st->buf, len);
    st->remaining -= len / lun->bs;
    st->state = OR_WRITE;
    return STEP_SUBMIT;
}

int sd_exec_orwrite(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint64_t lba = ld64(cdb + 2);
    uint32_t n = ld32(cdb + 10);
    struct op_state *st;

    if (cdb[1] & 0xe0) {
        return invalid_cdb(cmd, 1, 7);   /* ORPROTECT: no protection information */
    }
    if (lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    if ((uint64_t)n * lun->bs > sd_max_xfer_bytes(lun)) {
        return invalid_cdb(cmd, 10, 7);
    }
    if (n == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    if (sd_data_out_size(cmd) < (uint64_t)n * lun->bs) {
        return invalid_cdb(cmd, 10, 7);
    }
    st = sd_op_new(cmd, orwrite_step);
    st->lba = lba;
    st->remaining = n;
    st->chunk_blocks = MIN((uint64_t)n, sd_chunk_bytes(lun) / lun->bs);
    st->fua = sd_write_needs_fua(lun, cdb[1] & 0x08);
    /* Cleared: what a read leaves unwritten (fill=none) is ORed and written back. */
    st->buf = g_malloc0(st->chunk_blocks * lun->bs);
    st->expect = g_malloc(st->chunk_blocks * lun->bs);   /* filled from the data-out per chunk */
    st->state = OR_READ;
    return sd_op_start_range(lun, cmd, st, lba, n, true);
}

/* ---- WRITE ATOMIC (16) -------------------------------------------------- */

int sd_exec_write_atomic(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint64_t lba = ld64(cdb + 2), bytes;
    uint32_t n = ld16(cdb + 12), g = sd_atomic_granularity(lun);

    if (cdb[1] & 0xe0) {
        return invalid_cdb(cmd, 1, 7);   /* WRPROTECT: no protection information */
    }
    if (ld16(cdb + 10)) {
        return invalid_cdb(cmd, 10, 7);  /* ATOMIC BOUNDARY: MAXIMUM ATOMIC BOUNDARY SIZE 0 */
    }
    if (lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    if (n == 0) {
        cmd->status = SAM_STAT_GOOD;     /* nothing to write is not an error */
        return EXEC_DONE;
    }
    if (n > sd_max_atomic_blocks(lun) || n % g) {
        return invalid_cdb(cmd, 12, 7);  /* MAXIMUM ATOMIC TRANSFER LENGTH, GRANULARITY */
    }
    if (lba % g) {
        return invalid_cdb(cmd, 2, 7);   /* ATOMIC ALIGNMENT */
    }
    bytes = (uint64_t)n * lun->bs;
    if (sd_data_out_size(cmd) < bytes) {
        return invalid_cdb(cmd, 12, 7);
    }
    sd_bio_init(lun, cmd, BACKEND_WRITE, lba * lun->bs, bytes, sd_single_done);
    cmd->bio.fua = sd_write_needs_fua(lun, cdb[1] & 0x08);
    if (sd_map_data(cmd, cmd->data_out, cmd->data_out_cnt, sd_data_out_size(cmd), bytes) < 0) {
        return invalid_cdb(cmd, 12, 7);
    }
    return sd_submit_single_range(lun, cmd, lba, n, true);
}
