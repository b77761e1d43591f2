/*
 * Specification of virtio-scsi LUN addressing (hw/scsi/virtio-scsi.c,
 * virtio 1.2 5.6.6.1): the single-level structure 01h, target, 40h|LUN>>8,
 * LUN&FFh, four zero bytes; the REPORT LUNS well-known LUN C101h; and
 * everything else refused (the request then gets BAD_TARGET).  Request
 * handling itself is exercised end to end by the protocol, qtest and
 * fuzz-virtio-scsi tests.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "virtio-scsi.h"

static void test_single_level_lun(void)
{
    const uint8_t lun5[8] = { 1, 7, 0x40, 5 };
    const uint8_t lun_max[8] = { 1, 255, 0x7f, 0xff };
    const uint8_t lun0_peripheral[8] = { 1, 0, 0, 0 };
    unsigned t = 99, l = 99;

    g_assert_cmpint(vscsi_decode_lun(lun5, &t, &l), ==, 0);
    g_assert_cmpuint(t, ==, 7);
    g_assert_cmpuint(l, ==, 5);
    g_assert_cmpint(vscsi_decode_lun(lun_max, &t, &l), ==, 0);
    g_assert_cmpuint(t, ==, 255);
    g_assert_cmpuint(l, ==, 16383);
    g_assert_cmpint(vscsi_decode_lun(lun0_peripheral, &t, &l), ==, 0);
    g_assert_cmpuint(l, ==, 0);
}

static void test_report_luns_well_known_lun(void)
{
    const uint8_t wlun[8] = { 1, 2, 0xc1, 0x01 };
    unsigned t, l;

    g_assert_cmpint(vscsi_decode_lun(wlun, &t, &l), ==, 1);
    g_assert_cmpuint(t, ==, 2);
}

static void test_other_addresses_refused(void)
{
    static const uint8_t bad[][8] = {
        { 0, 0, 0x40, 0 },                 /* first byte not 1 */
        { 2, 0, 0x40, 0 },
        { 1, 0, 0x40, 0, 0, 0, 0, 1 },     /* second level present */
        { 1, 0, 0x80, 0 },                 /* logical unit addressing */
        { 1, 0, 0xc0, 0 },                 /* extended addressing, not the W-LUN */
        { 1, 0, 0x05, 0 },                 /* peripheral addressing with a bus number */
    };
    unsigned t, l;

    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_cmpint(vscsi_decode_lun(bad[i], &t, &l), ==, -EINVAL);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtio-scsi/lun/single-level", test_single_level_lun);
    g_test_add_func("/virtio-scsi/lun/report-luns-well-known-lun",
                    test_report_luns_well_known_lun);
    g_test_add_func("/virtio-scsi/lun/other-addresses-refused", test_other_addresses_refused);
    return g_test_run();
}
