/*
 * SCSI block device emulation (SPC-4 / SBC-3) for one logical unit: the
 * command table and dispatch, unit attentions, drain, and the data commands
 * (READ, WRITE, VERIFY, WRITE SAME, UNMAP, SYNCHRONIZE CACHE) that become
 * backend I/O; commands answered from the LUN's state live in
 * scsi-disk-info.c.  READ/WRITE are one backend request each and take no
 * lock; commands needing several requests (WRITE SAME replication, VERIFY
 * with compare, UNMAP lists, a flush after a cache change) run through a
 * small step engine that tolerates backends completing inside
 * backend_submit() without recursing.  Every CDB field and parameter list
 * byte is untrusted and checked here, where it enters.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "scsi-disk-int.h"

/*
 * Drain epochs.  lun->inflight holds two counts of commands in flight, one
 * per epoch slot (31 bits each), which slot is current (EPOCH_CUR) and
 * whether a drain waits for the other one (EPOCH_DRAINING).  A command
 * joins the current slot and leaves the slot it joined.  A drain closes
 * the current epoch with one atomic XOR that makes the other slot current:
 * the closed slot then holds exactly the commands in flight at that
 * instant, and only loses commands, so the command that empties it (it
 * sees DRAINING and its slot not current in the value it replaced) ends
 * the drain.  While a closed slot drains, the current one cannot be closed
 * as well (new commands would join a slot someone waits for): drains that
 * come meanwhile wait in next_drain, and when the closed slot empties they
 * close the current one, which holds every command that was in flight when
 * they came and not in the slot just emptied.  A drain thus waits for at
 * most two epochs of commands that already exist, never for the LUN to go
 * idle.  The current slot and DRAINING change only under lun->lock; the
 * counts change without it.
 */
#define EPOCH_BITS 31
#define EPOCH_SHIFT(s) ((s) * EPOCH_BITS)
#define EPOCH_ONE(s) (1ull << EPOCH_SHIFT(s))
#define EPOCH_COUNT(w, s) (((w) >> EPOCH_SHIFT(s)) & ((1ull << EPOCH_BITS) - 1))
#define EPOCH_DRAINING (1ull << 62)
#define EPOCH_CUR (1ull << 63)
#define EPOCH_SLOT(w) ((unsigned)((w) >> 63))

/*
 * Multi-request command state.  The step function prepares cmd->bio and
 * returns STEP_SUBMIT, or sets the command's result and returns STEP_DONE.
 * It sees the previous request's result in ret (0 on the first call).
 */
enum { STEP_DONE, STEP_SUBMIT };
enum { PHASE_SUBMITTING, PHASE_WAITING, PHASE_DONE_SYNC };

struct op_state;
typedef int op_step_fn(struct scsi_lun *lun, struct scsi_cmd *cmd,
                       struct op_state *st, int ret);

struct op_state {
    op_step_fn *step;
    atomic_int phase;
    int last_ret;
    int state;             /* step-function specific */
    uint64_t lba;          /* next block */
    uint64_t remaining;    /* blocks still to do */
    uint64_t done_bytes;   /* VERIFY: data-out bytes compared so far */
    uint8_t *buf;          /* bounce buffer, chunk sized */
    uint8_t *block;        /* one block: WRITE SAME data, VERIFY BYTCHK=3 */
    uint8_t *expect;       /* VERIFY BYTCHK=1: data-out for the chunk */
    uint64_t chunk_blocks;
    struct iovec iov;
    uint64_t *unmap;       /* UNMAP: lba, count pairs */
    unsigned idx, count;
    bool fua;
    bool flush_after;
};

/* Per-command private area, overlaid on scsi_cmd.priv. */
struct cmd_priv {
    struct op_state *op;
    struct iovec *heap_iov;  /* slice that did not fit cmd->iov_slice */
    unsigned epoch;          /* the drain epoch slot the command joined */
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
        scsi_cmd_set_sense(cmd, SENSE_HARDWARE_ERROR, 0x44, 0x00);
        break;
    case -ENOTCONN:
        /*
         * [iscsi] The remote LUN has been unreachable for a long time (the
         * backend logged it once): LOGICAL UNIT NOT READY, CAUSE NOT
         * REPORTABLE, which initiators fail rather than retry forever.
         */
        scsi_cmd_set_sense(cmd, SENSE_NOT_READY, 0x04, 0x00);
        return;
    case -ENOSPC:
        scsi_cmd_set_sense(cmd, SENSE_DATA_PROTECT, 0x27, 0x07);
        break;
    case -EROFS:
        scsi_cmd_set_sense(cmd, SENSE_DATA_PROTECT, 0x27, 0x00);
        break;
    case -EIO:
    case -ENODATA:
        if (op == BACKEND_READ) {
            scsi_cmd_set_sense(cmd, SENSE_MEDIUM_ERROR, 0x11, 0x00);  /* UNRECOVERED READ */
        } else {
            scsi_cmd_set_sense(cmd, SENSE_MEDIUM_ERROR, 0x0c, 0x00);  /* WRITE ERROR */
        }
        break;
    default:
        /* Anything else is our or the backend's bug, not the medium's. */
        scsi_cmd_set_sense(cmd, SENSE_HARDWARE_ERROR, 0x44, 0x00);  /* INTERNAL TARGET FAILURE */
        break;
    }
    g_warning("%s: %s at byte %" PRIu64 " failed: %s", lun->name, what, offset,
              g_strerror(-ret));
}

/* ---- command lifetime -------------------------------------------------- */

static void op_free(struct op_state *st)
{
    g_free(st->buf);
    g_free(st->block);
    g_free(st->expect);
    g_free(st->unmap);
    g_free(st);
}

/* Joins the current drain epoch; returns its slot. */
static unsigned lun_get(struct scsi_lun *lun)
{
    uint64_t w = atomic_load_explicit(&lun->inflight, memory_order_relaxed);
    unsigned s;

    /* Read the slot and count the command in it as one step: a drain may flip it. */
    do {
        s = EPOCH_SLOT(w);
    } while (!atomic_compare_exchange_weak(&lun->inflight, &w, w + EPOCH_ONE(s)));
    return s;
}

static void drain_list_append(struct scsi_drain **list, struct scsi_drain *d)
{
    while (*list) {
        list = &(*list)->next;
    }
    *list = d;
}

static void drain_run(void *opaque)
{
    struct scsi_drain *d = opaque;

    d->done(d);
}

/* Hands finished drains to their owners; lun is not touched (it may be freed meanwhile). */
static void drain_fire(struct scsi_drain *list)
{
    while (list) {
        struct scsi_drain *d = list;

        /* d is its owner's again once posted or done: read the link first. */
        list = d->next;
        if (d->thread) {
            iothread_post(d->thread, drain_run, d);
        } else {
            d->done(d);
        }
    }
}

/*
 * Closes the current epoch (lun->lock held, no closed epoch draining
 * unless draining is set, as when the previous one just emptied); returns
 * the commands in it.  An empty epoch is closed and done at once.
 */
static uint64_t epoch_close(struct scsi_lun *lun, bool draining)
{
    uint64_t old = atomic_fetch_xor(&lun->inflight,
                                    EPOCH_CUR | (draining ? 0 : EPOCH_DRAINING));
    uint64_t n = EPOCH_COUNT(old, EPOCH_SLOT(old));

    if (n == 0) {
        atomic_fetch_and(&lun->inflight, ~EPOCH_DRAINING);
    }
    return n;
}

/* The closed epoch has emptied: end its drains, start the next ones'. */
static void epoch_drained(struct scsi_lun *lun)
{
    struct scsi_drain *done, *next;

    pthread_mutex_lock(&lun->lock);
    done = lun->draining;
    next = lun->next_drain;
    lun->draining = NULL;
    lun->next_drain = NULL;
    if (!next) {
        atomic_fetch_and(&lun->inflight, ~EPOCH_DRAINING);
    } else if (epoch_close(lun, true) > 0) {
        lun->draining = next;
    } else {
        drain_list_append(&done, next);
    }
    pthread_mutex_unlock(&lun->lock);
    drain_fire(done);
}

static void lun_put(struct scsi_lun *lun, unsigned slot)
{
    uint64_t old = atomic_fetch_sub(&lun->inflight, EPOCH_ONE(slot));

    if ((old & EPOCH_DRAINING) && EPOCH_SLOT(old) != slot && EPOCH_COUNT(old, slot) == 1) {
        epoch_drained(lun);
    }
}

static void cmd_finish(struct scsi_cmd *cmd)
{
    struct scsi_lun *lun = cmd->lun;
    struct cmd_priv *p = cmd_priv(cmd);
    unsigned epoch = p->epoch;

    g_free(p->heap_iov);
    p->heap_iov = NULL;
    if (p->op) {
        op_free(p->op);
        p->op = NULL;
    }
    /* cmd may be freed by complete(); lun and epoch were saved above. */
    cmd->complete(cmd);
    lun_put(lun, epoch);
}

unsigned scsi_lun_inflight(struct scsi_lun *lun)
{
    uint64_t w = atomic_load(&lun->inflight);

    return (unsigned)(EPOCH_COUNT(w, 0) + EPOCH_COUNT(w, 1));
}

void scsi_lun_drain_async(struct scsi_lun *lun, struct scsi_drain *d)
{
    d->next = NULL;
    pthread_mutex_lock(&lun->lock);
    if (lun->draining) {
        drain_list_append(&lun->next_drain, d);
        pthread_mutex_unlock(&lun->lock);
        return;
    }
    if (epoch_close(lun, false) > 0) {
        lun->draining = d;
        pthread_mutex_unlock(&lun->lock);
        return;
    }
    pthread_mutex_unlock(&lun->lock);
    drain_fire(d);
}

/* scsi_lun_free's wait: the only drain that blocks its caller. */
struct sync_drain {
    struct scsi_drain d;
    struct scsi_lun *lun;
    bool done;
};

static void sync_drain_done(struct scsi_drain *d)
{
    struct sync_drain *sd = d->opaque;

    /* The waiter cannot return (and free lun) before this unlocks. */
    pthread_mutex_lock(&sd->lun->lock);
    sd->done = true;
    pthread_cond_broadcast(&sd->lun->drain_cond);
    pthread_mutex_unlock(&sd->lun->lock);
}

static void lun_drain_sync(struct scsi_lun *lun)
{
    struct sync_drain sd = { .d = { .done = sync_drain_done }, .lun = lun };

    sd.d.opaque = &sd;
    scsi_lun_drain_async(lun, &sd.d);
    pthread_mutex_lock(&lun->lock);
    while (!sd.done) {
        pthread_cond_wait(&lun->drain_cond, &lun->lock);
    }
    pthread_mutex_unlock(&lun->lock);
}

/* ---- data helpers ------------------------------------------------------ */

/*
 * Points the bio at the first len bytes of iov (total bytes long).  The
 * command's own slice array is used when it fits; otherwise a heap copy
 * freed when the command finishes.
 */
static int map_data(struct scsi_cmd *cmd, const struct iovec *iov, unsigned cnt,
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
static bool range_ok(const struct scsi_lun *lun, uint64_t lba, uint64_t n)
{
    if (n == 0) {
        return lba < lun->nb_blocks;
    }
    return lba <= lun->nb_blocks && n <= lun->nb_blocks - lba;
}

/* Writes must be durable at completion if FUA or the write cache is off. */
static bool write_needs_fua(struct scsi_lun *lun, bool fua_bit)
{
    return lun->be->write_cache && (fua_bit || !atomic_load(&lun->wce));
}

static void bio_init(struct scsi_lun *lun, struct scsi_cmd *cmd, enum backend_op op,
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

static void single_done(struct backend_io *io, int ret)
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
    cmd_finish(cmd);
}

static int submit_single(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    int ret = backend_submit(lun->be, &cmd->bio);

    if (ret < 0) {
        io_error(lun, cmd, cmd->bio.op, cmd->bio.offset, ret);
        return EXEC_DONE;
    }
    /* complete() may already have run and freed cmd: touch nothing. */
    return EXEC_ASYNC;
}

/* ---- step engine ------------------------------------------------------- */

static void op_bio_done(struct backend_io *io, int ret);

/*
 * Runs steps until one is left pending in the backend or the command is
 * done.  A synchronous completion is noticed through the phase flag and the
 * loop continues here instead of recursing from the callback.
 */
static void op_run(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    for (;;) {
        if (st->step(lun, cmd, st, ret) == STEP_DONE) {
            cmd_finish(cmd);
            return;
        }
        cmd->bio.complete = op_bio_done;
        cmd->bio.opaque = cmd;
        cmd->bio.thread = cmd->thread;
        atomic_store(&st->phase, PHASE_SUBMITTING);
        ret = backend_submit(lun->be, &cmd->bio);
        if (ret < 0) {
            continue;   /* complete() will not run: the step sees the error */
        }
        int expected = PHASE_SUBMITTING;
        if (atomic_compare_exchange_strong(&st->phase, &expected, PHASE_WAITING)) {
            return;     /* the callback continues the command */
        }
        ret = st->last_ret;
    }
}

static void op_bio_done(struct backend_io *io, int ret)
{
    struct scsi_cmd *cmd = io->opaque;
    struct op_state *st = cmd_priv(cmd)->op;
    int expected = PHASE_SUBMITTING;

    st->last_ret = ret;
    if (atomic_compare_exchange_strong(&st->phase, &expected, PHASE_DONE_SYNC)) {
        return;         /* still inside backend_submit(): op_run continues */
    }
    op_run(cmd->lun, cmd, st, ret);
}

static struct op_state *op_new(struct scsi_cmd *cmd, op_step_fn *step)
{
    struct op_state *st = g_new0(struct op_state, 1);

    st->step = step;
    cmd_priv(cmd)->op = st;
    return st;
}

static int op_start(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st)
{
    op_run(lun, cmd, st, 0);
    return EXEC_ASYNC;
}

static int step_fail(struct scsi_lun *lun, struct scsi_cmd *cmd, int ret)
{
    io_error(lun, cmd, cmd->bio.op, cmd->bio.offset, ret);
    return STEP_DONE;
}

/* A lone FLUSH as a step (MODE SELECT clearing WCE, START STOP UNIT). */
static int flush_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    if (ret < 0) {
        return step_fail(lun, cmd, ret);
    }
    if (st->state++ == 0) {
        bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, op_bio_done);
        return STEP_SUBMIT;
    }
    cmd->status = SAM_STAT_GOOD;
    return STEP_DONE;
}

int sd_start_flush(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    return op_start(lun, cmd, op_new(cmd, flush_step));
}

/* ---- READ / WRITE ------------------------------------------------------ */

static void decode_lba_len(const uint8_t *cdb, uint64_t *lba, uint32_t *n, unsigned *len_byte)
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

static int exec_rw(struct scsi_lun *lun, struct scsi_cmd *cmd, bool write, bool fua_bit)
{
    const uint8_t *cdb = cmd->cdb;
    uint64_t lba, bytes;
    uint32_t n;
    unsigned len_byte;
    size_t avail;

    decode_lba_len(cdb, &lba, &n, &len_byte);
    if (cdb[0] != OP_READ_6 && cdb[0] != OP_WRITE_6 && (cdb[1] & 0xe0)) {
        return invalid_cdb(cmd, 1, 7);   /* RD/WRPROTECT: no protection info */
    }
    if (write && lun->be->read_only) {
        return write_protected(cmd);
    }
    if (!range_ok(lun, lba, n)) {
        return lba_out_of_range(cmd);
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
    bio_init(lun, cmd, write ? BACKEND_WRITE : BACKEND_READ, lba * lun->bs, bytes, single_done);
    cmd->bio.fua = write && write_needs_fua(lun, fua_bit);
    if (map_data(cmd, write ? cmd->data_out : cmd->data_in,
                 write ? cmd->data_out_cnt : cmd->data_in_cnt, avail, bytes) < 0) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    return submit_single(lun, cmd);
}

static int exec_read(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    return exec_rw(lun, cmd, false, false);
}

static int exec_write(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    bool fua = cmd->cdb[0] != OP_WRITE_6 && (cmd->cdb[1] & 0x08);

    return exec_rw(lun, cmd, true, fua);
}

/*
 * WRITE AND VERIFY: the write is made durable (FUA) and not read back, as
 * the verify would only re-read what the backend just acknowledged.
 */
static int exec_write_verify(struct scsi_lun *lun, struct scsi_cmd *cmd)
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
        return step_fail(lun, cmd, ret);
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
                uint64_t i = 0;

                while (st->buf[off + i] == want[i]) {
                    i++;
                }
                scsi_cmd_set_sense(cmd, SENSE_MISCOMPARE, 0x1d, 0x00);
                cmd->sense[0] |= 0x80;      /* VALID: INFORMATION is set */
                /* INFORMATION: offset of the first mismatching byte in the data-out. */
                st32(cmd->sense + 3, (uint32_t)MIN(st->block ? i : st->done_bytes + off + i,
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
        return step_fail(lun, cmd, -EINVAL);
    }
    bio_init(lun, cmd, BACKEND_READ, st->lba * lun->bs, len, op_bio_done);
    st->iov.iov_base = st->buf;
    st->iov.iov_len = len;
    cmd->bio.iov = &st->iov;
    cmd->bio.iovcnt = 1;
    st->lba += n;
    st->remaining -= n;
    st->state = 1;
    return STEP_SUBMIT;
}

static int exec_verify(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned bytchk = (cdb[1] >> 1) & 3, len_byte;
    uint64_t lba;
    uint32_t n;
    struct op_state *st;

    decode_lba_len(cdb, &lba, &n, &len_byte);
    if (cdb[1] & 0xe0) {
        return invalid_cdb(cmd, 1, 7);   /* VRPROTECT */
    }
    if (bytchk == 2) {
        return invalid_cdb(cmd, 1, 2);
    }
    if (!range_ok(lun, lba, n)) {
        return lba_out_of_range(cmd);
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
    st = op_new(cmd, verify_step);
    st->lba = lba;
    st->remaining = n;
    st->chunk_blocks = MIN((uint64_t)n, sd_chunk_bytes(lun) / lun->bs);
    st->buf = g_malloc(st->chunk_blocks * lun->bs);
    if (bytchk == 3) {
        st->block = g_malloc(lun->bs);
        iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, st->block, lun->bs);
    } else {
        st->expect = g_malloc(st->chunk_blocks * lun->bs);
    }
    return op_start(lun, cmd, st);
}

/* ---- SYNCHRONIZE CACHE, START STOP UNIT, PREVENT ALLOW ------------------ */

static int exec_sync_cache(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint64_t lba;
    uint32_t n;
    unsigned len_byte;

    decode_lba_len(cmd->cdb, &lba, &n, &len_byte);
    /* n == 0 means "to the end"; either way the whole cache is flushed. */
    if (!range_ok(lun, lba, n)) {
        return lba_out_of_range(cmd);
    }
    bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, single_done);
    return submit_single(lun, cmd);
}

static int exec_start_stop(struct scsi_lun *lun, struct scsi_cmd *cmd)
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

static int exec_good(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* ---- WRITE SAME -------------------------------------------------------- */

enum { WS_ZEROES, WS_ZEROES_SENT, WS_REPLICATE, WS_FLUSH_SENT };

static void ws_setup_replicate(struct scsi_lun *lun, struct op_state *st)
{
    st->chunk_blocks = MIN(st->remaining, sd_chunk_bytes(lun) / lun->bs);
    st->buf = g_malloc(st->chunk_blocks * lun->bs);
    for (uint64_t i = 0; i < st->chunk_blocks; i++) {
        memcpy(st->buf + i * lun->bs, st->block, lun->bs);
    }
    st->state = WS_REPLICATE;
}

static int ws_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    switch (st->state) {
    case WS_ZEROES:
        bio_init(lun, cmd, BACKEND_WRITE_ZEROES, st->lba * lun->bs,
                 st->remaining * lun->bs, op_bio_done);
        st->state = WS_ZEROES_SENT;
        return STEP_SUBMIT;
    case WS_ZEROES_SENT:
        if (ret == -EOPNOTSUPP || ret == -ENOTSUP) {
            /* The backend cannot zero ranges: write the zeros out instead. */
            ws_setup_replicate(lun, st);
            break;
        }
        if (ret < 0) {
            return step_fail(lun, cmd, ret);
        }
        st->remaining = 0;
        if (st->flush_after) {
            bio_init(lun, cmd, BACKEND_FLUSH, 0, 0, op_bio_done);
            st->state = WS_FLUSH_SENT;
            return STEP_SUBMIT;
        }
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    case WS_FLUSH_SENT:
        if (ret < 0) {
            return step_fail(lun, cmd, ret);
        }
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    case WS_REPLICATE:
        if (ret < 0) {
            return step_fail(lun, cmd, ret);
        }
        break;
    }
    /* WS_REPLICATE: write the next chunk of copies. */
    if (st->remaining == 0) {
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
    uint64_t n = MIN(st->remaining, st->chunk_blocks);

    bio_init(lun, cmd, BACKEND_WRITE, st->lba * lun->bs, n * lun->bs, op_bio_done);
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

static int exec_write_same(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool ndob = cdb[0] == OP_WRITE_SAME_16 && (cdb[1] & 0x01);
    unsigned len_byte;
    uint64_t lba;
    uint32_t n;
    struct op_state *st;

    decode_lba_len(cdb, &lba, &n, &len_byte);
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
        return write_protected(cmd);
    }
    if (n == 0 || n > MAX_WRITE_SAME_LBAS) {
        return invalid_cdb(cmd, len_byte, 7);   /* WSNZ=1; Block Limits cap */
    }
    if (!range_ok(lun, lba, n)) {
        return lba_out_of_range(cmd);
    }
    if (!ndob && sd_data_out_size(cmd) < lun->bs) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    st = op_new(cmd, ws_step);
    st->lba = lba;
    st->remaining = n;
    st->fua = write_needs_fua(lun, false);
    st->block = g_malloc0(lun->bs);
    if (!ndob) {
        iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, st->block, lun->bs);
        cmd->data_out_xfer = lun->bs;
    }
    /*
     * Zeros (with or without UNMAP) become one WRITE ZEROES, which may
     * deallocate; anything else is replicated through a bounded buffer.
     */
    if (all_zero(st->block, lun->bs)) {
        st->state = WS_ZEROES;
        st->flush_after = st->fua;
    } else {
        ws_setup_replicate(lun, st);
    }
    return op_start(lun, cmd, st);
}

/* ---- UNMAP ------------------------------------------------------------- */

static int unmap_step(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st, int ret)
{
    if (ret < 0) {
        return step_fail(lun, cmd, ret);
    }
    while (st->idx < st->count && st->unmap[2 * st->idx + 1] == 0) {
        st->idx++;
    }
    if (st->idx == st->count) {
        cmd->status = SAM_STAT_GOOD;
        return STEP_DONE;
    }
    bio_init(lun, cmd, BACKEND_DISCARD, st->unmap[2 * st->idx] * lun->bs,
             st->unmap[2 * st->idx + 1] * lun->bs, op_bio_done);
    st->idx++;
    return STEP_SUBMIT;
}

static int exec_unmap(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned plen = ld16(cdb + 7), dl, bd_dl, count;
    uint64_t total = 0;
    g_autofree uint8_t *p = NULL;
    struct op_state *st;

    if (cdb[1] & 0x01) {
        return invalid_cdb(cmd, 1, 0);   /* ANCHOR */
    }
    if (lun->be->read_only) {
        return write_protected(cmd);
    }
    if (plen == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    if (plen < 8) {
        return param_list_length_error(cmd);
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
    st = op_new(cmd, unmap_step);
    st->unmap = g_new(uint64_t, 2 * MAX(count, 1u));
    st->count = count;
    for (unsigned i = 0; i < count; i++) {
        const uint8_t *d = p + 8 + 16 * i;
        uint64_t lba = ld64(d);
        uint32_t n = ld32(d + 8);

        if (n && !range_ok(lun, lba, n)) {
            return lba_out_of_range(cmd);
        }
        total += n;
        st->unmap[2 * i] = lba;
        st->unmap[2 * i + 1] = n;
    }
    if (total > MAX_UNMAP_LBAS) {
        return invalid_param(cmd, 8 + 8, 7);
    }
    return op_start(lun, cmd, st);
}

/* ---- command table ----------------------------------------------------- */

/* Indexed by opcode; empty slots (fn == NULL) are unsupported opcodes. */
const struct op_desc sd_op_table[256] = {
    [OP_TEST_UNIT_READY] = { OP_TEST_UNIT_READY, false, 0, 6, 0, exec_good,
      { 0x00, 0, 0, 0, 0, 0x04 } },
    [OP_REQUEST_SENSE] = { OP_REQUEST_SENSE, false, 0, 6, F_UA_PASS, sd_exec_request_sense,
      { 0x03, 0x01, 0, 0, 0xff, 0x04 } },
    [OP_READ_6] = { OP_READ_6, false, 0, 6, 0, exec_read,
      { 0x08, 0x1f, 0xff, 0xff, 0xff, 0x04 } },
    [OP_WRITE_6] = { OP_WRITE_6, false, 0, 6, 0, exec_write,
      { 0x0a, 0x1f, 0xff, 0xff, 0xff, 0x04 } },
    [OP_INQUIRY] = { OP_INQUIRY, false, 0, 6, F_UA_PASS, sd_exec_inquiry,
      { 0x12, 0x03, 0xff, 0xff, 0xff, 0x04 } },
    [OP_MODE_SELECT_6] = { OP_MODE_SELECT_6, false, 0, 6, 0, sd_exec_mode_select,
      { 0x15, 0x11, 0, 0, 0xff, 0x04 } },
    [OP_MODE_SENSE_6] = { OP_MODE_SENSE_6, false, 0, 6, 0, sd_exec_mode_sense,
      { 0x1a, 0x08, 0xff, 0xff, 0xff, 0x04 } },
    [OP_START_STOP_UNIT] = { OP_START_STOP_UNIT, false, 0, 6, 0, exec_start_stop,
      { 0x1b, 0, 0, 0, 0xf5, 0x04 } },
    [OP_PREVENT_ALLOW] = { OP_PREVENT_ALLOW, false, 0, 6, 0, exec_good,
      { 0x1e, 0, 0, 0, 0, 0x04 } },
    [OP_READ_CAPACITY_10] = { OP_READ_CAPACITY_10, false, 0, 10, 0, sd_exec_read_capacity_10,
      { 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0x04 } },
    [OP_READ_10] = { OP_READ_10, false, 0, 10, 0, exec_read,
      { 0x28, 0xf8, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    [OP_WRITE_10] = { OP_WRITE_10, false, 0, 10, 0, exec_write,
      { 0x2a, 0xf8, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    [OP_WRITE_VERIFY_10] = { OP_WRITE_VERIFY_10, false, 0, 10, 0, exec_write_verify,
      { 0x2e, 0xf6, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    [OP_VERIFY_10] = { OP_VERIFY_10, false, 0, 10, 0, exec_verify,
      { 0x2f, 0xf6, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    [OP_SYNC_CACHE_10] = { OP_SYNC_CACHE_10, false, 0, 10, 0, exec_sync_cache,
      { 0x35, 0, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    [OP_WRITE_SAME_10] = { OP_WRITE_SAME_10, false, 0, 10, 0, exec_write_same,
      { 0x41, 0xfe, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    [OP_UNMAP] = { OP_UNMAP, false, 0, 10, F_DISCARD, exec_unmap,
      { 0x42, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [OP_MODE_SELECT_10] = { OP_MODE_SELECT_10, false, 0, 10, 0, sd_exec_mode_select,
      { 0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [OP_MODE_SENSE_10] = { OP_MODE_SENSE_10, false, 0, 10, 0, sd_exec_mode_sense,
      { 0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0x04 } },
    [OP_READ_16] = { OP_READ_16, false, 0, 16, 0, exec_read,
      { 0x88, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_WRITE_16] = { OP_WRITE_16, false, 0, 16, 0, exec_write,
      { 0x8a, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_WRITE_VERIFY_16] = { OP_WRITE_VERIFY_16, false, 0, 16, 0, exec_write_verify,
      { 0x8e, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_VERIFY_16] = { OP_VERIFY_16, false, 0, 16, 0, exec_verify,
      { 0x8f, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_SYNC_CACHE_16] = { OP_SYNC_CACHE_16, false, 0, 16, 0, exec_sync_cache,
      { 0x91, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_WRITE_SAME_16] = { OP_WRITE_SAME_16, false, 0, 16, 0, exec_write_same,
      { 0x93, 0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_SERVICE_ACTION_IN_16] = { OP_SERVICE_ACTION_IN_16, true, SAI_READ_CAPACITY_16, 16, 0, sd_exec_read_capacity_16,
      { 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_MAINTENANCE_IN] = { OP_MAINTENANCE_IN, true, MI_REPORT_SUPPORTED_OPCODES, 12, 0, sd_exec_rsoc,
      { 0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_READ_12] = { OP_READ_12, false, 0, 12, 0, exec_read,
      { 0xa8, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    [OP_WRITE_12] = { OP_WRITE_12, false, 0, 12, 0, exec_write,
      { 0xaa, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
};

bool sd_opcode_has_sa(uint8_t opcode)
{
    return opcode == OP_SERVICE_ACTION_IN_16 || opcode == OP_MAINTENANCE_IN;
}

bool sd_op_supported(const struct scsi_lun *lun, const struct op_desc *d)
{
    return !(d->flags & F_DISCARD) || lun->be->can_discard;
}

const struct op_desc *sd_find_op(uint8_t opcode, uint16_t sa)
{
    const struct op_desc *d = &sd_op_table[opcode];

    if (!d->fn || (d->has_sa && d->sa != sa)) {
        return NULL;
    }
    return d;
}

/* ---- dispatch ---------------------------------------------------------- */

static int dispatch(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const struct op_desc *d;
    uint8_t opcode;
    int ua;

    if (cmd->cdb_len == 0 || !cmd->cdb) {
        return sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
    }
    opcode = cmd->cdb[0];

    /*
     * SPC-4 5.14: INQUIRY, REPORT LUNS and REQUEST SENSE do not see the UA;
     * every other command, even an unsupported one, reports it first.
     */
    if (sd_ua_maybe_pending(lun, cmd) &&
        !(sd_op_table[opcode].flags & F_UA_PASS) && opcode != OP_REPORT_LUNS &&
        (ua = sd_take_ua(lun, cmd)) >= 0) {
        return sd_sense_done(cmd, SENSE_UNIT_ATTENTION, sd_ua_codes[ua][0], sd_ua_codes[ua][1]);
    }

    if (sd_opcode_has_sa(opcode)) {
        if (cmd->cdb_len < 2 || !(d = sd_find_op(opcode, cmd->cdb[1] & 0x1f))) {
            return invalid_cdb(cmd, 1, 4);   /* unsupported service action */
        }
    } else {
        d = sd_find_op(opcode, 0);
    }
    if (!d || !sd_op_supported(lun, d)) {
        /* REPORT LUNS lands here only if the transport did not intercept it. */
        g_debug("%s: unsupported opcode 0x%02x", lun->name, opcode);
        return sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
    }
    if (cmd->cdb_len < d->cdb_len) {
        return invalid_cdb(cmd, cmd->cdb_len - 1, 7);
    }
    if (cmd->cdb[d->cdb_len - 1] & 0x04) {
        return invalid_cdb(cmd, d->cdb_len - 1, 2);   /* NACA: not supported */
    }
    return d->fn(lun, cmd);
}

void scsi_lun_exec(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    cmd->lun = lun;
    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    memset(cmd->priv, 0, sizeof(cmd->priv));
    cmd_priv(cmd)->epoch = lun_get(lun);

    if (dispatch(lun, cmd) == EXEC_DONE) {
        cmd_finish(cmd);
    }
    /* Otherwise the backend completion finishes cmd, perhaps already has. */
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
                              const struct scsi_lun_info *info)
{
    struct scsi_lun *lun;
    uint64_t h;

    /* Geometry the SCSI layer can describe: 512..4096-byte blocks, >= 1 block. */
    if (be->block_size < 512 || be->block_size > 4096 ||
        (be->block_size & (be->block_size - 1)) || be->size < be->block_size) {
        g_warning("%s: cannot serve %s: %" PRIu64 " bytes in %" PRIu32 "-byte blocks",
                  name ? name : "lun", be->name, be->size, be->block_size);
        backend_close(be);
        return NULL;
    }
    lun = g_new0(struct scsi_lun, 1);
    lun->be = be;
    lun->name = g_strdup(name ? name : be->name);
    lun->bs = be->block_size;
    lun->nb_blocks = be->size / be->block_size;
    pthread_mutex_init(&lun->lock, NULL);
    pthread_cond_init(&lun->drain_cond, NULL);
    atomic_init(&lun->inflight, 0);
    atomic_init(&lun->wce, be->write_cache);
    atomic_init(&lun->ua_events, 0);
    for (unsigned i = 0; i < SCSI_UA_COUNT; i++) {
        atomic_init(&lun->ua_gen[i], 0);
    }
    scsi_ua_init(&lun->own_ua, lun);

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
        lun_drain_sync(lun);
    }
    backend_close(lun->be);
    pthread_mutex_destroy(&lun->lock);
    pthread_cond_destroy(&lun->drain_cond);
    g_free(lun->name);
    g_free(lun);
}

struct lun_backend *scsi_lun_backend(struct scsi_lun *lun)
{
    return lun->be;
}

const char *scsi_lun_name(const struct scsi_lun *lun)
{
    return lun->name;
}

