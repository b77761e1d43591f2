/*
 * The harness the SCSI disk emulation's unit tests share
 * (scsi-disk-fixture.c, compiled into each of them): ram and null LUNs
 * whose power-on unit attention has been consumed, commands run on them
 * (to completion on a synchronous backend, or started and left pending),
 * checks of the status and fixed-format sense that come back, and the
 * "spy" backend, which wraps ram to observe the requests the SCSI layer
 * makes (FUA, FLUSH), to inject backend errors and to defer completions,
 * which exercises the asynchronous paths.  CDBs come from libiscsi's
 * builders and data-in and sense are decoded by libiscsi
 * (tests/scsi-cmd.h); a CDB is built by hand only where a test needs one
 * libiscsi cannot build, and says so.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_DISK_FIXTURE_H
#define VHOST_SCSI_SCSI_DISK_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <glib.h>

#include "backend.h"
#include "scsi-cmd.h"
#include "scsi-disk.h"

#define KiB 1024
#define MiB (1024 * 1024)

#define BS 512                /* the block size of most LUNs here */

/* An operation code no standard assigns, which libiscsi builds no CDB for. */
#define NO_SUCH_OPCODE 0xc5

/*
 * A remote device's sense outside the SCSI layer's own conditions
 * (MEDIUM ERROR, UNRECOVERED READ ERROR - AUTO REALLOCATE FAILED): the spy
 * backend answers with it to show it is passed on as it came.
 */
#define REMOTE_ASCQ 0x1104

/* How long a test waits for a drain, or for held requests, to end. */
#define DRAIN_TIMEOUT_US (10 * G_TIME_SPAN_SECOND)

struct result {
    uint8_t status;
    uint8_t sense_len;
    uint8_t sense[SCSI_SENSE_MAX];
    uint64_t in_xfer;
    uint64_t out_xfer;
    uint8_t cdb[SC_CDB_MAX];  /* what was sent, for sc_datain_decode */
    unsigned cdb_len;
};

struct pending_cmd {
    struct scsi_cmd cmd;
    struct iovec in, out;
    uint8_t cdb[SC_CDB_MAX];  /* a CDB libiscsi built, kept until completion */
    int completions;
};

/* The completion of a pending_cmd (cmd->opaque): counts it. */
void count_completion(struct scsi_cmd *cmd);

/*
 * Fills p for cdb (which must stay valid until completion) through nexus
 * ua, completed by count_completion: for a caller that executes it itself.
 */
void prepare_cdb(struct pending_cmd *p, struct scsi_ua_state *ua, const uint8_t *cdb,
                 unsigned cdb_len, const void *out, size_t out_len, void *in, size_t in_len);

/*
 * Starts cdb (which must stay valid until completion) through nexus ua
 * (NULL: the LUN's own); the caller checks p->completions.
 */
void start_cdb(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
               const uint8_t *cdb, unsigned cdb_len, const void *out, size_t out_len,
               void *in, size_t in_len);

/* Starts the CDB libiscsi built in task (which this frees), kept in p. */
void start_as(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_ua_state *ua,
              struct scsi_task *task, const void *out, size_t out_len, void *in,
              size_t in_len);

/* start_as() through the LUN's own nexus. */
void start(struct pending_cmd *p, struct scsi_lun *lun, struct scsi_task *task,
           const void *out, size_t out_len, void *in, size_t in_len);

/* The status, sense, transfer counts and CDB of a completed command. */
struct result result_of(const struct scsi_cmd *cmd);

/* Runs cdb on a synchronous backend: it must complete exactly once, inline. */
struct result run_cdb(struct scsi_lun *lun, const uint8_t *cdb, unsigned cdb_len,
                      const void *out, size_t out_len, void *in, size_t in_len);

/* run_cdb() for the CDB libiscsi built in task (which this frees). */
struct result run(struct scsi_lun *lun, struct scsi_task *task, const void *out,
                  size_t out_len, void *in, size_t in_len);

#define RUN(lun, task) run(lun, task, NULL, 0, NULL, 0)
#define RUN_IN(lun, task, buf, len) run(lun, task, NULL, 0, buf, len)
#define RUN_OUT(lun, task, buf, len) run(lun, task, buf, len, NULL, 0)

/* libiscsi's decoding of the data r's command read into buf; valid until sc_datain_free(d). */
void *decoded(struct sc_datain *d, const struct result *r, const void *buf);

/* GOOD, and no sense. */
void assert_good(const struct result *r);

/* CHECK CONDITION with fixed-format sense of key and code (ASC << 8 | ASCQ). */
struct sc_sense assert_sense(const struct result *r, unsigned key, unsigned code);

/* ILLEGAL REQUEST, INVALID FIELD IN CDB: the most common refusal. */
void assert_invalid_cdb(const struct result *r);

/*
 * INVALID FIELD IN CDB (in_cdb) or IN PARAMETER LIST whose field pointer
 * (SKSV) names byte and, with bit >= 0, that bit of it.
 */
void assert_field(const struct result *r, bool in_cdb, unsigned byte, int bit);

/* ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE. */
void assert_lba_out_of_range(const struct result *r);

/* ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST. */
void assert_invalid_param(const struct result *r);

/* A LUN whose power-on unit attention has been consumed. */
struct scsi_lun *ready(struct scsi_lun *lun);

/* A LUN on a ram backend of size bytes, its power-on unit attention pending. */
struct scsi_lun *new_ram(uint64_t size, uint32_t bs);

/* A ready LUN on 8 MiB of ram in 512-byte blocks. */
struct scsi_lun *ram_lun(void);

/* A ready LUN on a null backend (reads zeros, drops writes). */
struct scsi_lun *null_lun(uint64_t size, uint32_t bs);

/* A ready LUN on a null backend with fill=none (a READ writes nothing into its buffer). */
struct scsi_lun *nofill_lun(uint64_t size, uint32_t bs);

/*
 * Leaves freed heap blocks of size bytes holding HEAP_PATTERN, as another
 * tenant's data would, for a buffer the next command allocates to find
 * (glibc hands a freed block of the size back; ASan's allocator does not,
 * but fills the start of every new block with 0xbe): a buffer of the
 * daemon's that reaches a guest uncleared shows up as non-zero bytes.
 */
#define HEAP_PATTERN 0xa5
void dirty_heap(size_t size);

/* len bytes of a pattern that differs with seed and from block to block. */
void fill_pattern(uint8_t *p, size_t len, unsigned seed);

/* READ(16) of n 512-byte blocks at lba into buf, which must succeed. */
void read_blocks(struct scsi_lun *lun, uint64_t lba, uint32_t n, uint8_t *buf);

/* WRITE SAME(16) of one block (NDOB when data is NULL: libiscsi sets it for no data-out). */
struct result write_same16(struct scsi_lun *lun, bool unmap, bool anchor, uint64_t lba,
                           uint32_t n, const uint8_t *data, size_t len);

/* ---- geometries: the same case on 512-byte, 4Kn and 512e LUNs ---------- */

struct geometry {
    const char *name;       /* the test path's last part: "512", "4kn", "512e" */
    uint32_t bs;            /* logical block size */
    uint32_t pbs;           /* physical block size (phys_block_size; 0: one block) */
};

extern const struct geometry geometries[3];

/* A ready LUN on size bytes of ram with g's logical and physical block sizes. */
struct scsi_lun *geometry_lun(const struct geometry *g, uint64_t size);

/*
 * A LUN of g's geometry on size bytes of ram named name, with info's
 * identity (NULL: the defaults), its power-on unit attention pending.
 */
struct scsi_lun *geometry_ram(const struct geometry *g, const char *name, uint64_t size,
                              const struct scsi_lun_info *info);

/* Registers fn(geometry) as path/<name> for each of the three geometries. */
void add_geometry_tests(const char *path, GTestDataFunc fn);

/* READ(16) of n blocks of the LUN's block size bs at lba into buf, which must succeed. */
void read_lbas(struct scsi_lun *lun, uint32_t bs, uint64_t lba, uint32_t n, uint8_t *buf);

/* Does nothing: run on an I/O thread, it waits for what was posted before. */
void nothing(void *opaque);

/* ---- spy backend: records, fails or defers requests to a ram backend ---- */

struct spy {
    struct lun_backend be;
    struct lun_backend *inner;
    int fail_op;            /* -1: none */
    int fail_ret;
    uint8_t fail_status;    /* with -EREMOTEIO: a status instead of sense */
    bool defer;
    uint64_t max_len;       /* largest READ/WRITE submitted */
    uint64_t max_range_len; /* largest DISCARD/WRITE ZEROES submitted */
    GQueue pending;
    unsigned ops[5];
    unsigned fua_writes, plain_writes;
};

/*
 * Completes the requests deferred so far, outside submit(); requests their
 * completions submit wait for the next call.  Returns how many ran.
 */
unsigned spy_run_pending(struct spy *s);

/* Completes the oldest deferred request only. */
void spy_run_one(struct spy *s);

/* Completes the newest deferred request only. */
void spy_run_newest(struct spy *s);

/*
 * A ready LUN on a spy over 8 MiB of ram whose write cache and largest
 * transfer (0: no limit) are given; *out is the spy, freed with the LUN.
 */
struct scsi_lun *spy_lun_with(bool write_cache, uint32_t max_transfer, struct spy **out);

/* spy_lun_with() over size bytes of ram (MAP_NORESERVE: only what is written costs). */
struct scsi_lun *spy_lun_sized(uint64_t size, bool write_cache, uint32_t max_transfer,
                               struct spy **out);

/* spy_lun_with() without a transfer limit. */
struct scsi_lun *spy_lun(bool write_cache, struct spy **out);

/* ---- VPD pages ---------------------------------------------------------- */

/*
 * INQUIRY for VPD page code into buf, len bytes the allocation length:
 * GOOD, cut only by len (libiscsi reads the page's own length), and the
 * page as libiscsi decodes it, valid until sc_datain_free(d).  VPD() checks
 * the header every decoded page starts with.
 */
void *vpd(struct scsi_lun *lun, uint8_t code, uint8_t *buf, size_t len,
          struct sc_datain *d);

#define VPD(type, lun, code, buf, len, d)                                                    \
    ({                                                                                       \
        type *page_ = vpd(lun, code, buf, len, d);                                           \
        g_assert_cmpint(page_->qualifier, ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);  \
        g_assert_cmpint(page_->device_type, ==,                                              \
                        SCSI_INQUIRY_PERIPHERAL_DEVICE_TYPE_DIRECT_ACCESS);                  \
        g_assert_cmphex(page_->pagecode, ==, code);                                          \
        page_;                                                                               \
    })
#define VPD_PAGES(lun, buf, d) \
    VPD(struct scsi_inquiry_supported_pages, lun, SCSI_INQUIRY_PAGECODE_SUPPORTED_VPD_PAGES, \
        buf, sizeof(buf), d)
#define VPD_SERIAL(lun, buf, d) \
    VPD(struct scsi_inquiry_unit_serial_number, lun, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, \
        buf, sizeof(buf), d)
#define VPD_IDENT(lun, buf, d) \
    VPD(struct scsi_inquiry_device_identification, lun, \
        SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION, buf, sizeof(buf), d)
#define VPD_LIMITS(lun, buf, d) \
    VPD(struct scsi_inquiry_block_limits, lun, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, buf, \
        sizeof(buf), d)
#define VPD_CHARACTERISTICS(lun, buf, d) \
    VPD(struct scsi_inquiry_block_device_characteristics, lun, \
        SCSI_INQUIRY_PAGECODE_BLOCK_DEVICE_CHARACTERISTICS, buf, sizeof(buf), d)
#define VPD_PROVISIONING(lun, buf, d) \
    VPD(struct scsi_inquiry_logical_block_provisioning, lun, \
        SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING, buf, sizeof(buf), d)

/* ---- the write cache (the caching mode page) ---------------------------- */

/* MODE SELECT(6) of the caching page, current values, with WCE set to on. */
void set_wce(struct scsi_lun *lun, bool on);

/* WCE of the caching page's current values. */
bool get_wce(struct scsi_lun *lun);

#endif
