/*
 * The SCSI initiator side the tests share: CDBs come from libiscsi's
 * scsi_cdb_* builders (copied out of the task they return), data-in
 * buffers are decoded by libiscsi's scsi_datain_unmarshall, and sense by
 * scsi_parse_sense_data, so no test keeps its own opcode bytes or
 * hand-written decoding.  Opcodes, sense keys and ASC/ASCQ values are
 * libiscsi's enums (SCSI_OPCODE_*, SCSI_SENSE_*, SCSI_SENSE_ASCQ_*).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_SCSI_CMD_H
#define TESTS_SCSI_CMD_H

#include <stddef.h>
#include <stdint.h>

#include <iscsi/scsi-lowlevel.h>

#define SC_CDB_MAX 16

/* Copies the CDB of TASK (a scsi_cdb_* result, which must not be NULL)
 * into cdb and frees TASK; returns the CDB's length. */
unsigned sc_cdb(struct scsi_task *task, uint8_t cdb[SC_CDB_MAX]);

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
void sc_datain_free(struct sc_datain *d);

/* Key, ASC and ASCQ of fixed or descriptor format sense data of len
 * bytes; all zero when there is none.  code is ASC << 8 | ASCQ, the form
 * of libiscsi's SCSI_SENSE_ASCQ_* values; response_code is the format
 * (SCSI_SENSE_FIXED_CURRENT, ...). */
struct sc_sense {
    unsigned key, asc, ascq, code, response_code;
};
struct sc_sense sc_sense_of(const uint8_t *sense, size_t len);

#endif
