/*
 * Specification of targetcli migration (hw/lio/lio-targetcli.c), on the
 * fake configfs of lio-fixture.h, with saveconfig.json files written by
 * targetcli-fb's rtslib_fb (tests/unit/data/targetcli, made and checked by
 * targetcli-dump.py).  A restore maps vhost targets on fileio, block and
 * ramdisk backstores, keeping names, unit serials and LUN link names, and
 * saving the result with --format targetcli gives the file back (modulo
 * ordering and the attributes the kernel derives from the backing, which a
 * fake tree cannot show).  What cannot be mapped (other fabrics, pscsi and
 * user backstores, attributes off LIO's defaults, write-through fileio,
 * backstores no vhost LUN links) is named by its path and refused with
 * nothing changed, or left out with --partial; malformed files are refused
 * with a message and no crash; a failing step takes back what the restore
 * had made, named backstores included.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"
#include "lio-fixture.h"
#include "vs-error.h"

/* ---------------------------------------------------------------- helpers */

/* A fixture's text with /srv/ and /dev/vdb moved into the scratch directory. */
static char *fixture(struct fx *f, const char *name)
{
    const char *dir = g_getenv("TARGETCLI_FIXTURES");
    g_assert_nonnull(dir);
    g_autofree char *p = g_build_filename(dir, name, NULL);
    g_autofree char *text = slurp(p);
    g_autofree char *srv = scratch(f, "srv");
    g_autofree char *vdb = fake_blockdev(f, "vdb");
    g_assert_cmpint(g_mkdir_with_parents(srv, 0755), ==, 0);
    g_autofree char *srv_slash = g_strconcat(srv, "/", NULL);
    g_auto(GStrv) a = g_strsplit(text, "\"/srv/", -1);
    g_autofree char *srv_q = g_strconcat("\"", srv_slash, NULL);
    g_autofree char *t1 = g_strjoinv(srv_q, a);
    g_auto(GStrv) b = g_strsplit(t1, "\"/dev/vdb\"", -1);
    g_autofree char *vdb_q = g_strdup_printf("\"%s\"", vdb);
    return g_strjoinv(vdb_q, b);
}

static char *write_scratch(struct fx *f, const char *name, const char *text)
{
    char *p = scratch(f, name);
    g_assert_true(g_file_set_contents(p, text, -1, NULL));
    return p;
}

/* Attributes the kernel sets from the backing: a fake tree has none to read back. */
static bool derived(const char *name)
{
    static const char *const names[] = {
        "optimal_sectors", "queue_depth", "is_nonrot", "max_unmap_lba_count",
        "max_unmap_block_desc_count", "unmap_granularity", "unmap_granularity_alignment",
        "unmap_zeroes_data", "max_write_same_len",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        if (!strcmp(names[i], name)) {
            return true;
        }
    }
    return false;
}

static gint str_cmp(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* n as text with object members and array elements sorted, derived attributes left out. */
static char *canonical(JsonNode *n, bool in_attributes)
{
    if (JSON_NODE_HOLDS_OBJECT(n)) {
        JsonObject *o = json_node_get_object(n);
        g_autoptr(GList) names = g_list_sort(json_object_get_members(o), (GCompareFunc)strcmp);
        GString *s = g_string_new("{");
        for (GList *l = names; l; l = l->next) {
            if (in_attributes && derived(l->data)) {
                continue;
            }
            g_autofree char *v = canonical(json_object_get_member(o, l->data),
                                           !strcmp(l->data, "attributes"));
            g_string_append_printf(s, "\"%s\":%s,", (const char *)l->data, v);
        }
        g_string_append(s, "}");
        return g_string_free(s, FALSE);
    }
    if (JSON_NODE_HOLDS_ARRAY(n)) {
        JsonArray *a = json_node_get_array(n);
        g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
        for (guint i = 0; i < json_array_get_length(a); i++) {
            g_ptr_array_add(items, canonical(json_array_get_element(a, i), false));
        }
        g_ptr_array_sort(items, str_cmp);
        GString *s = g_string_new("[");
        for (guint i = 0; i < items->len; i++) {
            g_string_append_printf(s, "%s,", (char *)items->pdata[i]);
        }
        g_string_append(s, "]");
        return g_string_free(s, FALSE);
    }
    g_autoptr(JsonGenerator) gen = json_generator_new();
    json_generator_set_root(gen, n);
    return json_generator_to_data(gen, NULL);
}

static char *canonical_text(const char *json)
{
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, json, -1, NULL));
    return canonical(json_parser_get_root(p), false);
}

/* Restores name's fixture, saves it for targetcli: the same file modulo ordering. */
static void round_trip(struct fx *f, const char *name)
{
    g_autofree char *text = fixture(f, name);
    g_autofree char *in = write_scratch(f, "in.json", text);
    g_assert_cmpint(lio_restore(f->lio, in, false, NULL), ==, 0);
    g_autofree char *saved = save_text(f, "out.json", LIO_FORMAT_TARGETCLI);
    g_autofree char *out = scratch(f, "out.json");
    g_autofree char *want = canonical_text(text), *got = canonical_text(saved);
    g_assert_cmpstr(got, ==, want);

    /* Restoring our own file on top changes nothing, and saves the same again. */
    g_assert_cmpint(lio_restore(f->lio, out, false, NULL), ==, 0);
    g_autofree char *saved2 = save_text(f, "out2.json", LIO_FORMAT_TARGETCLI);
    g_assert_cmpstr(saved2, ==, saved);
}

/*
 * targetcli-dump.py --restore: rtslib_fb's own restore() of file (on a fake
 * kernel) reports no error and dumps it back.  False with the case skipped
 * when there is no rtslib_fb to run.
 */
static bool rtslib_restores(const char *file)
{
    const char *script = g_getenv("TARGETCLI_DUMP");
    if (!script || !g_file_test("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE)) {
        g_test_skip("no targetcli-dump.py or /usr/bin/python3");
        return false;
    }
    const char *argv[] = { "/usr/bin/python3", script, "--restore", file, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int status;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                               &status, NULL));
    g_assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        g_test_skip("python3-rtslib-fb is not installed");
        return false;
    }
    if (WEXITSTATUS(status) != 0) {
        g_error("targetcli would not restore %s as it is:\n%s", file, err);
    }
    return true;
}

/* ---------------------------------------------------------------- restore */

static void test_restore_maps_vhost_fileio_block_ramdisk(struct fx *f, gconstpointer d)
{
    g_autofree char *text = fixture(f, "vhost.json");
    g_autofree char *in = write_scratch(f, "in.json", text);
    g_assert_cmpint(lio_restore(f->lio, in, false, NULL), ==, 0);

    /* Names, serials and link names as targetcli had them. */
    g_autofree char *serial = attr(f, "target/core/fileio_0/disk1/wwn/vpd_unit_serial");
    g_assert_cmpstr(serial, ==, "T10 VPD Unit Serial Number: 5f3ab6a0-0d6e-4a3b-9d0a-2d4c7b1e0f11\n");
    g_assert_true(exists(f, "target/vhost/naa.5001405aaaaaaaa1/tpgt_1/lun/lun_0/c0ffee0001"));
    g_assert_true(exists(f, "target/vhost/naa.5001405aaaaaaaa1/tpgt_1/lun/lun_1/c0ffee0002"));
    g_assert_true(exists(f, "target/vhost/naa.5001405aaaaaaaa2/tpgt_2/lun/lun_3/c0ffee0005"));
    g_autofree char *c1 = attr(f, "target/core/fileio_0/disk1/control");
    g_assert_nonnull(strstr(c1, ",fd_dev_size=1073741824,fd_buffered_io=1"));
    g_autofree char *c3 = attr(f, "target/core/fileio_1/disk3/control");
    g_assert_nonnull(strstr(c3, ",fd_dev_size=2147483648,fd_async_io=1"));
    g_autofree char *c2 = attr(f, "target/core/iblock_0/disk2/control");
    g_assert_true(g_str_has_prefix(c2, "udev_path=") && !strstr(c2, "readonly"));
    g_autofree char *rd = attr(f, "target/core/rd_mcp_0/scratch/control");
    g_assert_cmpstr(rd, ==, "rd_pages=16384");
    g_autofree char *nl = attr(f, "target/core/rd_mcp_1/nothing/control");
    g_assert_cmpstr(nl, ==, "rd_pages=262144,rd_nullio=1");
    /* The file is made with the size targetcli recorded, as fileio would. */
    g_autofree char *img = scratch(f, "srv/vm1.img");
    struct stat st;
    g_assert_cmpint(stat(img, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, 1073741824);
    /* targetcli's format has no nexus: the restore makes one, as targetcli does. */
    g_autofree char *nexus = attr(f, "target/vhost/naa.5001405aaaaaaaa1/tpgt_1/nexus");
    g_assert_true(g_str_has_prefix(nexus, "naa.5001405"));

    /* Not ours: delete unlinks them but leaves them, as with targetcli's. */
    GPtrArray *targets;
    g_assert_cmpint(lio_list(f->lio, &targets), ==, 0);
    struct lio_target *t = targets->pdata[0];
    g_assert_false(((struct lio_lun *)t->luns->pdata[0])->owned);
    g_ptr_array_unref(targets);
}

static void test_round_trip_vhost(struct fx *f, gconstpointer d)
{
    round_trip(f, "vhost.json");
}

static void test_round_trip_block_size_4096(struct fx *f, gconstpointer d)
{
    round_trip(f, "block4k.json");
    g_autofree char *bs = attr(f, "target/core/fileio_0/big/attrib/block_size");
    g_assert_cmpstr(bs, ==, "4096");
}

/* One storage object linked from two vhost TPGs: one backstore, two links. */
static void test_shared_storage_object_is_one_backstore(struct fx *f, gconstpointer d)
{
    g_autofree char *img = scratch(f, "shared.img");
    g_autofree char *json = g_strdup_printf(
        "{\"storage_objects\": [{\"plugin\": \"fileio\", \"name\": \"sh\", \"dev\": \"%s\", "
        "\"size\": 1048576, \"write_back\": true, \"wwn\": \"s-1\"}], \"targets\": [{\"fabric\": "
        "\"vhost\", \"wwn\": \"" WWPN "\", \"tpgs\": [{\"tag\": 1, \"luns\": [{\"index\": 0, "
        "\"storage_object\": \"/backstores/fileio/sh\", \"alias\": \"l1\"}]}, {\"tag\": 2, \"luns\": "
        "[{\"index\": 5, \"storage_object\": \"/backstores/fileio/sh\", \"alias\": \"l2\"}]}]}]}", img);
    g_autofree char *in = write_scratch(f, "in.json", json);
    g_assert_cmpint(lio_restore(f->lio, in, false, NULL), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 1);
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0/l1"));
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_2/lun/lun_5/l2"));
    g_autofree char *saved = save_text(f, "out.json", LIO_FORMAT_TARGETCLI);
    g_autofree char *first = g_strrstr(saved, "\"plugin\" : \"fileio\"") ?
                             g_strdup(strstr(saved, "\"plugin\" : \"fileio\"") + 1) : NULL;
    g_assert_nonnull(first);
    g_assert_null(strstr(first, "\"plugin\" : \"fileio\""));   /* written once */
}

/* Ours, saved for targetcli and restored: the same LUNs, now named as in the file. */
static void test_our_luns_save_for_targetcli_and_restore(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 2, "null:1M,block-size=4096", NULL), ==, 0);
    g_autofree char *saved = save_text(f, "tcli.json", LIO_FORMAT_TARGETCLI);
    g_autofree char *out = scratch(f, "tcli.json");
    g_assert_nonnull(strstr(saved, "\"storage_object\" : \"/backstores/fileio/" BS0 "\""));
    g_assert_nonnull(strstr(saved, "\"plugin\" : \"ramdisk\""));
    g_assert_nonnull(strstr(saved, "\"nullio\" : true"));
    g_assert_null(strstr(saved, "nexus"));   /* rtslib would refuse to set it */

    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, NULL), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 0);
    g_assert_cmpint(lio_restore(f->lio, out, false, NULL), ==, 0);
    g_autofree char *resaved = save_text(f, "again.json", LIO_FORMAT_TARGETCLI);
    g_assert_cmpstr(resaved, ==, saved);
}

/* What we save, for a targetcli restore and for ours, rtslib_fb restores without an error. */
static void test_rtslib_restores_what_we_save(struct fx *f, gconstpointer d)
{
    g_autofree char *text = fixture(f, "vhost.json");
    g_autofree char *in = write_scratch(f, "in.json", text);
    g_assert_cmpint(lio_restore(f->lio, in, false, NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, 2, "null:1M,block-size=4096", NULL), ==, 0);
    g_autofree char *saved = save_text(f, "out.json", LIO_FORMAT_TARGETCLI);
    g_assert_nonnull(strstr(saved, BS0));
    g_autofree char *out = scratch(f, "out.json");
    rtslib_restores(out);
}

/* -------------------------------------------------------------- refusals */

/* Every object of mixed.json that cannot be mapped, by the path in the message. */
static const char *const mixed_refusals[] = {
    "(/backstores/pscsi/cdrom): LIO's pscsi backstore",
    "(/backstores/fileio/thin) attribute emulate_tpu: 1 (vhost-scsi-ctl keeps "
    "LIO's default, 0)",
    "(/backstores/fileio/wt): write_back false without aio",
    "(/iscsi/iqn.2003-01.org.linux-iscsi.host.x8664:sn.0123456789ab): the iscsi "
    "fabric",
    "(/loopback/naa.5001405123456789): the loopback fabric",
    "(/vhost/naa.5001405eeeeeeee1/tpg1/luns/lun1): its storage object "
    "/backstores/fileio/thin is not mappable",
    "(/vhost/naa.5001405eeeeeeee1/tpg1/luns/lun2): its storage object "
    "/backstores/fileio/wt is not mappable",
    "(/vhost/naa.5001405eeeeeeee1/tpg1/luns/lun3): its storage object "
    "/backstores/pscsi/cdrom is not mappable",
    "(/backstores/fileio/spare): no vhost LUN links it",
};

/* text is first, then one line "  AT: WHY" for each of mixed_refusals. */
static void assert_mixed_refusals(const char *text, const char *first)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, G_N_ELEMENTS(mixed_refusals) + 1);
    g_assert_cmpstr(lines[0], ==, first);
    for (size_t i = 0; i < G_N_ELEMENTS(mixed_refusals); i++) {
        bool found = false;
        for (guint k = 1; lines[k]; k++) {
            found = found || (g_str_has_prefix(lines[k], "  ") &&
                              strstr(lines[k], mixed_refusals[i]));
        }
        if (!found) {
            g_error("no line says \"%s\"", mixed_refusals[i]);
        }
    }
}

static void test_unmappable_is_named_and_refused(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *text = fixture(f, "mixed.json");
    g_autofree char *in = write_scratch(f, "in.json", text);
    g_autofree char *before = snapshot(f);
    g_assert_cmpint(lio_restore(f->lio, in, false, &err), ==, -EINVAL);
    g_assert_error(err, VS_ERROR, EINVAL);
    g_autofree char *first = g_strdup_printf("%s: targetcli configuration: 9 object(s) cannot "
                                             "be mapped; nothing was changed (--partial "
                                             "restores the rest):", in);
    assert_mixed_refusals(err->message, first);
    g_autofree char *after = snapshot(f);
    g_assert_cmpstr(after, ==, before);
}

static void test_partial_restores_the_rest(struct fx *f, gconstpointer d)
{
    g_autofree char *text = fixture(f, "mixed.json");
    g_autofree char *in = write_scratch(f, "in.json", text);
    struct collected c;
    collect_begin(&c);
    g_assert_cmpint(lio_restore(f->lio, in, true, NULL), ==, 0);
    /* Not a failure: what is left out is one message, not an error. */
    g_assert_cmpuint(c.msgs->len, ==, 1);
    assert_mixed_refusals(c.msgs->pdata[0], "lio: targetcli configuration: 9 object(s) left "
                          "out (--partial):");
    collect_end(&c);
    /* Only LUN 0 on vm1: no iSCSI, loopback or other backstore appears. */
    g_assert_true(exists(f, "target/vhost/naa.5001405eeeeeeee1/tpgt_1/lun/lun_0/a1a1a1a1a1"));
    g_assert_cmpuint(count_entries(f, "target/vhost/naa.5001405eeeeeeee1/tpgt_1/lun"), ==, 1);
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 1);
    g_assert_true(exists(f, "target/core/fileio_0/vm1"));
    g_assert_false(exists(f, "target/iscsi"));
    g_assert_false(exists(f, "target/loopback"));
}

/* A user: (tcmu) backstore, hand-written in rtslib's dump form (no runner to fake). */
static void test_user_backstore_is_refused(struct fx *f, gconstpointer d)
{
    g_autofree char *in = write_scratch(f, "in.json",
        "{\"fabric_modules\": [], \"storage_objects\": [{\"alua_tpgs\": [], \"attributes\": {}, "
        "\"config\": \"qcow//srv/a.qcow2\", \"hw_max_sectors\": 128, \"name\": \"q\", "
        "\"plugin\": \"user:qcow\", \"size\": 1048576, \"wwn\": \"x\"}], \"targets\": "
        "[{\"fabric\": \"vhost\", \"tpgs\": [{\"tag\": 1, \"luns\": [{\"index\": 0, "
        "\"storage_object\": \"/backstores/user:qcow/q\"}]}], \"wwn\": \"" WWPN "\"}]}");
    g_autofree char *before = snapshot(f);
    g_autoptr(GError) err = NULL;
    g_assert_cmpint(lio_restore(f->lio, in, false, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*: targetcli configuration: 2 object(s) cannot be mapped; "
                 "nothing was changed (--partial restores the rest):\n"
                 "  storage_objects[0] (/backstores/user:qcow/q): LIO's user:qcow backstore "
                 "is not one vhost-scsi-ctl configures (fileio, block and ramdisk are)\n"
                 "  targets[0].tpgs[0].luns[0] (/vhost/" WWPN "/tpg1/luns/lun0): its storage "
                 "object /backstores/user:qcow/q is not mappable (above)");
    g_autofree char *after = snapshot(f);
    g_assert_cmpstr(after, ==, before);
}

static const struct {
    const char *json;
    const char *says;
} malformed[] = {
    { "{\"targets\": {}}", "top level: member \"targets\" has the wrong type" },
    { "{\"storage_objects\": [{\"plugin\": \"fileio\"}]}", "storage_objects[0]: needs a string "
      "\"name\"" },
    { "{\"storage_objects\": [7]}", "storage_objects[0]: needs a string \"plugin\"" },
    { "{\"storage_objects\": [{\"plugin\": \"fileio\", \"name\": \"a\", \"dev\": \"/a\", "
      "\"size\": \"1G\", \"write_back\": true, \"wwn\": \"w\"}]}",
      "(/backstores/fileio/a): member \"size\" has the wrong type" },
    { "{\"storage_objects\": [{\"plugin\": \"fileio\", \"name\": \"a\", \"dev\": \"/a\", "
      "\"size\": -1, \"write_back\": true, \"wwn\": \"w\"}]}", "size out of range" },
    { "{\"targets\": [{\"fabric\": \"vhost\", \"wwn\": \"" WWPN "\", \"tpgs\": [{\"tag\": 1, "
      "\"luns\": [{\"index\": 0, \"storage_object\": \"/backstores/fileio/nope\"}]}]}]}",
      "targets[0].tpgs[0].luns[0] (/vhost/" WWPN "/tpg1/luns/lun0): storage_object "
      "/backstores/fileio/nope is not among" },
    { "{\"targets\": [{\"fabric\": \"vhost\", \"wwn\": \"" WWPN "\", \"tpgs\": [{\"tag\": 300}]}]}",
      "tag out of range" },
    { "{\"targets\": [{\"fabric\": \"vhost\", \"wwn\": \"naa.zz\", \"tpgs\": []}]}",
      "invalid vhost WWPN" },
    { "{\"targets\": [{\"fabric\": \"vhost\", \"tpgs\": []}]}", "missing member \"wwn\"" },
    { "{\"targets\": [{\"fabric\": \"vhost\", \"wwn\": \"" WWPN "\", \"tpgs\": [{\"tag\": 1, "
      "\"luns\": [{\"index\": 0, \"storage_object\": \"fileio/x\"}]}]}]}",
      "is not /backstores/PLUGIN/NAME" },
    { "{\"storage_objects\": [], \"targets\": [", "configuration rejected at byte 36" },
    { "{\"storage_objects\": [], \"storage_objects\": []}", "rejected" },
};

static void test_malformed_files_are_refused(struct fx *f, gconstpointer d)
{
    g_autofree char *before = snapshot(f);
    for (size_t i = 0; i < G_N_ELEMENTS(malformed); i++) {
        g_autofree char *in = scratch(f, "bad.json");
        g_assert_true(g_file_set_contents(in, malformed[i].json, -1, NULL));
        g_autoptr(GError) err = NULL;
        int ret = lio_restore(f->lio, in, true, &err);
        bool said = err && strstr(err->message, malformed[i].says);
        if (ret != -EINVAL || !said) {
            g_error("%s: returned %d, said \"%s\", not \"%s\"", malformed[i].json, ret,
                    err ? err->message : "", malformed[i].says);
        }
        g_assert_error(err, VS_ERROR, EINVAL);
        g_unlink(in);
    }
    g_autofree char *after = snapshot(f);
    g_assert_cmpstr(after, ==, before);
}

/* Ours has "version"; a targetcli file never does. */
static void test_format_is_told_by_content(struct fx *f, gconstpointer d)
{
    static const char ours[] = "{\"version\": 1, \"targets\": []}";
    static const char theirs[] = "{\"targets\": [], \"storage_objects\": []}";
    g_assert_false(lio_targetcli_detect(ours, strlen(ours)));
    g_assert_true(lio_targetcli_detect(theirs, strlen(theirs)));
    g_assert_false(lio_targetcli_detect("[]", 2));
    g_assert_false(lio_targetcli_detect("{", 1));
}

/* --------------------------------------------------------------- rollback */

static int restore(struct fx *f, gconstpointer file, GError **err)
{
    return lio_restore(f->lio, file, false, err);
}

static void test_failing_step_takes_back_named_backstores(struct fx *f, gconstpointer d)
{
    g_autofree char *text = fixture(f, "vhost.json");
    g_autofree char *in = write_scratch(f, "in.json", text);
    static const char *const names[] = { "stopped at targets[", NULL };
    unsigned changes = fail_each_step(f, restore, in, names);
    g_assert_cmpuint(changes, >, 30);
    g_assert_true(exists(f, "target/core/rd_mcp_1/nothing"));
}

/* ---------------------------------------------------------- vhost-scsi-ctl */

static void test_ctl_refuses_unmappable_with_exit_1(struct fx *f, gconstpointer d)
{
    if (!ctl_available()) {
        return;
    }
    g_autofree char *text = fixture(f, "mixed.json");
    g_autofree char *in = write_scratch(f, "in.json", text);
    g_autofree char *before = snapshot(f);
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint(run_ctl(f, &out, &err, "restore", in, NULL), ==, 1);
    /* One error, said once: the summary, then each object on a line of its own. */
    g_autofree char *first = g_strdup_printf("vhost-scsi-ctl: %s: targetcli configuration: 9 "
                                             "object(s) cannot be mapped; nothing was changed "
                                             "(--partial restores the rest):\n  "
                                             "storage_objects[0] (/backstores/pscsi/cdrom): LIO's "
                                             "pscsi backstore", in);
    g_assert_true(g_str_has_prefix(err, first));
    g_assert_null(strstr(err + 1, "vhost-scsi-ctl:"));
    g_assert_null(strstr(err, "WARNING"));
    g_autofree char *after = snapshot(f);
    g_assert_cmpstr(after, ==, before);

    g_autofree char *o2 = NULL, *e2 = NULL;
    g_assert_cmpint(run_ctl(f, &o2, &e2, "save", in, "--format", "xml", NULL), ==, 2);
    g_assert_nonnull(strstr(e2, "--format 'xml': expected native or targetcli"));
}

/* The tool writes what the library writes (read through the real operations). */
static void test_ctl_save_format_targetcli(struct fx *f, gconstpointer d)
{
    if (!ctl_available()) {
        return;
    }
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    g_autofree char *mine = scratch(f, "lib.json"), *theirs = scratch(f, "ctl.json");
    g_assert_cmpint(lio_save(f->lio, mine, LIO_FORMAT_TARGETCLI, NULL), ==, 0);
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint(run_ctl(f, &out, &err, "save", theirs, "--format=targetcli", NULL), ==, 0);
    g_autofree char *a = slurp(mine), *b = slurp(theirs);
    g_assert_cmpstr(b, ==, a);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ADD("/lio/targetcli/restore-maps-vhost-fileio-block-ramdisk",
        test_restore_maps_vhost_fileio_block_ramdisk);
    ADD("/lio/targetcli/round-trip/vhost", test_round_trip_vhost);
    ADD("/lio/targetcli/round-trip/block-size-4096", test_round_trip_block_size_4096);
    ADD("/lio/targetcli/shared-storage-object-is-one-backstore",
        test_shared_storage_object_is_one_backstore);
    ADD("/lio/targetcli/our-luns-save-and-restore", test_our_luns_save_for_targetcli_and_restore);
    ADD("/lio/targetcli/rtslib-restores-what-we-save", test_rtslib_restores_what_we_save);
    ADD("/lio/targetcli/unmappable-is-named-and-refused", test_unmappable_is_named_and_refused);
    ADD("/lio/targetcli/partial-restores-the-rest", test_partial_restores_the_rest);
    ADD("/lio/targetcli/user-backstore-is-refused", test_user_backstore_is_refused);
    ADD("/lio/targetcli/malformed-files-are-refused", test_malformed_files_are_refused);
    ADD("/lio/targetcli/format-is-told-by-content", test_format_is_told_by_content);
    ADD("/lio/rollback/targetcli-restore-failing-takes-back-named-backstores",
        test_failing_step_takes_back_named_backstores);
    ADD("/lio/targetcli/ctl-refuses-unmappable-with-exit-1",
        test_ctl_refuses_unmappable_with_exit_1);
    ADD("/lio/targetcli/ctl-save-format-targetcli", test_ctl_save_format_targetcli);
    return g_test_run();
}
