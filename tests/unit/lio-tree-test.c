/*
 * Specification of opening a configfs root (hw/lio/lio-tree.c), through
 * the operations table it is given, here the fake of lio-fs-fake.h.  With
 * setup_kernel, opening first brings up the kernel side: target_core_mod,
 * the fileio and iblock backstore modules and vhost_scsi, in that order,
 * then the configfs mount; a missing module is named with the running
 * kernel's release, and the root is then not opened.  A root that is not a
 * directory is refused.  The path, attribute and directory helpers of
 * lio-tree.c are one call each into the table, and every other lio test
 * goes through them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"
#include "lio-fixture.h"

static void test_open_missing_root_fails(void)
{
    g_autoptr(GError) err = NULL;
    struct lio *lio = NULL;
    struct lio_options o = { .configfs = "/nonexistent/configfs" };
    g_assert_cmpint(lio_open(&o, &lio, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "*/nonexistent/configfs is not a directory");
    g_assert_null(lio);
}

static void test_open_sets_up_the_kernel(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    /* The fixture opened its root with setup_kernel. */
    g_assert_cmpstr(lio_fake_modules(f->fake), ==,
                    "target_core_mod target_core_file target_core_iblock vhost_scsi");
    g_assert_true(lio_fake_mounted(f->fake));

    /* A missing module is named with the kernel, and the root is not opened. */
    struct lio_fake *other = lio_fake_new(f->root);
    struct lio *lio = NULL;
    struct lio_options o = {
        .configfs = f->root, .setup_kernel = true, .fs = &lio_fake_ops, .fs_opaque = other,
    };
    lio_fake_fail_path(other, "target_core_file", ENOENT);
    lio_fake_set_release(other, "6.1.0-18-amd64");
    g_assert_cmpint(lio_open(&o, &lio, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "kernel module target_core_file is missing for kernel "
                 "6.1.0-18-amd64 (CONFIG_VHOST_SCSI/CONFIG_TCM_* enabled? modules installed?)");
    g_assert_null(lio);
    g_assert_cmpstr(lio_fake_modules(other), ==, "target_core_mod");
    g_assert_false(lio_fake_mounted(other));
    lio_fake_free(other);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lio/open/missing-root", test_open_missing_root_fails);
    ADD("/lio/open/sets-up-the-kernel-through-the-table", test_open_sets_up_the_kernel);
    return g_test_run();
}
