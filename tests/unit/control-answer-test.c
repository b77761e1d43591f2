/*
 * Specification of control answers as `vhost-scsi-ctl target` prints them
 * (hw/control/control-answer.c):
 *  - a list prints one line per element, by the element's kind (LUN,
 *    backend, connection, controller), and skips what is none of them;
 *  - a single object or string follows the command's word ("added ...");
 *    an answer without one prints the word alone;
 *  - version and stats have their own forms; stats-prometheus is the text;
 *  - --json prints the result as it came, indented.
 * Sizes are GLib's (g_format_size: a no-break space before the unit).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-answer.h"

static char *text_of(const char *method, const char *json, const char *what)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(JsonNode) n = json_from_string(json, &err);

    g_assert_no_error(err);
    return ctl_answer_text(method, n, what);
}

#define LUN_0_1 "{\"target\":0,\"lun\":1,\"backend\":\"lun0:1\",\"device\":\"ram\"," \
                "\"size\":1073741824,\"block_size\":512,\"read_only\":false}"

static void test_lists_by_kind(void)
{
    g_autofree char *luns = text_of("lun-list", "[" LUN_0_1 ", {\"odd\":1}]", "");
    g_autofree char *backends = text_of("backend-list",
        "[{\"name\":\"disk\",\"spec\":\"ram:4M\",\"device\":\"ram\",\"size\":4194304,"
        "\"block_size\":4096,\"read_only\":true,\"mapped_at\":[{\"target\":0,\"lun\":2}],"
        "\"qos\":{\"iops\":100,\"bandwidth\":0}},"
        "{\"name\":\"spare\",\"spec\":\"null:1M\",\"device\":\"null\",\"size\":1048576,"
        "\"block_size\":512,\"read_only\":false,\"mapped_at\":[]}]", "");
    g_autofree char *conns = text_of("connection-list",
        "[{\"name\":\"conn1\",\"pid\":42,\"uid\":0,\"state\":\"running\",\"queues\":"
        "[{\"index\":0,\"running\":true,\"in_flight\":3},{\"index\":1,\"running\":false}]}]", "");
    g_autofree char *ctrls = text_of("controller-list",
        "[{\"name\":\"default\",\"queues\":4,\"luns\":1,\"connections\":0}]", "");

    g_assert_cmpstr(luns, ==, "0:1     lun0:1       1.0\xc2\xa0" "GiB     512-byte blocks  rw  ram\n");
    g_assert_cmpstr(backends, ==,
                    "disk         4.0\xc2\xa0" "MiB    4096-byte blocks  ro  ram  mapped at: 0:2"
                    "  limits: 100 IOPS, 0 B/s (0: none)\n"
                    "spare        1.0\xc2\xa0" "MiB     512-byte blocks  rw  null  mapped at: nowhere\n");
    g_assert_cmpstr(conns, ==, "conn1    pid 42      uid 0      running    in flight: q0=3\n");
    g_assert_cmpstr(ctrls, ==, "default      (inherited socket)                        4 queues"
                    "   1 LUNs   0 connections\n");
}

static void test_single_answers_follow_the_word(void)
{
    g_autofree char *added = text_of("lun-add", LUN_0_1, "added");
    g_autofree char *saved = text_of("config-save", "\"/etc/vs.json\"", "saved");
    g_autofree char *removed = text_of("lun-remove", "{}", "removed");

    g_assert_cmpstr(added, ==, "added 0:1     lun0:1       1.0\xc2\xa0" "GiB     512-byte blocks  rw  ram\n");
    g_assert_cmpstr(saved, ==, "saved /etc/vs.json\n");
    g_assert_cmpstr(removed, ==, "removed\n");
}

static void test_version_and_stats(void)
{
    g_autofree char *version = text_of("version",
        "{\"program\":\"vhost-scsi-target\",\"version\":\"1.2\",\"protocol\":1}", "");
    g_autofree char *stats = text_of("stats",
        "{\"backends\":[{\"name\":\"disk\",\"in_flight\":2,"
        "\"total\":{\"read\":{\"ops\":10,\"errors\":1}},"
        "\"interval\":{\"seconds\":1.5,\"read\":{\"ops_per_s\":1000,\"bytes_per_s\":2097152,"
        "\"latency_us\":{\"p50\":10,\"p99\":20,\"p99.9\":30}}}}],\"controllers\":[]}", "");
    g_autofree char *prom = text_of("stats-prometheus", "{\"text\":\"a 1\\n\"}", "");
    g_autofree char *methods = text_of("method-list",
        "{\"methods\":[{\"name\":\"lun-add\"},{\"name\":\"stats\"}]}", "");

    g_assert_cmpstr(version, ==, "vhost-scsi-target 1.2 (control protocol 1)\n");
    g_assert_cmpstr(stats, ==, "backend disk: 2 in flight, over the last 1.5 s:\n"
                    "  read        1000 ops/s        2.0 MiB/s  latency us p50 10.0     p99 20.0"
                    "     p99.9 30.0      total 10 ops, 1 errors\n");
    g_assert_cmpstr(prom, ==, "a 1\n");
    g_assert_cmpstr(methods, ==, "lun-add\nstats\n");
}

static void test_json_as_it_came(void)
{
    g_autoptr(JsonNode) n = json_from_string("{\"a\":[1]}", NULL);
    g_autofree char *text = ctl_answer_json(n);

    g_assert_cmpstr(text, ==, "{\n  \"a\" : [\n    1\n  ]\n}\n");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/control-answer/lists-by-kind", test_lists_by_kind);
    g_test_add_func("/control-answer/single-answers-follow-the-word",
                    test_single_answers_follow_the_word);
    g_test_add_func("/control-answer/version-and-stats", test_version_and_stats);
    g_test_add_func("/control-answer/json-as-it-came", test_json_as_it_came);
    return g_test_run();
}
