/*
 * The provisioning command family: WRITE SAME (zeros become backend
 * WRITE ZEROES, which may deallocate; other data is replicated through a
 * bounded buffer) and UNMAP (a parameter list of ranges discarded one
 * backend request at a time), both capped at 1M blocks and cut into range
 * chunks (scsi-disk-int.h) so one command's work is bounded per request.  The parameter list is untrusted and checked
 * here in full before any range is touched.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

/* ---- WRITE SAME -------------------------------------------------------- */

enum { WS_ZEROES, WS_ZEROES_SENT, WS_REPLICATE, WS_FLUSH_SENT };

static void ws_setup_replicate(struct scsi_lun *lun, struct op_state *st)
{
    st->chunk_blocks = MIN(st->remaining, sd_chunk_bytes(lun) / lun->bs);
    st->buf = g_malloc(st->chunk_blocks * lun->bs);
    for (uint64_t i = 0; i < st->chunk_blocks; i++) {
        memcpy(st->buf + i * lun->bs, st->block, lun->bs);
    }
    iothread_charge(st->cmd->thread, st->chunk_blocks * lun->bs);
    st->state = WS_REPLICATE;
}

static int ws_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    switch (st->state) {
    case WS_ZEROES:
        /* A range chunk at a time (sd_range_chunk_blocks). */
        st->chunk_blocks = MIN(st->remaining, sd_range_chunk_blocks(lun));
        sd_bio_init(lun, cmd, BACKEND_WRITE_ZEROES, st->lba * lun->bs,
                 st->chunk_blocks * lun->bs, sd_op_bio_done);
        st->state = WS_ZEROES_SENT;
        return STEP_SUBMIT;
    case WS_ZEROES_SENT:
        if (ret == -EOPNOTSUPP || ret == -ENOTSUP) {
            /* The backend cannot zero ranges: write the rest of the zeros out. */
            ws_setup_replicate(lun, st);
            break;
        }
        if (ret < 0) {
            return sd_step_fail(lun, cmd, ret);
        }
        st->lba += st->chunk_blocks;
        st->remaining -= st->chunk_blocks;
        if (st->remaining) {
            st->state = WS_ZEROES;
            return ws_step(lun, cmd, st, 0);
        }
        if (st->flush_after) {
            sd_bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, sd_op_bio_done);
            st->state = WS_FLUSH_SENT;
            return STEP_SUBMIT;
        }
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    case WS_FLUSH_SENT:
        if (ret < 0) {
            return sd_step_fail(lun, cmd, ret);
        }
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    case WS_REPLICATE:
        if (ret < 0) {
            return sd_step_fail(lun, cmd, ret);
        }
        break;
    }
    /* WS_REPLICATE: write the next chunk of copies (the buffer filled in the first step). */
    if (!st->buf) {
        ws_setup_replicate(lun, st);
    }
    if (st->remaining == 0) {
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
    uint64_t n = MIN(st->remaining, st->chunk_blocks);

    sd_bio_init(lun, cmd, BACKEND_WRITE, st->lba * lun->bs, n * lun->bs, sd_op_bio_done);
    cmd->bio.fua = st->fua;
    st->iov.iov_base = st->buf;
    st->iov.iov_len = n * lun->bs;
    cmd->bio.iov = &st->iov;
    cmd->bio.iovcnt = 1;
    st->lba += n;
    st->remaining -= n;
    return STEP_SUBMIT;
}

static bool all_zero(const uint8_t *p, size_t len)
{
    return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

int sd_exec_write_same(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool ndob = cdb[0] == OP_WRITE_SAME_16 && (cdb[1] & 0x01);
    unsigned len_byte;
    uint64_t lba;
    uint32_t n;
    struct op_state *st;

    sd_decode_lba_len(cdb, &lba, &n, &len_byte);
    if (cdb[1] & 0xe0) {
        return invalid_cdb(cmd, 1, 7);   /* WRPROTECT */
    }
    if (cdb[1] & 0x10) {
        return invalid_cdb(cmd, 1, 4);   /* ANCHOR: not supported (ANC_SUP=0) */
    }
    if (cdb[0] == OP_WRITE_SAME_10 && (cdb[1] & 0x06)) {
        return invalid_cdb(cmd, 1, 2);   /* obsolete PBDATA/LBDATA */
    }
    if (lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    /* The range first: a start past the medium is out of range whatever the length. */
    if (lba >= sd_nb_blocks(lun) || !sd_range_ok(lun, lba, n)) {
        return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
    }
    if (n == 0 || n > MAX_WRITE_SAME_LBAS) {
        return invalid_cdb(cmd, len_byte, 7);   /* WSNZ=1; Block Limits cap */
    }
    /*
     * The data-out is exactly one logical block: a buffer of any other
     * size means the initiator assumed another block size or meant
     * another command, so none of it is written.  No CDB field is wrong,
     * so no field pointer.  With NDOB (SBC-3: no data is transferred) a
     * buffer that came anyway is left untransferred, its residual the
     * initiator's to see, and zeros are written.
     */
    if (!ndob && sd_data_out_size(cmd) != lun->bs) {
        return sd_sense_done(cmd, SCSI_SC_INVALID_FIELD_IN_CDB);
    }
    st = sd_op_new(cmd, ws_step);
    st->lba = lba;
    st->remaining = n;
    st->fua = sd_write_needs_fua(lun, false);
    st->block = g_malloc0(lun->bs);
    if (!ndob) {
        iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, st->block, lun->bs);
        cmd->data_out_xfer = lun->bs;
    }
    /*
     * Zeros (with or without UNMAP) become WRITE ZEROES, which may
     * deallocate; anything else is replicated through a bounded buffer.
     */
    if (all_zero(st->block, lun->bs)) {
        st->state = WS_ZEROES;
        st->flush_after = st->fua;
    } else {
        st->state = WS_REPLICATE;
    }
    st->defer_first = lun->be->works_inline;
    return sd_op_start_range(lun, cmd, st, lba, n, false);
}

/* ---- UNMAP ------------------------------------------------------------- */

/*
 * One request per range chunk: st->lba and st->remaining are what is left
 * of the descriptor being worked on, st->idx the next descriptor.
 */
static int unmap_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    uint64_t n;

    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    while (st->remaining == 0) {
        if (st->idx == st->count) {
            cmd->status = SAM_STAT_GOOD;
            return STEP_DONE;
        }
        st->lba = st->unmap[2 * st->idx];
        st->remaining = st->unmap[2 * st->idx + 1];
        st->idx++;
    }
    n = MIN(st->remaining, sd_range_chunk_blocks(lun));
    sd_bio_init(lun, cmd, BACKEND_DISCARD, st->lba * lun->bs, n * lun->bs, sd_op_bio_done);
    st->lba += n;
    st->remaining -= n;
    return STEP_SUBMIT;
}

int sd_exec_unmap(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned plen = ld16(cdb + 7), dl, bd_dl, count;
    uint64_t total = 0, first = UINT64_MAX, end = 0;
    g_autofree uint8_t *p = NULL;
    struct op_state *st;

    if (cdb[1] & 0x01) {
        return invalid_cdb(cmd, 1, 0);   /* ANCHOR */
    }
    if (lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    if (plen == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    if (plen < 8) {
        return sd_sense_done(cmd, SCSI_SC_PARAM_LIST_LENGTH_ERROR);
    }
    if (sd_data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, 7, 7);
    }
    p = g_malloc(plen);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, plen);
    cmd->data_out_xfer = plen;
    dl = ld16(p);
    bd_dl = ld16(p + 2);
    if (bd_dl > plen - 8) {
        return invalid_param(cmd, 2, 7);
    }
    if (dl < bd_dl + 6) {
        return invalid_param(cmd, 0, 7);
    }
    /* SBC-3: a trailing partial descriptor is ignored, not an error. */
    count = bd_dl / 16;
    if (count > MAX_UNMAP_DESCS) {
        return invalid_param(cmd, 2, 7);
    }
    st = sd_op_new(cmd, unmap_step);
    st->unmap = g_new(uint64_t, 2 * MAX(count, 1u));
    st->count = count;
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *d = p + 8 + 16 * i;
        uint64_t lba = ld64(d);
        uint32_t n = ld32(d + 8);

        if (n && !sd_range_ok(lun, lba, n)) {
            return sd_sense_done(cmd, SCSI_SC_LBA_OUT_OF_RANGE);
        }
        total += n;
        if (total > MAX_UNMAP_LBAS) {
            /* The field pointer names the descriptor that crossed the cap. */
            return invalid_param(cmd, 8 + 16 * i + 8, 7);
        }
        if (n) {
            first = MIN(first, lba);
            end = MAX(end, lba + n);
        }
        st->unmap[2 * i] = lba;
        st->unmap[2 * i + 1] = n;
    }
    if (total == 0) {
        return sd_op_start(lun, cmd, st);   /* nothing to unmap */
    }
    st->defer_first = lun->be->works_inline;
    /* One range from the first block to the last: UNMAP is rare, lists short. */
    return sd_op_start_range(lun, cmd, st, first, end - first, false);
}
