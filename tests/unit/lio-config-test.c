/*
 * Specification of the saved form of a LIO configuration
 * (hw/lio/lio-config.c), on the fake configfs of lio-fixture.h.  Save,
 * delete and restore round-trip, every LUN kind and option included, and
 * a file of the previous format restores as it did.  The reader takes
 * strict RFC 8259 and the schema only: what json-glib alone would take is
 * refused, a NUL byte or trailing data at its byte, deep nesting without
 * recursing; it is linear in its input (checked as the ratio of the times
 * for two sizes, never against an absolute time) and checks the whole file
 * before anything is changed, so a path is never read as options.  The one
 * writer, for list --json and save alike, refuses a string that is not
 * UTF-8 and a size the reader could not take back, naming the field, and
 * vhost-scsi-ctl then exits 1 without writing.  A restore failing at any
 * step names the element it stopped at and takes back what it had made.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <glib.h>

#include "lio-configfs.h"
#include "lio-fs-fake.h"
#include "lio-fixture.h"

/* ------------------------------------------------------- save and restore */

/* Deletes WWPN (the only target), restores file and saves again: the same as saved. */
static void delete_restore_and_compare(struct fx *f, const char *file, const char *saved)
{
    g_assert_cmpint(lio_target_delete(f->lio, WWPN, false, NULL), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/vhost"), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 0);

    g_assert_cmpint(lio_restore(f->lio, file, false, NULL), ==, 0);
    g_autofree char *resaved = save_text(f, "again.json", LIO_FORMAT_NATIVE);
    g_assert_cmpstr(resaved, ==, saved);
}

static void test_save_delete_restore_round_trip(struct fx *f, gconstpointer d)
{
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 3, NULL, NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    add_file_lun(f, WWPN, 7, "b.img", "4M");
    g_autofree char *file = scratch(f, "saved.json");
    g_assert_cmpint(lio_save(f->lio, file, LIO_FORMAT_NATIVE, NULL), ==, 0);
    g_autofree char *saved = slurp(file);

    delete_restore_and_compare(f, file, saved);
    g_autofree char *again = scratch(f, "again.json");

    /* Restoring on top of the same state changes nothing. */
    g_assert_cmpint(lio_restore(f->lio, file, false, NULL), ==, 0);
    g_assert_cmpint(lio_save(f->lio, again, LIO_FORMAT_NATIVE, NULL), ==, 0);
    g_autofree char *third = slurp(again);
    g_assert_cmpstr(third, ==, saved);
}

/* Every kind and option survives save, delete and restore. */
static void test_save_restore_keeps_kinds_and_options(struct fx *f, gconstpointer d)
{
    g_autofree char *dev = fake_blockdev(f, "sdz");
    g_autofree char *img = scratch(f, "f.img");
    g_autofree char *direct = g_strdup_printf("file:%s,direct,block-size=4096,size=1M", img);
    g_autofree char *ro = g_strdup_printf("file:%s,ro", dev);
    const char *specs[] = { direct, ro, "ram:4M", "null:1G,block-size=4096" };
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
    for (unsigned i = 0; i < G_N_ELEMENTS(specs); i++) {
        g_assert_cmpint(lio_lun_add(f->lio, WWPN, 1, i, specs[i], NULL), ==, 0);
    }
    g_autofree char *file = scratch(f, "saved.json");
    g_assert_cmpint(lio_save(f->lio, file, LIO_FORMAT_NATIVE, NULL), ==, 0);
    g_autofree char *saved = slurp(file);
    g_autofree char *json = g_strdup_printf(
        "\"lun\" : 0,\n          \"type\" : \"file\",\n          \"path\" : \"%s\",\n"
        "          \"size\" : 1048576,\n          \"backstore\" : "
        "\"fileio_0/vs-naa_5001405aaaaaaaaa-t1-l0\",\n          \"direct\" : true,\n"
        "          \"block_size\" : 4096\n", img);
    g_assert_nonnull(strstr(saved, json));
    g_assert_nonnull(strstr(saved, "\"type\" : \"block\""));
    g_assert_nonnull(strstr(saved, "\"ro\" : true"));
    g_assert_nonnull(strstr(saved, "\"type\" : \"ram\",\n          \"path\" : \"\",\n"
                                   "          \"size\" : 4194304,"));
    g_assert_nonnull(strstr(saved, "\"type\" : \"null\""));
    delete_restore_and_compare(f, file, saved);
}

/*
 * A file saved by the previous version (no options, "file" and "block"
 * only) restores as it did, a file LUN now through the page cache.
 */
static void test_restore_reads_the_previous_format(struct fx *f, gconstpointer d)
{
    g_autofree char *dev = fake_blockdev(f, "sdz");
    g_autofree char *img = scratch(f, "old.img");
    g_autofree char *file = scratch(f, "old.json");
    g_autofree char *json = g_strdup_printf(
        "{\n  \"version\" : 1,\n  \"targets\" : [\n    {\n      \"wwpn\" : \"" WWPN "\",\n"
        "      \"tpgt\" : 1,\n      \"nexus\" : \"naa.5001405ccccccccc\",\n      \"luns\" : [\n"
        "        {\n          \"lun\" : 0,\n          \"type\" : \"file\",\n"
        "          \"path\" : \"%s\",\n          \"size\" : 1048576,\n"
        "          \"backstore\" : \"fileio_0/vs-naa_5001405aaaaaaaaa-t1-l0\"\n        },\n"
        "        {\n          \"lun\" : 1,\n          \"type\" : \"block\",\n"
        "          \"path\" : \"%s\",\n          \"size\" : 67108864,\n"
        "          \"backstore\" : \"iblock_0/vs-naa_5001405aaaaaaaaa-t1-l1\"\n        }\n"
        "      ]\n    }\n  ]\n}\n", img, dev);
    g_assert_true(g_file_set_contents(file, json, -1, NULL));
    g_assert_cmpint(lio_restore(f->lio, file, false, NULL), ==, 0);
    g_autofree char *c0 = attr(f, "target/core/fileio_0/vs-naa_5001405aaaaaaaaa-t1-l0/control");
    g_autofree char *c1 = attr(f, "target/core/iblock_0/vs-naa_5001405aaaaaaaaa-t1-l1/control");
    g_autofree char *w0 = g_strdup_printf("fd_dev_name=%s,fd_dev_size=1048576,fd_buffered_io=1",
                                          img);
    g_autofree char *w1 = g_strdup_printf("udev_path=%s", dev);
    g_assert_cmpstr(c0, ==, w0);
    g_assert_cmpstr(c1, ==, w1);
    /* Saved again, it is the same file. */
    g_autofree char *resaved = save_text(f, "again.json", LIO_FORMAT_NATIVE);
    g_assert_cmpstr(resaved, ==, json);
}

static void test_restore_missing_file_fails(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *file = scratch(f, "nope.json");
    g_assert_cmpint(lio_restore(f->lio, file, false, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "reading*nope.json failed*");
}

/* ------------------------------------------------------------- the reader */

static void test_config_parser_is_strict(void)
{
    g_autoptr(GError) err = NULL;
    static const char *const bad[] = {
        "",
        "[]",
        "{\"version\": 1}",
        "{\"version\": 2, \"targets\": []}",
        "{\"version\": 1, \"targets\": [], \"extra\": 0}",
        "{\"version\": 1, \"targets\": []} x",
        "{\"version\": 1, \"version\": 1, \"targets\": []}",
        "{\"version\": 1.0, \"targets\": []}",
        "{\"version\": 01, \"targets\": []}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.1\", \"tpgt\": 1, \"nexus\": \"\", "
        "\"luns\": []}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 300, "
        "\"nexus\": \"\", \"luns\": []}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": \"1\", "
        "\"nexus\": \"\", \"luns\": []}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [{\"lun\": 99999, \"type\": \"file\", \"path\": \"/x\", "
        "\"size\": 512, \"backstore\": \"\"}]}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [{\"lun\": 0, \"type\": \"rd\", \"path\": \"/x\", "
        "\"size\": 512, \"backstore\": \"\"}]}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405\\u0000aaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": []}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [}]}",
        "{\"version\": 1, \"targets\": \"\\q\"}",
        "{\"version\": 1, \"targets\": [[[[[[[[[[[[]]]]]]]]]]]]}",
        /* What json-glib 1.6 alone would take (or misread), each refused. */
        "{\"version\": 1, \"targets\": []}{}",
        "{\"version\": 1, \"targets\": []} /* comment */",
        "{\"version\": 1, /* comment */ \"targets\": []}",
        "{\"version\": 1, 'targets': []}",
        "var config = {\"version\": 1, \"targets\": []};",
        "{\"version\": 0x1, \"targets\": []}",
        "{\"version\": -01, \"targets\": []}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405\\qaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": []}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\\u0000\", \"luns\": []}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [{\"lun\": 0, \"type\": \"file\", \"path\": \"/x\\ud800\", "
        "\"size\": 512, \"backstore\": \"\"}]}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [{\"lun\": 0, \"type\": \"file\", \"path\": \"/x\ty\", "
        "\"size\": 512, \"backstore\": \"\"}]}]}",
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"naa.5001405aaaaaaaaa\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [{\"lun\": 0, \"type\": \"file\", \"path\": \"/x\", "
        "\"size\": 512, \"size\": 1024, \"backstore\": \"\"}]}]}",
        "\xef\xbb\xbf{\"version\": 1, \"targets\": []}",
        "{\"version\": 1, \"targets\": [truefalse]}",
        "{\"version\": 1, \"targets\": [}",
        "{\"version\": 1, \"targets\": [",
        "{\"version\": 1, \"targets\": [], }",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        GPtrArray *out = NULL;
        if (lio_config_parse(bad[i], strlen(bad[i]), &out, &err) != -EINVAL) {
            g_error("accepted: %s", bad[i]);
        }
        assert_error(&err, EINVAL, "configuration rejected*");
        g_assert_null(out);
    }
    GPtrArray *out = NULL;
    g_assert_cmpint(lio_config_parse(bad[12], strlen(bad[12]), &out, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "configuration rejected: targets[0].luns[0]: lun out of range");
    g_assert_cmpint(lio_config_parse(bad[5], strlen(bad[5]), &out, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "configuration rejected at byte 30: trailing data*");
    const char *good = " {\"targets\": [{\"luns\": [], \"nexus\": \"\", \"tpgt\": 0, "
                       "\"wwpn\": \"iqn.2024-12.com.ex\\u0061mple\"}], \"version\": 1}\n";
    g_assert_cmpint(lio_config_parse(good, strlen(good), &out, NULL), ==, 0);
    g_assert_cmpuint(out->len, ==, 1);
    g_assert_cmpstr(((struct lio_target *)out->pdata[0])->wwpn, ==, "iqn.2024-12.com.example");
    g_ptr_array_unref(out);
}

/* A configuration with one file LUN at path of size bytes, written to name. */
static char *write_one_lun_config(struct fx *f, const char *name, const char *path,
                                  const char *size)
{
    g_autofree char *file = scratch(f, name);
    g_autofree char *json = g_strdup_printf(
        "{\"version\": 1, \"targets\": [{\"wwpn\": \"" WWPN "\", \"tpgt\": 1, "
        "\"nexus\": \"\", \"luns\": [{\"lun\": 0, \"type\": \"file\", \"path\": \"%s\", "
        "\"size\": %s, \"backstore\": \"\"}]}]}\n", path, size);
    g_assert_true(g_file_set_contents(file, json, -1, NULL));
    return g_steal_pointer(&file);
}

static void assert_smaller_than_1t(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size >= (1LL << 40)) {
        g_error("%s was extended to %jd bytes", path, (intmax_t)st.st_size);
    }
}

/*
 * Restore used to rebuild a "file:PATH,size=N" spec from
 * the file, so this path became /…/img with a 1 TiB size.
 */
static void test_restore_comma_in_path_is_refused_not_read_as_size(struct fx *f,
                                                                    gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *img = scratch(f, "img");
    g_autofree char *path = g_strdup_printf("%s,size=1T", img);
    g_autofree char *file = write_one_lun_config(f, "inject.json", path, "0");

    g_assert_cmpint(lio_restore(f->lio, file, false, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*configuration rejected: targets[0].luns[0]: path must be absolute "
                 "without ','*");
    assert_smaller_than_1t(img);
    assert_smaller_than_1t(path);
    g_assert_false(g_file_test(img, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
    /* The whole file is checked first: not even the target was created. */
    g_assert_cmpuint(count_entries(f, "target/vhost"), ==, 0);
    g_assert_cmpuint(count_entries(f, "target/core"), ==, 0);
}

/*
 * An earlier parser read the file as a C string, so
 * anything after a NUL byte was never looked at and restore succeeded.
 */
static void test_restore_refuses_trailing_bytes_after_nul(struct fx *f, gconstpointer d)
{
    static const char doc[] = "{\"version\": 1, \"targets\": []}";
    static const struct { const char *tail; size_t len; const char *msg; } cases[] = {
        { "\0{\"garbage\": 1}", 15, "*nul.json: configuration rejected at byte 29: NUL byte*" },
        { "\0", 1, "*nul.json: configuration rejected at byte 29: NUL byte*" },
        { "\n\0\n", 3, "*nul.json: configuration rejected at byte 30: NUL byte*" },
        { " {}", 3, "*nul.json: configuration rejected at byte 30: trailing data*" },
        { "\n]", 2, "*nul.json: configuration rejected at byte 30: trailing data*" },
    };
    g_autofree char *file = scratch(f, "nul.json");
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *bytes = g_malloc(sizeof(doc) - 1 + cases[i].len);
        memcpy(bytes, doc, sizeof(doc) - 1);
        memcpy(bytes + sizeof(doc) - 1, cases[i].tail, cases[i].len);
        g_assert_true(g_file_set_contents(file, bytes, sizeof(doc) - 1 + cases[i].len, NULL));
        g_autoptr(GError) err = NULL;
        if (lio_restore(f->lio, file, false, &err) != -EINVAL) {
            g_error("case %zu: restore accepted a document with trailing bytes", i);
        }
        assert_error(&err, EINVAL, cases[i].msg);
    }
    /* The same document without the tail is fine. */
    g_assert_true(g_file_set_contents(file, doc, -1, NULL));
    g_assert_cmpint(lio_restore(f->lio, file, false, NULL), ==, 0);
}

/* json-glib 1.6 recurses per level: 200,000 '[' overflowed the stack. */
static void test_config_deep_nesting_is_refused_without_crashing(void)
{
    g_autoptr(GError) err = NULL;
    const unsigned depth = 200000;
    GString *s = g_string_new("{\"version\": 1, \"targets\": ");
    for (unsigned i = 0; i < depth; i++) {
        g_string_append_c(s, '[');
    }
    for (unsigned i = 0; i < depth; i++) {
        g_string_append_c(s, ']');
    }
    g_string_append_c(s, '}');
    GPtrArray *out = NULL;
    g_assert_cmpint(lio_config_parse(s->str, s->len, &out, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "configuration rejected at byte 41: nested deeper than 16");
    g_assert_null(out);
    g_string_free(s, TRUE);
}

/* This thread's CPU time in us: what the work cost, not how long others ran. */
static gint64 thread_cpu_us(void)
{
    struct timespec ts;

    g_assert_cmpint(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts), ==, 0);
    return (gint64)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * Fastest of three runs of restore on file, in CPU time (the restore runs
 * on this thread): on a loaded machine wall time would measure the load.
 */
static gint64 restore_time(struct fx *f, const char *file)
{
    gint64 best = G_MAXINT64;
    for (int i = 0; i < 3; i++) {
        g_autoptr(GError) err = NULL;
        gint64 t0 = thread_cpu_us();
        int ret = lio_restore(f->lio, file, false, &err);
        gint64 t = thread_cpu_us() - t0;
        g_assert_cmpint(ret, ==, -EINVAL);
        assert_error(&err, EINVAL, "*configuration rejected*");
        best = MIN(best, t);
    }
    return MAX(best, 1);
}

/*
 * One object of n members: n/2 distinct names, then the last one repeated.
 * The old parser checked each name against all before it (quadratic in the
 * distinct names); json-glib 1.6 walks the member list for each repeat.
 */
static char *write_big_object(struct fx *f, const char *name, unsigned n)
{
    GString *s = g_string_new("{\"version\": 1, \"targets\": []");
    for (unsigned i = 0; i < n; i++) {
        g_string_append_printf(s, ", \"m%u\": 0", MIN(i, n / 2 - 1));
    }
    g_string_append(s, "}\n");
    g_autofree char *file = scratch(f, name);
    g_assert_true(g_file_set_contents(file, s->str, s->len, NULL));
    g_string_free(s, TRUE);
    return g_steal_pointer(&file);
}

/* 200,000 members once took over 20 s under ASan: parsing must stay linear. */
static void test_restore_refuses_big_object_in_linear_time(struct fx *f, gconstpointer d)
{
    g_autofree char *small = write_big_object(f, "small.json", 20000);
    g_autofree char *large = write_big_object(f, "large.json", 200000);
    gint64 ts = restore_time(f, small);
    gint64 tl = restore_time(f, large);
    g_test_message("20,000 members: %" G_GINT64_FORMAT " us, 200,000: %" G_GINT64_FORMAT
                   " us", ts, tl);
    /* Ten times the input: linear is ~10, quadratic ~100. */
    g_assert_cmpfloat((double)tl / ts, <, 30);
    g_assert_cmpuint(count_entries(f, "target/vhost"), ==, 0);
}

/* A valid configuration of n LUNs (5 members each), 1000 LUNs per TPG. */
static GString *big_config(unsigned n)
{
    GString *s = g_string_new("{\"version\": 1, \"targets\": [");
    for (unsigned t = 0; t * 1000 < n; t++) {
        g_string_append_printf(s, "%s{\"wwpn\": \"" WWPN "\", \"tpgt\": %u, \"nexus\": \"\", "
                               "\"luns\": [", t ? ", " : "", t);
        for (unsigned l = 0; l < 1000 && t * 1000 + l < n; l++) {
            g_string_append_printf(s, "%s{\"lun\": %u, \"type\": \"file\", \"path\": "
                                   "\"/srv/disk-%u-%u.img\", \"size\": 1048576, "
                                   "\"backstore\": \"\"}", l ? ", " : "", l, t, l);
        }
        g_string_append(s, "]}");
    }
    g_string_append(s, "]}\n");
    return s;
}

/* Fastest of three parses of doc, in this thread's CPU time, as restore_time. */
static gint64 parse_time(const GString *doc, unsigned luns)
{
    gint64 best = G_MAXINT64;
    for (int i = 0; i < 3; i++) {
        GPtrArray *out = NULL;
        gint64 t0 = thread_cpu_us();
        int ret = lio_config_parse(doc->str, doc->len, &out, NULL);
        gint64 t = thread_cpu_us() - t0;
        g_assert_cmpint(ret, ==, 0);
        g_assert_cmpuint(out->len, ==, (luns + 999) / 1000);
        g_ptr_array_unref(out);
        best = MIN(best, t);
    }
    return MAX(best, 1);
}

/* The whole path (byte check, json-glib, repeat check, schema) is linear. */
static void test_config_large_valid_document_parses_in_linear_time(void)
{
    GString *small = big_config(4000), *large = big_config(40000);
    gint64 ts = parse_time(small, 4000), tl = parse_time(large, 40000);
    g_test_message("20,000 members: %" G_GINT64_FORMAT " us, 200,000: %" G_GINT64_FORMAT
                   " us", ts, tl);
    g_assert_cmpfloat((double)tl / ts, <, 30);
    g_string_free(small, TRUE);
    g_string_free(large, TRUE);
}

/* ------------------------------------------------------------- the writer */

/* A target with one file LUN whose udev_path and nexus are then overwritten. */
static void setup_lun_with_attrs(struct fx *f, const char *udev_path, const char *nexus)
{
    if (!exists(f, "target/vhost/" WWPN)) {
        g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, NULL, NULL), ==, 0);
        add_file_lun(f, WWPN, 0, "disk0.img", "1M");
    }
    g_autofree char *up = cf(f, "target/core/fileio_0/" BS0 "/udev_path");
    g_assert_true(g_file_set_contents(up, udev_path, -1, NULL));
    g_autofree char *np = cf(f, "target/vhost/" WWPN "/tpgt_1/nexus");
    g_assert_true(g_file_set_contents(np, nexus, -1, NULL));
}

/*
 * list --json used to copy a udev_path that is not UTF-8 into
 * its output while save refused it, and neither looked at the nexus.
 */
static void test_json_writer_refuses_non_utf8_naming_the_field(struct fx *f, gconstpointer d)
{
    g_autoptr(GError) err = NULL;
    static const struct { const char *path, *nexus, *msg; } cases[] = {
        { "/srv/\xff.img", "naa.5001405ccccccccc", "*targets[0].luns[0].path is not UTF-8*" },
        { "/srv/ok.img", "naa.5001405\xfe", "*targets[0].nexus is not UTF-8*" },
    };
    g_autofree char *file = scratch(f, "saved.json");
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        setup_lun_with_attrs(f, cases[i].path, cases[i].nexus);
        GPtrArray *targets;
        g_assert_cmpint(lio_list(f->lio, &targets), ==, 0);
        char *json = NULL;
        g_autoptr(GError) err = NULL;
        g_assert_cmpint(lio_list_to_json(targets, &json, &err), ==, -EINVAL);
        assert_error(&err, EINVAL, cases[i].msg);
        g_assert_null(json);
        g_ptr_array_unref(targets);

        g_assert_cmpint(lio_save(f->lio, file, LIO_FORMAT_NATIVE, &err), ==, -EINVAL);
        assert_error(&err, EINVAL, cases[i].msg);
        g_assert_false(g_file_test(file, G_FILE_TEST_EXISTS));
    }
    /* A size the reader could not take back is refused the same way. */
    setup_lun_with_attrs(f, "/srv/ok.img", "naa.5001405ccccccccc");
    g_autofree char *info = cf(f, "target/core/fileio_0/" BS0 "/info");
    g_assert_true(g_file_set_contents(info, "File: /srv/ok.img  Size: 18446744073709551615",
                                      -1, NULL));
    g_assert_cmpint(lio_save(f->lio, file, LIO_FORMAT_NATIVE, &err), ==, -EINVAL);
    assert_error(&err, EINVAL, "*targets[0].luns[0].size 18446744073709551615 is out of range");
    g_assert_false(g_file_test(file, G_FILE_TEST_EXISTS));
}

/* The same as users met it: exit 0 with invalid JSON on stdout. */
static void test_ctl_list_json_and_save_refuse_non_utf8(struct fx *f, gconstpointer d)
{
    if (!ctl_available()) {
        return;
    }
    g_autofree char *file = scratch(f, "saved.json");
    static const struct { const char *path, *nexus, *field; } cases[] = {
        { "/srv/\xff.img", "naa.5001405ccccccccc", "targets[0].luns[0].path is not UTF-8" },
        { "/srv/ok.img", "naa.5001405\xfe", "targets[0].nexus is not UTF-8" },
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        setup_lun_with_attrs(f, cases[i].path, cases[i].nexus);
        g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
        g_assert_cmpint(run_ctl(f, &out, &err, "list", "--json", NULL), ==, 1);
        g_assert_cmpstr(out, ==, "");
        g_assert_nonnull(strstr(err, cases[i].field));
        g_assert_cmpint(run_ctl(f, &out2, &err2, "save", file, NULL), ==, 1);
        g_assert_nonnull(strstr(err2, cases[i].field));
        g_assert_false(g_file_test(file, G_FILE_TEST_EXISTS));
    }
    /* With both made UTF-8 again, both work and agree. */
    setup_lun_with_attrs(f, "/srv/ok.img", "naa.5001405ccccccccc");
    g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
    g_assert_cmpint(run_ctl(f, &out, &err, "list", "--json", NULL), ==, 0);
    g_assert_cmpint(run_ctl(f, &out2, &err2, "save", file, NULL), ==, 0);
    g_autofree char *saved = slurp(file);
    g_assert_cmpstr(saved, ==, out);
}

/* --------------------------------------------------------------- rollback */

/* Two targets, three LUNs; the second target's TPG 1 already exists when asked. */
static char *write_two_target_config(struct fx *f)
{
    g_autofree char *a = scratch(f, "a.img"), *b = scratch(f, "b.img");
    g_autofree char *file = scratch(f, "two.json");
    g_autofree char *json = g_strdup_printf(
        "{\"version\": 1, \"targets\": ["
        "{\"wwpn\": \"" WWPN "\", \"tpgt\": 1, \"nexus\": \"\", \"luns\": ["
        "{\"lun\": 0, \"type\": \"file\", \"path\": \"%s\", \"size\": 1048576, "
        "\"backstore\": \"\"}]}, "
        "{\"wwpn\": \"" WWPN2 "\", \"tpgt\": 1, \"nexus\": \"\", \"luns\": ["
        "{\"lun\": 0, \"type\": \"ram\", \"path\": \"\", \"size\": 1048576, \"backstore\": \"\"}, "
        "{\"lun\": 1, \"type\": \"file\", \"path\": \"%s\", \"size\": 1048576, "
        "\"backstore\": \"\", \"direct\": true}]}]}\n", a, b);
    g_assert_true(g_file_set_contents(file, json, -1, NULL));
    return g_steal_pointer(&file);
}

static int restore(struct fx *f, gconstpointer file, GError **err)
{
    return lio_restore(f->lio, file, false, err);
}

/*
 * A restore that fails says which object of the file it stopped at, and
 * takes back everything it had made: no half-made target is left, and
 * what was there before stays.
 */
static void test_restore_failing_names_the_object_and_undoes_it(struct fx *f, gconstpointer d)
{
    g_autofree char *file = write_two_target_config(f);
    g_autofree char *b = scratch(f, "b.img");
    g_autofree char *before = snapshot(f);
    g_autoptr(GError) err = NULL;

    lio_fake_fail_path(f->fake, "*/vs-naa_5001405bbbbbbbbb-t1-l1/enable", EIO);
    g_assert_cmpint(lio_restore(f->lio, file, false, &err), ==, -EIO);
    /* The step that failed, with the attribute and its path, inside the object. */
    g_autofree char *want = g_strdup_printf("restoring %s stopped at targets[1].luns[1] "
                                            "(" WWPN2 " tpgt 1 LUN 1, file %s, backstore core/-): "
                                            "backstore vs-naa_5001405bbbbbbbbb-t1-l1: writing "
                                            "enable='1' to %s/target/core/fileio_?/"
                                            "vs-naa_5001405bbbbbbbbb-t1-l1/enable failed: "
                                            "Input/output error; what the restore had made is "
                                            "removed again", file, b, f->root);
    assert_error(&err, EIO, want);
    g_autofree char *after = snapshot(f);
    g_assert_cmpstr(after, ==, before);
    lio_fake_fail_path(f->fake, NULL, 0);

    /* With the first target there already, it is kept as it was. */
    g_assert_cmpint(lio_target_create(f->lio, WWPN, 1, "naa.5001405ccccccccc", NULL), ==, 0);
    add_file_lun(f, WWPN, 0, "a.img", "1M");
    add_file_lun(f, WWPN, 7, "c.img", "1M");
    g_assert_cmpint(lio_target_create(f->lio, WWPN2, 2, NULL, NULL), ==, 0);
    static const char *const names[] = { "stopped at targets[", NULL };
    unsigned changes = fail_each_step(f, restore, file, names);
    /*
     * WWPN2's tpgt_1 and nexus; the RAM LUN (HBA, backstore, control,
     * enable, LUN, link); the file LUN (create, size, three tries at an HBA
     * since fileio_0 and fileio_1 are taken, backstore, control, udev_path,
     * enable, LUN, link).
     */
    g_assert_cmpuint(changes, ==, 2 + 6 + 11);
    g_assert_true(exists(f, "target/vhost/" WWPN2 "/tpgt_1/lun/lun_1"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    ADD("/lio/save-restore", test_save_delete_restore_round_trip);
    ADD("/lio/restore/missing-file", test_restore_missing_file_fails);
    ADD("/lio/restore/comma-in-path-is-refused-not-read-as-size",
        test_restore_comma_in_path_is_refused_not_read_as_size);
    ADD("/lio/json/writer-refuses-non-utf8-naming-the-field",
        test_json_writer_refuses_non_utf8_naming_the_field);
    ADD("/lio/ctl/list-json-and-save-refuse-non-utf8-with-exit-1",
        test_ctl_list_json_and_save_refuse_non_utf8);
    ADD("/lio/restore/refuses-trailing-bytes-after-nul",
        test_restore_refuses_trailing_bytes_after_nul);
    ADD("/lio/restore/refuses-200000-member-object-in-linear-time",
        test_restore_refuses_big_object_in_linear_time);
    g_test_add_func("/lio/config/strict-parser", test_config_parser_is_strict);
    g_test_add_func("/lio/config/deep-nesting-is-refused-without-crashing",
                    test_config_deep_nesting_is_refused_without_crashing);
    g_test_add_func("/lio/config/large-valid-document-parses-in-linear-time",
                    test_config_large_valid_document_parses_in_linear_time);
    ADD("/lio/save-restore/keeps-kinds-and-options", test_save_restore_keeps_kinds_and_options);
    ADD("/lio/restore/reads-the-previous-format", test_restore_reads_the_previous_format);
    ADD("/lio/rollback/restore-failing-names-the-object-and-undoes-it",
        test_restore_failing_names_the_object_and_undoes_it);
    return g_test_run();
}
