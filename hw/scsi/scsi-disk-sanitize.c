/*
 * SANITIZE (SBC-3 5.30), offered only on LUNs whose spec says
 * sanitize=on: OVERWRITE (the initialization pattern of the parameter
 * list written to every block, OVERWRITE COUNT passes, inverted between
 * passes with INVERT), BLOCK ERASE (deallocation where the backend's
 * discarded blocks read back as zeros, else WRITE ZEROES, else zeros
 * written out) and EXIT FAILURE MODE; CRYPTOGRAPHIC ERASE is refused (no
 * backend encrypts).  The erase runs through the step engine a range
 * chunk or bounce buffer at a time, so a thread is yielded between pieces
 * as for WRITE SAME, under the write range lock held exclusively over the
 * whole LUN (it starts once the writes in flight have finished).  With
 * IMMED it runs as an internal command of its own after the SANITIZE has
 * answered GOOD.  Meanwhile the dispatch (and EXTENDED COPY for its copy
 * targets) asks sd_sanitize_gate() (scsi-disk-int.h), which
 * answers every command but INQUIRY, REQUEST SENSE and REPORT LUNS with
 * NOT READY, SANITIZE IN PROGRESS and its progress indication; after a
 * failed one, medium access commands get MEDIUM ERROR, SANITIZE COMMAND
 * FAILED until a sanitize succeeds or (with AUSE) EXIT FAILURE MODE.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "scsi-disk-int.h"
#include "scsi-disk-ops.h"

#define SANITIZE_CDB_LEN 10
/* OVERWRITE parameter list: 4-byte header and the initialization pattern. */
#define OVERWRITE_HDR 4

/* What the step does: erase (discard / WRITE ZEROES), write the buffer, or flush. */
enum { SAN_ERASE, SAN_WRITE, SAN_FLUSH };

/* A SANITIZE with IMMED: the erase runs as this command once the guest's has completed. */
struct sanitize_job {
    struct scsi_cmd cmd;
    uint8_t cdb[SANITIZE_CDB_LEN];
};

/* Progress in 65536ths of every pass over every block, without overflowing. */
static void set_progress(struct scsi_lun *lun, const struct op_state *st)
{
    uint64_t total = st->end_lba * st->count, done = st->done_bytes;
    uint64_t p = total <= UINT64_MAX >> 16 ? (done << 16) / total : done / (total >> 16);

    atomic_store_explicit(&lun->sanitize_progress, (unsigned)MIN(p, 0xffffu),
                          memory_order_relaxed);
}

static void sanitize_end(struct scsi_lun *lun, bool ok)
{
    atomic_store_explicit(&lun->sanitize_progress, 0, memory_order_relaxed);
    atomic_store_explicit(&lun->sanitize_state, ok ? SD_SANITIZE_IDLE : SD_SANITIZE_FAILED,
                          memory_order_release);
    if (ok) {
        log_limit_message(&lun->log_limit, "%s: SANITIZE completed", lun->name);
    } else {
        log_limit_warning(&lun->log_limit,
                          "%s: SANITIZE failed; medium access refused until one succeeds%s",
                          lun->name,
                          atomic_load(&lun->sanitize_ause) ? " or EXIT FAILURE MODE" : "");
    }
}

/* Zeros written out: the backend can neither discard to zeros nor write zeroes. */
static void use_zero_buffer(struct scsi_lun *lun, struct op_state *st)
{
    st->chunk_blocks = MIN(st->end_lba, sd_chunk_bytes(lun) / lun->bs);
    g_free(st->buf);
    st->buf = g_malloc0(st->chunk_blocks * lun->bs);
    st->iov.iov_len = 0;    /* the piece that failed is done again */
    st->state = SAN_WRITE;
}

static void invert(uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        p[i] = (uint8_t)~p[i];
    }
}

/*
 * st->lba / st->remaining: what is left of pass st->idx of st->count;
 * st->iov.iov_len: the bytes of the piece in flight (0: none), counted
 * done when its request succeeds; st->fua: INVERT; st->done_bytes: blocks
 * done over all passes, for the progress indication.
 */
static int sanitize_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st,
                         int ret)
{
    uint64_t n;

    if ((ret == -EOPNOTSUPP || ret == -ENOTSUP) && st->state == SAN_ERASE) {
        use_zero_buffer(lun, st);
        ret = 0;
    }
    if (ret < 0) {
        sd_step_fail(lun, cmd, ret);
        sanitize_end(lun, false);
        return STEP_DONE;
    }
    if (st->state == SAN_FLUSH) {
        sanitize_end(lun, true);
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
    n = st->iov.iov_len / lun->bs;
    st->iov.iov_len = 0;
    st->lba += n;
    st->remaining -= n;
    st->done_bytes += n;
    set_progress(lun, st);
    if (!st->remaining && ++st->idx < st->count) {
        st->lba = 0;
        st->remaining = st->end_lba;
        if (st->fua) {
            invert(st->buf, st->chunk_blocks * lun->bs);
        }
    }
    if (!st->remaining) {
        if (lun->be->write_cache) {
            /* Erased means erased on the medium, not in a volatile cache. */
            sd_bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, sd_op_bio_done);
            st->state = SAN_FLUSH;
            return STEP_SUBMIT;
        }
        sanitize_end(lun, true);
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
    if (st->state == SAN_ERASE) {
        /*
         * Deallocation only where deallocated blocks read back as zeros: a
         * discard that may leave the old data readable erases nothing.
         */
        n = MIN(st->remaining, sd_range_chunk_blocks(lun));
        sd_bio_init(lun, cmd, lun->be->can_discard && lun->be->discard_zeroes
                              ? BACKEND_DISCARD : BACKEND_WRITE_ZEROES,
                    st->lba * lun->bs, n * lun->bs, sd_op_bio_done);
        st->iov.iov_len = n * lun->bs;
        return STEP_SUBMIT;
    }
    n = MIN(st->remaining, st->chunk_blocks);
    sd_bio_init(lun, cmd, BACKEND_WRITE, st->lba * lun->bs, n * lun->bs, sd_op_bio_done);
    st->iov.iov_base = st->buf;
    st->iov.iov_len = n * lun->bs;
    cmd->bio.iov = &st->iov;
    cmd->bio.iovcnt = 1;
    return STEP_SUBMIT;
}

static void job_done(struct scsi_cmd *cmd)
{
    /* The failure was logged by the I/O engine and sanitize_end(). */
    g_free((struct sanitize_job *)(void *)cmd);
}

/*
 * The OVERWRITE parameter list (SBC-3 table 44) into st: the pattern
 * replicated over a bounce buffer, the passes and INVERT.  -1 if accepted,
 * else EXEC_DONE with the refusal.
 */
static int parse_overwrite(struct scsi_lun *lun, struct scsi_cmd *cmd, unsigned plen,
                           struct op_state *st)
{
    uint8_t p[OVERWRITE_HDR + 4096];
    unsigned ipl;

    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, plen);
    cmd->data_out_xfer = plen;
    if (p[0] & 0x60) {
        return invalid_param(cmd, 0, 6);   /* TEST: no test modes */
    }
    if ((p[0] & 0x1f) == 0) {
        return invalid_param(cmd, 0, 4);   /* OVERWRITE COUNT 0 */
    }
    if (p[1]) {
        return invalid_param(cmd, 1, 31 - __builtin_clz(p[1]));   /* reserved */
    }
    ipl = ld16(p + 2);
    if (ipl == 0 || ipl != plen - OVERWRITE_HDR) {
        return invalid_param(cmd, 2, 7);
    }
    st->fua = p[0] & 0x80;
    st->count = p[0] & 0x1f;
    st->chunk_blocks = MIN(st->end_lba, sd_chunk_bytes(lun) / lun->bs);
    st->buf = g_malloc(st->chunk_blocks * lun->bs);
    /* The pattern repeated to fill a block (restarting at each), the block the buffer. */
    for (size_t i = 0; i < lun->bs; i++) {
        st->buf[i] = p[OVERWRITE_HDR + i % ipl];
    }
    for (uint64_t b = 1; b < st->chunk_blocks; b++) {
        memcpy(st->buf + b * lun->bs, st->buf, lun->bs);
    }
    st->state = SAN_WRITE;
    return -1;
}

static int exit_failure_mode(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    unsigned expected = SD_SANITIZE_FAILED;

    if (sd_sanitize_state(lun) != SD_SANITIZE_FAILED) {
        cmd->status = SAM_STAT_GOOD;   /* nothing failed: nothing to exit */
        return EXEC_DONE;
    }
    if (!atomic_load(&lun->sanitize_ause)) {
        /* Only a sanitize begun with AUSE may be left without succeeding. */
        return invalid_cdb(cmd, 1, 4);
    }
    if (atomic_compare_exchange_strong(&lun->sanitize_state, &expected, SD_SANITIZE_IDLE)) {
        log_limit_message(&lun->log_limit, "%s: SANITIZE failure mode exited", lun->name);
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* Claims the LUN for a sanitize; false if one runs already. */
static bool sanitize_claim(struct scsi_lun *lun, bool ause)
{
    unsigned from = sd_sanitize_state(lun);

    if (from == SD_SANITIZE_RUNNING ||
        !atomic_compare_exchange_strong(&lun->sanitize_state, &from, SD_SANITIZE_RUNNING)) {
        return false;
    }
    atomic_store(&lun->sanitize_progress, 0);
    atomic_store(&lun->sanitize_ause, ause);
    return true;
}

int sd_exec_sanitize(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned sa = cdb[1] & 0x1f, plen = ld16(cdb + 7);
    bool immed = cdb[1] & 0x80, ause = cdb[1] & 0x20;
    struct scsi_cmd *run = cmd;
    struct sanitize_job *job = NULL;
    struct op_state *st;
    int ret;

    if (sa == SANITIZE_OVERWRITE
        ? plen <= OVERWRITE_HDR || plen > OVERWRITE_HDR + lun->bs
        : plen != 0) {
        return invalid_cdb(cmd, 7, 7);
    }
    if (sa == SANITIZE_EXIT_FAILURE_MODE) {
        return exit_failure_mode(lun, cmd);
    }
    if (lun->be->read_only) {
        return sd_sense_done(cmd, SCSI_SC_WRITE_PROTECTED);
    }
    if (sd_data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, 7, 7);
    }
    if (immed) {
        /* The erase outlives cmd: it runs as a command of its own. */
        job = g_new0(struct sanitize_job, 1);
        memcpy(job->cdb, cdb, SANITIZE_CDB_LEN);
        job->cmd.cdb = job->cdb;
        job->cmd.cdb_len = SANITIZE_CDB_LEN;
        job->cmd.thread = cmd->thread;
        job->cmd.complete = job_done;
        run = &job->cmd;
        sd_cmd_begin(lun, run, IO_OTHER);
    }
    st = sd_op_new(run, sanitize_step);
    st->end_lba = sd_nb_blocks(lun);
    st->remaining = st->end_lba;
    st->count = 1;
    st->state = SAN_ERASE;
    if (sa == SANITIZE_OVERWRITE && (ret = parse_overwrite(lun, cmd, plen, st)) >= 0) {
        if (job) {
            sd_cmd_finish(run);   /* frees the job, which never ran */
        }
        return ret;
    }
    if (!sanitize_claim(lun, ause)) {
        if (job) {
            sd_cmd_finish(run);
        }
        return sd_sanitize_in_progress(lun, cmd);
    }
    log_limit_message(&lun->log_limit, "%s: SANITIZE %s of %" PRIu64 " blocks%s", lun->name,
                      sa == SANITIZE_OVERWRITE ? "OVERWRITE" : "BLOCK ERASE", st->end_lba,
                      immed ? " (IMMED)" : "");
    ret = sd_op_start_range(lun, run, st, 0, st->end_lba, true);
    if (!job) {
        return ret;
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}
