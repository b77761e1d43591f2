/*
 * The SCSI initiator side the tests share: CDBs come from libiscsi's
 * scsi_cdb_* builders (copied out of the task they return), data-in
 * buffers are decoded by libiscsi's scsi_datain_unmarshall, and sense by
 * scsi_parse_sense_data, so no test keeps its own opcode bytes or
 * hand-written decoding.  Opcodes, sense keys and ASC/ASCQ values are
 * libiscsi's enums (SCSI_OPCODE_*, SCSI_SENSE_*, SCSI_SENSE_ASCQ_*); the
 * few the tests need that libiscsi lacks are named here, next to a builder
 * for the one CDB it cannot build (REQUEST SENSE).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_SCSI_CMD_H
#define TESTS_SCSI_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <iscsi/scsi-lowlevel.h>

#define SC_CDB_MAX 16

/* Operation codes missing from libiscsi's enum scsi_opcode. */
enum {
    SC_OPCODE_REQUEST_SENSE = 0x03,
    SC_OPCODE_WRITE6 = 0x0a,
};

/* ASC/ASCQ values libiscsi has no name for, in the form of its
 * SCSI_SENSE_ASCQ_* (ASC << 8 | ASCQ).  (Its SCSI_SENSE_ASCQ_BUS_RESET,
 * 29h/00h, is POWER ON, RESET, OR BUS DEVICE RESET OCCURRED.) */
#define SC_ASCQ_WRITE_ERROR 0x0c00
#define SC_ASCQ_UNRECOVERED_READ_ERROR 0x1100
#define SC_ASCQ_SPACE_ALLOCATION_FAILED_WRITE_PROTECT 0x2707
#define SC_ASCQ_SAVING_PARAMETERS_NOT_SUPPORTED 0x3900
#define SC_ASCQ_REPORTED_LUNS_DATA_HAS_CHANGED 0x3f0e

/* Copies the CDB of TASK (a scsi_cdb_* result, which must not be NULL)
 * into cdb and frees TASK; returns the CDB's length. */
unsigned sc_cdb(struct scsi_task *task, uint8_t cdb[SC_CDB_MAX]);

/* REQUEST SENSE (6), which libiscsi has no builder for: desc asks for
 * descriptor format.  Returns the CDB's length. */
unsigned sc_cdb_request_sense(uint8_t cdb[SC_CDB_MAX], bool desc, uint8_t alloc_len);

/* A data-in buffer decoded for the command that read it. */
struct sc_datain {
    struct scsi_task *task;   /* owns the decoded structure */
};

/* Decodes len bytes of data returned for cdb (INQUIRY, VPD pages, READ
 * CAPACITY 10/16, REPORT LUNS, ...): the libiscsi structure for that
 * command (struct scsi_inquiry_standard *, struct scsi_readcapacity16 *,
 * ...), or NULL if libiscsi cannot decode it.  Valid until
 * sc_datain_free(d). */
void *sc_datain_decode(struct sc_datain *d, const uint8_t *cdb, unsigned cdb_len,
                       const void *data, size_t len);
/* The length the decoded data says it has in full (INQUIRY and VPD pages,
 * MODE SENSE(6), REPORT LUNS, all of REPORT SUPPORTED OPERATION CODES),
 * which a device cuts only to the allocation length; -1 if libiscsi
 * cannot tell. */
int sc_datain_full_size(const struct sc_datain *d);
void sc_datain_free(struct sc_datain *d);

/* Key, ASC and ASCQ of fixed or descriptor format sense data of len
 * bytes; all zero when there is none.  code is ASC << 8 | ASCQ, the form
 * of libiscsi's SCSI_SENSE_ASCQ_* values; response_code is the format
 * (SCSI_SENSE_FIXED_CURRENT, ...).  The sense-key specific field pointer
 * is libiscsi's decoding; INFORMATION is read for fixed format only. */
struct sc_sense {
    unsigned key, asc, ascq, code, response_code;
    bool sksv;                /* a field pointer follows */
    bool in_cdb;              /* C/D: it points into the CDB, else the parameter list */
    bool bit_valid;           /* BPV: bit says which bit */
    unsigned bit, field;      /* bit pointer, field pointer (byte) */
    bool info_valid;          /* VALID: info is set */
    uint32_t info;            /* INFORMATION */
};
struct sc_sense sc_sense_of(const uint8_t *sense, size_t len);

/* Asserts that sense is the fixed-format sense a disk returns: response
 * code 70h (current), 18 bytes with ADDITIONAL SENSE LENGTH 10, no
 * FILEMARK, EOM or ILI; returns its decoding. */
struct sc_sense sc_fixed_sense(const uint8_t *sense, size_t len);

#endif
