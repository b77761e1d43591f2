/*
 * libiscsi's SCSI marshalling, wrapped for test programs that send the
 * CDBs through something other than an iSCSI session (see scsi-cmd.h),
 * with the little libiscsi leaves out: a REQUEST SENSE CDB and the VALID
 * and INFORMATION fields of fixed-format sense.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "scsi-cmd.h"

#include <stdlib.h>
#include <string.h>

#include <glib.h>

unsigned sc_cdb(struct scsi_task *task, uint8_t cdb[SC_CDB_MAX])
{
    unsigned n;

    g_assert_nonnull(task);
    n = (unsigned)task->cdb_size;
    g_assert_cmpuint(n, <=, SC_CDB_MAX);
    memset(cdb, 0, SC_CDB_MAX);
    memcpy(cdb, task->cdb, n);
    scsi_free_scsi_task(task);
    return n;
}

unsigned sc_cdb_request_sense(uint8_t cdb[SC_CDB_MAX], bool desc, uint8_t alloc_len)
{
    memset(cdb, 0, SC_CDB_MAX);
    cdb[0] = SC_OPCODE_REQUEST_SENSE;
    cdb[1] = desc ? 0x01 : 0;
    cdb[4] = alloc_len;
    return 6;
}

void *sc_datain_decode(struct sc_datain *d, const uint8_t *cdb, unsigned cdb_len,
                       const void *data, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);   /* the task frees it with free() */

    g_assert_nonnull(copy);
    memcpy(copy, data, len);
    d->task = scsi_create_task((int)cdb_len, (unsigned char *)cdb, SCSI_XFER_READ, (int)len);
    g_assert_nonnull(d->task);
    d->task->datain.data = copy;
    d->task->datain.size = (int)len;
    return scsi_datain_unmarshall(d->task);
}

int sc_datain_full_size(const struct sc_datain *d)
{
    g_assert_nonnull(d->task);
    return scsi_datain_getfullsize(d->task);
}

void sc_datain_free(struct sc_datain *d)
{
    if (d->task) {
        scsi_free_scsi_task(d->task);
        d->task = NULL;
    }
}

struct sc_sense sc_sense_of(const uint8_t *sense, size_t len)
{
    /* libiscsi walks descriptors by their own lengths: give it a buffer as
     * long as any sense data can claim, zero past what was returned. */
    uint8_t sb[8 + 255] = { 0 };
    struct scsi_sense s = { 0 };
    unsigned fmt;

    memcpy(sb, sense, MIN(len, sizeof(sb)));
    fmt = sb[0] & 0x7e;   /* current or deferred */
    if (!((fmt == SCSI_SENSE_FIXED_CURRENT && len >= 14) ||
          (fmt == SCSI_SENSE_DESCRIPTOR_CURRENT && len >= 4))) {
        return (struct sc_sense){ 0 };
    }
    scsi_parse_sense_data(&s, sb);
    return (struct sc_sense){
        .key = s.key, .asc = (unsigned)s.ascq >> 8, .ascq = (unsigned)s.ascq & 0xff,
        .code = (unsigned)s.ascq, .response_code = s.error_type,
        .sksv = s.sense_specific, .in_cdb = s.ill_param_in_cdb,
        .bit_valid = s.bit_pointer_valid, .bit = s.bit_pointer, .field = s.field_pointer,
        /* libiscsi leaves VALID and INFORMATION (bytes 3-6) to the caller. */
        .info_valid = fmt == SCSI_SENSE_FIXED_CURRENT && (sb[0] & 0x80),
        .info = fmt == SCSI_SENSE_FIXED_CURRENT ? scsi_get_uint32(sb + 3) : 0,
    };
}

struct sc_sense sc_fixed_sense(const uint8_t *sense, size_t len)
{
    struct sc_sense s = sc_sense_of(sense, len);

    g_assert_cmpuint(len, ==, 18);
    g_assert_cmphex(s.response_code, ==, SCSI_SENSE_FIXED_CURRENT);
    g_assert_cmpuint(sense[7], ==, 10);          /* ADDITIONAL SENSE LENGTH */
    g_assert_cmphex(sense[2] & 0xe0, ==, 0);     /* FILEMARK, EOM, ILI */
    return s;
}
