/*
 * Specification of the daemon's LUN table (lib/scsi/lun-map.c): ids are
 * range-checked and unique, lookups find exactly what was added, and a
 * target's LUN list comes back sorted.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "lun-map.h"

static struct scsi_lun *ram_lun(const char *name)
{
    struct lun_backend *be;

    g_assert_cmpint(backend_ram_new(1 << 20, 512, &be), ==, 0);
    return scsi_lun_new(be, name, NULL);
}

static void test_add_and_find(void)
{
    struct lun_map m;
    struct scsi_lun *a = ram_lun("a"), *b = ram_lun("b"), *c = ram_lun("c");
    uint16_t ids[4];

    lun_map_init(&m);
    g_assert_cmpint(lun_map_add(&m, 0, 5, a), ==, 0);
    g_assert_cmpint(lun_map_add(&m, 0, 1, b), ==, 0);
    g_assert_cmpint(lun_map_add(&m, 3, 16383, c), ==, 0);
    g_assert_true(lun_map_find(&m, 0, 5) == a);
    g_assert_true(lun_map_find(&m, 0, 1) == b);
    g_assert_true(lun_map_find(&m, 3, 16383) == c);
    g_assert_null(lun_map_find(&m, 0, 0));
    g_assert_null(lun_map_find(&m, 1, 5));
    g_assert_null(lun_map_find(&m, 256, 5));
    g_assert_true(lun_map_has_target(&m, 0));
    g_assert_true(lun_map_has_target(&m, 3));
    g_assert_false(lun_map_has_target(&m, 1));
    /* Sorted, and the count is the whole set even when ids[] is short. */
    g_assert_cmpuint(lun_map_target_luns(&m, 0, ids, 4), ==, 2);
    g_assert_cmpuint(ids[0], ==, 1);
    g_assert_cmpuint(ids[1], ==, 5);
    g_assert_cmpuint(lun_map_target_luns(&m, 0, ids, 1), ==, 2);
    g_assert_cmpuint(lun_map_target_luns(&m, 7, ids, 4), ==, 0);
    lun_map_clear(&m);
    g_assert_cmpuint(m.n, ==, 0);
    g_assert_null(lun_map_find(&m, 0, 5));
}

static void test_rejects_duplicates_and_out_of_range(void)
{
    struct lun_map m;

    lun_map_init(&m);
    g_assert_cmpint(lun_map_add(&m, 0, 0, ram_lun("x")), ==, 0);
    /* The rejected LUN is freed by lun_map_add (ASan would report a leak). */
    g_assert_cmpint(lun_map_add(&m, 0, 0, ram_lun("dup")), ==, -EEXIST);
    g_assert_cmpint(lun_map_add(&m, 256, 0, ram_lun("t")), ==, -EINVAL);
    g_assert_cmpint(lun_map_add(&m, 0, 16384, ram_lun("l")), ==, -EINVAL);
    g_assert_cmpuint(m.n, ==, 1);
    lun_map_clear(&m);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lun-map/add-and-find", test_add_and_find);
    g_test_add_func("/lun-map/rejects-duplicates-and-out-of-range",
                    test_rejects_duplicates_and_out_of_range);
    return g_test_run();
}
