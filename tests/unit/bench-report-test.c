/*
 * Specification of the bench's report (hw/bench/bench-report.c):
 *  - the JSON is one object on one line with the members scripts read
 *    (transport, rw, iops, lat_us.p50/p99/p99_9/max, ...), figures rounded
 *    to their decimals; backend figures only when both samples were read;
 *  - --idle reports its own members (interrupts, backend.cpu_cores), not
 *    the I/O ones;
 *  - the text gives the same figures for people, verify's count with it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "bench-report.h"

static struct bench_result io_result(void)
{
    return (struct bench_result){
        .transport = "vhost-user", .rw = "randread", .bs = 4096, .iodepth = 32, .queues = 2,
        .event_idx = true, .seconds = 2.00049, .ios = 200000, .reads = 200000,
        .iops = 99975.5123, .mb_per_s = 409.4999, .lat_us_p50 = 150.04, .lat_us_p99 = 410.0,
        .lat_us_p99_9 = 999.96, .lat_us_max = 4000.0, .interrupts_per_io = 0.12345,
        .kicks_per_io = 0.5,
    };
}

static JsonObject *parse(const char *text, JsonParser *p)
{
    g_autoptr(GError) err = NULL;

    g_assert_true(g_str_has_suffix(text, "}\n"));
    g_assert_cmpint(strchr(text, '\n') - text, ==, (long)strlen(text) - 1);     /* one line */
    g_assert_true(json_parser_load_from_data(p, text, -1, &err));
    return json_node_get_object(json_parser_get_root(p));
}

static void test_json_members(void)
{
    struct bench_result r = io_result();
    g_autofree char *text = bench_report_json(&r);
    g_autoptr(JsonParser) p = json_parser_new();
    JsonObject *o = parse(text, p);
    JsonObject *lat = json_object_get_object_member(o, "lat_us");

    g_assert_cmpstr(json_object_get_string_member(o, "transport"), ==, "vhost-user");
    g_assert_cmpstr(json_object_get_string_member(o, "rw"), ==, "randread");
    g_assert_cmpint(json_object_get_int_member(o, "ios"), ==, 200000);
    g_assert_cmpint(json_object_get_int_member(o, "queues"), ==, 2);
    g_assert_cmpfloat(json_object_get_double_member(o, "iops"), ==, 99975.5);
    g_assert_cmpfloat(json_object_get_double_member(o, "mb_per_s"), ==, 409.50);
    g_assert_cmpfloat(json_object_get_double_member(o, "seconds"), ==, 2.0);
    g_assert_cmpfloat(json_object_get_double_member(lat, "p50"), ==, 150.0);
    g_assert_cmpfloat(json_object_get_double_member(lat, "p99_9"), ==, 1000.0);
    g_assert_cmpfloat(json_object_get_double_member(o, "interrupts_per_io"), ==, 0.1235);
    g_assert_true(json_object_get_boolean_member(o, "event_idx"));
    g_assert_cmpint(json_object_get_int_member(o, "verify_errors"), ==, 0);
    /* no --pid (or it could not be read): no backend member */
    g_assert_false(json_object_has_member(o, "backend"));
}

static void test_json_backend(void)
{
    struct bench_result r = io_result();
    g_autoptr(JsonParser) p = json_parser_new();

    r.have_backend = true;
    r.pid = 4242;
    r.usr_us_per_io = 1.23456;
    r.ctxsw_per_io = 0.01;
    g_autofree char *text = bench_report_json(&r);
    JsonObject *be = json_object_get_object_member(parse(text, p), "backend");

    g_assert_cmpint(json_object_get_int_member(be, "pid"), ==, 4242);
    g_assert_cmpfloat(json_object_get_double_member(be, "usr_us_per_io"), ==, 1.235);
    g_assert_cmpfloat(json_object_get_double_member(be, "ctxsw_per_io"), ==, 0.01);
}

static void test_idle(void)
{
    struct bench_result r = { .idle = true, .transport = "vhost-kernel", .rw = "idle", .queues = 1,
                              .seconds = 1.0, .interrupts = 3, .have_backend = true, .pid = 7,
                              .cpu_cores = 0.99999, .ctxsw_per_s = 12.0 };
    g_autofree char *json = bench_report_json(&r);
    g_autofree char *text = bench_report_text(&r);
    g_autoptr(JsonParser) p = json_parser_new();
    JsonObject *o = parse(json, p);

    g_assert_cmpstr(json_object_get_string_member(o, "rw"), ==, "idle");
    g_assert_cmpint(json_object_get_int_member(o, "interrupts"), ==, 3);
    g_assert_cmpfloat(json_object_get_double_member(json_object_get_object_member(o, "backend"),
                                                    "cpu_cores"), ==, 1.0);
    g_assert_false(json_object_has_member(o, "iops"));
    g_assert_cmpstr(text, ==, "vhost-kernel idle, 1 queue(s): 1.00 s, 3 interrupts\n"
                    "  back-end pid 7: 100.00% of a core, 12.0 context switches/s\n");
}

static void test_text(void)
{
    struct bench_result r = io_result();
    g_autofree char *text = NULL;

    r.rw = "verify";
    r.verify = true;
    r.verify_blocks = 100;
    r.packed = true;
    text = bench_report_text(&r);
    g_assert_cmpstr(text, ==,
                    "vhost-user verify bs=4096 iodepth=32 queues=2 ring=packed: 200000 I/Os in 2.00 s\n"
                    "  IOPS 99976  bandwidth 409.50 MB/s\n"
                    "  latency us: p50 150.0  p99 410.0  p99.9 1000.0  max 4000.0\n"
                    "  interrupts/IO 0.123  kicks/IO 0.500\n"
                    "  verify: 100 blocks of 4096 bytes, 0 mismatches\n");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bench-report/json-members", test_json_members);
    g_test_add_func("/bench-report/json-backend", test_json_backend);
    g_test_add_func("/bench-report/idle", test_idle);
    g_test_add_func("/bench-report/text", test_text);
    return g_test_run();
}
