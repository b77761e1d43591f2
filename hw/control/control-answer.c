/*
 * Control answers for people (include/control/control-answer.h).  An
 * element of a list is printed by its kind, which its members tell (a
 * LUN has target, lun and a device; a backend a spec and where it is
 * mapped; ...); each is checked for its members before it is read, since
 * the answer comes from another process.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdbool.h>
#include <string.h>

#include <glib.h>

#include "control-answer.h"
#include "json-member.h"

static void print_device(GString *s, JsonObject *o)
{
    g_autofree char *size = g_format_size_full((guint64)json_object_get_int_member(o, "size"),
                                               G_FORMAT_SIZE_IEC_UNITS);

    g_string_append_printf(s, "%-10s %5" G_GINT64_FORMAT "-byte blocks  %s  %s", size,
                           json_object_get_int_member(o, "block_size"),
                           json_object_get_boolean_member(o, "read_only") ? "ro" : "rw",
                           json_object_get_string_member(o, "device"));
}

static void print_lun(GString *s, JsonObject *o)
{
    g_string_append_printf(s, "%" G_GINT64_FORMAT ":%-5" G_GINT64_FORMAT " %-12s ",
                           json_object_get_int_member(o, "target"),
                           json_object_get_int_member(o, "lun"),
                           json_object_get_string_member(o, "backend"));
    print_device(s, o);
    g_string_append_c(s, '\n');
}

static void print_backend(GString *s, JsonObject *o)
{
    JsonArray *at = json_array_member_or_null(o, "mapped_at");
    JsonObject *q = json_object_member_or_null(o, "qos");
    gint64 iops = q ? json_object_get_int_member_with_default(q, "iops", 0) : 0;
    gint64 bw = q ? json_object_get_int_member_with_default(q, "bandwidth", 0) : 0;

    g_string_append_printf(s, "%-12s ", json_object_get_string_member(o, "name"));
    print_device(s, o);
    g_string_append(s, "  mapped at:");
    for (guint i = 0; at && i < json_array_get_length(at); i++) {
        JsonObject *m = json_array_get_object_element(at, i);

        g_string_append_printf(s, " %" G_GINT64_FORMAT ":%" G_GINT64_FORMAT,
                               json_object_get_int_member_with_default(m, "target", 0),
                               json_object_get_int_member_with_default(m, "lun", 0));
    }
    g_string_append(s, at && json_array_get_length(at) ? "" : " nowhere");
    if (iops || bw) {
        g_string_append_printf(s, "  limits: %" G_GINT64_FORMAT " IOPS, %" G_GINT64_FORMAT
                               " B/s (0: none)", iops, bw);
    }
    g_string_append_c(s, '\n');
}

static void print_connection(GString *s, JsonObject *o)
{
    JsonArray *qs = json_array_member_or_null(o, "queues");

    g_string_append_printf(s, "%-8s pid %-7" G_GINT64_FORMAT " uid %-6" G_GINT64_FORMAT
                           " %-10s in flight:", json_object_get_string_member(o, "name"),
                           json_object_get_int_member(o, "pid"), json_object_get_int_member(o, "uid"),
                           json_object_get_string_member(o, "state"));
    for (guint i = 0; qs && i < json_array_get_length(qs); i++) {
        JsonObject *q = json_array_get_object_element(qs, i);

        if (q && json_object_get_boolean_member_with_default(q, "running", FALSE)) {
            g_string_append_printf(s, " q%" G_GINT64_FORMAT "=%" G_GINT64_FORMAT,
                                   json_object_get_int_member_with_default(q, "index", 0),
                                   json_object_get_int_member_with_default(q, "in_flight", 0));
        }
    }
    g_string_append_c(s, '\n');
}

static void print_controller(GString *s, JsonObject *o)
{
    g_string_append_printf(s, "%-12s %-40s %2" G_GINT64_FORMAT " queues %3" G_GINT64_FORMAT
                           " LUNs %3" G_GINT64_FORMAT " connections\n",
                           json_object_get_string_member(o, "name"),
                           json_object_get_string_member_with_default(o, "socket",
                                                                      "(inherited socket)"),
                           json_object_get_int_member(o, "queues"),
                           json_object_get_int_member(o, "luns"),
                           json_object_get_int_member(o, "connections"));
}

/* Whether n is an object with all members. */
static bool has_all(JsonNode *n, const char *const *members)
{
    JsonObject *o = n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;

    for (; o && *members; members++) {
        if (!json_object_has_member(o, *members)) {
            return false;
        }
    }
    return o != NULL;
}

static const char *const device_members[] = { "device", "size", "block_size", "read_only", NULL };

static bool is_lun(JsonNode *n)
{
    static const char *const m[] = { "target", "lun", "backend", NULL };

    return has_all(n, m) && has_all(n, device_members);
}

static bool is_backend(JsonNode *n)
{
    static const char *const m[] = { "name", "spec", "mapped_at", NULL };

    return has_all(n, m) && has_all(n, device_members);
}

static bool is_controller(JsonNode *n)
{
    static const char *const m[] = { "name", "queues", "luns", "connections", NULL };

    return has_all(n, m) && !has_all(n, device_members);
}

static bool is_connection(JsonNode *n)
{
    static const char *const m[] = { "name", "pid", "uid", "state", "queues", NULL };

    return has_all(n, m);
}

/* One element of a list answer, by its kind; false if it is none. */
static bool print_element(GString *s, JsonNode *n)
{
    if (is_lun(n)) {
        print_lun(s, json_node_get_object(n));
    } else if (is_backend(n)) {
        print_backend(s, json_node_get_object(n));
    } else if (is_connection(n)) {
        print_connection(s, json_node_get_object(n));
    } else if (is_controller(n)) {
        print_controller(s, json_node_get_object(n));
    } else {
        return false;
    }
    return true;
}

/* One class of an object's interval: rates, errors and latency quantiles. */
static void print_class(GString *s, const char *cls, JsonObject *total, JsonObject *interval)
{
    JsonObject *t = json_object_member_or_null(total, cls);
    JsonObject *i = json_object_member_or_null(interval, cls);
    JsonObject *lat = json_object_member_or_null(i, "latency_us");

    if (!t || !i || !lat) {
        return;
    }
    g_string_append_printf(s, "  %-5s %10.0f ops/s %10.1f MiB/s  latency us p50 %-8.1f p99 %-8.1f"
                           " p99.9 %-8.1f  total %" G_GINT64_FORMAT " ops, %" G_GINT64_FORMAT
                           " errors\n", cls,
                           json_object_get_double_member_with_default(i, "ops_per_s", 0),
                           json_object_get_double_member_with_default(i, "bytes_per_s", 0) /
                           1048576.0,
                           json_object_get_double_member_with_default(lat, "p50", 0),
                           json_object_get_double_member_with_default(lat, "p99", 0),
                           json_object_get_double_member_with_default(lat, "p99.9", 0),
                           json_object_get_int_member_with_default(t, "ops", 0),
                           json_object_get_int_member_with_default(t, "errors", 0));
}

static void print_stats_list(GString *s, JsonObject *r, const char *member, const char *kind)
{
    JsonArray *a = json_array_member_or_null(r, member);

    for (guint k = 0; a && k < json_array_get_length(a); k++) {
        JsonObject *o = json_array_get_object_element(a, k);
        JsonObject *total = o ? json_object_member_or_null(o, "total") : NULL;
        JsonObject *interval = o ? json_object_member_or_null(o, "interval") : NULL;

        if (!total || !interval) {
            continue;
        }
        g_string_append_printf(s, "%s %s: %" G_GINT64_FORMAT " in flight, over the last %.1f s:\n",
                               kind, json_object_get_string_member_with_default(o, "name", "?"),
                               json_object_get_int_member_with_default(o, "in_flight", 0),
                               json_object_get_double_member_with_default(interval, "seconds", 0));
        print_class(s, "read", total, interval);
        print_class(s, "write", total, interval);
        print_class(s, "other", total, interval);
    }
}

char *ctl_answer_text(const char *method, JsonNode *result, const char *what)
{
    GString *s = g_string_new(NULL);
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;

    if (!strcmp(method, "version") && o) {
        g_string_append_printf(s, "%s %s (control protocol %" G_GINT64_FORMAT ")\n",
                               json_object_get_string_member_with_default(o, "program", "?"),
                               json_object_get_string_member_with_default(o, "version", "?"),
                               json_object_get_int_member_with_default(o, "protocol", 0));
    } else if (!strcmp(method, "method-list") && o) {
        JsonArray *a = json_array_member_or_null(o, "methods");

        for (guint i = 0; a && i < json_array_get_length(a); i++) {
            g_string_append_printf(s, "%s\n", json_object_get_string_member_with_default(
                                       json_array_get_object_element(a, i), "name", "?"));
        }
    } else if (!strcmp(method, "stats") && o) {
        print_stats_list(s, o, "backends", "backend");
        print_stats_list(s, o, "controllers", "controller");
    } else if (!strcmp(method, "stats-prometheus") && o) {
        g_string_append(s, json_object_get_string_member_with_default(o, "text", ""));
    } else if (JSON_NODE_HOLDS_ARRAY(result)) {
        JsonArray *a = json_node_get_array(result);

        for (guint i = 0; i < json_array_get_length(a); i++) {
            print_element(s, json_array_get_element(a, i));
        }
    } else if (is_lun(result) || is_backend(result) || is_controller(result)) {
        g_string_append_printf(s, "%s ", what);
        print_element(s, result);
    } else if (JSON_NODE_HOLDS_VALUE(result) && json_node_get_value_type(result) == G_TYPE_STRING) {
        g_string_append_printf(s, "%s %s\n", what, json_node_get_string(result));
    } else {
        g_string_append_printf(s, "%s\n", what);
    }
    return g_string_free(s, FALSE);
}

char *ctl_answer_json(JsonNode *result)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_pretty(gen, TRUE);
    json_generator_set_root(gen, result);
    text = json_generator_to_data(gen, NULL);
    return g_strconcat(text, "\n", NULL);
}
