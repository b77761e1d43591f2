/*
 * Internals shared by the SCSI disk emulation files: scsi-disk.c (command
 * dispatch, drain, and the data commands that reach the backend),
 * scsi-disk-info.c (commands answered from the LUN's own state: INQUIRY,
 * READ CAPACITY, MODE SENSE/SELECT, REQUEST SENSE, REPORT SUPPORTED
 * OPERATION CODES, and the target-level REPORT LUNS), and at the bottom,
 * calling nothing above them, scsi-sense.c (sense data and replies) and
 * scsi-ua.c (unit attentions per nexus).  Not an interface for other
 * layers: use scsi-disk.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_DISK_INT_H
#define VHOST_SCSI_SCSI_DISK_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

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

    /*
     * Commands in flight, counted in two epochs (scsi-disk.c, "drain"):
     * one word, so that a command joins the current epoch and a drain
     * closes it in one atomic step each.
     */
    _Atomic uint64_t inflight;
    /*
     * LUN-wide unit attentions: a count per condition, and their sum so the
     * data path checks one word; each nexus folds in what changed.
     */
    atomic_uint ua_events;
    atomic_uint ua_gen[SCSI_UA_COUNT];
    struct scsi_ua_state own_ua;  /* for commands that name no nexus */
    atomic_bool wce;       /* caching mode page WCE: read on every write */

    /* pthread rather than GMutex so ThreadSanitizer sees the ordering. */
    pthread_mutex_t lock;  /* mode page updates and the drain lists */
    pthread_cond_t drain_cond;     /* scsi_lun_free's own wait */
    struct scsi_drain *draining;   /* waiting for the closed epoch to empty */
    struct scsi_drain *next_drain; /* came meanwhile: wait for the epoch after */
};

/* Handlers return EXEC_DONE (result set, caller finishes) or EXEC_ASYNC. */
enum { EXEC_DONE, EXEC_ASYNC };
typedef int sd_exec_fn(struct scsi_lun *lun, struct scsi_cmd *cmd);

/* The command table (scsi-disk.c), also read by REPORT SUPPORTED OPCODES. */
#define F_UA_PASS  0x01   /* executes despite a pending unit attention */
#define F_DISCARD  0x02   /* supported only if the backend can discard */

struct op_desc {
    uint8_t opcode;
    bool has_sa;
    uint16_t sa;
    uint8_t cdb_len;
    uint8_t flags;
    sd_exec_fn *fn;
    /* CDB usage data (SPC-4 6.35.3): opcode, SA, then the bits we look at. */
    uint8_t usage[16];
};

/* Big-endian fields of CDBs and parameter data. */

static inline uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) << 32 | ld32(p + 4); }
static inline void st16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static inline void st32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void st64(uint8_t *p, uint64_t v) { st32(p, (uint32_t)(v >> 32)); st32(p + 4, (uint32_t)v); }

/*
 * The largest READ/WRITE this LUN takes: its own cap, or the backend's
 * device's when smaller (a remote LUN would refuse more), whole blocks.
 */
static inline uint32_t sd_max_xfer_bytes(const struct scsi_lun *lun)
{
    uint32_t dev = lun->be->max_transfer / lun->bs * lun->bs;

    return dev && dev < MAX_XFER_BYTES ? dev : MAX_XFER_BYTES;
}

/* Bounce-buffer steps (VERIFY, WRITE SAME) go to the backend as I/O too. */
static inline uint32_t sd_chunk_bytes(const struct scsi_lun *lun)
{
    return MIN(CHUNK_BYTES, sd_max_xfer_bytes(lun));
}

static inline size_t sd_data_in_size(const struct scsi_cmd *cmd)
{
    return cmd->data_in ? iov_size(cmd->data_in, cmd->data_in_cnt) : 0;
}

static inline size_t sd_data_out_size(const struct scsi_cmd *cmd)
{
    return cmd->data_out ? iov_size(cmd->data_out, cmd->data_out_cnt) : 0;
}

/* Common CHECK CONDITION answers; each returns EXEC_DONE. */
#define invalid_cdb(cmd, byte, bit) sd_field_error(cmd, true, byte, bit)
#define invalid_param(cmd, byte, bit) sd_field_error(cmd, false, byte, bit)
#define lba_out_of_range(cmd) sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x21, 0x00)
#define write_protected(cmd) sd_sense_done(cmd, SENSE_DATA_PROTECT, 0x27, 0x00)
#define param_list_length_error(cmd) sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x1a, 0x00)

/* ---- scsi-disk-info.c: sense and replies -------------------------------- */

void sd_fill_fixed_sense(uint8_t *s, uint8_t key, uint8_t asc, uint8_t ascq);
/* ILLEGAL REQUEST with a field pointer; asc 24h (CDB) or 26h (parameter list). */
int sd_field_error(struct scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit);
int sd_sense_done(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);
/* Copies a reply truncated to the allocation length and the buffer; GOOD. */
int sd_reply(struct scsi_cmd *cmd, const void *buf, size_t len, size_t alloc);

sd_exec_fn sd_exec_inquiry, sd_exec_read_capacity_10, sd_exec_read_capacity_16,
           sd_exec_request_sense, sd_exec_mode_sense, sd_exec_mode_select, sd_exec_rsoc;

/* ---- scsi-disk.c ------------------------------------------------------- */

extern const uint8_t sd_ua_codes[SCSI_UA_COUNT][2];
/* Takes the highest-priority pending unit attention, or returns -1. */
int sd_take_ua(struct scsi_lun *lun, struct scsi_cmd *cmd);
bool sd_ua_maybe_pending(struct scsi_lun *lun, struct scsi_cmd *cmd);
/* Finishes the command after a backend FLUSH (asynchronously). */
int sd_start_flush(struct scsi_lun *lun, struct scsi_cmd *cmd);

extern const struct op_desc sd_op_table[256];
bool sd_opcode_has_sa(uint8_t opcode);
bool sd_op_supported(const struct scsi_lun *lun, const struct op_desc *d);
const struct op_desc *sd_find_op(uint8_t opcode, uint16_t sa);

#endif
