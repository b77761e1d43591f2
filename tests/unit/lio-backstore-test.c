/*
 * Specification of LIO backstores (hw/lio/lio-backstore.c), as
 * lio_lun_add makes them and lio_lun_remove takes them away on the fake
 * configfs of lio-fixture.h.  A LUN spec of the daemon's grammar maps onto
 * iblock (a block device), fileio (a regular file, through the page cache
 * or with direct O_DIRECT) or rd_mcp (ram:, null:), ro and block-size onto
 * what LIO has for them, and list reads each back as what it was asked to
 * be; what LIO cannot express is refused, naming it, before anything is
 * made, and vhost-scsi-ctl says the same.  A file backing is made with the
 * size asked for, or an existing one gives its own; creation failing at
 * any step leaves nothing behind, a file it made included; removal takes
 * the backstore and the HBA it leaves empty (whose index is then reused),
 * never the backing file, which is the user's data.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"
#include "lio-fixture.h"
#include "test-hooks.h"

/* ---------------------------------------------------------- file backings */

static void test_lun_add_file_creates_backstore_and_link(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "disk0.img", "16M");

    g_autofree char *img = scratch(f, "disk0.img");
    struct stat st;
    g_assert_cmpint(stat(img, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 16 << 20);

    g_autofree char *ctl = cf(f, "target/core/fileio_0/" BS0 "/control");
    g_autofree char *control = slurp(ctl);
    g_autofree char *want = g_strdup_printf("fd_dev_name=%s,fd_dev_size=16777216,"
                                            "fd_buffered_io=1", img);
    g_assert_cmpstr(control, ==, want);
    g_autofree char *en = cf(f, "target/core/fileio_0/" BS0 "/enable");
    g_autofree char *enable = slurp(en);
    g_assert_cmpstr(enable, ==, "1");
    g_autofree char *up = cf(f, "target/core/fileio_0/" BS0 "/udev_path");
    g_autofree char *udev = slurp(up);
    g_assert_cmpstr(udev, ==, img);

    g_autofree char *link = cf(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0/" BS0);
    g_autofree char *to = g_file_read_link(link, NULL);
    g_autofree char *bs = cf(f, "target/core/fileio_0/" BS0);
    g_assert_cmpstr(to, ==, bs);
}

static void test_lun_add_existing_file_takes_its_size(struct fx *f, gconstpointer d)
{
    g_autofree char *img = scratch(f, "existing.img");
    g_autofree char *data = g_malloc0(8192);
    g_assert_true(g_file_set_contents(img, data, 8192, NULL));
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_autofree char *spec = g_strdup_printf("file:%s", img);
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 3, spec, NULL), ==, 0);
    g_autofree char *ctl = cf(f, "target/core/fileio_0/vs-naa_5001405aaaaaaaaa-t1-l3/control");
    g_autofree char *control = slurp(ctl);
    g_assert_true(g_str_has_suffix(control, ",fd_dev_size=8192,fd_buffered_io=1"));
}

/* -------------------------------------------------- specs onto backstores */

/* tmpl with DEV and IMG replaced by dev and img. */
static char *subst(const char *tmpl, const char *dev, const char *img)
{
    GString *s = g_string_new(tmpl);
    g_string_replace(s, "DEV", dev, 0);
    g_string_replace(s, "IMG", img, 0);
    return g_string_free(s, FALSE);
}

/*
 * The daemon's grammar, mapped onto LIO: a block device is iblock, a
 * regular file fileio through the page cache (or, with direct, O_DIRECT),
 * ram: and null: rd_mcp; ro and block-size become iblock's readonly=1
 * and attrib/block_size.  list reads each back as what it was asked to be.
 */
static void test_lun_specs_map_onto_backstores(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *dev = fake_blockdev(f, "sdz");
    g_autofree char *img = scratch(f, "f.img");
    static const struct {
        const char *spec;           /* DEV: the device, IMG: the image */
        const char *hba, *control, *block_size;
        enum lio_lun_type type;
        bool ro, direct;
        uint64_t size;
    } cases[] = {
        { "file:IMG,size=1M", "fileio_0",
          "fd_dev_name=IMG,fd_dev_size=1048576,fd_buffered_io=1", NULL, LIO_LUN_FILE,
          false, false, 1 << 20 },
        { "file:DEV", "iblock_0", "udev_path=DEV", NULL, LIO_LUN_BLOCK, false, false,
          64 << 20 },
        { "ram:1M", "rd_mcp_0", "rd_pages=256", NULL, LIO_LUN_RAM, false, false, 1 << 20 },
        { "null:1G,block-size=4096", "rd_mcp_1", "rd_pages=262144,rd_nullio=1", "4096",
          LIO_LUN_NULL, false, false, 1 << 30 },
    };
    static const struct {
        const char *spec, *control, *block_size;
        bool ro, direct;
    } options[] = {
        /* Again on one backing each, after removing the LUN above. */
        { "file:IMG,direct,block-size=4096",
          "fd_dev_name=IMG,fd_dev_size=1048576,fd_async_io=1", "4096", false, true },
        { "file:DEV,ro,direct", "udev_path=DEV,readonly=1", NULL, true, false },
    };
    g_assert_cmpint(sysconf(_SC_PAGESIZE), ==, 4096);
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *spec = subst(cases[i].spec, dev, img);
        g_autofree char *want = subst(cases[i].control, dev, img);
        g_autofree char *so = g_strdup_printf("target/core/%s/vs-naa_5001405aaaaaaaaa-t1-l%u",
                                              cases[i].hba, i);
        g_autofree char *ctl = g_strdup_printf("%s/control", so);
        g_autofree char *bsp = g_strdup_printf("%s/attrib/block_size", so);
        g_autofree char *link = g_strdup_printf("target/vhost/" WWPN "/tpgt_1/lun/lun_%u/"
                                                "vs-naa_5001405aaaaaaaaa-t1-l%u", i, i);
        g_test_message("%s", spec);
        g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, i, spec, NULL), ==, 0);
        g_autofree char *control = attr(f, ctl);
        g_autofree char *bs = attr(f, bsp);
        g_assert_cmpstr(control, ==, want);
        g_assert_cmpstr(bs, ==, cases[i].block_size);
        g_assert_true(exists(f, link));
        /* The same spec again changes nothing. */
        g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, i, spec, NULL), ==, 0);
    }
    GPtrArray *targets;
    g_assert_cmpint(lio_list(f->lio, &targets), ==, 0);
    struct lio_target *t = targets->pdata[0];
    g_assert_cmpuint(t->luns->len, ==, G_N_ELEMENTS(cases));
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lio_lun *l = t->luns->pdata[i];
        g_assert_cmpint(l->type, ==, cases[i].type);
        g_assert_cmpuint(l->size, ==, cases[i].size);
        g_assert_false(l->ro);
        g_assert_false(l->direct);
        g_assert_cmpuint(l->block_size, ==, cases[i].block_size ? 4096 : 0);
        g_assert_true(l->owned);
    }
    g_autofree char *text = lio_list_to_text(targets);
    g_assert_nonnull(strstr(text, "  lun 2     ram   - size 1048576 backstore core/rd_mcp_0/"));
    g_assert_nonnull(strstr(text, "  lun 3     null  - size 1073741824 backstore "
                                  "core/rd_mcp_1/vs-naa_5001405aaaaaaaaa-t1-l3 block-size 4096\n"));
    g_ptr_array_unref(targets);

    /* Another size for the same RAM LUN is another LUN. */
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 2, "ram:2M", &err), ==, -EEXIST);
    assert_error(&err, EEXIST, "*LUN 2 already exists and maps core/rd_mcp_0/*, not a new ram");

    for (unsigned i = 0; i < G_N_ELEMENTS(options); i++) {
        g_autofree char *spec = subst(options[i].spec, dev, img);
        g_autofree char *want = subst(options[i].control, dev, img);
        const char *hba = i ? "iblock_0" : "fileio_0";
        g_autofree char *so = g_strdup_printf("target/core/%s/vs-naa_5001405aaaaaaaaa-t1-l%u",
                                              hba, i);
        g_autofree char *ctl = g_strdup_printf("%s/control", so);
        g_autofree char *bsp = g_strdup_printf("%s/attrib/block_size", so);
        g_test_message("%s", spec);
        /* The LUN as it is maps the backing without these options: refused. */
        g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, i, spec, &err), ==, -EEXIST);
        assert_error(&err, EEXIST, "*already exists and maps*");
        g_assert_cmpint(lio_lun_remove(f->lio, WWPN, 1, i, NULL), ==, 0);
        g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, i, spec, NULL), ==, 0);
        g_autofree char *control = attr(f, ctl);
        g_autofree char *bs = attr(f, bsp);
        g_assert_cmpstr(control, ==, want);
        g_assert_cmpstr(bs, ==, options[i].block_size);
        g_assert_cmpint(lio_list(f->lio, &targets), ==, 0);
        struct lio_lun *l = ((struct lio_target *)targets->pdata[0])->luns->pdata[i];
        g_assert_cmpint(l->ro, ==, options[i].ro);
        g_assert_cmpint(l->direct, ==, options[i].direct);
        g_ptr_array_unref(targets);
    }
}

/* Whatever LIO cannot express is refused, naming it, before anything is made. */
static void test_lun_specs_lio_cannot_express_are_refused(struct fx *f, gconstpointer d)
{
    g_autofree char *dev = fake_blockdev(f, "sdz");
    g_autofree char *img = scratch(f, "f.img");
    g_autofree char *file_ro = g_strdup_printf("file:%s,ro,size=1M", img);
    g_autofree char *dev_size = g_strdup_printf("file:%s,size=1M", dev);
    static const char *const fixed[][2] = {
        { "iscsi://10.0.0.1/iqn.2024-01.org.example:t1/0",
          "*\"iscsi://10.0.0.1/iqn.2024-01.org.example:t1/0\": iscsi:// LUNs are "
          "vhost-scsi-target's*" },
        /* The password is not shown. */
        { "iscsi://u%s3cr3t@h/iqn.x:t/0", "*\"iscsi://u%***@h/iqn.x:t/0\": iscsi://*" },
        /* a test backend of vhost-scsi-target's, or (in a product) no backend at all */
        { "hold:1M,while=/run/gate", TEST_HOOKS_BUILT ?
                                     "*hold: is a test backend of vhost-scsi-target" :
                                     "*unknown backend \"hold:*" },
        { "ram:1M,ro", "*option \"ro\": LIO's rd_mcp backstore has no read-only mode*" },
        { "null:1M,ro", "*option \"ro\": LIO's rd_mcp backstore*" },
        { "ram:1536", "*size 1536: LIO's rd_mcp takes a whole number of 4096-byte pages*" },
        { "ram:1M,direct", "*unknown option \"direct\" for ram:" },
        { "file:/x,queue-depth=4", "*unknown option \"queue-depth\" for file:" },
    };
    const char *made[][2] = {
        { file_ro, "*option \"ro\": LIO's fileio backstore has no read-only mode (only a "
                   "block device, through iblock, can be read-only)" },
        { dev_size, "*option \"size\": LIO's iblock backstore exports the whole device" },
    };
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_setenv("VHOST_SCSI_TEST_BACKENDS", "1", TRUE);
    g_autofree char *before = snapshot(f);
    unsigned changes = lio_fake_changes(f->fake);
    for (unsigned i = 0; i < G_N_ELEMENTS(fixed) + G_N_ELEMENTS(made); i++) {
        const char *const *c = i < G_N_ELEMENTS(fixed) ? fixed[i] : made[i - G_N_ELEMENTS(fixed)];
        g_autoptr(GError) err = NULL;
        g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 0, c[0], &err), ==, -EINVAL);
        assert_error(&err, EINVAL, c[1]);
        g_autofree char *after = snapshot(f);
        g_assert_cmpstr(after, ==, before);
    }
    g_unsetenv("VHOST_SCSI_TEST_BACKENDS");
    g_assert_cmpuint(lio_fake_changes(f->fake), ==, changes);   /* not even tried */
}

/* vhost-scsi-ctl speaks the same grammar and says what LIO cannot do. */
static void test_ctl_lun_add_refuses_what_lio_cannot_express(struct fx *f, gconstpointer d)
{
    if (!ctl_available()) {
        return;
    }
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint(run_ctl(f, &out, &err, "lun", "add", WWPN, "0", "iscsi://h/iqn.x:t/0", NULL),
                    ==, 1);
    /* Said once, as the tool's own line: no GLib log line besides. */
    g_assert_cmpstr(err, ==, "vhost-scsi-ctl: LUN spec \"iscsi://h/iqn.x:t/0\": iscsi:// "
                    "LUNs are vhost-scsi-target's: LIO has no backstore that is an iSCSI "
                    "initiator\n");
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 0);
}

/*
 * vhost-scsi-ctl lio parses with getopt_long: an option before or after
 * the words means the same, "--opt=value" and "--opt value" alike; a usage
 * error exits 2 naming the option, and the targets stay as they were.
 */
static void test_ctl_options_anywhere_and_usage_errors(struct fx *f, gconstpointer d)
{
    static const struct {
        const char *args[4];
        const char *says;
    } bad[] = {
        { { "list", "--bogus" }, "unknown option --bogus" },
        { { "--bogus=1", "list" }, "unknown option --bogus" },
        { { "list", "--tpgt" }, "option --tpgt needs a value" },
        { { "--json=yes", "list" }, "option --json takes no value" },
        { { "--tpgt", "256", "list" }, "--tpgt '256': expected 0..255" },
        { { "-x", "list" }, "unknown option -x" },
    };

    if (!ctl_available()) {
        return;
    }
    g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 2, NULL, NULL), ==, 0);
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 2, 0, "ram:1M", NULL), ==, 0);
    /* The flag after the command, or before it: the same answer. */
    g_assert_cmpint(run_ctl(f, &out, &err, "list", "--json", NULL), ==, 0);
    g_assert_cmpint(run_ctl(f, &out2, &err2, "--json", "list", NULL), ==, 0);
    g_assert_cmpstr(out, ==, out2);
    g_assert_nonnull(strstr(out, WWPN));
    g_assert_nonnull(strstr(out, "\"tpgt\""));
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *o = NULL, *e = NULL;
        g_assert_cmpint(run_ctl(f, &o, &e, bad[i].args[0], bad[i].args[1], bad[i].args[2],
                                bad[i].args[3], NULL), ==, 2);
        if (!strstr(e, bad[i].says)) {
            g_error("%s %s: \"%s\" does not say \"%s\"", bad[i].args[0], bad[i].args[1], e,
                    bad[i].says);
        }
    }
    /* Nothing changed: the same listing. */
    g_autofree char *out3 = NULL, *err3 = NULL;
    g_assert_cmpint(run_ctl(f, &out3, &err3, "list", "--json", NULL), ==, 0);
    g_assert_cmpstr(out3, ==, out);
}

/* --------------------------------------------------------------- rollback */

static int add_lun0(struct fx *f, gconstpointer spec, GError **err)
{
    return lio_lun_add(f->lio, WWPN, 1, 0, spec, err);
}

static void test_lun_add_failing_at_each_step_leaves_no_trace(struct fx *f, gconstpointer d)
{
    g_autofree char *img = scratch(f, "new.img");
    g_autofree char *spec = g_strdup_printf("file:%s,size=1M", img);
    const char *const names[] = { WWPN, BS0, img, NULL };
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    /*
     * Create and size the file, mkdir HBA and backstore, write control,
     * udev_path and enable, mkdir the LUN, link it: a new file is removed
     * again when a later step fails.
     */
    g_assert_cmpuint(fail_each_step(f, add_lun0, spec, names), ==, 9);
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0/" BS0));

    /* An existing file of the right size is used as it is, and kept. */
    g_assert_cmpint(lio_lun_remove(f->lio, WWPN, 1, 0, NULL), ==, 0);
    g_assert_cmpuint(fail_each_step(f, add_lun0, spec, names), ==, 7);
}

/* ---------------------------------------------------------------- removal */

static void test_lun_remove_deletes_backstore_and_is_idempotent(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "disk0.img", "1M");
    add_file_lun(f, WWPN, 1, "disk1.img", "1M");
    g_assert_cmpint(lio_lun_remove(f->lio, WWPN, 1, 0, NULL), ==, 0);
    g_assert_false(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0"));
    g_assert_false(exists(f, "target/core/fileio_0"));
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_1"));
    g_assert_cmpint(lio_lun_remove(f->lio, WWPN, 1, 0, NULL), ==, 0);
    /* The backing file is the user's data: never deleted. */
    g_autofree char *img = scratch(f, "disk0.img");
    g_assert_true(g_file_test(img, G_FILE_TEST_IS_REGULAR));
    /* The freed HBA index is reused. */
    add_file_lun(f, WWPN, 2, "disk2.img", "1M");
    g_assert_true(exists(f, "target/core/fileio_0/vs-naa_5001405aaaaaaaaa-t1-l2"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ADD("/lio/lun/add-file", test_lun_add_file_creates_backstore_and_link);
    ADD("/lio/lun/add-existing-file", test_lun_add_existing_file_takes_its_size);
    ADD("/lio/lun/remove", test_lun_remove_deletes_backstore_and_is_idempotent);
    ADD("/lio/rollback/lun-add-failing-at-each-step-leaves-no-trace",
        test_lun_add_failing_at_each_step_leaves_no_trace);
    ADD("/lio/spec/kinds-and-options-map-onto-backstores", test_lun_specs_map_onto_backstores);
    ADD("/lio/spec/what-lio-cannot-express-is-refused-before-anything-is-made",
        test_lun_specs_lio_cannot_express_are_refused);
    ADD("/lio/ctl/lun-add-refuses-what-lio-cannot-express",
        test_ctl_lun_add_refuses_what_lio_cannot_express);
    ADD("/lio/ctl/options-anywhere-and-usage-errors", test_ctl_options_anywhere_and_usage_errors);
    return g_test_run();
}
