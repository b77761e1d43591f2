/*
 * The lower layer of the SCSI disk emulation, which every file of it may
 * call: the LUN's state and limits, opcodes, CDB fields and sense building
 * (scsi-sense.h, shared with the target), unit attentions (scsi-disk-ua.c), in-flight accounting
 * (scsi-disk-drain.c) and the backend I/O engine (scsi-disk-io.c).
 * Nothing declared here calls up into the command families or the
 * dispatch; those are declared in scsi-disk-ops.h, which only the dispatch
 * (scsi-disk.c) and the families' own files include.  Not an interface for
 * other layers: use scsi-disk.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_DISK_INT_H
#define VHOST_SCSI_SCSI_DISK_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include <glib.h>

#include "iothread.h"
#include "iov.h"
#include "log-limit.h"
#include "scsi-disk.h"
#include "scsi-pr.h"
#include "scsi-sense.h"

/*
 * Limits advertised in the Block Limits VPD page and enforced here.  The
 * transfer cap bounds what one command can pin of guest memory; WRITE SAME
 * and VERIFY bounce through buffers of at most one chunk.  The UNMAP and
 * WRITE SAME caps (1M blocks) bound the work one command asks for, and
 * that work goes to the backend a range chunk at a time (at most 64k
 * blocks and 1 MiB per request, INLINE_PIECE_BYTES for a backend that
 * works inside submit), the I/O thread yielded between chunks
 * that completed inside submit() (scsi-disk-io.c), so one guest's command
 * does not hold a thread other queues share.
 */
/*
 * The transfer cap is the virtio-scsi config space's: the front-end owns
 * that space (the daemon offers no VHOST_USER_PROTOCOL_F_CONFIG), and
 * QEMU's vhost-user-scsi says max_sectors 0xFFFF there, which the guest's
 * driver takes as its limit (vioscsi's MaximumTransferLength, Linux's
 * max_sectors).  Block Limits says no more, so the two agree.
 */
#define MAX_XFER_BYTES (0xffffu * 512u)
#define OPT_XFER_BYTES (1u << 20)
#define CHUNK_BYTES (1u << 20)
#define MAX_UNMAP_LBAS 0x100000u
#define MAX_UNMAP_DESCS 128u
#define MAX_WRITE_SAME_LBAS 0x100000u
#define RANGE_CHUNK_BLOCKS 0x10000u
#define RANGE_CHUNK_BYTES (1u << 20)
/*
 * A backend that works inside submit() (works_inline: ram, null) does
 * every byte on the I/O thread's CPU, so a 1 MiB chunk or a 16 MiB READ
 * would hold the thread for hundreds of microseconds to milliseconds
 * while another guest's 4 KiB read waits.  For those backends every
 * request is cut to at most this (a few microseconds of copying, faulting
 * or zeroing), a READ or WRITE of more runs as a command of pieces, and
 * those, WRITE SAME and UNMAP start deferred (defer_first), so what a queue's
 * turn costs the thread is bounded by its turn budget (virtio-scsi) and
 * one piece per loop iteration (docs/security.md).
 */
#define INLINE_PIECE_BYTES (16u << 10)
/* COMPARE AND WRITE: one byte in the CDB and Block Limits; both halves bounce. */
#define MAX_CAW_BLOCKS 255u
/*
 * WRITE ATOMIC (16): one backend request under the exclusive range, which
 * holds up overlapping reads and writes while it lasts: at most 1 MiB.
 */
#define MAX_ATOMIC_BYTES (1u << 20)

/*
 * EXTENDED COPY (scsi-disk-xcopy.c), as the Third-party Copy VPD page and
 * RECEIVE COPY RESULTS' OPERATING PARAMETERS report it: at most 8 copy
 * target (CSCD) descriptors of 32 bytes and 8 block-to-block segment
 * descriptors of 28, each segment at most 32 MiB, so one command moves at
 * most 256 MiB, in chunks of at most CHUNK_BYTES; no inline data.  At most
 * 16 copies run at once on one LUN, and as many results are held for
 * RECEIVE COPY RESULTS.
 */
#define XCOPY_MAX_CSCDS 8u
#define XCOPY_MAX_SEGMENTS 8u
#define XCOPY_CSCD_LEN 32u
#define XCOPY_SEGMENT_LEN 28u
#define XCOPY_MAX_DESC_LIST (XCOPY_MAX_CSCDS * XCOPY_CSCD_LEN + \
                             XCOPY_MAX_SEGMENTS * XCOPY_SEGMENT_LEN)
#define XCOPY_MAX_SEGMENT_BYTES (32u << 20)
#define XCOPY_MAX_COPIES 16u
#define XCOPY_CSCD_ID_DESC 0xe4      /* identification descriptor CSCD descriptor */
#define XCOPY_SEG_BLOCK_TO_BLOCK 0x02

/* Large enough for any reply built on the stack (VPD pages, mode data). */
#define REPLY_MAX 512

/* Room for sd_lu_designators(): NAA (12 bytes) and T10 vendor id (12 + a 64-byte serial). */
#define SD_LU_DESIGNATORS_MAX 96u
size_t sd_lu_designators(const struct scsi_lun *lun, uint8_t *d);

/* A rate limit's token bucket (scsi-qos.c); rate 0: no limit. */
struct sd_bucket {
    _Atomic uint64_t rate;     /* tokens per second */
    _Atomic int64_t tokens;    /* may be overdrawn by one take */
    _Atomic uint64_t last_ns;  /* refilled up to then */
};

/* Rate-limit state per I/O thread id (commands on threads past it are not limited). */
#define SD_QOS_SLOTS 257u
struct sd_qos_slot;
struct sd_range_lock;
struct sd_copy_result;

struct scsi_lun {
    struct lun_backend *be;
    char *name;
    /* Lines that a guest's commands cause (any initiator's) go through it. */
    struct log_limit log_limit;
    char vendor[9];
    char product[17];
    char serial[65];
    uint64_t naa;          /* full 64-bit NAA-5 designator */
    uint64_t nb_blocks;    /* sd_nb_blocks(): a resize changes it under I/O */
    uint32_t bs;

    /* Commands in flight, per thread and drain epoch (scsi-disk-drain.c). */
    struct sd_inflight *inflight;
    /*
     * LUN-wide unit attentions: a count per condition, and their sum so the
     * data path checks one word; each nexus folds in what changed.
     */
    atomic_uint ua_events;
    atomic_uint ua_gen[SCSI_UA_COUNT];
    struct scsi_ua_state own_ua;  /* for commands that name no nexus */
    struct scsi_pr *pr;    /* persistent reservations (scsi-pr.c) */
    atomic_bool wce;       /* caching mode page WCE: read on every write */
    struct io_stats stats; /* per I/O thread slots, summed by scsi_lun_stats */
    atomic_bool qos_on;    /* a rate limit is set: the one load the data path pays */
    struct sd_bucket qos_io, qos_bytes;
    struct sd_qos_slot *_Atomic qos_slot[SD_QOS_SLOTS];
    struct sd_range_lock *wlock;   /* the write range lock (scsi-disk-range.c) */
    /* EXTENDED COPY's running and held copies (scsi-disk-xcopy.c), under lock; NULL: none yet. */
    struct sd_copy_result *copies;
    /*
     * SANITIZE (scsi-disk-sanitize.c): enum sd_sanitize_state, which the
     * dispatch loads once per command, and the progress of a running one
     * in 65536ths; AUSE of the running or failed one.
     */
    atomic_uint sanitize_state;
    atomic_uint sanitize_progress;
    atomic_bool sanitize_ause;

    /* pthread rather than GMutex so ThreadSanitizer sees the ordering. */
    pthread_mutex_t lock;  /* mode page updates, the drain lists, copies */
    pthread_cond_t drain_cond;     /* scsi_lun_free's own wait */
    struct scsi_drain *draining;   /* waiting for the closed epoch to empty */
    struct scsi_drain *next_drain; /* came meanwhile: wait for the epoch after */
};

typedef int sd_exec_fn(struct scsi_lun *lun, struct scsi_cmd *cmd);

/* Where the LUN's SANITIZE stands (SBC-3 4.11.x): idle, running, or failed. */
enum sd_sanitize_state { SD_SANITIZE_IDLE, SD_SANITIZE_RUNNING, SD_SANITIZE_FAILED };

static inline unsigned sd_sanitize_state(const struct scsi_lun *lun)
{
    return atomic_load_explicit(&((struct scsi_lun *)lun)->sanitize_state,
                                memory_order_acquire);
}

/* The progress indication of a running SANITIZE (65536ths done). */
static inline uint16_t sd_sanitize_progress(const struct scsi_lun *lun)
{
    return (uint16_t)atomic_load_explicit(&((struct scsi_lun *)lun)->sanitize_progress,
                                          memory_order_relaxed);
}

/* NOT READY, SANITIZE IN PROGRESS, with how far it has got; EXEC_DONE. */
static inline int sd_sanitize_in_progress(struct scsi_lun *lun, struct scsi_cmd *cmd)
{
    sd_fill_progress_sense(cmd->sense, SCSI_SC_SANITIZE_IN_PROGRESS, sd_sanitize_progress(lun));
    cmd->sense_len = FIXED_SENSE_LEN;
    cmd->status = SAM_STAT_CHECK_CONDITION;
    return EXEC_DONE;
}

/*
 * While a SANITIZE of lun runs or after one failed (sanitize_state not
 * idle): EXEC_DONE with the answer cmd gets instead of running (NOT
 * READY, SANITIZE IN PROGRESS; MEDIUM ERROR, SANITIZE COMMAND FAILED for a
 * medium access), or -1 if it runs.  passes: it may run while a sanitize
 * runs (INQUIRY, REQUEST SENSE); medium: it reads or writes lun's blocks
 * (the dispatch; EXTENDED COPY for its copy targets).
 */
static inline int sd_sanitize_gate(struct scsi_lun *lun, struct scsi_cmd *cmd, bool passes,
                                   bool medium)
{
    switch (sd_sanitize_state(lun)) {
    case SD_SANITIZE_RUNNING:
        return passes ? -1 : sd_sanitize_in_progress(lun, cmd);
    case SD_SANITIZE_FAILED:
        return medium ? sd_sense_done(cmd, SCSI_SC_SANITIZE_FAILED) : -1;
    default:
        return -1;
    }
}

/* The capacity in blocks; only ever grows (scsi_lun_resize). */
static inline uint64_t sd_nb_blocks(const struct scsi_lun *lun)
{
    return __atomic_load_n(&lun->nb_blocks, __ATOMIC_RELAXED);
}

/*
 * The largest READ/WRITE this LUN takes: its own cap, or the backend's
 * device's when smaller (a remote LUN would refuse more), whole blocks.
 */
static inline uint32_t sd_max_xfer_bytes(const struct scsi_lun *lun)
{
    uint32_t pbs = lun->be->phys_block_size;
    /* Whole physical blocks, so the largest transfer never ends inside one. */
    uint32_t unit = pbs > lun->bs && pbs % lun->bs == 0 ? pbs : lun->bs;
    uint32_t dev = lun->be->max_transfer / lun->bs * lun->bs;
    uint32_t max = dev && dev < MAX_XFER_BYTES ? dev : MAX_XFER_BYTES;

    return max >= unit ? max / unit * unit : max;
}

/* Bounce-buffer steps (VERIFY, WRITE SAME) go to the backend as I/O too. */
static inline uint32_t sd_chunk_bytes(const struct scsi_lun *lun)
{
    return MIN(lun->be->works_inline ? INLINE_PIECE_BYTES : CHUNK_BYTES,
               sd_max_xfer_bytes(lun));
}

/* The longest COMPARE AND WRITE: its read and its write are one request each. */
static inline uint32_t sd_max_caw_blocks(const struct scsi_lun *lun)
{
    return MIN(MAX_CAW_BLOCKS, sd_max_xfer_bytes(lun) / lun->bs);
}

/*
 * WRITE ATOMIC's ATOMIC ALIGNMENT and ATOMIC TRANSFER LENGTH GRANULARITY:
 * the physical block, so an atomic write never covers part of one (which
 * the device would read-modify-write underneath); one block if none.
 */
static inline uint32_t sd_atomic_granularity(const struct scsi_lun *lun)
{
    uint32_t pbs = lun->be->phys_block_size;

    return pbs > lun->bs && pbs % lun->bs == 0 ? pbs / lun->bs : 1;
}

/* MAXIMUM ATOMIC TRANSFER LENGTH: one request, whole granules; 0 if not even one fits. */
static inline uint32_t sd_max_atomic_blocks(const struct scsi_lun *lun)
{
    uint32_t g = sd_atomic_granularity(lun);
    uint32_t max = MIN(MAX_ATOMIC_BYTES, sd_max_xfer_bytes(lun)) / lun->bs / g * g;

    return max ? max : (g <= sd_max_xfer_bytes(lun) / lun->bs ? g : 0);
}

/* The most blocks one DISCARD or WRITE ZEROES request covers. */
static inline uint32_t sd_range_chunk_blocks(const struct scsi_lun *lun)
{
    uint32_t bytes = lun->be->works_inline ? INLINE_PIECE_BYTES : RANGE_CHUNK_BYTES;

    return MIN(RANGE_CHUNK_BLOCKS, MAX(bytes / lun->bs, 1u));
}

/*
 * The offset of the first byte where a and b differ (len if none): the
 * INFORMATION of a MISCOMPARE, found after memcmp() said they differ.
 */
static inline size_t sd_first_difference(const uint8_t *a, const uint8_t *b, size_t len)
{
    size_t i = 0;

    while (i < len && a[i] == b[i]) {
        i++;
    }
    return i;
}

static inline size_t sd_data_in_size(const struct scsi_cmd *cmd)
{
    return cmd->data_in ? iov_size(cmd->data_in, cmd->data_in_cnt) : 0;
}

static inline size_t sd_data_out_size(const struct scsi_cmd *cmd)
{
    return cmd->data_out ? iov_size(cmd->data_out, cmd->data_out_cnt) : 0;
}

/* ---- scsi-disk-ua.c: unit attentions ------------------------------------ */

/* Takes the highest-priority pending unit attention, or returns -1. */
int sd_take_ua(struct scsi_lun *lun, struct scsi_cmd *cmd);
bool sd_ua_maybe_pending(struct scsi_lun *lun, struct scsi_cmd *cmd);

/* ---- scsi-disk-drain.c: in-flight accounting ---------------------------- */

int sd_inflight_init(struct scsi_lun *lun);
void sd_inflight_free(struct scsi_lun *lun);
/*
 * Joins the current drain epoch in the counter of I/O thread thread_id (0:
 * none, a shared counter); returns the token for sd_inflight_put, which
 * must then run on the same thread.
 */
unsigned sd_inflight_get(struct scsi_lun *lun, unsigned thread_id);
void sd_inflight_put(struct scsi_lun *lun, unsigned token);
/* A token no sd_inflight_get returns: the command counts nowhere. */
#define SD_INFLIGHT_NONE UINT_MAX
/*
 * A command that will wait for a drain of its own LUN stops counting as
 * in flight first (or the drain would wait for it); sd_cmd_finish then
 * does not count it out again.
 */
void sd_cmd_leave_epoch(struct scsi_cmd *cmd);
/* Blocks until every command in flight has completed (scsi_lun_free only). */
void sd_drain_sync(struct scsi_lun *lun);

/* ---- scsi-disk-range.c: the write range lock --------------------------- */

/*
 * What a command holds of the LUN's block range lock: every command that
 * writes takes its LBA range, shared, and COMPARE AND WRITE exclusively,
 * so that nothing writes its blocks between its read and its write.
 * Kept in the command's private area (scsi-disk-io.c).
 */
typedef void sd_range_go_fn(struct scsi_lun *lun, struct scsi_cmd *cmd);
struct sd_range {
    uint64_t lba, n;
    struct sd_range *next;     /* in the held or the waiting list */
    struct sd_range *run_next; /* granted by one release, to be continued */
    struct scsi_cmd *cmd;
    sd_range_go_fn *go;        /* continues the command once it holds the range */
    uint16_t slot;             /* fast-path counter it counts in */
    uint8_t excl;
    uint8_t state;             /* enum in scsi-disk-range.c; 0: holds nothing */
};

int sd_range_init(struct scsi_lun *lun);
void sd_range_free(struct scsi_lun *lun);
/*
 * Takes [lba, lba + n) for cmd, recorded in r (cmd's own record, which
 * its owner passes down so that the lock needs nothing from above it),
 * shared or exclusive.  True: held now.  False: cmd waits, and go(lun, cmd)
 * runs on cmd's thread (posted there; inside a later release when the
 * command has no thread) once it holds it.
 */
bool sd_range_lock(struct scsi_lun *lun, struct sd_range *r, struct scsi_cmd *cmd,
                   uint64_t lba, uint64_t n, bool excl, sd_range_go_fn *go);
/* Gives back what r holds (sd_cmd_finish does, before completing its command). */
void sd_range_unlock(struct scsi_lun *lun, struct sd_range *r);

/* ---- scsi-qos.c: rate limits ------------------------------------------- */

typedef void sd_qos_run_fn(struct scsi_lun *lun, struct scsi_cmd *cmd);
/*
 * Whether cmd (begun, of class cls) may run now; if not it waits and
 * run(lun, cmd) is called on its thread when the limit allows.
 */
bool sd_qos_admit(struct scsi_lun *lun, struct scsi_cmd *cmd, enum io_class cls,
                  sd_qos_run_fn *run);
void sd_qos_init(struct scsi_lun *lun);
/* Frees the per-thread state of a drained LUN. */
void sd_qos_free(struct scsi_lun *lun);

/* ---- scsi-disk-io.c: command lifetime and the backend I/O engine -------- */

/*
 * Multi-request command state.  The step function prepares cmd->bio and
 * returns STEP_SUBMIT, or sets the command's result and returns STEP_DONE.
 * It sees the previous request's result in ret (0 on the first call).
 * STEP_RANGE asks for [range_lba, range_lba + range_n) of range_lun's
 * write range lock, shared, and the step is called again with ret 0 once
 * the command holds it (now, or continued on its thread when it is
 * granted); the step gives it back with sd_op_range_unlock, or the
 * command's end does.  A command holds one range at a time.
 */
enum { STEP_DONE, STEP_SUBMIT, STEP_RANGE };

struct op_state;
typedef int op_step_fn(struct scsi_lun *lun, struct scsi_cmd *cmd,
                       struct op_state *st, int ret);

struct op_state {
    op_step_fn *step;
    struct scsi_cmd *cmd;
    struct iothread_task task;   /* the next request, deferred (scsi-disk-io.c) */
    atomic_int phase;
    int last_ret;
    int state;             /* step-function specific */
    uint64_t lba;          /* next block */
    uint64_t remaining;    /* blocks still to do */
    uint64_t done_bytes;   /* VERIFY: data-out bytes compared so far; SANITIZE: blocks done */
    uint64_t end_lba;      /* SANITIZE: the capacity it erases, each pass */
    uint8_t *buf;          /* bounce buffer, chunk sized */
    uint8_t *block;        /* one block: WRITE SAME data, VERIFY BYTCHK=3 */
    uint8_t *expect;       /* VERIFY BYTCHK=1: data-out for the chunk */
    uint64_t chunk_blocks;
    struct iovec iov;
    uint64_t *unmap;       /* UNMAP: lba, count pairs */
    unsigned idx, count;   /* UNMAP: the next pair, how many */
    bool fua;
    bool flush_after;
    /*
     * Where the step's request goes: another LUN's backend (EXTENDED COPY's
     * copy targets); NULL: the command's own LUN's.
     */
    struct lun_backend *be;
    struct scsi_lun *range_lun;     /* STEP_RANGE: whose range; set while held */
    uint64_t range_lba, range_n;
    /* A family's own state, and what frees it (before complete(); cmd's result is set). */
    void *ext;
    void (*ext_free)(struct scsi_cmd *cmd, void *ext);
    /*
     * The first request is deferred like the later ones (op_run): a
     * command of many pieces on a works_inline backend costs its queue's
     * turn nothing but its set-up.
     */
    bool defer_first;
    /* READ/WRITE in pieces: the command's data and the slice being sent. */
    const struct iovec *data_iov;
    unsigned data_cnt;
    struct iovec *piece_iov;   /* data_cnt entries: a slice never needs more */
};

/* Resets the command's results and counts it in flight on lun, as cls. */
void sd_cmd_begin(struct scsi_lun *lun, struct scsi_cmd *cmd, enum io_class cls);
/* Frees its private state, calls complete() and counts it out. */
void sd_cmd_finish(struct scsi_cmd *cmd);

/* LBA range check that cannot wrap. */
bool sd_range_ok(const struct scsi_lun *lun, uint64_t lba, uint64_t n);
/* Writes must be durable at completion if FUA or the write cache is off. */
bool sd_write_needs_fua(struct scsi_lun *lun, bool fua_bit);
/* Points the bio at the first len bytes of iov (total bytes long). */
int sd_map_data(struct scsi_cmd *cmd, const struct iovec *iov, unsigned cnt,
                size_t total, size_t len);
void sd_bio_init(struct scsi_lun *lun, struct scsi_cmd *cmd, enum backend_op op,
                 uint64_t offset, uint64_t len,
                 void (*done)(struct backend_io *io, int ret));
/* One-request commands: submit cmd->bio, finished by sd_single_done. */
void sd_single_done(struct backend_io *io, int ret);
int sd_submit_single(struct scsi_lun *lun, struct scsi_cmd *cmd);
/* Multi-request commands: the op belongs to cmd and is freed with it. */
struct op_state *sd_op_new(struct scsi_cmd *cmd, op_step_fn *step);
int sd_op_start(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st);
/*
 * Writing commands, and READ, start under the range lock: these take
 * [lba, lba + n) (shared, or exclusive for COMPARE AND WRITE, ORWRITE and
 * WRITE ATOMIC) and then submit or start,
 * now or once the range is theirs.  EXEC_DONE or EXEC_ASYNC as above.
 */
int sd_submit_single_range(struct scsi_lun *lun, struct scsi_cmd *cmd, uint64_t lba,
                           uint64_t n, bool excl);
int sd_op_start_range(struct scsi_lun *lun, struct scsi_cmd *cmd, struct op_state *st,
                      uint64_t lba, uint64_t n, bool excl);
void sd_op_bio_done(struct backend_io *io, int ret);
/* Gives back the range a STEP_RANGE took. */
void sd_op_range_unlock(struct scsi_cmd *cmd, struct op_state *st);
/* Sets the sense for a failed backend request; returns STEP_DONE. */
int sd_step_fail(struct scsi_lun *lun, struct scsi_cmd *cmd, int ret);
/* Finishes the command after a backend FLUSH (asynchronously). */
int sd_start_flush(struct scsi_lun *lun, struct scsi_cmd *cmd);

#endif
