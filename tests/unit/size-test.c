/*
 * Specification of sizes on command lines and in LUN specs
 * (hw/util/size.c), which vhost-scsi-target and vhost-scsi-ctl share.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "size.h"

static void test_sizes(void)
{
    static const struct {
        const char *str;
        uint64_t val;
    } good[] = {
        { "0", 0 }, { "1", 1 }, { "512", 512 }, { "1K", 1024 }, { "1k", 1024 },
        { "3M", 3ull << 20 }, { "5G", 5ull << 30 }, { "7t", 7ull << 40 },
        { "16777215T", 16777215ull << 40 }, { "18446744073709551615", UINT64_MAX },
    };
    static const char *const bad[] = {
        "", "K", "-1", "+1", " 1", "1 ", "1KB", "1KiB", "1P", "1.5G", "0x10",
        "16777216T", "18446744073709551616", "99999999999999999999K",
    };
    uint64_t v;

    for (unsigned i = 0; i < G_N_ELEMENTS(good); i++) {
        g_assert_cmpint(size_parse(good[i].str, &v), ==, 0);
        g_assert_cmpuint(v, ==, good[i].val);
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        v = 42;
        if (size_parse(bad[i], &v) != -EINVAL) {
            g_error("size \"%s\" was accepted", bad[i]);
        }
        g_assert_cmpuint(v, ==, 42);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/size/digits-and-one-binary-suffix", test_sizes);
    return g_test_run();
}
