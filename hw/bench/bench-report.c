/*
 * The bench's report (include/bench/bench-report.h).  Figures in the
 * JSON are rounded to as many decimals as they have meaning, as the text
 * prints them, so that a script comparing runs does not compare noise.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "bench-report.h"

static void add_string(JsonBuilder *jb, const char *name, const char *v)
{
    json_builder_set_member_name(jb, name);
    json_builder_add_string_value(jb, v);
}

static void add_int(JsonBuilder *jb, const char *name, int64_t v)
{
    json_builder_set_member_name(jb, name);
    json_builder_add_int_value(jb, v);
}

static void add_bool(JsonBuilder *jb, const char *name, bool v)
{
    json_builder_set_member_name(jb, name);
    json_builder_add_boolean_value(jb, v);
}

static void add_double(JsonBuilder *jb, const char *name, double v, int decimals)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    g_ascii_formatd(buf, sizeof(buf), decimals == 1 ? "%.1f" : decimals == 2 ? "%.2f"
                                      : decimals == 3 ? "%.3f" : "%.4f", v);
    json_builder_set_member_name(jb, name);
    json_builder_add_double_value(jb, g_ascii_strtod(buf, NULL));
}

static void add_io_figures(JsonBuilder *jb, const struct bench_result *r)
{
    add_int(jb, "bs", r->bs);
    add_int(jb, "iodepth", r->iodepth);
    add_int(jb, "rate", r->rate);
    add_int(jb, "queues", r->queues);
    add_bool(jb, "packed", r->packed);
    add_bool(jb, "inflight", r->inflight);
    add_int(jb, "ios", (int64_t)r->ios);
    add_int(jb, "reads", (int64_t)r->reads);
    add_int(jb, "writes", (int64_t)r->writes);
    add_double(jb, "seconds", r->seconds, 3);
    add_double(jb, "iops", r->iops, 1);
    add_double(jb, "mb_per_s", r->mb_per_s, 2);
    json_builder_set_member_name(jb, "lat_us");
    json_builder_begin_object(jb);
    add_double(jb, "p50", r->lat_us_p50, 1);
    add_double(jb, "p99", r->lat_us_p99, 1);
    add_double(jb, "p99_9", r->lat_us_p99_9, 1);
    add_double(jb, "max", r->lat_us_max, 1);
    json_builder_end_object(jb);
    add_double(jb, "interrupts_per_io", r->interrupts_per_io, 4);
    add_double(jb, "kicks_per_io", r->kicks_per_io, 4);
    add_bool(jb, "event_idx", r->event_idx);
    add_int(jb, "verify_errors", (int64_t)r->verify_errors);
    add_int(jb, "unit_attentions", (int64_t)r->unit_attentions);
    if (r->have_backend) {
        json_builder_set_member_name(jb, "backend");
        json_builder_begin_object(jb);
        add_int(jb, "pid", r->pid);
        add_double(jb, "usr_us_per_io", r->usr_us_per_io, 3);
        add_double(jb, "sys_us_per_io", r->sys_us_per_io, 3);
        add_double(jb, "ctxsw_per_io", r->ctxsw_per_io, 4);
        json_builder_end_object(jb);
    }
}

static void add_idle_figures(JsonBuilder *jb, const struct bench_result *r)
{
    add_int(jb, "queues", r->queues);
    add_bool(jb, "packed", r->packed);
    add_double(jb, "seconds", r->seconds, 3);
    add_int(jb, "interrupts", (int64_t)r->interrupts);
    if (r->have_backend) {
        json_builder_set_member_name(jb, "backend");
        json_builder_begin_object(jb);
        add_int(jb, "pid", r->pid);
        add_double(jb, "cpu_cores", r->cpu_cores, 4);
        json_builder_end_object(jb);
    }
}

char *bench_report_json(const struct bench_result *r)
{
    g_autoptr(JsonBuilder) jb = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;

    json_builder_begin_object(jb);
    add_string(jb, "transport", r->transport);
    add_string(jb, "rw", r->rw);
    if (r->idle) {
        add_idle_figures(jb, r);
    } else {
        add_io_figures(jb, r);
    }
    json_builder_end_object(jb);
    root = json_builder_get_root(jb);
    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    return g_strconcat(text, "\n", NULL);
}

static char *idle_text(const struct bench_result *r)
{
    GString *s = g_string_new(NULL);

    g_string_append_printf(s, "%s idle, %d queue(s)%s: %.2f s, %" PRIu64 " interrupts\n",
                           r->transport, r->queues, r->packed ? " ring=packed" : "", r->seconds,
                           r->interrupts);
    if (r->have_backend) {
        g_string_append_printf(s, "  back-end pid %d: %.2f%% of a core, %.1f context switches/s\n",
                               r->pid, r->cpu_cores * 100, r->ctxsw_per_s);
    }
    return g_string_free(s, FALSE);
}

char *bench_report_text(const struct bench_result *r)
{
    GString *s;

    if (r->idle) {
        return idle_text(r);
    }
    s = g_string_new(NULL);
    g_string_append_printf(s, "%s %s bs=%u iodepth=%d queues=%d%s%s: %" PRIu64 " I/Os in %.2f s\n",
                           r->transport, r->rw, r->bs, r->iodepth, r->queues,
                           r->packed ? " ring=packed" : "", r->inflight ? " inflight" : "",
                           r->ios, r->seconds);
    g_string_append_printf(s, "  IOPS %.0f  bandwidth %.2f MB/s\n", r->iops, r->mb_per_s);
    g_string_append_printf(s, "  latency us: p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
                           r->lat_us_p50, r->lat_us_p99, r->lat_us_p99_9, r->lat_us_max);
    g_string_append_printf(s, "  interrupts/IO %.3f  kicks/IO %.3f\n", r->interrupts_per_io,
                           r->kicks_per_io);
    if (r->have_backend) {
        g_string_append_printf(s, "  back-end pid %d: usr %.2f us/IO  sys %.2f us/IO  "
                               "context switches/IO %.3f\n", r->pid, r->usr_us_per_io,
                               r->sys_us_per_io, r->ctxsw_per_io);
    }
    if (r->verify) {
        g_string_append_printf(s, "  verify: %" PRIu64 " blocks of %u bytes, %" PRIu64
                               " mismatches\n", r->verify_blocks, r->bs, r->verify_errors);
    }
    return g_string_free(s, FALSE);
}
