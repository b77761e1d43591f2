/*
 * SCSI block device emulation (SPC-4 / SBC-3): decodes CDBs, answers the
 * commands a LUN answers itself (INQUIRY, READ CAPACITY, MODE SENSE, ...)
 * and turns data commands into backend I/O.  Transport-neutral: the
 * virtio-scsi layer hands it a command with data iovecs and gets back SAM
 * status, sense data and the byte counts transferred.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_DISK_H
#define VHOST_SCSI_SCSI_DISK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "backend.h"
#include "io-stats.h"

#define SCSI_SENSE_MAX 96
#define SCSI_CDB_MAX 32

/* SAM status codes */
#define SAM_STAT_GOOD                 0x00
#define SAM_STAT_CHECK_CONDITION      0x02
#define SAM_STAT_CONDITION_MET        0x04   /* PRE-FETCH: the range is in the cache */
#define SAM_STAT_BUSY                 0x08
#define SAM_STAT_RESERVATION_CONFLICT 0x18
#define SAM_STAT_TASK_SET_FULL        0x28
#define SAM_STAT_TASK_ABORTED         0x40

/* Sense keys */
#define SENSE_NO_SENSE        0x0
#define SENSE_RECOVERED_ERROR 0x1
#define SENSE_NOT_READY       0x2
#define SENSE_MEDIUM_ERROR    0x3
#define SENSE_HARDWARE_ERROR  0x4
#define SENSE_ILLEGAL_REQUEST 0x5
#define SENSE_UNIT_ATTENTION  0x6
#define SENSE_DATA_PROTECT    0x7
#define SENSE_COPY_ABORTED    0xa
#define SENSE_ABORTED_COMMAND 0xb
#define SENSE_MISCOMPARE      0xe

struct scsi_lun;
struct scsi_ua_state;

struct scsi_lun_info {
    const char *vendor;      /* 8 chars max; default "VHOSTSCS" */
    const char *product;     /* 16 chars max; default from backend type */
    const char *serial;      /* unit serial (VPD 0x80); default derived */
    uint64_t naa_id;         /* low 60 bits of an NAA-5 id (VPD 0x83); 0: derived */
};

/*
 * An I_T nexus as persistent reservations see it: by names, not by
 * connection, so that it is the same nexus after a front-end reconnects.
 * The strings belong to the nexus (scsi-target.h), which outlives its
 * commands.
 */
struct scsi_it_id {
    const char *initiator;     /* initiator port name (its TransportID) */
    const char *target;        /* target port name */
    uint16_t rtpi;             /* relative target port identifier */
};

struct scsi_cmd {
    /* Set by the transport before scsi_lun_exec(). */
    const uint8_t *cdb;
    unsigned cdb_len;                 /* bytes available in cdb (<= 32) */
    const struct iovec *data_out;     /* initiator -> target (WRITE data) */
    unsigned data_out_cnt;
    const struct iovec *data_in;      /* target -> initiator (READ data) */
    unsigned data_in_cnt;
    uint64_t tag;
    struct iothread *thread;          /* the thread executing the command */
    /*
     * The I_T nexus's unit attentions for this LUN; NULL: the LUN's own.
     * Valid until the command completes, however long it waits in flight.
     */
    struct scsi_ua_state *ua;
    /* Who sends it, for reservations; all NULL: the LUN's own nexus (set by scsi_nexus_exec). */
    struct scsi_it_id it;
    /*
     * The other LUNs the sending nexus reaches, for EXTENDED COPY's copy
     * targets: finds the first for which match(lun, arg) holds (the copy
     * manager's test of a designator against the LUN's VPD 83h) and gives
     * the relative target port it is reached on in *rtpi.  Set by
     * scsi_nexus_exec to the nexus's table; NULL: the command reaches its
     * own LUN only.  Valid only during scsi_lun_exec's dispatch (the table
     * is freed after a grace period): a LUN found must be counted in
     * flight before the dispatch returns to stay alive.
     */
    struct scsi_lun *(*find_lun)(const void *ctx,
                                 bool (*match)(const struct scsi_lun *lun, const void *arg),
                                 const void *arg, uint16_t *rtpi);
    const void *find_ctx;
    void (*complete)(struct scsi_cmd *cmd);
    void *opaque;
    /*
     * When the transport received the command (io_stats_now_ns()), so that
     * the LUN's latency includes the wait for the backend's queue and the
     * clock is read once for both layers; 0: the LUN reads the clock.
     */
    uint64_t start_ns;

    /* Results, valid in complete(). */
    uint8_t status;                   /* SAM status */
    uint8_t sense_len;
    uint8_t sense[SCSI_SENSE_MAX];    /* fixed-format sense */
    uint64_t data_in_xfer;            /* bytes written into data_in */
    uint64_t data_out_xfer;           /* bytes consumed from data_out */
    uint64_t done_ns;                 /* when the LUN finished it (io_stats_now_ns()) */

    /* Private to scsi-disk.c. */
    struct scsi_lun *lun;
    struct scsi_cmd *qos_next;        /* waiting for a rate limit (scsi-qos.c) */
    struct backend_io bio;
    uint64_t priv[12];
    struct iovec iov_slice[8];
};

/*
 * Clears a command for reuse, except the buffers that are always written
 * before they are read (sense[] up to sense_len, priv[] by the LUN's
 * command set-up, iov_slice[] by the slicer): a third of the struct,
 * cleared once per I/O otherwise.
 */
static inline void scsi_cmd_reset(struct scsi_cmd *cmd)
{
    /*
     * Word stores the compiler unrolls into vector stores, not memset: on
     * x86 the two memsets became rep stosb, whose start-up was a fifth of
     * virtio-scsi's request set-up in perf (polled null LUN, QD32).  The
     * head's last word also clears the first bytes of sense[], which is
     * written before it is read anyway.
     */
    typedef uint64_t word __attribute__((may_alias));
    enum {
        W = sizeof(word),
        HEAD = (offsetof(struct scsi_cmd, sense_len) + W) / W,
        TAIL0 = offsetof(struct scsi_cmd, data_in_xfer) / W,
        TAIL = (offsetof(struct scsi_cmd, priv) - offsetof(struct scsi_cmd, data_in_xfer)) / W,
    };
    word *w = (word *)cmd;

    _Static_assert(HEAD * sizeof(word) <= offsetof(struct scsi_cmd, data_in_xfer),
                   "the head's words stay inside sense[]");
    if (offsetof(struct scsi_cmd, data_in_xfer) % W || offsetof(struct scsi_cmd, priv) % W) {
        /* An ABI that packs 64-bit members on 4 bytes: the plain way. */
        memset(cmd, 0, offsetof(struct scsi_cmd, sense));
        memset(&cmd->data_in_xfer, 0,
               offsetof(struct scsi_cmd, priv) - offsetof(struct scsi_cmd, data_in_xfer));
        return;
    }
#pragma GCC unroll 32
    for (unsigned i = 0; i < HEAD; i++) {
        w[i] = 0;
    }
#pragma GCC unroll 32
    for (unsigned i = 0; i < TAIL; i++) {
        w[TAIL0 + i] = 0;
    }
}

/*
 * Takes ownership of be (closed on failure).  name is used in log lines
 * ("lun0:3").  Returns NULL, with *err (VS_ERROR, EINVAL) saying why, if
 * the geometry cannot be served (block size not a power of two in
 * 512..4096, or no block).
 */
struct scsi_lun *scsi_lun_new(struct lun_backend *be, const char *name,
                              const struct scsi_lun_info *info, GError **err);
void scsi_lun_free(struct scsi_lun *lun);
struct lun_backend *scsi_lun_backend(struct scsi_lun *lun);
/*
 * Where the LUN keeps its persistent reservations while a guest has
 * "activate persist through power loss" (APTPL) on: a state file, written
 * atomically before each PERSISTENT RESERVE OUT that changes them
 * completes, removed when APTPL is cleared.  What is saved there is
 * restored now (no file: nothing).  Without a state file APTPL is refused
 * (REPORT CAPABILITIES PTPL_C 0).  Before the LUN serves commands.  0, or
 * -EINVAL (a corrupt or foreign file: the LUN must not be served without
 * the fencing it records) / -EIO, with *err (VS_ERROR) naming the LUN and
 * the file.
 */
int scsi_lun_set_pr_file(struct scsi_lun *lun, const char *path, GError **err);
/*
 * How a LUN's reservation state reaches its state file: write replaces
 * path with data atomically and durably, remove takes it away; each 0, or
 * -errno with *why (g_free it).  They run on the LUN's saver thread,
 * never on an I/O thread.  The default is the file system's (a temporary
 * file, fsync, rename, fsync of the directory); a test gives its own to
 * hold or fail a save.
 */
struct scsi_pr_store {
    int (*write)(void *opaque, const char *path, const char *data, size_t len, char **why);
    int (*remove)(void *opaque, const char *path, char **why);
};
/* Saves lun's state file through store (NULL: the default); before the LUN serves commands. */
void scsi_lun_set_pr_store(struct scsi_lun *lun, const struct scsi_pr_store *store,
                           void *opaque);
/*
 * Grows the LUN (backend_resize: size bytes, or 0 for what the device has
 * grown to) and raises CAPACITY DATA HAS CHANGED for every nexus.  Main
 * thread, with I/O running; a LUN never shrinks.  0, or -errno with *err
 * saying why (backend_resize's words).
 */
int scsi_lun_resize(struct scsi_lun *lun, uint64_t size, GError **err);
const char *scsi_lun_name(const struct scsi_lun *lun);
/* The LUN's 64-bit NAA designator, as its VPD page 83h reports it. */
uint64_t scsi_lun_naa(const struct scsi_lun *lun);

/*
 * Executes a command.  complete() is called exactly once, possibly before
 * this returns.  The data_in/data_out lengths are those of the buffers
 * the initiator supplied; a CDB asking for more or less than that is
 * handled as SPC/SAM say: a larger buffer leaves a residual (data_*_xfer
 * tells how much moved), replies such as INQUIRY are truncated to the
 * buffer, and a READ or WRITE whose buffer is shorter than its transfer
 * length gets CHECK CONDITION, INVALID FIELD IN CDB, with nothing moved.
 * Thread-safe: several iothreads may execute commands on one LUN at once.
 */
void scsi_lun_exec(struct scsi_lun *lun, struct scsi_cmd *cmd);

/* Commands started and not yet completed, across all threads. */
unsigned scsi_lun_inflight(struct scsi_lun *lun);

/*
 * Statistics: every command the LUN executes is counted, when it
 * completes, as a read (READ 6/10/12/16), a write (WRITE and WRITE AND
 * VERIFY 6/10/12/16, COMPARE AND WRITE, ORWRITE, WRITE ATOMIC) or other (everything else, including commands
 * refused before they ran), with the bytes it moved (data_in_xfer +
 * data_out_xfer), its latency from start_ns to completion, and as an
 * error if its status was not GOOD (a unit attention is not an error: it
 * is a report the initiator retries after).  The counters live in
 * per-thread slots (io-stats.h), indexed by the id of cmd->thread.
 * scsi_lun_stats adds the LUN's figures since scsi_lun_new to out.
 */
void scsi_lun_stats(struct scsi_lun *lun, struct io_stats_snapshot *out);

/*
 * Rate limits for READ and WRITE commands (other commands are not
 * limited): at most iops commands and bytes_per_s data bytes per second,
 * each over windows of about 100 ms (a burst after idling is at most a
 * tenth of a second's worth); 0: no limit.  A command over the limit is
 * not refused: it waits, in flight, and runs when the limit allows, so a
 * guest sees latency, not errors.  Only commands run on an I/O thread
 * (cmd->thread, with an id below 257) are limited.  Any thread, at any
 * time; takes effect within a few milliseconds.
 */
struct scsi_qos {
    uint64_t iops;
    uint64_t bytes_per_s;
};
void scsi_lun_set_qos(struct scsi_lun *lun, const struct scsi_qos *q);
void scsi_lun_get_qos(struct scsi_lun *lun, struct scsi_qos *q);

/*
 * The statistics class of a command by its CDB (as above).  Inline, with
 * the opcodes spelt out, because transports count with it too and their
 * tests replace the disk emulation with a fake.
 */
static inline enum io_class scsi_cdb_class(const uint8_t *cdb, unsigned cdb_len)
{
    if (!cdb || cdb_len == 0) {
        return IO_OTHER;
    }
    switch (cdb[0]) {
    case 0x08: case 0x28: case 0xa8: case 0x88:   /* READ (6), (10), (12), (16) */
        return IO_READ;
    case 0x0a: case 0x2a: case 0xaa: case 0x8a:   /* WRITE (6), (10), (12), (16) */
    case 0x2e: case 0xae: case 0x8e:              /* WRITE AND VERIFY (10), (12), (16) */
    case 0x89: case 0x8b:                         /* COMPARE AND WRITE, ORWRITE (16) */
    case 0x9c:                                    /* WRITE ATOMIC (16) */
        return IO_WRITE;
    default:
        return IO_OTHER;
    }
}

/* Whether a completed command counts as an error (as above; CONDITION MET is a success). */
static inline bool scsi_cmd_is_error(const struct scsi_cmd *cmd)
{
    return cmd->status != SAM_STAT_GOOD && cmd->status != SAM_STAT_CONDITION_MET &&
           !(cmd->status == SAM_STAT_CHECK_CONDITION && cmd->sense_len > 2 &&
             (cmd->sense[2] & 0x0f) == SENSE_UNIT_ATTENTION);
}

/*
 * Unit attention conditions, reported once to the next command (then
 * cleared), except INQUIRY/REPORT LUNS/REQUEST SENSE which pass through
 * (SPC-4 5.14 / SAM-5).  They are kept per I_T nexus, as LIO keeps them
 * per initiator: each front-end connection (a scsi_ua_state per LUN, owned
 * by the transport and named by scsi_cmd.ua) sees its own power-on
 * condition, a condition raised for the whole LUN is reported once to
 * every nexus, and one raised for one nexus only to that nexus.  A command
 * with ua == NULL uses the LUN's own state (one initiator); power-on is
 * pending there after scsi_lun_new().
 */
enum scsi_ua {
    SCSI_UA_POWER_ON,         /* 29h/00h POWER ON, RESET, OR BUS DEVICE RESET OCCURRED */
    SCSI_UA_LUN_RESET,        /* 29h/03h BUS DEVICE RESET FUNCTION OCCURRED */
    SCSI_UA_NEXUS_LOSS,       /* 29h/07h I_T NEXUS LOSS OCCURRED */
    SCSI_UA_CAPACITY_CHANGED, /* 2Ah/09h CAPACITY DATA HAS CHANGED */
    SCSI_UA_REPORTED_LUNS_CHANGED, /* 3Fh/0Eh */
    SCSI_UA_COUNT
};

struct scsi_ua_state {
    atomic_uint pending;                 /* bit per enum scsi_ua */
    atomic_uint seen_events;             /* the LUN's event count folded in so far */
    atomic_uint seen_gen[SCSI_UA_COUNT]; /* the LUN's per-condition counts folded in */
};

/* A new I_T nexus to lun: power-on pending, earlier LUN-wide conditions not. */
void scsi_ua_init(struct scsi_ua_state *s, struct scsi_lun *lun);
/* A condition for one I_T nexus only (its I_T NEXUS RESET, its bus reset). */
void scsi_ua_set(struct scsi_ua_state *s, enum scsi_ua ua);
/* A condition for every I_T nexus to lun (LOGICAL UNIT RESET, capacity change). */
void scsi_lun_set_ua(struct scsi_lun *lun, enum scsi_ua ua);

/*
 * Backend I/O cannot be recalled, so a task management function that
 * aborts the LUN's tasks (LOGICAL UNIT RESET, CLEAR TASK SET) answers when
 * they have completed.  scsi_lun_drain_async() calls d->done(d) once every
 * command that was in flight on the LUN when it was called has completed;
 * commands started afterwards are not waited for, so a drain ends even
 * under continuous I/O from other initiators.  Nothing waits: with
 * d->thread set, done runs on that thread, posted there (iothread_post)
 * even when nothing was in flight; with d->thread NULL it runs on the
 * thread that completes the last of those commands, or inside this call
 * when there was none.  d belongs to the LUN until done runs (it cannot
 * be withdrawn; an owner that loses interest lets done find that out).
 * Several drains may be pending at once, from any thread.  The data path
 * stays lock-free: a command joins an epoch with one compare-and-swap and
 * leaves it with one atomic subtraction.
 */
struct scsi_drain {
    void (*done)(struct scsi_drain *d);
    struct iothread *thread;
    void *opaque;
    /* Private to scsi-disk.c. */
    struct scsi_drain *next;
};
void scsi_lun_drain_async(struct scsi_lun *lun, struct scsi_drain *d);

/*
 * Builds fixed-format sense (response code 70h) with any key, ASC and ASCQ
 * into cmd and sets CHECK CONDITION: for sense that is not the SCSI
 * layer's own, such as a remote device's passed on as it came.  What the
 * layer reports itself comes from its table of named conditions.
 */
void scsi_cmd_set_sense(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);

#endif
