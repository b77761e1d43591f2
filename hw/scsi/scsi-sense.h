/*
 * The bottom of the SCSI layer, shared by the disk emulation and the
 * target (scsi-sense.c): opcodes, big-endian CDB fields, the one table of
 * named sense conditions that every sense the layer reports of its own
 * comes from, fixed-format sense building and replies truncated to the
 * allocation length.  It calls nothing above it.  Internal to hw/scsi/.
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
    OP_PRE_FETCH_10 = 0x34,
    OP_SYNC_CACHE_10 = 0x35,
    OP_READ_DEFECT_DATA_10 = 0x37,
    OP_WRITE_SAME_10 = 0x41,
    OP_UNMAP = 0x42,
    OP_SANITIZE = 0x48,
    OP_MODE_SELECT_10 = 0x55,
    OP_MODE_SENSE_10 = 0x5a,
    OP_PR_IN = 0x5e,
    OP_PR_OUT = 0x5f,
    OP_EXTENDED_COPY = 0x83,
    OP_RECEIVE_COPY_RESULTS = 0x84,
    OP_READ_16 = 0x88,
    OP_COMPARE_AND_WRITE = 0x89,
    OP_WRITE_16 = 0x8a,
    OP_ORWRITE_16 = 0x8b,
    OP_WRITE_VERIFY_16 = 0x8e,
    OP_VERIFY_16 = 0x8f,
    OP_PRE_FETCH_16 = 0x90,
    OP_SYNC_CACHE_16 = 0x91,
    OP_WRITE_SAME_16 = 0x93,
    OP_WRITE_ATOMIC_16 = 0x9c,
    OP_SERVICE_ACTION_IN_16 = 0x9e,
    OP_REPORT_LUNS = 0xa0,
    OP_MAINTENANCE_IN = 0xa3,
    OP_READ_12 = 0xa8,
    OP_WRITE_12 = 0xaa,
    OP_WRITE_VERIFY_12 = 0xae,
    OP_VERIFY_12 = 0xaf,
    OP_READ_DEFECT_DATA_12 = 0xb7,
};
#define SAI_READ_CAPACITY_16 0x10
#define SAI_GET_LBA_STATUS 0x12
#define MI_REPORT_SUPPORTED_OPCODES 0x0c
#define XCOPY_SA_LID1 0x00
#define RCR_SA_COPY_STATUS 0x00
#define RCR_SA_OPERATING_PARAMETERS 0x03
/* SANITIZE service actions (SBC-3 5.30); CRYPTOGRAPHIC ERASE (03h) is not supported. */
#define SANITIZE_OVERWRITE 0x01
#define SANITIZE_BLOCK_ERASE 0x02
#define SANITIZE_EXIT_FAILURE_MODE 0x1f

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

/*
 * The sense conditions the SCSI layer reports of its own, one name each,
 * indexing the table in scsi-sense.c, the only place their key, ASC and
 * ASCQ are written.  A remote device's sense, which can be anything, is
 * passed on as it came with scsi_cmd_set_sense().  The comments give the
 * sense key and the T10 name of the ASC/ASCQ (SPC-4 Annex D).
 */
enum scsi_sc {
    /* NO SENSE */
    SCSI_SC_NO_SENSE,                    /* 00h/00h NO ADDITIONAL SENSE INFORMATION */
    /* NOT READY */
    SCSI_SC_LUN_NOT_READY,               /* 04h/00h LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE */
    SCSI_SC_SANITIZE_IN_PROGRESS,        /* 04h/1Bh LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS */
    /* MEDIUM ERROR */
    SCSI_SC_WRITE_ERROR,                 /* 0Ch/00h WRITE ERROR */
    SCSI_SC_UNRECOVERED_READ_ERROR,      /* 11h/00h UNRECOVERED READ ERROR */
    SCSI_SC_SANITIZE_FAILED,             /* 31h/03h SANITIZE COMMAND FAILED */
    /* HARDWARE ERROR */
    SCSI_SC_INTERNAL_TARGET_FAILURE,     /* 44h/00h INTERNAL TARGET FAILURE */
    /* ILLEGAL REQUEST */
    SCSI_SC_PARAM_LIST_LENGTH_ERROR,     /* 1Ah/00h PARAMETER LIST LENGTH ERROR */
    SCSI_SC_INVALID_OPCODE,              /* 20h/00h INVALID COMMAND OPERATION CODE */
    SCSI_SC_LBA_OUT_OF_RANGE,            /* 21h/00h LOGICAL BLOCK ADDRESS OUT OF RANGE */
    SCSI_SC_INVALID_FIELD_IN_CDB,        /* 24h/00h INVALID FIELD IN CDB */
    SCSI_SC_LUN_NOT_SUPPORTED,           /* 25h/00h LOGICAL UNIT NOT SUPPORTED */
    SCSI_SC_INVALID_FIELD_IN_PARAM_LIST, /* 26h/00h INVALID FIELD IN PARAMETER LIST */
    SCSI_SC_INVALID_RELEASE_OF_PR,       /* 26h/04h INVALID RELEASE OF PERSISTENT RESERVATION */
    SCSI_SC_TOO_MANY_TARGET_DESCS,       /* 26h/06h TOO MANY TARGET DESCRIPTORS */
    SCSI_SC_TOO_MANY_SEGMENT_DESCS,      /* 26h/08h TOO MANY SEGMENT DESCRIPTORS */
    SCSI_SC_UNSUPPORTED_SEGMENT_DESC,    /* 26h/09h UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE */
    SCSI_SC_UNSUPPORTED_TARGET_DESC,     /* 26h/07h UNSUPPORTED TARGET DESCRIPTOR TYPE CODE */
    SCSI_SC_OPERATION_IN_PROGRESS,       /* 00h/16h OPERATION IN PROGRESS */
    SCSI_SC_INSUFFICIENT_RESOURCES,      /* 55h/03h INSUFFICIENT RESOURCES */
    SCSI_SC_INSUFFICIENT_REG_RESOURCES,  /* 55h/04h INSUFFICIENT REGISTRATION RESOURCES */
    SCSI_SC_SAVING_PARAMS_UNSUPPORTED,   /* 39h/00h SAVING PARAMETERS NOT SUPPORTED */
    /* UNIT ATTENTION */
    SCSI_SC_POWER_ON_RESET,              /* 29h/00h POWER ON, RESET, OR BUS DEVICE RESET OCCURRED */
    SCSI_SC_BUS_DEVICE_RESET,            /* 29h/03h BUS DEVICE RESET FUNCTION OCCURRED */
    SCSI_SC_NEXUS_LOSS,                  /* 29h/07h I_T NEXUS LOSS OCCURRED */
    SCSI_SC_CAPACITY_CHANGED,            /* 2Ah/09h CAPACITY DATA HAS CHANGED */
    SCSI_SC_RESERVATIONS_PREEMPTED,      /* 2Ah/03h RESERVATIONS PREEMPTED */
    SCSI_SC_RESERVATIONS_RELEASED,       /* 2Ah/04h RESERVATIONS RELEASED */
    SCSI_SC_REGISTRATIONS_PREEMPTED,     /* 2Ah/05h REGISTRATIONS PREEMPTED */
    SCSI_SC_REPORTED_LUNS_CHANGED,       /* 3Fh/0Eh REPORTED LUNS DATA HAS CHANGED */
    /* DATA PROTECT */
    SCSI_SC_WRITE_PROTECTED,             /* 27h/00h WRITE PROTECTED */
    SCSI_SC_SPACE_ALLOC_FAILED,          /* 27h/07h SPACE ALLOCATION FAILED WRITE PROTECT */
    /* COPY ABORTED */
    SCSI_SC_COPY_ABORTED,                /* 00h/00h NO ADDITIONAL SENSE INFORMATION */
    SCSI_SC_UNREACHABLE_COPY_TARGET,     /* 08h/04h UNREACHABLE COPY TARGET */
    SCSI_SC_COPY_TARGET_UNREACHABLE,     /* 0Dh/02h COPY TARGET DEVICE NOT REACHABLE */
    SCSI_SC_COPY_INVALID_FIELD,          /* 26h/00h INVALID FIELD IN PARAMETER LIST */
    SCSI_SC_UNEXPECTED_INEXACT_SEGMENT,  /* 26h/0Ah UNEXPECTED INEXACT SEGMENT */
    /* MISCOMPARE */
    SCSI_SC_MISCOMPARE_DURING_VERIFY,    /* 1Dh/00h MISCOMPARE DURING VERIFY OPERATION */
    SCSI_SC_COUNT
};

/* The condition each unit attention reports. */
extern const enum scsi_sc sd_ua_sense[SCSI_UA_COUNT];

void sd_fill_fixed_sense(uint8_t *s, enum scsi_sc sc);
/* The ASC and ASCQ of sc (a transport's event names the condition too). */
void sd_sense_asc(enum scsi_sc sc, uint8_t *asc, uint8_t *ascq);
/* Sets cmd's sense to sc and its status to CHECK CONDITION. */
void sd_set_sense(struct scsi_cmd *cmd, enum scsi_sc sc);
/* sd_set_sense() with the INFORMATION field set (and VALID): a miscompare's offset. */
void sd_set_sense_info(struct scsi_cmd *cmd, enum scsi_sc sc, uint32_t info);
/*
 * Fixed-format sense of sc with a progress indication (SKSV, bytes 16-17:
 * progress / 65536 done), as NOT READY of a sanitize in progress carries it.
 */
void sd_fill_progress_sense(uint8_t *s, enum scsi_sc sc, uint16_t progress);
/* sd_set_sense() for a handler's answer; returns EXEC_DONE. */
int sd_sense_done(struct scsi_cmd *cmd, enum scsi_sc sc);
/*
 * INVALID FIELD IN CDB (in_cdb) or INVALID FIELD IN PARAMETER LIST with a
 * field pointer to byte and bit (bit < 0: the whole byte); EXEC_DONE.
 */
int sd_field_error(struct scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit);
/* Copies a reply truncated to the allocation length and the buffer; GOOD. */
int sd_reply(struct scsi_cmd *cmd, const void *buf, size_t len, size_t alloc);
/* LBA, transfer length and the CDB byte holding the length, by opcode. */
void sd_decode_lba_len(const uint8_t *cdb, uint64_t *lba, uint32_t *n, unsigned *len_byte);

/* The field-pointer answers, by where the field is; each returns EXEC_DONE. */
#define invalid_cdb(cmd, byte, bit) sd_field_error(cmd, true, byte, bit)
#define invalid_param(cmd, byte, bit) sd_field_error(cmd, false, byte, bit)

#endif
