/*
 * SCSI block device emulation (SPC-4 / SBC-3) for one logical unit: decodes
 * CDBs, answers the commands the LUN answers from its own state (INQUIRY,
 * READ CAPACITY, MODE SENSE/SELECT, REQUEST SENSE, REPORT SUPPORTED
 * OPERATION CODES) and turns data commands (READ, WRITE, VERIFY, WRITE SAME,
 * UNMAP, SYNCHRONIZE CACHE) into backend I/O.  READ/WRITE are one backend
 * request each and take no lock; commands needing several requests (WRITE
 * SAME replication, VERIFY with compare, UNMAP lists, a flush after a
 * cache change) run through a small step engine that tolerates backends
 * completing inside backend_submit() without recursing.  Every CDB field
 * and parameter list byte is untrusted and checked here, where it enters.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include <glib.h>

#include "iov.h"
#include "scsi-disk.h"

/* Operation codes (SPC-4 / SBC-3). */
enum {
    OP_TEST_UNIT_READY = 0x00,
    OP_REQUEST_SENSE = 0x03,
    OP_READ_6 = 0x08,
    OP_WRITE_6 = 0x0a,
    OP_INQUIRY = 0x12,
    OP_MODE_SELECT_6 = 0x15,
    OP_MODE_SENSE_6 = 0x1a,
    OP_START_STOP_UNIT = 0x1b,
    OP_PREVENT_ALLOW = 0x1e,
    OP_READ_CAPACITY_10 = 0x25,
    OP_READ_10 = 0x28,
    OP_WRITE_10 = 0x2a,
    OP_WRITE_VERIFY_10 = 0x2e,
    OP_VERIFY_10 = 0x2f,
    OP_SYNC_CACHE_10 = 0x35,
    OP_WRITE_SAME_10 = 0x41,
    OP_UNMAP = 0x42,
    OP_MODE_SELECT_10 = 0x55,
    OP_MODE_SENSE_10 = 0x5a,
    OP_READ_16 = 0x88,
    OP_WRITE_16 = 0x8a,
    OP_WRITE_VERIFY_16 = 0x8e,
    OP_VERIFY_16 = 0x8f,
    OP_SYNC_CACHE_16 = 0x91,
    OP_WRITE_SAME_16 = 0x93,
    OP_SERVICE_ACTION_IN_16 = 0x9e,
    OP_REPORT_LUNS = 0xa0,
    OP_MAINTENANCE_IN = 0xa3,
    OP_READ_12 = 0xa8,
    OP_WRITE_12 = 0xaa,
};
#define SAI_READ_CAPACITY_16 0x10
#define MI_REPORT_SUPPORTED_OPCODES 0x0c

/*
 * Limits advertised in the Block Limits VPD page and enforced here.  The
 * transfer cap bounds what one command can pin of guest memory; WRITE SAME
 * and VERIFY bounce through buffers of at most one chunk.
 */
#define MAX_XFER_BYTES (32u << 20)
#define OPT_XFER_BYTES (1u << 20)
#define CHUNK_BYTES (1u << 20)
#define MAX_UNMAP_LBAS 0x400000u
#define MAX_UNMAP_DESCS 128u
#define MAX_WRITE_SAME_LBAS 0x400000u

/* Sense data sizes: fixed format, 10 additional bytes. */
#define FIXED_SENSE_LEN 18

/* Bit 31 of inflight: a drainer is waiting for the count to reach 0. */
#define INFLIGHT_DRAIN 0x80000000u

/* Large enough for any reply built on the stack (VPD pages, mode data). */
#define REPLY_MAX 512

struct scsi_lun {
    struct lun_backend *be;
    char *name;
    char vendor[9];
    char product[17];
    char serial[65];
    uint64_t naa;          /* full 64-bit NAA-5 designator */
    uint64_t nb_blocks;
    uint32_t bs;

    atomic_uint inflight;  /* count | INFLIGHT_DRAIN */
    atomic_uint ua_pending; /* bit per enum scsi_ua */
    atomic_bool wce;       /* caching mode page WCE: read on every write */

    GMutex lock;           /* mode page updates and the drain handshake */
    GCond drain_cond;
    uint64_t drain_gen;    /* bumped when inflight reaches 0 while draining */
    unsigned drain_waiters;
};

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
};
G_STATIC_ASSERT(sizeof(struct cmd_priv) <= sizeof(((struct scsi_cmd *)0)->priv));

static struct cmd_priv *cmd_priv(struct scsi_cmd *cmd)
{
    return (struct cmd_priv *)(void *)cmd->priv;
}

/* Handlers return EXEC_DONE (result set, caller finishes) or EXEC_ASYNC. */
enum { EXEC_DONE, EXEC_ASYNC };
typedef int exec_fn(struct scsi_lun *lun, struct scsi_cmd *cmd);

/* ---- byte order helpers ------------------------------------------------ */

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) << 32 | ld32(p + 4); }
static void st16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static void st32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static void st64(uint8_t *p, uint64_t v) { st32(p, (uint32_t)(v >> 32)); st32(p + 4, (uint32_t)v); }

/* ---- sense ------------------------------------------------------------- */

static void fill_fixed_sense(uint8_t *s, uint8_t key, uint8_t asc, uint8_t ascq)
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
    fill_fixed_sense(cmd->sense, key, asc, ascq);
    cmd->sense_len = FIXED_SENSE_LEN;
    cmd->status = SAM_STAT_CHECK_CONDITION;
}

/*
 * ILLEGAL REQUEST with a field pointer (SKSV): asc 24h for the CDB, 26h for
 * the parameter list.  bit < 0 means no bit pointer.
 */
static int field_error(struct scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit)
{
    scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, in_cdb ? 0x24 : 0x26, 0);
    cmd->sense[15] = 0x80 | (in_cdb ? 0x40 : 0) | (bit >= 0 ? 0x08 | (bit & 7) : 0);
    st16(cmd->sense + 16, (uint16_t)byte);
    return EXEC_DONE;
}
#define invalid_cdb(cmd, byte, bit) field_error(cmd, true, byte, bit)
#define invalid_param(cmd, byte, bit) field_error(cmd, false, byte, bit)

static int sense_done(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
    scsi_cmd_set_sense(cmd, key, asc, ascq);
    return EXEC_DONE;
}
#define lba_out_of_range(cmd) sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x21, 0x00)
#define write_protected(cmd) sense_done(cmd, SENSE_DATA_PROTECT, 0x27, 0x00)
#define param_list_length_error(cmd) sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x1a, 0x00)

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

    switch (ret) {
    case -EAGAIN:
    case -EBUSY:
    case -ENOMEM:
        g_debug("%s: %s at byte %" PRIu64 ": %s, reporting BUSY", lun->name, what,
                offset, g_strerror(-ret));
        cmd->status = SAM_STAT_BUSY;
        cmd->sense_len = 0;
        return;
    case -ENOSPC:
        scsi_cmd_set_sense(cmd, SENSE_DATA_PROTECT, 0x27, 0x07);
        break;
    case -EROFS:
        scsi_cmd_set_sense(cmd, SENSE_DATA_PROTECT, 0x27, 0x00);
        break;
    case -EIO:
    default:
        if (ret != -EIO && ret != -ENODATA) {
            scsi_cmd_set_sense(cmd, SENSE_HARDWARE_ERROR, 0x44, 0x00);
        } else if (op == BACKEND_READ) {
            scsi_cmd_set_sense(cmd, SENSE_MEDIUM_ERROR, 0x11, 0x00);
        } else {
            scsi_cmd_set_sense(cmd, SENSE_MEDIUM_ERROR, 0x0c, 0x00);
        }
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

static void lun_put(struct scsi_lun *lun)
{
    unsigned old = atomic_fetch_sub(&lun->inflight, 1);

    if ((old & INFLIGHT_DRAIN) && (old & ~INFLIGHT_DRAIN) == 1) {
        /* The drainer cannot return before we unlock: lun stays valid. */
        g_mutex_lock(&lun->lock);
        lun->drain_gen++;
        g_cond_broadcast(&lun->drain_cond);
        g_mutex_unlock(&lun->lock);
    }
}

static void cmd_finish(struct scsi_cmd *cmd)
{
    struct scsi_lun *lun = cmd->lun;
    struct cmd_priv *p = cmd_priv(cmd);

    g_free(p->heap_iov);
    p->heap_iov = NULL;
    if (p->op) {
        op_free(p->op);
        p->op = NULL;
    }
    /* cmd may be freed by complete(); lun was saved above. */
    cmd->complete(cmd);
    lun_put(lun);
}

unsigned scsi_lun_inflight(struct scsi_lun *lun)
{
    return atomic_load(&lun->inflight) & ~INFLIGHT_DRAIN;
}

void scsi_lun_drain(struct scsi_lun *lun)
{
    g_mutex_lock(&lun->lock);
    uint64_t gen = lun->drain_gen;
    unsigned old;

    lun->drain_waiters++;
    old = atomic_fetch_or(&lun->inflight, INFLIGHT_DRAIN);
    if (old & ~INFLIGHT_DRAIN) {
        while (gen == lun->drain_gen) {
            g_cond_wait(&lun->drain_cond, &lun->lock);
        }
    }
    if (--lun->drain_waiters == 0) {
        atomic_fetch_and(&lun->inflight, ~INFLIGHT_DRAIN);
    }
    g_mutex_unlock(&lun->lock);
}

/* ---- unit attention ---------------------------------------------------- */

static const uint8_t ua_codes[][2] = {
    [SCSI_UA_POWER_ON] = { 0x29, 0x00 },
    [SCSI_UA_LUN_RESET] = { 0x29, 0x03 },
    [SCSI_UA_NEXUS_LOSS] = { 0x29, 0x07 },
    [SCSI_UA_CAPACITY_CHANGED] = { 0x2a, 0x09 },
    [SCSI_UA_REPORTED_LUNS_CHANGED] = { 0x3f, 0x0e },
};

void scsi_lun_set_ua(struct scsi_lun *lun, enum scsi_ua ua)
{
    if ((unsigned)ua >= G_N_ELEMENTS(ua_codes)) {
        return;
    }
    atomic_fetch_or(&lun->ua_pending, 1u << ua);
}

/*
 * Takes the highest-priority pending UA (lowest enum value), or -1.  A
 * power-on report covers the resets it implies, so those are cleared too.
 * Lock-free so the data path pays only an atomic load when none is pending.
 */
static int take_ua(struct scsi_lun *lun)
{
    unsigned cur = atomic_load(&lun->ua_pending);

    while (cur) {
        int ua = __builtin_ctz(cur);
        unsigned clear = 1u << ua;

        if (ua == SCSI_UA_POWER_ON) {
            clear |= 1u << SCSI_UA_LUN_RESET | 1u << SCSI_UA_NEXUS_LOSS;
        }
        if (atomic_compare_exchange_weak(&lun->ua_pending, &cur, cur & ~clear)) {
            return ua;
        }
    }
    return -1;
}

/* ---- data helpers ------------------------------------------------------ */

/* Copies a reply of len bytes, truncated to the allocation length and buffer. */
static int reply(struct scsi_cmd *cmd, const void *buf, size_t len, size_t alloc)
{
    size_t n = MIN(len, alloc);

    cmd->data_in_xfer = cmd->data_in ? iov_from_buf(cmd->data_in, cmd->data_in_cnt, 0, buf, n) : 0;
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

static size_t data_in_size(const struct scsi_cmd *cmd)
{
    return cmd->data_in ? iov_size(cmd->data_in, cmd->data_in_cnt) : 0;
}

static size_t data_out_size(const struct scsi_cmd *cmd)
{
    return cmd->data_out ? iov_size(cmd->data_out, cmd->data_out_cnt) : 0;
}

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

static int start_flush(struct scsi_lun *lun, struct scsi_cmd *cmd)
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
    if (bytes > MAX_XFER_BYTES) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    /* A short buffer is refused rather than half-filled (or over-run). */
    avail = write ? data_out_size(cmd) : data_in_size(cmd);
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
    if ((uint64_t)n * lun->bs > MAX_XFER_BYTES) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    if (data_out_size(cmd) < (bytchk == 3 ? lun->bs : (uint64_t)n * lun->bs)) {
        return invalid_cdb(cmd, len_byte, 7);
    }
    st = op_new(cmd, verify_step);
    st->lba = lba;
    st->remaining = n;
    st->chunk_blocks = MIN((uint64_t)n, CHUNK_BYTES / lun->bs);
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
        return start_flush(lun, cmd);
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
    st->chunk_blocks = MIN(st->remaining, CHUNK_BYTES / lun->bs);
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
    if (!ndob && data_out_size(cmd) < lun->bs) {
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
    if (data_out_size(cmd) < plen) {
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

/* ---- INQUIRY ----------------------------------------------------------- */

static void pad_copy(uint8_t *dst, const char *src, size_t len)
{
    size_t n = MIN(strlen(src), len);

    memset(dst, ' ', len);
    memcpy(dst, src, n);
}

static size_t std_inquiry(const struct scsi_lun *lun, uint8_t *b)
{
    static const uint16_t versions[] = { 0x00a0 /* SAM-5 */, 0x0460 /* SPC-4 */,
                                         0x04c0 /* SBC-3 */ };

    memset(b, 0, 74);
    b[0] = 0x00;            /* qualifier 0, direct access block device */
    b[2] = 0x06;            /* SPC-4 */
    b[3] = 0x02;            /* response data format 2 */
    b[4] = 74 - 5;
    b[7] = 0x02;            /* CMDQUE */
    pad_copy(b + 8, lun->vendor, 8);
    pad_copy(b + 16, lun->product, 16);
    pad_copy(b + 32, "0001", 4);
    for (unsigned i = 0; i < G_N_ELEMENTS(versions); i++) {
        st16(b + 58 + 2 * i, versions[i]);
    }
    return 74;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2 };

/* Fills a VPD page into b (REPLY_MAX bytes); returns its length or 0 if unknown. */
static size_t vpd_page(const struct scsi_lun *lun, uint8_t page, uint8_t *b)
{
    const struct lun_backend *be = lun->be;
    size_t len;

    memset(b, 0, REPLY_MAX);
    b[1] = page;
    switch (page) {
    case 0x00:
        memcpy(b + 4, vpd_pages, sizeof(vpd_pages));
        len = 4 + sizeof(vpd_pages);
        break;
    case 0x80:
        len = strlen(lun->serial);
        memcpy(b + 4, lun->serial, len);
        len += 4;
        break;
    case 0x83: {
        uint8_t *d = b + 4;
        size_t sl = strlen(lun->serial);

        d[0] = 0x01;        /* binary */
        d[1] = 0x03;        /* LUN association, NAA */
        d[3] = 8;
        st64(d + 4, lun->naa);
        d += 12;
        d[0] = 0x02;        /* ASCII */
        d[1] = 0x01;        /* LUN association, T10 vendor id */
        d[3] = (uint8_t)(8 + sl);
        pad_copy(d + 4, lun->vendor, 8);
        memcpy(d + 12, lun->serial, sl);
        d += 12 + sl;
        len = (size_t)(d - b);
        break;
    }
    case 0xb0: {
        uint32_t max_xfer = MAX_XFER_BYTES / lun->bs;

        b[4] = 0x01;        /* WSNZ: WRITE SAME needs a non-zero length */
        st16(b + 6, 1);
        st32(b + 8, max_xfer);
        st32(b + 12, MIN(OPT_XFER_BYTES / lun->bs, max_xfer));
        if (be->can_discard) {
            st32(b + 20, MAX_UNMAP_LBAS);
            st32(b + 24, MAX_UNMAP_DESCS);
            st32(b + 28, MAX(4096u / lun->bs, 1u));
        }
        st64(b + 36, MAX_WRITE_SAME_LBAS);
        len = 64;
        break;
    }
    case 0xb1:
        st16(b + 4, 1);     /* non-rotating medium */
        len = 64;
        break;
    case 0xb2:
        if (be->can_discard) {
            b[5] = 0x80 | 0x40 | 0x20;              /* LBPU, LBPWS, LBPWS10 */
            b[5] |= be->discard_zeroes ? 0x04 : 0;  /* LBPRZ */
            b[6] = 0x02;                            /* thin provisioned */
        }
        len = 8;
        break;
    default:
        return 0;
    }
    st16(b + 2, (uint16_t)(len - 4));
    return len;
}

static int exec_inquiry(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    unsigned alloc = ld16(cdb + 3);
    uint8_t b[REPLY_MAX];
    size_t len;

    if (cdb[1] & 0x02) {
        return invalid_cdb(cmd, 1, 1);   /* CMDDT (obsolete) */
    }
    if (!(cdb[1] & 0x01)) {
        if (cdb[2]) {
            return invalid_cdb(cmd, 2, 7);
        }
        len = std_inquiry(lun, b);
        return reply(cmd, b, len, alloc);
    }
    len = vpd_page(lun, cdb[2], b);
    if (!len) {
        return invalid_cdb(cmd, 2, 7);
    }
    return reply(cmd, b, len, alloc);
}

/* ---- READ CAPACITY ----------------------------------------------------- */

static int exec_read_capacity_10(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t b[8];
    uint64_t last = lun->nb_blocks - 1;

    /* Too big for 32 bits: FFFFFFFFh tells the initiator to use (16). */
    st32(b, last > 0xfffffffe ? 0xffffffff : (uint32_t)last);
    st32(b + 4, lun->bs);
    return reply(cmd, b, sizeof(b), sizeof(b));
}

static int exec_read_capacity_16(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t b[32] = { 0 };

    st64(b, lun->nb_blocks - 1);
    st32(b + 8, lun->bs);
    if (lun->be->can_discard) {
        b[14] = 0x80 | (lun->be->discard_zeroes ? 0x40 : 0);  /* LBPME, LBPRZ */
    }
    return reply(cmd, b, sizeof(b), ld32(cmd->cdb + 10));
}

/* ---- REQUEST SENSE ----------------------------------------------------- */

static int exec_request_sense(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    uint8_t s[FIXED_SENSE_LEN];
    int ua;

    if (cmd->cdb[1] & 0x01) {
        return invalid_cdb(cmd, 1, 0);   /* DESC: only fixed format here */
    }
    ua = take_ua(lun);
    if (ua >= 0) {
        fill_fixed_sense(s, SENSE_UNIT_ATTENTION, ua_codes[ua][0], ua_codes[ua][1]);
    } else {
        fill_fixed_sense(s, SENSE_NO_SENSE, 0, 0);
    }
    return reply(cmd, s, sizeof(s), cmd->cdb[4]);
}

/* ---- MODE SENSE / MODE SELECT ----------------------------------------- */

enum { PC_CURRENT, PC_CHANGEABLE, PC_DEFAULT, PC_SAVED };
#define CACHING_PAGE 0x08
#define CONTROL_PAGE 0x0a
#define ALL_PAGES 0x3f
#define CACHING_WCE 0x04

/* Writes mode page `page` for page control pc into p; returns its length or 0. */
static size_t mode_page(struct scsi_lun *lun, uint8_t page, int pc, uint8_t *p)
{
    switch (page) {
    case CACHING_PAGE: {
        bool wce = pc == PC_DEFAULT ? lun->be->write_cache : atomic_load(&lun->wce);

        memset(p, 0, 20);
        p[0] = CACHING_PAGE;
        p[1] = 18;
        if (pc == PC_CHANGEABLE) {
            p[2] = CACHING_WCE;
        } else {
            p[2] = wce ? CACHING_WCE : 0;
        }
        return 20;
    }
    case CONTROL_PAGE:
        memset(p, 0, 12);
        p[0] = CONTROL_PAGE;
        p[1] = 10;
        if (pc != PC_CHANGEABLE) {
            p[3] = 0x10;    /* QUEUE ALGORITHM MODIFIER 1: unrestricted order */
            st16(p + 8, 0xffff);   /* BUSY TIMEOUT PERIOD: unlimited */
        }
        return 12;
    }
    return 0;
}

static int exec_mode_sense(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool ten = cdb[0] == OP_MODE_SENSE_10;
    bool dbd = cdb[1] & 0x08, llbaa = ten && (cdb[1] & 0x10);
    int pc = cdb[2] >> 6;
    uint8_t page = cdb[2] & 0x3f, subpage = cdb[3];
    unsigned alloc = ten ? ld16(cdb + 7) : cdb[4];
    unsigned hdr = ten ? 8 : 4, bdlen = dbd ? 0 : llbaa ? 16 : 8;
    uint8_t b[REPLY_MAX] = { 0 };
    uint8_t *p = b + hdr + bdlen;

    if (pc == PC_SAVED) {
        return sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x39, 0x00);
    }
    if (subpage != 0 && !(page == ALL_PAGES && subpage == 0xff)) {
        return invalid_cdb(cmd, 3, 7);
    }
    if (page == ALL_PAGES) {
        p += mode_page(lun, CACHING_PAGE, pc, p);
        p += mode_page(lun, CONTROL_PAGE, pc, p);
    } else {
        size_t n = mode_page(lun, page, pc, p);

        if (!n) {
            return invalid_cdb(cmd, 2, 5);
        }
        p += n;
    }

    /* Header: WP for read-only LUNs; DPOFUA because FUA is honoured. */
    uint8_t dsp = (lun->be->read_only ? 0x80 : 0) | 0x10;
    size_t total = (size_t)(p - b);

    if (ten) {
        st16(b, (uint16_t)(total - 2));
        b[3] = dsp;
        b[4] = llbaa && !dbd ? 0x01 : 0;   /* LONGLBA */
        st16(b + 6, (uint16_t)bdlen);
    } else {
        b[0] = (uint8_t)(total - 1);
        b[2] = dsp;
        b[3] = (uint8_t)bdlen;
    }
    if (bdlen && pc != PC_CHANGEABLE) {
        uint8_t *d = b + hdr;

        if (bdlen == 16) {
            st64(d, lun->nb_blocks);
            st32(d + 12, lun->bs);
        } else {
            st32(d, lun->nb_blocks > 0xffffffff ? 0xffffffff : (uint32_t)lun->nb_blocks);
            st32(d + 4, lun->bs);    /* byte 4 reserved, 5..7 block length */
            d[4] = 0;
        }
    }
    return reply(cmd, b, total, alloc);
}

/*
 * MODE SELECT: only WCE can change.  Every other byte of a page must match
 * its current value, as SPC requires for non-changeable fields.
 */
static int exec_mode_select(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool ten = cdb[0] == OP_MODE_SELECT_10;
    unsigned plen = ten ? ld16(cdb + 7) : cdb[4];
    unsigned hdr = ten ? 8 : 4, bdlen, off;
    g_autofree uint8_t *p = NULL;
    bool new_wce, old_wce;

    if (cdb[1] & 0x01) {
        return invalid_cdb(cmd, 1, 0);   /* SP: nothing is saved */
    }
    if (plen == 0) {
        cmd->status = SAM_STAT_GOOD;
        return EXEC_DONE;
    }
    if (data_out_size(cmd) < plen) {
        return invalid_cdb(cmd, ten ? 7 : 4, 7);
    }
    if (plen < hdr) {
        return param_list_length_error(cmd);
    }
    p = g_malloc(plen);
    iov_to_buf(cmd->data_out, cmd->data_out_cnt, 0, p, plen);
    cmd->data_out_xfer = plen;
    bdlen = ten ? ld16(p + 6) : p[3];
    if (bdlen != 0 && bdlen != 8 && !(ten && (p[4] & 1) && bdlen == 16)) {
        return invalid_param(cmd, ten ? 6 : 3, 7);
    }
    if (hdr + bdlen > plen) {
        return param_list_length_error(cmd);
    }
    if (bdlen) {
        /* The block length cannot change (no FORMAT UNIT). */
        const uint8_t *d = p + hdr;
        uint32_t bl = bdlen == 16 ? ld32(d + 12) : ld32(d + 4) & 0xffffff;

        if (bl != lun->bs) {
            return invalid_param(cmd, hdr + (bdlen == 16 ? 12 : 5), 7);
        }
    }

    g_mutex_lock(&lun->lock);
    old_wce = new_wce = atomic_load(&lun->wce);
    for (off = hdr + bdlen; off < plen;) {
        uint8_t cur[REPLY_MAX];
        uint8_t code = p[off] & 0x3f;
        size_t n;

        if (plen - off < 2) {
            g_mutex_unlock(&lun->lock);
            return param_list_length_error(cmd);
        }
        if (p[off] & 0x40) {
            g_mutex_unlock(&lun->lock);
            return invalid_param(cmd, off, 6);   /* SPF: no subpages */
        }
        n = mode_page(lun, code, PC_CURRENT, cur);
        if (!n) {
            g_mutex_unlock(&lun->lock);
            return invalid_param(cmd, off, 5);
        }
        if (p[off + 1] != n - 2 || off + n > plen) {
            g_mutex_unlock(&lun->lock);
            return invalid_param(cmd, off + 1, 7);
        }
        for (size_t i = 2; i < n; i++) {
            uint8_t mask = code == CACHING_PAGE && i == 2 ? CACHING_WCE : 0;

            if ((p[off + i] ^ cur[i]) & ~mask) {
                g_mutex_unlock(&lun->lock);
                return invalid_param(cmd, off + i, -1);
            }
        }
        if (code == CACHING_PAGE) {
            new_wce = p[off + 2] & CACHING_WCE;
        }
        off += n;
    }
    atomic_store(&lun->wce, new_wce);
    g_mutex_unlock(&lun->lock);

    if (new_wce != old_wce) {
        g_message("%s: write cache %s", lun->name, new_wce ? "enabled" : "disabled");
    }
    /* Turning the cache off: what it held must be durable from now on. */
    if (old_wce && !new_wce && lun->be->write_cache) {
        return start_flush(lun, cmd);
    }
    cmd->status = SAM_STAT_GOOD;
    return EXEC_DONE;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---------------------------------- */

#define F_UA_PASS  0x01   /* executes despite a pending unit attention */
#define F_DISCARD  0x02   /* supported only if the backend can discard */

struct op_desc {
    uint8_t opcode;
    bool has_sa;
    uint16_t sa;
    uint8_t cdb_len;
    uint8_t flags;
    exec_fn *fn;
    /* CDB usage data (SPC-4 6.35.3): opcode, SA, then the bits we look at. */
    uint8_t usage[16];
};

static int exec_rsoc(struct scsi_lun *lun, struct scsi_cmd *cmd);

static const struct op_desc op_table[] = {
    { OP_TEST_UNIT_READY, false, 0, 6, 0, exec_good,
      { 0x00, 0, 0, 0, 0, 0x04 } },
    { OP_REQUEST_SENSE, false, 0, 6, F_UA_PASS, exec_request_sense,
      { 0x03, 0x01, 0, 0, 0xff, 0x04 } },
    { OP_READ_6, false, 0, 6, 0, exec_read,
      { 0x08, 0x1f, 0xff, 0xff, 0xff, 0x04 } },
    { OP_WRITE_6, false, 0, 6, 0, exec_write,
      { 0x0a, 0x1f, 0xff, 0xff, 0xff, 0x04 } },
    { OP_INQUIRY, false, 0, 6, F_UA_PASS, exec_inquiry,
      { 0x12, 0x03, 0xff, 0xff, 0xff, 0x04 } },
    { OP_MODE_SELECT_6, false, 0, 6, 0, exec_mode_select,
      { 0x15, 0x11, 0, 0, 0xff, 0x04 } },
    { OP_MODE_SENSE_6, false, 0, 6, 0, exec_mode_sense,
      { 0x1a, 0x08, 0xff, 0xff, 0xff, 0x04 } },
    { OP_START_STOP_UNIT, false, 0, 6, 0, exec_start_stop,
      { 0x1b, 0, 0, 0, 0xf5, 0x04 } },
    { OP_PREVENT_ALLOW, false, 0, 6, 0, exec_good,
      { 0x1e, 0, 0, 0, 0, 0x04 } },
    { OP_READ_CAPACITY_10, false, 0, 10, 0, exec_read_capacity_10,
      { 0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0x04 } },
    { OP_READ_10, false, 0, 10, 0, exec_read,
      { 0x28, 0xf8, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    { OP_WRITE_10, false, 0, 10, 0, exec_write,
      { 0x2a, 0xf8, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    { OP_WRITE_VERIFY_10, false, 0, 10, 0, exec_write_verify,
      { 0x2e, 0xf6, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    { OP_VERIFY_10, false, 0, 10, 0, exec_verify,
      { 0x2f, 0xf6, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    { OP_SYNC_CACHE_10, false, 0, 10, 0, exec_sync_cache,
      { 0x35, 0, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    { OP_WRITE_SAME_10, false, 0, 10, 0, exec_write_same,
      { 0x41, 0xfe, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x04 } },
    { OP_UNMAP, false, 0, 10, F_DISCARD, exec_unmap,
      { 0x42, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    { OP_MODE_SELECT_10, false, 0, 10, 0, exec_mode_select,
      { 0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0x04 } },
    { OP_MODE_SENSE_10, false, 0, 10, 0, exec_mode_sense,
      { 0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0x04 } },
    { OP_READ_16, false, 0, 16, 0, exec_read,
      { 0x88, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_WRITE_16, false, 0, 16, 0, exec_write,
      { 0x8a, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_WRITE_VERIFY_16, false, 0, 16, 0, exec_write_verify,
      { 0x8e, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_VERIFY_16, false, 0, 16, 0, exec_verify,
      { 0x8f, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_SYNC_CACHE_16, false, 0, 16, 0, exec_sync_cache,
      { 0x91, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_WRITE_SAME_16, false, 0, 16, 0, exec_write_same,
      { 0x93, 0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_SERVICE_ACTION_IN_16, true, SAI_READ_CAPACITY_16, 16, 0, exec_read_capacity_16,
      { 0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_MAINTENANCE_IN, true, MI_REPORT_SUPPORTED_OPCODES, 12, 0, exec_rsoc,
      { 0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_READ_12, false, 0, 12, 0, exec_read,
      { 0xa8, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
    { OP_WRITE_12, false, 0, 12, 0, exec_write,
      { 0xaa, 0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x04 } },
};

static bool opcode_has_sa(uint8_t opcode)
{
    return opcode == OP_SERVICE_ACTION_IN_16 || opcode == OP_MAINTENANCE_IN;
}

static bool op_supported(const struct scsi_lun *lun, const struct op_desc *d)
{
    return !(d->flags & F_DISCARD) || lun->be->can_discard;
}

static const struct op_desc *find_op(uint8_t opcode, uint16_t sa)
{
    for (unsigned i = 0; i < G_N_ELEMENTS(op_table); i++) {
        const struct op_desc *d = &op_table[i];

        if (d->opcode == opcode && (!d->has_sa || d->sa == sa)) {
            return d;
        }
    }
    return NULL;
}

/* Command timeouts descriptor: 30 s recommended, no nominal figure. */
static uint8_t *put_timeouts(uint8_t *p)
{
    memset(p, 0, 12);
    st16(p, 10);
    st32(p + 8, 30);
    return p + 12;
}

static int exec_rsoc(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    bool rctd = cdb[2] & 0x80;
    unsigned options = cdb[2] & 0x07;
    uint8_t req_op = cdb[3];
    uint16_t req_sa = ld16(cdb + 4);
    uint32_t alloc = ld32(cdb + 6);
    uint8_t b[4 + G_N_ELEMENTS(op_table) * 20];
    uint8_t *p = b;
    const struct op_desc *d = NULL;

    if (options == 0) {
        p += 4;
        for (unsigned i = 0; i < G_N_ELEMENTS(op_table); i++) {
            d = &op_table[i];
            if (!op_supported(lun, d)) {
                continue;
            }
            memset(p, 0, 8);
            p[0] = d->opcode;
            st16(p + 2, d->sa);
            p[5] = (rctd ? 0x02 : 0) | (d->has_sa ? 0x01 : 0);
            st16(p + 6, d->cdb_len);
            p += 8;
            if (rctd) {
                p = put_timeouts(p);
            }
        }
        st32(b, (uint32_t)(p - b - 4));
        return reply(cmd, b, (size_t)(p - b), alloc);
    }
    switch (options) {
    case 1:     /* by opcode: wrong for commands with service actions */
        if (opcode_has_sa(req_op)) {
            return invalid_cdb(cmd, 2, 2);
        }
        d = find_op(req_op, 0);
        break;
    case 2:     /* by opcode and service action */
        if (!opcode_has_sa(req_op)) {
            return invalid_cdb(cmd, 2, 2);
        }
        d = find_op(req_op, req_sa);
        break;
    case 3:     /* either, as the opcode says */
        d = find_op(req_op, opcode_has_sa(req_op) ? req_sa : 0);
        break;
    default:
        return invalid_cdb(cmd, 2, 2);
    }
    if (d && !op_supported(lun, d)) {
        d = NULL;
    }
    memset(b, 0, 4);
    b[1] = (rctd ? 0x80 : 0) | (d ? 0x03 : 0x01);   /* SUPPORT: 011b / 001b */
    p = b + 4;
    if (d) {
        st16(b + 2, d->cdb_len);
        memcpy(p, d->usage, d->cdb_len);
        p += d->cdb_len;
        if (rctd) {
            p = put_timeouts(p);
        }
    }
    return reply(cmd, b, (size_t)(p - b), alloc);
}

/* ---- dispatch ---------------------------------------------------------- */

void scsi_lun_exec(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    const struct op_desc *d;
    uint8_t opcode;
    int ua;

    cmd->lun = lun;
    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    memset(cmd->priv, 0, sizeof(cmd->priv));
    atomic_fetch_add(&lun->inflight, 1);

    if (cmd->cdb_len == 0 || !cmd->cdb) {
        sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
        cmd_finish(cmd);
        return;
    }
    opcode = cmd->cdb[0];

    /* SPC-4 5.14: INQUIRY, REPORT LUNS and REQUEST SENSE do not see the UA. */
    if (atomic_load_explicit(&lun->ua_pending, memory_order_relaxed) &&
        opcode != OP_INQUIRY && opcode != OP_REQUEST_SENSE && opcode != OP_REPORT_LUNS &&
        (ua = take_ua(lun)) >= 0) {
        sense_done(cmd, SENSE_UNIT_ATTENTION, ua_codes[ua][0], ua_codes[ua][1]);
        cmd_finish(cmd);
        return;
    }

    if (opcode_has_sa(opcode)) {
        if (cmd->cdb_len < 2) {
            invalid_cdb(cmd, 1, 4);
            cmd_finish(cmd);
            return;
        }
        d = find_op(opcode, cmd->cdb[1] & 0x1f);
        if (!d) {
            invalid_cdb(cmd, 1, 4);   /* unsupported service action */
            cmd_finish(cmd);
            return;
        }
    } else {
        d = find_op(opcode, 0);
    }
    if (!d || !op_supported(lun, d)) {
        /* REPORT LUNS lands here only if the transport did not intercept it. */
        g_debug("%s: unsupported opcode 0x%02x", lun->name, opcode);
        sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x20, 0x00);
        cmd_finish(cmd);
        return;
    }
    if (cmd->cdb_len < d->cdb_len) {
        invalid_cdb(cmd, cmd->cdb_len - 1, 7);
        cmd_finish(cmd);
        return;
    }
    if (cmd->cdb[d->cdb_len - 1] & 0x04) {
        invalid_cdb(cmd, d->cdb_len - 1, 2);   /* NACA: not supported */
        cmd_finish(cmd);
        return;
    }
    if (d->fn(lun, cmd) == EXEC_DONE) {
        cmd_finish(cmd);
    }
}

/* ---- target-level answers ---------------------------------------------- */

void scsi_report_luns(struct scsi_cmd *cmd, const uint16_t *luns, unsigned n)
{
    const uint8_t *cdb = cmd->cdb;
    uint32_t alloc;
    g_autofree uint8_t *b = NULL;

    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    if (!cdb || cmd->cdb_len < 12) {
        scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
        return;
    }
    if (cdb[11] & 0x04) {
        field_error(cmd, true, 11, 2);
        return;
    }
    alloc = ld32(cdb + 6);
    if (alloc < 16) {
        field_error(cmd, true, 6, 7);   /* SPC-4: fewer than 16 bytes is invalid */
        return;
    }
    switch (cdb[2]) {
    case 0x00:      /* logical units */
    case 0x02:      /* everything; there are no well-known LUNs to add */
        break;
    case 0x01:      /* well-known logical units only: none are listed */
        n = 0;
        break;
    default:
        field_error(cmd, true, 2, 7);
        return;
    }
    b = g_malloc0(8 + 8 * (size_t)n);
    st32(b, 8 * n);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *e = b + 8 + 8 * i;

        /* Single-level LUN: peripheral addressing below 256, else flat. */
        if (luns[i] < 256) {
            e[1] = (uint8_t)luns[i];
        } else {
            e[0] = 0x40 | ((luns[i] >> 8) & 0x3f);
            e[1] = (uint8_t)luns[i];
        }
    }
    reply(cmd, b, 8 + 8 * (size_t)n, alloc);
}

void scsi_no_lun_exec(struct scsi_cmd *cmd)
{
    const uint8_t *cdb = cmd->cdb;
    uint8_t b[36] = { 0 };
    uint8_t s[FIXED_SENSE_LEN];

    cmd->status = SAM_STAT_GOOD;
    cmd->sense_len = 0;
    cmd->data_in_xfer = 0;
    cmd->data_out_xfer = 0;
    if (!cdb || cmd->cdb_len < 6) {
        scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        return;
    }
    switch (cdb[0]) {
    case OP_INQUIRY:
        if (cdb[1] & 0x03) {
            scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
            return;
        }
        /* Qualifier 011b, type 1Fh: no LUN here, nor ever will be. */
        b[0] = 0x7f;
        b[2] = 0x06;
        b[3] = 0x02;
        b[4] = sizeof(b) - 5;
        reply(cmd, b, sizeof(b), ld16(cdb + 3));
        return;
    case OP_REQUEST_SENSE:
        fill_fixed_sense(s, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        reply(cmd, s, sizeof(s), cdb[4]);
        return;
    default:
        scsi_cmd_set_sense(cmd, SENSE_ILLEGAL_REQUEST, 0x25, 0x00);
        return;
    }
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

struct scsi_lun *scsi_lun_new(struct lun_backend *be, const char *name,
                              const struct scsi_lun_info *info)
{
    struct scsi_lun *lun = g_new0(struct scsi_lun, 1);
    uint64_t h;

    g_assert(be && be->block_size && be->size >= be->block_size);
    lun->be = be;
    lun->name = g_strdup(name ? name : be->name);
    lun->bs = be->block_size;
    lun->nb_blocks = be->size / be->block_size;
    g_mutex_init(&lun->lock);
    g_cond_init(&lun->drain_cond);
    atomic_init(&lun->inflight, 0);
    atomic_init(&lun->wce, be->write_cache);
    atomic_init(&lun->ua_pending, 1u << SCSI_UA_POWER_ON);

    copy_ascii(lun->vendor, info && info->vendor ? info->vendor : "VHOSTSCS",
               sizeof(lun->vendor) - 1);
    if (info && info->product) {
        copy_ascii(lun->product, info->product, sizeof(lun->product) - 1);
    } else {
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
        scsi_lun_drain(lun);
    }
    backend_close(lun->be);
    g_mutex_clear(&lun->lock);
    g_cond_clear(&lun->drain_cond);
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
