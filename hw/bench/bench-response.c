/*
 * The words for a command's answer (include/bench/bench-response.h).
 * The response names are linux/virtio_scsi.h's, so a message can be
 * looked up in the virtio specification as it is read; the sense is
 * decoded by libiscsi (fixed and descriptor formats alike).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <string.h>

#include <glib.h>
#include <iscsi/scsi-lowlevel.h>

#include "bench-response.h"

static const struct {
    unsigned response;
    const char *name;
    const char *words;
} responses[] = {
    { VIRTIO_SCSI_S_OK, "VIRTIO_SCSI_S_OK", "ok" },
    { VIRTIO_SCSI_S_OVERRUN, "VIRTIO_SCSI_S_OVERRUN", "data overrun" },
    { VIRTIO_SCSI_S_ABORTED, "VIRTIO_SCSI_S_ABORTED", "aborted" },
    { VIRTIO_SCSI_S_BAD_TARGET, "VIRTIO_SCSI_S_BAD_TARGET", "bad target" },
    { VIRTIO_SCSI_S_RESET, "VIRTIO_SCSI_S_RESET", "reset" },
    { VIRTIO_SCSI_S_BUSY, "VIRTIO_SCSI_S_BUSY", "busy" },
    { VIRTIO_SCSI_S_TRANSPORT_FAILURE, "VIRTIO_SCSI_S_TRANSPORT_FAILURE", "transport failure" },
    { VIRTIO_SCSI_S_TARGET_FAILURE, "VIRTIO_SCSI_S_TARGET_FAILURE", "target failure" },
    { VIRTIO_SCSI_S_NEXUS_FAILURE, "VIRTIO_SCSI_S_NEXUS_FAILURE", "nexus failure" },
    { VIRTIO_SCSI_S_FAILURE, "VIRTIO_SCSI_S_FAILURE", "failure" },
    { VIRTIO_SCSI_S_FUNCTION_SUCCEEDED, "VIRTIO_SCSI_S_FUNCTION_SUCCEEDED", "function succeeded" },
    { VIRTIO_SCSI_S_FUNCTION_REJECTED, "VIRTIO_SCSI_S_FUNCTION_REJECTED", "function rejected" },
    { VIRTIO_SCSI_S_INCORRECT_LUN, "VIRTIO_SCSI_S_INCORRECT_LUN", "incorrect LUN" },
};

/* SAM-5's status codes other than GOOD and CHECK CONDITION. */
static const struct {
    unsigned status;
    const char *name;
} statuses[] = {
    { 0x04, "CONDITION MET" }, { 0x08, "BUSY" }, { 0x18, "RESERVATION CONFLICT" },
    { 0x28, "TASK SET FULL" }, { 0x30, "ACA ACTIVE" }, { 0x40, "TASK ABORTED" },
};

const char *bench_response_name(unsigned response)
{
    for (size_t i = 0; i < G_N_ELEMENTS(responses); i++) {
        if (responses[i].response == response) {
            return responses[i].name;
        }
    }
    return NULL;
}

void bench_sense_of(const struct virtio_scsi_cmd_resp *rs, unsigned *key, unsigned *asc,
                    unsigned *ascq)
{
    *key = *asc = *ascq = 0;
    if (rs->sense_len >= 14) {
        /* libiscsi follows descriptor lengths: zeroes past what came back. */
        uint8_t sb[8 + 255] = { 0 };
        struct scsi_sense s = { 0 };

        memcpy(sb, rs->sense, MIN(rs->sense_len, sizeof(rs->sense)));
        scsi_parse_sense_data(&s, sb);
        *key = s.key;
        *asc = (unsigned)s.ascq >> 8;
        *ascq = (unsigned)s.ascq & 0xff;
    }
}

bool bench_is_unit_attention(const struct virtio_scsi_cmd_resp *rs)
{
    unsigned key, asc, ascq;

    if (rs->response != VIRTIO_SCSI_S_OK || rs->status != BENCH_STATUS_CHECK_CONDITION) {
        return false;
    }
    bench_sense_of(rs, &key, &asc, &ascq);
    return key == SCSI_SENSE_UNIT_ATTENTION;
}

static char *describe_check_condition(const struct virtio_scsi_cmd_resp *rs)
{
    unsigned key, asc, ascq;

    if (rs->sense_len < 14) {
        return g_strdup("CHECK CONDITION without sense data");
    }
    bench_sense_of(rs, &key, &asc, &ascq);
    return g_strdup_printf("CHECK CONDITION: %s (sense key 0x%x), %s (ASC/ASCQ 0x%02x/0x%02x)",
                           scsi_sense_key_str((int)key), key,
                           scsi_sense_ascq_str((int)(asc << 8 | ascq)), asc, ascq);
}

char *bench_response_describe(const struct virtio_scsi_cmd_resp *rs)
{
    if (rs->response != VIRTIO_SCSI_S_OK) {
        for (size_t i = 0; i < G_N_ELEMENTS(responses); i++) {
            if (responses[i].response == rs->response) {
                return g_strdup_printf("%s (%s)", responses[i].words, responses[i].name);
            }
        }
        return g_strdup_printf("virtio-scsi response %u (not one the specification defines)",
                               rs->response);
    }
    if (rs->status == 0) {
        return NULL;
    }
    if (rs->status == BENCH_STATUS_CHECK_CONDITION) {
        return describe_check_condition(rs);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(statuses); i++) {
        if (statuses[i].status == rs->status) {
            return g_strdup_printf("status %s (0x%02x)", statuses[i].name, rs->status);
        }
    }
    return g_strdup_printf("status 0x%02x", rs->status);
}
