/*
 * The block I/O command family: READ, WRITE and WRITE AND VERIFY (one
 * backend request each, under their range of the range lock, shared), VERIFY (read back and compare through a
 * bounded buffer), SYNCHRONIZE CACHE and START STOP UNIT (a flush).  Every
 * CDB field is untrusted and checked here, where it enters; the requests
 * run through the engine in scsi-disk-io.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

/*
 * A READ or WRITE to a backend that works inside submit(), in pieces of
 * INLINE_PIECE_BYTES (st->state: the backend op; st->done_bytes: sent and
 * completed; st->remaining: bytes still to send).
 */
static int rw_piece_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st,
                         int ret)
{
    uint64_t n;
    int cnt;

    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    if (cmd->bio.len && cmd->bio.iov == st->piece_iov) {
        st->done_bytes += cmd->bio.len;      /* a piece completed */
    }
    if (st->remaining == 0) {
        if (st->state == BACKEND_READ) {
            cmd->data_in_xfer = st->done_bytes;
        } else {
            cmd->data_out_xfer = st->done_bytes;
        }
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
    n = MIN(st->remaining, INLINE_PIECE_BYTES);
    /* The data was sliced to the command's length already: this cannot fail. */
    cnt = iov_slice(st->data_iov, st->data_cnt, st->done_bytes, n, st->piece_iov, st->data_cnt);
    g_assert(cnt >= 0);
    sd_bio_init(lun, cmd, (enum backend_op)st->state, st->lba * lun->bs + st->done_bytes, n,
                sd_op_bio_done);
    cmd->bio.fua = st->fua;
    cmd->bio.iov = st->piece_iov;
    cmd->bio.iovcnt = (unsigned)cnt;
    st->remaining -= n;
    return STEP_SUBMIT;
}

/* Turns the READ/WRITE cmd->bio describes into a command of pieces. */
static int start_rw_pieces(struct scsi_lun *lun, struct scsi_cmd *cmd, uint64_t lba, uint32_t n)
{
    struct op_state *st = sd_op_new(cmd, rw_piece_step);

    st->state = cmd->bio.op;
    st->fua = cmd->bio.fua;
    st->lba = lba;
    st->remaining = cmd->bio.len;
    st->data_iov = cmd->bio.iov;
    st->data_cnt = cmd->bio.iovcnt;
    st->piece_iov = g_new(struct iovec, st->data_cnt);
    st->defer_first = true;
    cmd->bio.len = 0;
    /* Shared, READs too, as for a single request (exec_rw). */
    return sd_op_start_range(lun, cmd, st, lba, n, false);
}

static int exec_rw(struct scsi_lun *lun, struct scsi_cmd *cmd, bool write, bool fua_bit)
{
    const uint8_t *cdb = cmd->cdb;
    uint64_t lba, bytes;
    uint32_t n;
    unsigned len_byte;
    size_t avail;

    sd_decode_lba_len(cdb, &lba, &n, &len_byte);
    if (cdb[0] != OP_READ_6 && cdb[0] != OP_WRITE_6 && (cdb[1] & 0xe0)) {
        return invalid_cdb(cmd, 1, 7);   /* RD/WRPROTECT: no protection info */
    }
    if (write && lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    bytes = (uint64_t)n * lun->bs;
    if (bytes > sd_max_xfer_bytes(lun)) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    /* A short buffer is refused rather than half-filled (or over-run). */
    avail = write ? sd_data_out_size(cmd) : sd_data_in_size(cmd);
    if (avail < bytes) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    if (n == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    sd_bio_init(lun, cmd, write ? BACKEND_WRITE : BACKEND_READ, lba * lun->bs, bytes, sd_single_done);
    cmd->bio.fua = write && sd_write_needs_fua(lun, fua_bit);
    if (sd_map_data(cmd, write ? cmd->data_out : cmd->data_in,
                 write ? cmd->data_out_cnt : cmd->data_in_cnt, avail, bytes) < 0) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    if (bytes > INLINE_PIECE_BYTES && lun->be->works_inline) {
        return start_rw_pieces(lun, cmd, lba, n);
    }
    /*
     * A READ takes its range shared too, so that it never runs beside a
     * WRITE ATOMIC, COMPARE AND WRITE or ORWRITE to its blocks and sees part
     * of one (the fast path: a count of its own thread's and one load).
     */
    return sd_submit_single_range(lun, cmd, lba, n, false);
}

int sd_exec_read(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    return exec_rw(lun, cmd, false, false);
}

int sd_exec_write(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    bool fua = cmd->cdb[0] != OP_WRITE_6 && (cmd->cdb[1] & 0x08);

    return exec_rw(lun, cmd, true, fua);
}

/*
 * WRITE AND VERIFY: the write is made durable (FUA) and not read back, as
 * the verify would only re-read what the backend just acknowledged.
 */
int sd_exec_write_verify(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    unsigned bytchk = (cmd->cdb[1] >> 1) & 3;

    if (bytchk > 1) {
        return invalid_cdb(cmd, 1, 2);
    }
    return exec_rw(lun, cmd, true, true);
}

/* ---- VERIFY ------------------------------------------------------------ */

static int verify_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    if (st->state == 1) {
        /* A chunk was read into st->buf: compare it with the data-out. */
        uint64_t len = cmd->bio.len;

        for (uint64_t off = 0; off < len; off += lun->bs) {
            const uint8_t *want;

            if (st->block) {        /* BYTCHK=3: one block for all */
                want = st->block;
            } else {
                want = st->expect + off;
            }
            if (memcmp(st->buf + off, want, lun->bs) != 0) {
                uint64_t i = sd_first_difference(st->buf + off, want, lun->bs);

                /* INFORMATION: offset of the first mismatching byte in the data-out. */
                sd_set_sense_info(cmd, SCSI_SC_MISCOMPARE_DURING_VERIFY,
                                  (uint32_t)MIN(st->block ? i : st->done_bytes + off + i,
                                                UINT32_MAX));
                cmd->data_out_xfer = st->block ? lun->bs : st->done_bytes + len;
                return STEP_DONE;
            }
        }
        if (!st->block) {
            st->done_bytes += len;
        }
    }
    if (st->remaining == 0) {
        cmd->status = SAM_STAT_GOOD;
        cmd->data_out_xfer = st->block ? lun->bs : st->done_bytes;
        return STEP_DONE;
    }
    uint64_t n = MIN(st->remaining, st->chunk_blocks);
    uint64_t len = n * lun->bs;

    if (!st->block &&
        iov_to_buf(cmd->data_out, cmd->data_out_cnt, st->done_bytes, st->expect, len) != len) {
        /* The buffer size was checked up front; this cannot happen. */
        return sd_step_fail(lun, cmd, -EINVAL);
    }
    sd_bio_init(lun, cmd, BACKEND_READ, st->lba * lun->bs, len, sd_op_bio_done);
    st->iov.iov_base = st->buf;
    st->iov.iov_len = len;
    cmd->bio.iov = &st->iov;
    cmd->bio.iovcnt = 1;
    st->lba += n;
    st->remaining -= n;
    st->state = 1;
    return STEP_SUBMIT;
}

int sd_exec_verify(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned bytchk = (cdb[1] >> 1) & 3, len_byte;
    uint64_t lba;
    uint32_t n;
    struct op_state *st;

    sd_decode_lba_len(cdb, &lba, &n, &len_byte);
    if (cdb[1] & 0xe0) {
        return invalid_cdb(cmd, 1, 7);   /* VRPROTECT */
    }
    if (bytchk == 2) {
        return invalid_cdb(cmd, 1, 2);
    }
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    /* BYTCHK=0: there is no medium to scan; the range check is the verify. */
    if (bytchk == 0 || n == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    if ((uint64_t)n * lun->bs > sd_max_xfer_bytes(lun)) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    if (sd_data_out_size(cmd) < (bytchk == 3 ? lun->bs : (uint64_t)n * lun->bs)) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    st = sd_op_new(cmd, verify_step);
    st->lba = lba;
    st->remaining = n;
    st->chunk_blocks = MIN((uint64_t)n, sd_chunk_bytes(lun) / lun->bs);
    /* Cleared: what a read leaves unwritten (fill=none) must not decide the compare. */
    st->buf = g_malloc0(st->chunk_blocks * lun->bs);
    if (bytchk == 3) {
        st->block = g_malloc(lun->bs);
        iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, st->block, lun->bs);
    } else {
        st->expect = g_malloc(st->chunk_blocks * lun->bs);
    }
    return sd_op_start(lun, cmd, st);
}

/* ---- SYNCHRONIZE CACHE, START STOP UNIT -------------------------------- */

int sd_exec_sync_cache(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint64_t lba;
    uint32_t n;
    unsigned len_byte;

    sd_decode_lba_len(cmd->cdb, &lba, &n, &len_byte);
    /* n == 0 means "to the end"; either way the whole cache is flushed. */
    if (!sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    sd_bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, sd_single_done);
    return sd_submit_single(lun, cmd);
}

int sd_exec_start_stop(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool start = cdb[4] & 0x01, no_flush = cdb[4] & 0x04;
    unsigned power_condition = cdb[4] >> 4;

    /* Stopping a disk writes its cache back first, as a real drive does. */
    if (!start && !no_flush && power_condition == 0 && lun->be->write_cache) {
        return sd_start_flush(lun, cmd);
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}
