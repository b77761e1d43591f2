/*
 * Specification of LIO configuration through configfs
 * (hw/lio/lio-configfs.c), run on the fake configfs of lio-fixture.h,
 * where each check is the tree and attribute files an operation leaves
 * behind (what the kernel would be told).  Names: WWPNs of the three kinds
 * are told from near misses, and a generated one is valid and random.  A
 * target is a TPG with its I_T nexus, made once (asking again changes
 * nothing, another nexus is a conflict), refused for names the vhost
 * fabric cannot take, and leaves no trace when any of its steps fails.  A
 * LUN is a link onto a backstore, made once: refused when the LUN or its
 * backing is already taken, the target missing, the LUN id out of range or
 * the spec bad (nothing half made), and warned about when it is a TPG's
 * second before Linux 6.4.  Delete takes away a target with the
 * backstores it made and nothing else, refusing before any change while
 * one of them is linked elsewhere or /dev/vhost-scsi is held; list reports
 * targets and LUNs sorted, saying which are ours; and a target is given to
 * QEMU as one -device.  What a backstore is made of is specified by
 * lio-backstore-test.c, the saved form by lio-config-test.c, opening a root
 * by lio-tree-test.c, and the kernel side itself by
 * tests/guest/kernel-vhost-test.sh.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"
#include "lio-fixture.h"

/* ------------------------------------------------------------------ names */

static void test_wwpn_validation(void)
{
    static const char *const good[] = {
        "naa.5001405aaaaaaaaa", "naa.60014050123456789abcdef012345678",
        "iqn.2003-01.org.linux-iscsi.host:sn.1234", "iqn.2024-12.com.example",
        "eui.0123456789abcdef",
    };
    static const char *const bad[] = {
        "", "naa.", "naa.5001405aaaaaaaa", "naa.5001405aaaaaaaaaa", "naa.1001405aaaaaaaaa",
        "naa.5001405AAAAAAAAA", "naa.5001405aaaaaaaaz", "naa.6001405aaaaaaaaa",
        "iqn.2003-1.org.x", "iqn.2003-01", "iqn.2003-01.", "iqn.2003-01.Org.x",
        "iqn.2003-01.org x", "eui.0123", "wwn.5001405aaaaaaaaa", "5001405aaaaaaaaa",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
        g_assert_true(lio_wwpn_valid(good[i]));
    }
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (lio_wwpn_valid(bad[i])) {
            g_error("'%s' accepted as a WWPN", bad[i]);
        }
    }
    g_autofree char *huge = g_strdup_printf("iqn.2003-01.org.%0*d", LIO_WWPN_MAX, 0);
    g_assert_false(lio_wwpn_valid(huge));
}

static void test_wwpn_generated_names_are_valid_and_random(void)
{
    char a[LIO_WWPN_MAX], b[LIO_WWPN_MAX];
    g_assert_cmpint(lio_wwpn_generate(a, NULL), ==, 0);
    g_assert_cmpint(lio_wwpn_generate(b, NULL), ==, 0);
    g_assert_true(lio_wwpn_valid(a));
    g_assert_true(g_str_has_prefix(a, "naa.5001405"));
    g_assert_cmpstr(a, !=, b);
}

/* ---------------------------------------------------------------- targets */

static void test_create_makes_tpgt_with_nexus(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_autofree char *np = cf(f, "target/vhost/" WWPN "/tpgt_1/nexus");
    g_autofree char *nexus = slurp(np);
    g_assert_true(lio_wwpn_valid(nexus));
    g_assert_true(g_str_has_prefix(nexus, "naa."));
    g_assert_cmpstr(nexus, !=, WWPN);

    /* Again: nothing changes, in particular not the nexus. */
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_autofree char *again = slurp(np);
    g_assert_cmpstr(again, ==, nexus);
    g_assert_cmpuint(count_entries(f, "target/vhost"), ==, 1);
}

static void test_create_with_explicit_nexus_and_tpgt(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 7, "naa.5001405ccccccccc", NULL), ==, 0);
    g_autofree char *np = cf(f, "target/vhost/" WWPN "/tpgt_7/nexus");
    g_autofree char *nexus = slurp(np);
    g_assert_cmpstr(nexus, ==, "naa.5001405ccccccccc");

    /* The same nexus again is fine; another one is a conflict, not a change. */
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 7, "naa.5001405ccccccccc", NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 7, "naa.5001405ddddddddd", &err), ==, -EEXIST);
    assert_error(&err, EEXIST, "*already has nexus naa.5001405ccccccccc, not naa.5001405ddddddddd");
    g_autofree char *after = slurp(np);
    g_assert_cmpstr(after, ==, "naa.5001405ccccccccc");
}

static void test_create_iqn_target_gets_iqn_nexus(struct fx *f, gconstpointer d)
{
    const char *w = "iqn.2024-12.com.example:vm1";
    g_assert_cmpint(lio_target_create(f->lio, w, 1, NULL, NULL), ==, 0);
    g_autofree char *np = cf(f, "target/vhost/iqn.2024-12.com.example:vm1/tpgt_1/nexus");
    g_autofree char *nexus = slurp(np);
    g_assert_true(g_str_has_prefix(nexus, "iqn."));
    g_assert_true(lio_wwpn_valid(nexus));
}

static void test_create_rejects_bad_input(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_target_create(f->lio, "naa.123", 1, NULL, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "invalid WWPN 'naa.123'*");
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 256, NULL, &err), ==, -ERANGE);
    assert_error(&err, ERANGE, "TPGT 256 out of range*");
    g_assert_cmpint(lio_target_create(f->lio, "eui.0123456789abcdef", 1, NULL, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*accepts only naa. and iqn.*");
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, "iqn.2024-12.com.x", &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "nexus 'iqn.2024-12.com.x'*prefix naa.");
    g_assert_cmpuint(count_entries(f, "target/vhost"), ==, 0);
}

static int create_target(struct fx *f, gconstpointer wwpn, GError **err)
{
    return lio_target_create(f->lio, wwpn, 1, NULL, err);
}

static void test_target_create_failing_at_each_step_leaves_no_trace(struct fx *f,
                                                                     gconstpointer d)
{
    static const char *const names[] = { WWPN, NULL }, *const names2[] = { WWPN2, NULL };
    /* mkdir WWPN, mkdir tpgt_1, write nexus */
    g_assert_cmpuint(fail_each_step(f, create_target, WWPN, names), ==, 3);
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/nexus"));

    /* A second TPG of an existing WWPN: the WWPN stays whatever fails. */
    g_assert_cmpint(lio_target_create(f->lio, WWPN2, 2, NULL, NULL), ==, 0);
    g_assert_cmpuint(fail_each_step(f, create_target, WWPN2, names2), ==, 2);
}

/* ------------------------------------------------------------------- LUNs */

static void test_lun_add_is_idempotent(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "disk0.img", "1M");
    add_file_lun(f, WWPN, 0, "disk0.img", "1M");
    /* Same file, size taken from the file this time: still the same LUN. */
    g_autofree char *img = scratch(f, "disk0.img");
    g_autofree char *spec = g_strdup_printf("file:%s", img);
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, spec, NULL), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 1);
    g_assert_cmpuint(count_entries(f, "target/vhost/" WWPN "/tpgt_1/lun"), ==, 1);
    g_assert_cmpuint(count_entries(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0"), ==, 1);
}

static void test_lun_add_conflicts(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "disk0.img", "1M");
    g_autofree char *img0 = scratch(f, "disk0.img");
    g_autofree char *img1 = scratch(f, "disk1.img");
    g_autofree char *spec0 = g_strdup_printf("file:%s", img0);
    g_autofree char *spec1 = g_strdup_printf("file:%s,size=1M", img1);

    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, spec1, &err), ==, -EEXIST);
    assert_error(&err, EEXIST, WWPN " tpgt 1 LUN 0 already exists and maps core/fileio_0/" BS0
                 ", not *disk1.img");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 1, spec0, &err), ==, -EBUSY);
    assert_error(&err, EBUSY, "*disk0.img is busy: it already backs backstore core/fileio_0/" BS0);
    g_assert_false(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_1"));
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 1);
}

static void test_lun_add_rejects_bad_input(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *img = scratch(f, "d.img");
    g_autofree char *ok = g_strdup_printf("file:%s,size=1M", img);
    g_autofree char *odd = g_strdup_printf("file:%s,size=1000", img);
    g_autofree char *nosize = g_strdup_printf("file:%s", img);
    g_autofree char *notblk = g_strdup_printf("file:%s", f->dir);

    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, ok, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "target " WWPN " tpgt 1 does not exist*");

    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 16384, ok, &err), ==, -ERANGE);
    assert_error(&err, ERANGE, "LUN 16384 out of range 0..16383");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, "rd:foo", &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "LUN spec \"rd:foo\": unknown backend \"rd:foo\" (expected file:, "
                 "ram:, null:, iscsi:// or rbd:)");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, "file:rel.img,size=1M", &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "LUN spec \"file:rel.img,size=1M\": path must be absolute*");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, "file:/a=b,size=1M", &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*path must be absolute*");
    /* ",," is a comma of the path in the grammar, and configfs cannot take one. */
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, "file:/a,,b,size=1M", &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*path must be absolute without ','*");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, odd, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*size 1000 is not a multiple of the block size 512");
    /* The old form for block devices points at the new one. */
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, "block:/dev/sda", &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*unknown backend \"block:/dev/sda\"*(a block device is file:DEV)");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, nosize, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "*does not exist (give ,size=BYTES*");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, notblk, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*is neither a regular file nor a block device");
    g_assert_cmpint(lio_lun_add(f->lio, "naa.zz", 1, 0, ok, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "invalid WWPN*");

    /* Nothing was half-created by any of the refusals. */
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/vhost/" WWPN "/tpgt_1/lun"), ==, 0);
    g_assert_false(g_file_test(img, G_FILE_TEST_EXISTS));
}

static void test_lun_add_backing_takes_values_not_a_spec(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_autofree char *img = scratch(f, "img");
    g_autofree char *comma = g_strdup_printf("%s,size=1T", img);
    struct lio_backing bad = { .type = LIO_LUN_FILE, .path = comma, .size = 1 << 20 };
    g_assert_cmpint(lio_lun_add_backing(f->lio, WWPN, 1, 0, &bad, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*LUN 0 (file '*img,size=1T'): path must be absolute without ','*");
    struct lio_backing odd = { .type = LIO_LUN_FILE, .path = img, .size = 1000 };
    g_assert_cmpint(lio_lun_add_backing(f->lio, WWPN, 1, 0, &odd, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, WWPN " tpgt 1 LUN 0 (file '*img'): size 1000 is not a multiple of "
                 "the block size 512");
    struct lio_backing sized_block = { .type = LIO_LUN_BLOCK, .path = "/dev/null", .size = 512 };
    g_assert_cmpint(lio_lun_add_backing(f->lio, WWPN, 1, 0, &sized_block, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*option \"size\": LIO's iblock backstore exports the whole device");
    g_assert_false(g_file_test(img, G_FILE_TEST_EXISTS));
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 0);

    struct lio_backing good = { .type = LIO_LUN_FILE, .path = img, .size = 1 << 20 };
    g_assert_cmpint(lio_lun_add_backing(f->lio, WWPN, 1, 0, &good, NULL), ==, 0);
    g_autofree char *ctl = cf(f, "target/core/fileio_0/" BS0 "/control");
    g_autofree char *control = slurp(ctl);
    g_autofree char *want = g_strdup_printf("fd_dev_name=%s,fd_dev_size=1048576,"
                                            "fd_buffered_io=1", img);
    g_assert_cmpstr(control, ==, want);
}

static void test_second_lun_warns_before_linux_6_4(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    lio_fake_set_release(f->fake, "6.1.0-18-amd64");
    add_file_lun(f, WWPN, 0, "a.img", "1M");     /* the first LUN: no message */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE,
                          "*" WWPN " tpgt 1 gets a second LUN: on kernel 6.1.0-18-amd64 (< 6.4)*");
    add_file_lun(f, WWPN, 1, "b.img", "1M");
    g_test_assert_expected_messages();
    lio_fake_set_release(f->fake, "6.4.0");
    add_file_lun(f, WWPN, 2, "c.img", "1M");
}

/* ----------------------------------------------------------------- delete */

static void test_delete_with_luns_leaves_clean_tree(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 2, NULL, NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN2, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    add_file_lun(f, WWPN, 5, "b.img", "1M");
    add_file_lun(f, WWPN2, 0, "c.img", "1M");
    g_autofree char *img = scratch(f, "d.img");
    g_autofree char *spec = g_strdup_printf("file:%s,size=1M", img);
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 2, 0, spec, NULL), ==, 0);

    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, NULL), ==, 0);
    g_assert_false(exists(f, "target/vhost/" WWPN));
    /* Only the other target's backstore is left. */
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 1);
    g_assert_true(exists(f, "target/core/fileio_2/vs-naa_5001405bbbbbbbbb-t1-l0"));
    g_assert_true(exists(f, "target/vhost/" WWPN2 "/tpgt_1/lun/lun_0"));

    /* Deleting what is gone is fine. */
    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, NULL), ==, 0);
}

static void test_delete_keeps_foreign_backstores(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    /* A backstore made by someone else (targetcli), linked by hand. */
    g_autofree char *so = cf(f, "target/core/rd_mcp_0/ramdisk");
    lio_fake_make_groups(f->fake, so);
    g_autofree char *ld = cf(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_4");
    lio_fake_make_groups(f->fake, ld);
    g_autofree char *link = g_build_filename(ld, "0a1b2c3d", NULL);
    g_assert_cmpint(symlink(so, link), ==, 0);

    GPtrArray *targets;
    g_assert_cmpint(lio_list(f->lio, &targets), ==, 0);
    struct lio_target *t = targets->pdata[0];
    struct lio_lun *l = t->luns->pdata[0];
    g_assert_cmpuint(l->lun, ==, 4);
    g_assert_cmpint(l->type, ==, LIO_LUN_RAM);       /* listed for what it is, */
    g_assert_cmpstr(l->backstore, ==, "rd_mcp_0/ramdisk");
    g_assert_false(l->owned);                         /* but not ours */
    g_ptr_array_unref(targets);

    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, NULL), ==, 0);
    g_assert_false(exists(f, "target/vhost/" WWPN));
    g_assert_true(exists(f, "target/core/rd_mcp_0/ramdisk"));
}

static void test_delete_refuses_when_backstore_shared(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN2, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    add_file_lun(f, WWPN, 1, "b.img", "1M");
    /* Someone linked our LUN 0 backstore into another target too. */
    g_autofree char *ld = cf(f, "target/vhost/" WWPN2 "/tpgt_1/lun/lun_9");
    lio_fake_make_groups(f->fake, ld);
    g_autofree char *link = g_build_filename(ld, "x", NULL);
    g_autofree char *so = cf(f, "target/core/fileio_0/" BS0);
    g_assert_cmpint(symlink(so, link), ==, 0);

    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, &err), ==, -EBUSY);
    assert_error(&err, EBUSY, "backstore core/fileio_0/" BS0 " of " WWPN " LUN 0 is busy*lun_9");
    /* The refusal came before any change. */
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0/" BS0));
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_1"));
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 2);

    g_assert_cmpint(lio_lun_remove(f->lio, WWPN, 1, 0, &err), ==, -EBUSY);
    assert_error(&err, EBUSY, "*is busy*");
}

static void test_delete_refused_while_vhost_device_held(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "disk0.img", "1M");
    g_autofree char *before = snapshot(f);
    lio_fake_set_holder(f->fake, 4242, "qemu-system-x86");
    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, &err), ==, -EBUSY);
    assert_error(&err, EBUSY, "target " WWPN " may be in use: /dev/vhost-scsi is open by pid 4242 "
                 "(qemu-system-x86)*");
    g_autofree char *after = snapshot(f);
    g_assert_cmpstr(after, ==, before);
    /* --force: the holder may be another target's. */
    g_assert_cmpint(lio_target_delete(f->lio, WWPN, true, NULL), ==, 0);
    g_assert_false(exists(f, "target/vhost/" WWPN));
}

/* ------------------------------------------------------------------- list */

static void test_list_reports_targets_and_luns(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN2, 1, "naa.5001405ddddddddd", NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, "naa.5001405ccccccccc", NULL), ==, 0);
    add_file_lun(f, WWPN, 2, "b.img", "2M");
    add_file_lun(f, WWPN, 0, "a.img", "1M");

    GPtrArray *targets;
    g_assert_cmpint(lio_list(f->lio, &targets), ==, 0);
    g_assert_cmpuint(targets->len, ==, 2);
    struct lio_target *t = targets->pdata[0];
    g_assert_cmpstr(t->wwpn, ==, WWPN);          /* sorted */
    g_assert_cmpuint(t->tpgt, ==, 1);
    g_assert_cmpstr(t->nexus, ==, "naa.5001405ccccccccc");
    g_assert_cmpuint(t->luns->len, ==, 2);
    struct lio_lun *l0 = t->luns->pdata[0], *l2 = t->luns->pdata[1];
    g_assert_cmpuint(l0->lun, ==, 0);
    g_assert_cmpuint(l2->lun, ==, 2);
    g_assert_cmpint(l2->type, ==, LIO_LUN_FILE);
    g_assert_cmpuint(l2->size, ==, 2 << 20);
    g_assert_true(l2->owned);
    g_autofree char *b = scratch(f, "b.img");
    g_assert_cmpstr(l2->path, ==, b);

    g_autofree char *text = lio_list_to_text(targets);
    g_assert_nonnull(strstr(text, WWPN " tpgt 1 nexus naa.5001405ccccccccc\n"));
    g_autofree char *line = g_strdup_printf("  lun 2     file  %s size 2097152 backstore core/", b);
    g_assert_nonnull(strstr(text, line));

    g_autofree char *json = NULL;
    g_assert_cmpint(lio_list_to_json(targets, &json, NULL), ==, 0);
    GPtrArray *parsed;
    g_assert_cmpint(lio_config_parse(json, strlen(json), &parsed, NULL), ==, 0);
    g_assert_cmpuint(parsed->len, ==, 2);
    struct lio_target *p = parsed->pdata[0];
    struct lio_lun *pl = p->luns->pdata[1];
    g_assert_cmpstr(p->nexus, ==, t->nexus);
    g_assert_cmpuint(pl->size, ==, l2->size);
    g_assert_cmpstr(pl->path, ==, l2->path);
    g_ptr_array_unref(parsed);
    g_ptr_array_unref(targets);
}

static void test_qemu_args(void)
{
    g_autofree char *a = lio_qemu_args(WWPN, NULL, 0);
    g_assert_cmpstr(a, ==, "-device vhost-scsi-pci,wwpn=" WWPN);
    g_autofree char *b = lio_qemu_args(WWPN, "pcie.0", 4);
    g_assert_cmpstr(b, ==, "-device vhost-scsi-pci,wwpn=" WWPN ",bus=pcie.0,num_queues=4");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lio/wwpn/validation", test_wwpn_validation);
    g_test_add_func("/lio/wwpn/generated", test_wwpn_generated_names_are_valid_and_random);
    ADD("/lio/create/tpgt-and-nexus", test_create_makes_tpgt_with_nexus);
    ADD("/lio/create/explicit-nexus", test_create_with_explicit_nexus_and_tpgt);
    ADD("/lio/create/iqn", test_create_iqn_target_gets_iqn_nexus);
    ADD("/lio/create/bad-input", test_create_rejects_bad_input);
    ADD("/lio/lun/add-idempotent", test_lun_add_is_idempotent);
    ADD("/lio/lun/add-conflicts", test_lun_add_conflicts);
    ADD("/lio/lun/add-bad-input", test_lun_add_rejects_bad_input);
    ADD("/lio/delete/clean-tree", test_delete_with_luns_leaves_clean_tree);
    ADD("/lio/delete/foreign-backstore", test_delete_keeps_foreign_backstores);
    ADD("/lio/delete/shared-backstore", test_delete_refuses_when_backstore_shared);
    ADD("/lio/list", test_list_reports_targets_and_luns);
    ADD("/lio/lun/add-backing-takes-values-not-a-spec",
        test_lun_add_backing_takes_values_not_a_spec);
    ADD("/lio/delete/refused-while-vhost-device-held",
        test_delete_refused_while_vhost_device_held);
    ADD("/lio/lun/second-lun-warns-before-linux-6.4", test_second_lun_warns_before_linux_6_4);
    ADD("/lio/rollback/target-create-failing-at-each-step-leaves-no-trace",
        test_target_create_failing_at_each_step_leaves_no_trace);
    g_test_add_func("/lio/qemu-args", test_qemu_args);
    return g_test_run();
}
