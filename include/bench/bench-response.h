/*
 * A virtio-scsi command's answer in words, for the bench's messages: the
 * virtio-scsi response by its VIRTIO_SCSI_S_* name, a SCSI status by its
 * name, and a CHECK CONDITION's sense key and additional sense code as
 * libiscsi's scsi-lowlevel decodes them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BENCH_RESPONSE_H
#define VHOST_SCSI_BENCH_RESPONSE_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/virtio_scsi.h>

#define BENCH_STATUS_CHECK_CONDITION 0x02

/* "VIRTIO_SCSI_S_BAD_TARGET" for 3; NULL for a response virtio-scsi does not define. */
const char *bench_response_name(unsigned response);

/* The sense key, ASC and ASCQ of rs's sense data (all 0 without any). */
void bench_sense_of(const struct virtio_scsi_cmd_resp *rs, unsigned *key, unsigned *asc,
                    unsigned *ascq);

/* Whether rs is a CHECK CONDITION with UNIT ATTENTION, which an initiator retries. */
bool bench_is_unit_attention(const struct virtio_scsi_cmd_resp *rs);

/*
 * What went wrong (g_free): "bad target (VIRTIO_SCSI_S_BAD_TARGET)",
 * "CHECK CONDITION: ILLEGAL_REQUEST (sense key 0x5), LOGICAL_UNIT_NOT_SUPPORTED
 * (ASC/ASCQ 0x25/0x00)", "status BUSY (0x08)"; NULL if rs is a success.
 */
char *bench_response_describe(const struct virtio_scsi_cmd_resp *rs);

#endif
