/*
 * Specification of the bench's words for a command's answer
 * (hw/bench/bench-response.c):
 *  - a virtio-scsi response other than OK reads in words and by its
 *    linux/virtio_scsi.h name (a LUN that is not there: "bad target
 *    (VIRTIO_SCSI_S_BAD_TARGET)"); one the specification does not define
 *    is given by number;
 *  - a CHECK CONDITION gives its sense key and ASC/ASCQ by name and
 *    number, from fixed- and descriptor-format sense alike; without sense
 *    data it says so;
 *  - other statuses by their SAM name; a success has no words;
 *  - only a CHECK CONDITION with UNIT ATTENTION is one to retry.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>

#include "bench-response.h"

static struct virtio_scsi_cmd_resp check_condition(bool descriptor, uint8_t key, uint8_t asc,
                                                   uint8_t ascq)
{
    struct virtio_scsi_cmd_resp rs = { .response = VIRTIO_SCSI_S_OK,
                                       .status = BENCH_STATUS_CHECK_CONDITION };

    if (descriptor) {
        rs.sense[0] = 0x72;
        rs.sense[1] = key;
        rs.sense[2] = asc;
        rs.sense[3] = ascq;
    } else {
        rs.sense[0] = 0x70;
        rs.sense[2] = key;
        rs.sense[7] = 10;       /* additional sense length */
        rs.sense[12] = asc;
        rs.sense[13] = ascq;
    }
    rs.sense_len = 18;
    return rs;
}

static void test_responses_by_name(void)
{
    struct virtio_scsi_cmd_resp rs = { .response = VIRTIO_SCSI_S_BAD_TARGET };
    g_autofree char *bad_target = bench_response_describe(&rs);
    g_autofree char *busy = NULL, *unknown = NULL;

    g_assert_cmpstr(bad_target, ==, "bad target (VIRTIO_SCSI_S_BAD_TARGET)");
    rs.response = VIRTIO_SCSI_S_BUSY;
    busy = bench_response_describe(&rs);
    g_assert_cmpstr(busy, ==, "busy (VIRTIO_SCSI_S_BUSY)");
    rs.response = 200;
    unknown = bench_response_describe(&rs);
    g_assert_cmpstr(unknown, ==, "virtio-scsi response 200 (not one the specification defines)");
    g_assert_cmpstr(bench_response_name(3), ==, "VIRTIO_SCSI_S_BAD_TARGET");
    g_assert_cmpstr(bench_response_name(VIRTIO_SCSI_S_INCORRECT_LUN), ==,
                    "VIRTIO_SCSI_S_INCORRECT_LUN");
    g_assert_null(bench_response_name(13));
}

static void test_check_condition_decoded(void)
{
    for (int descriptor = 0; descriptor < 2; descriptor++) {
        /* ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE */
        struct virtio_scsi_cmd_resp rs = check_condition(descriptor, 0x5, 0x21, 0x00);
        g_autofree char *words = bench_response_describe(&rs);
        unsigned key, asc, ascq;

        g_assert_cmpstr(words, ==, "CHECK CONDITION: ILLEGAL_REQUEST (sense key 0x5), "
                        "LBA_OUT_OF_RANGE (ASC/ASCQ 0x21/0x00)");
        bench_sense_of(&rs, &key, &asc, &ascq);
        g_assert_cmpuint(key, ==, 0x5);
        g_assert_cmpuint(asc, ==, 0x21);
        g_assert_cmpuint(ascq, ==, 0x00);
        g_assert_false(bench_is_unit_attention(&rs));
    }
}

static void test_unit_attention_is_retried(void)
{
    /* POWER ON, RESET, OR BUS DEVICE RESET OCCURRED */
    struct virtio_scsi_cmd_resp rs = check_condition(false, 0x6, 0x29, 0x00);

    g_assert_true(bench_is_unit_attention(&rs));
    rs.response = VIRTIO_SCSI_S_ABORTED;
    g_assert_false(bench_is_unit_attention(&rs));
}

static void test_other_statuses(void)
{
    struct virtio_scsi_cmd_resp rs = { .response = VIRTIO_SCSI_S_OK, .status = 0x18 };
    g_autofree char *conflict = bench_response_describe(&rs);
    g_autofree char *odd = NULL, *bare = NULL;

    g_assert_cmpstr(conflict, ==, "status RESERVATION CONFLICT (0x18)");
    rs.status = 0x22;
    odd = bench_response_describe(&rs);
    g_assert_cmpstr(odd, ==, "status 0x22");
    rs.status = BENCH_STATUS_CHECK_CONDITION;
    bare = bench_response_describe(&rs);
    g_assert_cmpstr(bare, ==, "CHECK CONDITION without sense data");
    rs.status = 0;
    g_assert_null(bench_response_describe(&rs));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bench-response/responses-by-name", test_responses_by_name);
    g_test_add_func("/bench-response/check-condition-decoded", test_check_condition_decoded);
    g_test_add_func("/bench-response/unit-attention-is-retried", test_unit_attention_is_retried);
    g_test_add_func("/bench-response/other-statuses", test_other_statuses);
    return g_test_run();
}
