/*
 * The bottom of the SCSI layer, shared by the disk emulation and the
 * target (scsi-sense.c): opcodes, big-endian CDB fields, the named sense
 * codes, fixed-format sense building and replies truncated to the
 * allocation length.  It calls nothing above it.  Internal to lib/scsi/.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SCSI_SENSE_H
#define VHOST_SCSI_SCSI_SENSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Sense data sizes: fixed format, 10 additional bytes. */
#define FIXED_SENSE_LEN 18

/* Handlers return EXEC_DONE (result set, caller finishes) or EXEC_ASYNC. */
enum { EXEC_DONE, EXEC_ASYNC };
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

/* Additional sense code and qualifier of each unit attention condition. */
extern const uint8_t sd_ua_codes[SCSI_UA_COUNT][2];

void sd_fill_fixed_sense(uint8_t *s, uint8_t key, uint8_t asc, uint8_t ascq);
/* ILLEGAL REQUEST with a field pointer; asc 24h (CDB) or 26h (parameter list). */
int sd_field_error(struct scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit);
int sd_sense_done(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);
/* Copies a reply truncated to the allocation length and the buffer; GOOD. */
int sd_reply(struct scsi_cmd *cmd, const void *buf, size_t len, size_t alloc);
/* LBA, transfer length and the CDB byte holding the length, by opcode. */
void sd_decode_lba_len(const uint8_t *cdb, uint64_t *lba, uint32_t *n, unsigned *len_byte);

/* Common CHECK CONDITION answers; each returns EXEC_DONE. */
#define invalid_cdb(cmd, byte, bit) sd_field_error(cmd, true, byte, bit)
#define invalid_param(cmd, byte, bit) sd_field_error(cmd, false, byte, bit)
#define lba_out_of_range(cmd) sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x21, 0x00)
#define write_protected(cmd) sd_sense_done(cmd, SENSE_DATA_PROTECT, 0x27, 0x00)
#define param_list_length_error(cmd) sd_sense_done(cmd, SENSE_ILLEGAL_REQUEST, 0x1a, 0x00)

#endif
