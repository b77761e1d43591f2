/*
 * The backend I/O engine under every SCSI disk command family: a command's
 * lifetime (its drain-epoch membership and its private area, freed when it
 * finishes), mapping data buffers onto a backend request, one-request
 * commands, and the step engine for commands needing several requests
 * (WRITE SAME replication, VERIFY with compare, UNMAP lists, a flush after
 * a cache change, EXTENDED COPY's chunks on other LUNs' backends, each
 * write under a range of the write range lock taken mid-command), which
 * tolerates backends completing inside backend_submit() without recursing.  Backend errors become sense data
 * here, once.  Calls only the drain accounting and sense helpers below it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "scsi-disk-int.h"

enum { PHASE_SUBMITTING, PHASE_WAITING, PHASE_DONE_SYNC };

/* Per-command private area, overlaid on scsi_cmd.priv. */
struct cmd_priv {
    struct op_state *op;
    struct iovec *heap_iov;  /* slice that did not fit cmd->iov_slice */
    unsigned epoch;          /* its sd_inflight_get token, or SD_INFLIGHT_NONE */
    enum io_class cls;       /* what the statistics count it as */
    struct sd_range range;   /* what it holds of the write range lock */
};
G_STATIC_ASSERT(sizeof(struct cmd_priv) <= sizeof(((struct scsi_cmd *)0)->priv));

static struct cmd_priv *cmd_priv(struct scsi_cmd *cmd)
{
    return (struct cmd_priv *)(void *)cmd->priv;
}

/*
 * Backend failures.  -ENOSPC (a thin backend out of space) is reported as
 * DATA PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h), which
 * Linux turns into -ENOSPC for the writer instead of a medium error.
 */
static void io_error(struct scsi_lun *lun, struct scsi_cmd *cmd,
                     enum backend_op op, uint64_t offset, int ret)
{
    static const char *const names[] = { "read", "write", "flush", "discard", "write-zeroes" };
    const char *what = (unsigned)op < G_N_ELEMENTS(names) ? names[op] : "i/o";

    /* A remote device's own CHECK CONDITION is passed on unchanged. */
    if (ret == -EREMOTEIO && cmd->bio.has_sense) {
        scsi_cmd_set_sense(cmd, cmd->bio.sense_key, cmd->bio.asc, cmd->bio.ascq);
        g_debug("%s: %s at byte %" PRIu64 ": remote sense %x/%02x/%02x", lun->name, what,
                offset, cmd->bio.sense_key, cmd->bio.asc, cmd->bio.ascq);
        return;
    }
    /*
     * So is a remote status without sense (another initiator holds a
     * reservation): the guest must see it as such, not as a medium error.
     */
    if (ret == -EREMOTEIO && cmd->bio.status == SAM_STAT_RESERVATION_CONFLICT) {
        g_debug("%s: %s at byte %" PRIu64 ": reservation conflict", lun->name, what, offset);
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        cmd->sense_len = 0;
        return;
    }
    switch (ret) {
    case -EAGAIN:
    case -EBUSY:
    case -ENOMEM:
        g_debug("%s: %s at byte %" PRIu64 ": %s, reporting BUSY", lun->name, what,
                offset, g_strerror(-ret));
        cmd->status = SAM_STAT_BUSY;
        cmd->sense_len = 0;
        return;
    case -EREMOTEIO:
        /* [iscsi] A remote answer with nothing we can pass on (handled above). */
        sd_set_sense(cmd, SCSI_SC_INTERNAL_TARGET_FAILURE);
        break;
    case -ENOTCONN:
        /*
         * [iscsi] The remote LUN has been unreachable for a long time (the
         * backend logged it once): LOGICAL UNIT NOT READY, CAUSE NOT
         * REPORTABLE, which initiators fail rather than retry forever.
         */
        sd_set_sense(cmd, SCSI_SC_LUN_NOT_READY);
        return;
    case -ENOSPC:
        sd_set_sense(cmd, SCSI_SC_SPACE_ALLOC_FAILED);
        break;
    case -EROFS:
        sd_set_sense(cmd, SCSI_SC_WRITE_PROTECTED);
        break;
    case -EIO:
    case -ENODATA:
        if (op == BACKEND_READ) {
            sd_set_sense(cmd, SCSI_SC_UNRECOVERED_READ_ERROR);
        } else {
            sd_set_sense(cmd, SCSI_SC_WRITE_ERROR);
        }
        break;
    default:
        /* Anything else is our or the backend's bug, not the medium's. */
        sd_set_sense(cmd, SCSI_SC_INTERNAL_TARGET_FAILURE);
        break;
    }
    log_limit_warning(&lun->log_limit, "%s: %s at byte %" PRIu64 " failed: %s", lun->name, what,
                      offset, g_strerror(-ret));
}

/* ---- command lifetime -------------------------------------------------- */

void sd_cmd_begin(struct scsi_lun *lun, struct scsi_cmd *cmd, enum io_class cls)
{
    if (!cmd->start_ns) {
        cmd->start_ns = iothread_now_ns(cmd->thread);
    }
    cmd->lun = lun;
    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    /* Unrolled stores, not memset: that became rep stosb, slow to start for 96 bytes. */
#pragma GCC unroll 16
    for (unsigned i = 0; i < G_N_ELEMENTS(cmd->priv); i++) {
        cmd->priv[i] = 0;
    }
    cmd_priv(cmd)->epoch = sd_inflight_get(lun, cmd->thread ? iothread_id(cmd->thread) : 0);
    cmd_priv(cmd)->cls = cls;
}

static void op_free(struct scsi_cmd *cmd, struct op_state *st)
{
    if (st->ext_free) {
        st->ext_free(cmd, st->ext);
    }
    g_free(st->buf);
    g_free(st->block);
    g_free(st->expect);
    g_free(st->unmap);
    g_free(st->piece_iov);
    g_free(st);
}
void sd_cmd_finish(struct scsi_cmd *cmd)
{
    struct scsi_lun *lun = cmd->lun;
    struct cmd_priv *p = cmd_priv(cmd);
    unsigned epoch = p->epoch;
    uint64_t now = iothread_now_after_ns(cmd->thread, cmd->start_ns);

    /* Released before complete(): a waiter may start while cmd is freed. */
    if (p->range.state) {
        sd_range_unlock(p->op && p->op->range_lun ? p->op->range_lun : lun, &p->range);
    }
    g_free(p->heap_iov);
    p->heap_iov = NULL;
    if (p->op) {
        op_free(cmd, p->op);
        p->op = NULL;
    }
    cmd->done_ns = now;
    io_stats_add(&lun->stats, cmd->thread ? iothread_id(cmd->thread) : 0, p->cls,
                 cmd->data_in_xfer + cmd->data_out_xfer, scsi_cmd_is_error(cmd),
                 now - cmd->start_ns);
    /* cmd may be freed by complete(); lun and epoch were saved above. */
    cmd->complete(cmd);
    if (epoch != SD_INFLIGHT_NONE) {
        sd_inflight_put(lun, epoch);
    }
}

void sd_cmd_leave_epoch(struct scsi_cmd *cmd)
{
    struct cmd_priv *p = cmd_priv(cmd);

    if (p->epoch != SD_INFLIGHT_NONE) {
        sd_inflight_put(cmd->lun, p->epoch);
        p->epoch = SD_INFLIGHT_NONE;
    }
}
/* ---- data helpers ------------------------------------------------------ */

/*
 * Points the bio at the first len bytes of iov (total bytes long).  The
 * command's own slice array is used when it fits; otherwise a heap copy
 * freed when the command finishes.
 */
int sd_map_data(struct scsi_cmd *cmd, const struct iovec *iov, unsigned cnt,
                    size_t total, size_t len)
{
    struct backend_io *bio = &cmd->bio;
    int n;

    if (total == len) {
        bio->iov = iov;
        bio->iovcnt = cnt;
        return 0;
    }
    n = iov_slice(iov, cnt, 0, len, cmd->iov_slice, G_N_ELEMENTS(cmd->iov_slice));
    if (n >= 0) {
        bio->iov = cmd->iov_slice;
        bio->iovcnt = (unsigned)n;
        return 0;
    }
    if (n == -ENOBUFS) {
        struct iovec *heap = g_new(struct iovec, cnt);

        n = iov_slice(iov, cnt, 0, len, heap, cnt);
        if (n >= 0) {
            cmd_priv(cmd)->heap_iov = heap;
            bio->iov = heap;
            bio->iovcnt = (unsigned)n;
            return 0;
        }
        g_free(heap);
    }
    return n;
}

/*
 * LBA range check that cannot wrap: lba + n must not pass the capacity.  A
 * zero-length range still needs lba to name a block.
 */
bool sd_range_ok(const struct scsi_lun *lun, uint64_t lba, uint64_t n)
{
    uint64_t blocks = sd_nb_blocks(lun);

    if (n == 0) {
        return lba < blocks;
    }
    return lba <= blocks && n <= blocks - lba;
}

/* Writes must be durable at completion if FUA or the write cache is off. */
bool sd_write_needs_fua(struct scsi_lun *lun, bool fua_bit)
{
    return lun->be->write_cache && (fua_bit || !atomic_load(&lun->wce));
}

void sd_bio_init(struct scsi_lun *lun, struct scsi_cmd *cmd, enum backend_op op,
                     uint64_t offset, uint64_t len,
                     void (*done)(struct backend_io *io, int ret))
{
    struct backend_io *bio = &cmd->bio;

    bio->op = op;
    bio->offset = offset;
    bio->len = len;
    bio->iov = NULL;
    bio->iovcnt = 0;
    bio->fua = false;
    bio->has_sense = false;
    bio->status = 0;
    bio->thread = cmd->thread;
    bio->complete = done;
    bio->opaque = cmd;
}

/* ---- single-request commands (READ, WRITE, SYNCHRONIZE CACHE) ---------- */

void sd_single_done(struct backend_io *io, int ret)
{
    struct scsi_cmd *cmd = io->opaque;

    if (ret < 0) {
        io_error(cmd->lun, cmd, io->op, io->offset, ret);
    } else {
        cmd->status = SAM_STAT_GOOD;
        if (io->op == BACKEND_READ) {
            cmd->data_in_xfer = io->len;
        } else if (io->op == BACKEND_WRITE) {
            cmd->data_out_xfer = io->len;
        }
    }
    sd_cmd_finish(cmd);
}

int sd_submit_single(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    int ret = backend_submit(lun->be, &cmd->bio);

    if (ret < 0) {
        io_error(lun, cmd, cmd->bio.op, cmd->bio.offset, ret);
        return EXEC_DONE;
    }
    /* complete() may already have run and freed cmd: touch nothing. */
    return EXEC_ASYNC;
}

static void single_go(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    if (sd_submit_single(lun, cmd) == EXEC_DONE) {
        sd_cmd_finish(cmd);
    }
}

int sd_submit_single_range(struct scsi_lun *lun, struct scsi_cmd *cmd, uint64_t lba,
                           uint64_t n, bool excl)
{
    if (!sd_range_lock(lun, &cmd_priv(cmd)->range, cmd, lba, n, excl, single_go)) {
        return EXEC_ASYNC;
    }
    return sd_submit_single(lun, cmd);
}

/* ---- step engine ------------------------------------------------------- */

/*
 * Submits the request the step prepared.  Returns true if it is left
 * pending in the backend (the callback continues the command); false if
 * it already completed, its result in *ret.
 */
static bool op_submit(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int *ret)
{
    int expected = PHASE_SUBMITTING;
    int r;

    cmd->bio.complete = sd_op_bio_done;
    cmd->bio.opaque = cmd;
    cmd->bio.thread = cmd->thread;
    atomic_store(&st->phase, PHASE_SUBMITTING);
    r = backend_submit(st->be ? st->be : lun->be, &cmd->bio);
    if (r < 0) {
        *ret = r;       /* complete() will not run: the step sees the error */
        return false;
    }
    if (atomic_compare_exchange_strong(&st->phase, &expected, PHASE_WAITING)) {
        return true;
    }
    *ret = st->last_ret;
    return false;
}

static void op_run(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret,
                   bool ran_inline);
static void op_go(struct scsi_lun *lun, struct scsi_cmd *cmd);

/* The next request of a command that yielded its thread (op_run). */
static void op_submit_later(struct iothread_task *task)
{
    struct op_state *st = (struct op_state *)((char *)task - offsetof(struct op_state, task));
    struct scsi_cmd *cmd = st->cmd;
    int ret;

    if (!op_submit(cmd->lun, cmd, st, &ret)) {
        op_run(cmd->lun, cmd, st, ret, true);
    }
}

/* The first step of a command that started deferred (defer_first). */
static void op_start_later(struct iothread_task *task)
{
    struct op_state *st = (struct op_state *)((char *)task - offsetof(struct op_state, task));

    op_run(st->cmd->lun, st->cmd, st, 0, false);
}

/*
 * Runs steps until one is left pending in the backend or the command is
 * done (a command with defer_first set starts in a later iteration).  A
 * synchronous completion is noticed through the phase flag and the loop
 * continues here instead of recursing from the callback.  After one,
 * the next request is deferred to a later iteration of the command's I/O
 * thread rather than submitted here (iothread_defer, a few pieces per
 * iteration whatever the number of such commands): a backend that works
 * inside submit() (ram, BLKDISCARD) would otherwise hold the thread for
 * the whole command (a WRITE SAME of a million blocks), and the other
 * queues it serves would wait meanwhile.
 */
static void op_run(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret,
                   bool ran_inline)
{
    if (st->defer_first && cmd->thread && iothread_is_current(cmd->thread)) {
        st->defer_first = false;
        st->task.fn = op_start_later;
        iothread_defer(cmd->thread, &st->task);
        return;
    }
    for (;;) {
        int next = st->step(lun, cmd, st, ret);

        if (next == STEP_DONE) {
            sd_cmd_finish(cmd);
            return;
        }
        if (next == STEP_RANGE) {
            /* Held now: the step goes on here; else op_go continues it once granted. */
            if (!sd_range_lock(st->range_lun, &cmd_priv(cmd)->range, cmd, st->range_lba,
                               st->range_n, false, op_go)) {
                return;
            }
            ret = 0;
            continue;
        }
        /* Deferred only on its own thread (a backend completing elsewhere goes on here). */
        if (ran_inline && cmd->thread && iothread_is_current(cmd->thread)) {
            st->task.fn = op_submit_later;
            iothread_defer(cmd->thread, &st->task);
            return;
        }
        if (op_submit(lun, cmd, st, &ret)) {
            return;     /* the callback continues the command */
        }
        ran_inline = true;
    }
}

void sd_op_bio_done(struct backend_io *io, int ret)
{
    struct scsi_cmd *cmd = io->opaque;
    struct op_state *st = cmd_priv(cmd)->op;
    int expected = PHASE_SUBMITTING;

    st->last_ret = ret;
    if (atomic_compare_exchange_strong(&st->phase, &expected, PHASE_DONE_SYNC)) {
        return;         /* still inside backend_submit(): op_run continues */
    }
    op_run(cmd->lun, cmd, st, ret, false);
}

struct op_state *sd_op_new(struct scsi_cmd *cmd, op_step_fn *step)
{
    struct op_state *st = g_new0(struct op_state, 1);

    st->step = step;
    st->cmd = cmd;
    cmd_priv(cmd)->op = st;
    return st;
}

int sd_op_start(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st)
{
    op_run(lun, cmd, st, 0, false);
    return EXEC_ASYNC;
}

static void op_go(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    op_run(lun, cmd, cmd_priv(cmd)->op, 0, false);
}

void sd_op_range_unlock(struct scsi_cmd *cmd, struct op_state *st)
{
    sd_range_unlock(st->range_lun, &cmd_priv(cmd)->range);
    st->range_lun = NULL;
}

int sd_op_start_range(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st,
                      uint64_t lba, uint64_t n, bool excl)
{
    g_assert(cmd_priv(cmd)->op == st);
    if (sd_range_lock(lun, &cmd_priv(cmd)->range, cmd, lba, n, excl, op_go)) {
        op_run(lun, cmd, st, 0, false);
    }
    return EXEC_ASYNC;
}

int sd_step_fail(struct scsi_lun *lun, struct scsi_cmd *cmd, int ret)
{
    io_error(lun, cmd, cmd->bio.op, cmd->bio.offset, ret);
    return STEP_DONE;
}

/* A lone FLUSH as a step (MODE SELECT clearing WCE, START STOP UNIT). */
static int flush_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    if (ret < 0) {
        return sd_step_fail(lun, cmd, ret);
    }
    if (st->state++ == 0) {
        sd_bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, sd_op_bio_done);
        return STEP_SUBMIT;
    }
    cmd->status = SAM_STAT_GOOD;
    return STEP_DONE;
}

int sd_start_flush(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    return sd_op_start(lun, cmd, sd_op_new(cmd, flush_step));
}
