/*
 * `vhost-scsi-ctl target …`: the client of vhost-scsi-target's control
 * socket (docs/control.md).  Each command is one JSON-RPC call; the answer
 * is printed for people (or, with --json, as the server's JSON result),
 * and a server error is printed as the server's message with exit status
 * 1.  Usage errors exit 2.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "control-client.h"
#include "ctl-target.h"
#include "json-member.h"
#include "size.h"

#define EXIT_USAGE 2

static const char usage_text[] =
    "Usage: vhost-scsi-ctl target [--control PATH] [--controller NAME] [--json]\n"
    "                             [--timeout-ms N] COMMAND\n"
    "\n"
    "Operate a running vhost-scsi-target through its --control socket\n"
    "(default: $VHOST_SCSI_CONTROL).  lun commands act on the controller\n"
    "--controller names (default: the command line's, \"default\").\n"
    "\n"
    "Commands:\n"
    "  version                      the daemon's version and protocol\n"
    "  method list                  the control methods the daemon answers\n"
    "  lun list                     the LUNs served\n"
    "  lun add ID=SPEC              map a LUN (the --lun grammar, e.g. 1=file:/d.img)\n"
    "  lun remove [TARGET:]LUN      unmap it; returns once its I/O has drained\n"
    "  lun resize [TARGET:]LUN [SIZE]\n"
    "                               grow it to SIZE (bytes, K/M/G/T), or without\n"
    "                               SIZE to what its device has grown to\n"
    "  lun map [TARGET:]LUN BACKEND map a named backend there\n"
    "  lun unmap [TARGET:]LUN       unmap it (the backend stays); returns once\n"
    "                               its I/O has drained\n"
    "  backend add NAME SPEC        open a named backend (SPEC as in --lun ID=SPEC)\n"
    "  backend remove NAME          close it (refused while it is mapped)\n"
    "  backend resize NAME [SIZE]   grow it; every LUN it is mapped at is told\n"
    "  backend list                 the backends and where they are mapped\n"
    "  connection list              the front-ends connected, their queues\n"
    "  controller add NAME SOCKET [--queues N] [--allow-uid UID]...\n"
    "                 [--allow-gid GID]... [--socket-group GROUP] [--initiator IQN]\n"
    "                               a per-VM controller listening on SOCKET; IQN:\n"
    "                               the initiator name persistent reservations\n"
    "                               see (default iqn.2026-12.org.vhost-scsi:NAME)\n"
    "  controller remove NAME       (refused while it has LUNs or connections)\n"
    "  controller list              the controllers, their LUN and connection counts\n"
    "  qos set BACKEND [--iops N] [--bandwidth SIZE]\n"
    "                               limit its READ/WRITE commands per second\n"
    "                               and bytes per second (K/M/G/T); 0: no limit\n"
    "  stats [--controller NAME | --backend NAME]\n"
    "                               I/O figures per backend and per controller:\n"
    "                               totals and rates since start (a client on a\n"
    "                               connection of its own sees the interval since\n"
    "                               its previous stats call)\n"
    "  stats --prometheus           the counters in Prometheus text format (for\n"
    "                               node-exporter's textfile collector)\n"
    "  config save [FILE]           write the backends and LUNs to FILE (default:\n"
    "                               the daemon's --config), atomically\n"
    "\n"
    "Options:\n"
    "  --version                    print vhost-scsi-ctl's version and exit (the\n"
    "                               daemon's: the version command)\n"
    "\n"
    "Exit status: 0 success, 1 the daemon refused or failed, 2 usage.\n";

struct opts {
    const char *control;
    const char *controller;     /* for lun-* methods; NULL: the daemon's default */
    bool json;
    int timeout_ms;
};

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "vhost-scsi-ctl target: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(vhost-scsi-ctl target --help for usage)\n");
    return EXIT_USAGE;
}

/* "[TARGET:]LUN" into a params object with target and lun. */
static JsonNode *lun_params(const char *id)
{
    g_auto(GStrv) parts = g_strsplit(id, ":", 3);
    guint64 t = 0, l;
    g_autoptr(JsonBuilder) b = json_builder_new();
    guint n = g_strv_length(parts);

    if (n < 1 || n > 2 ||
        (n == 2 && !g_ascii_string_to_unsigned(parts[0], 10, 0, 255, &t, NULL)) ||
        !g_ascii_string_to_unsigned(parts[n - 1], 10, 0, 16383, &l, NULL)) {
        return NULL;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "target");
    json_builder_add_int_value(b, (gint64)t);
    json_builder_set_member_name(b, "lun");
    json_builder_add_int_value(b, (gint64)l);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void print_device(JsonObject *o)
{
    g_autofree char *size = g_format_size_full((guint64)json_object_get_int_member(o, "size"),
                                               G_FORMAT_SIZE_IEC_UNITS);

    printf("%-10s %5" G_GINT64_FORMAT "-byte blocks  %s  %s", size,
           json_object_get_int_member(o, "block_size"),
           json_object_get_boolean_member(o, "read_only") ? "ro" : "rw",
           json_object_get_string_member(o, "device"));
}

static void print_lun(JsonObject *o)
{
    printf("%" G_GINT64_FORMAT ":%-5" G_GINT64_FORMAT " %-12s ",
           json_object_get_int_member(o, "target"), json_object_get_int_member(o, "lun"),
           json_object_get_string_member(o, "backend"));
    print_device(o);
    printf("\n");
}

static void print_backend(JsonObject *o)
{
    JsonArray *at = json_array_member_or_null(o, "mapped_at");

    printf("%-12s ", json_object_get_string_member(o, "name"));
    print_device(o);
    printf("  mapped at:");
    for (guint i = 0; at && i < json_array_get_length(at); i++) {
        JsonObject *m = json_array_get_object_element(at, i);

        printf(" %" G_GINT64_FORMAT ":%" G_GINT64_FORMAT, json_object_get_int_member(m, "target"),
               json_object_get_int_member(m, "lun"));
    }
    printf("%s", at && json_array_get_length(at) ? "" : " nowhere");
    {
        JsonObject *q = json_object_member_or_null(o, "qos");
        gint64 iops = q ? json_object_get_int_member_with_default(q, "iops", 0) : 0;
        gint64 bw = q ? json_object_get_int_member_with_default(q, "bandwidth", 0) : 0;

        if (iops || bw) {
            printf("  limits: %" G_GINT64_FORMAT " IOPS, %" G_GINT64_FORMAT " B/s (0: none)",
                   iops, bw);
        }
    }
    printf("\n");
}

static void print_connection(JsonObject *o)
{
    JsonArray *qs = json_array_member_or_null(o, "queues");

    printf("%-8s pid %-7" G_GINT64_FORMAT " uid %-6" G_GINT64_FORMAT " %-10s in flight:",
           json_object_get_string_member(o, "name"), json_object_get_int_member(o, "pid"),
           json_object_get_int_member(o, "uid"), json_object_get_string_member(o, "state"));
    for (guint i = 0; qs && i < json_array_get_length(qs); i++) {
        JsonObject *q = json_array_get_object_element(qs, i);

        if (json_object_get_boolean_member(q, "running")) {
            printf(" q%" G_GINT64_FORMAT "=%" G_GINT64_FORMAT, json_object_get_int_member(q, "index"),
                   json_object_get_int_member(q, "in_flight"));
        }
    }
    printf("\n");
}

static void print_json(JsonNode *n)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_pretty(gen, TRUE);
    json_generator_set_root(gen, n);
    text = json_generator_to_data(gen, NULL);
    printf("%s\n", text);
}

/* Checks the shape of what the server sent before reading it. */
static bool has_all(JsonNode *n, const char *const *members)
{
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;

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

static void print_controller(JsonObject *o)
{
    printf("%-12s %-40s %2" G_GINT64_FORMAT " queues %3" G_GINT64_FORMAT " LUNs %3"
           G_GINT64_FORMAT " connections\n", json_object_get_string_member(o, "name"),
           json_object_get_string_member_with_default(o, "socket", "(inherited socket)"),
           json_object_get_int_member(o, "queues"), json_object_get_int_member(o, "luns"),
           json_object_get_int_member(o, "connections"));
}

static bool is_connection(JsonNode *n)
{
    static const char *const m[] = { "name", "pid", "uid", "state", "queues", NULL };

    return has_all(n, m);
}

/* One element of a list answer, printed by its kind. */
static void print_element(JsonNode *n)
{
    if (is_lun(n)) {
        print_lun(json_node_get_object(n));
    } else if (is_backend(n)) {
        print_backend(json_node_get_object(n));
    } else if (is_connection(n)) {
        print_connection(json_node_get_object(n));
    } else if (is_controller(n)) {
        print_controller(json_node_get_object(n));
    }
}

/* One class of an object's interval: rates, errors and latency quantiles. */
static void print_class(const char *cls, JsonObject *total, JsonObject *interval)
{
    JsonObject *t = json_object_member_or_null(total, cls);
    JsonObject *i = json_object_member_or_null(interval, cls);
    JsonObject *lat = json_object_member_or_null(i, "latency_us");

    if (!t || !i || !lat) {
        return;
    }
    printf("  %-5s %10.0f ops/s %10.1f MiB/s  latency us p50 %-8.1f p99 %-8.1f p99.9 %-8.1f"
           "  total %" G_GINT64_FORMAT " ops, %" G_GINT64_FORMAT " errors\n", cls,
           json_object_get_double_member_with_default(i, "ops_per_s", 0),
           json_object_get_double_member_with_default(i, "bytes_per_s", 0) / 1048576.0,
           json_object_get_double_member_with_default(lat, "p50", 0),
           json_object_get_double_member_with_default(lat, "p99", 0),
           json_object_get_double_member_with_default(lat, "p99.9", 0),
           json_object_get_int_member_with_default(t, "ops", 0),
           json_object_get_int_member_with_default(t, "errors", 0));
}

static void print_stats_list(JsonObject *r, const char *member, const char *kind)
{
    JsonArray *a = json_array_member_or_null(r, member);

    for (guint k = 0; a && k < json_array_get_length(a); k++) {
        JsonObject *o = json_array_get_object_element(a, k);
        JsonObject *total = json_object_member_or_null(o, "total");
        JsonObject *interval = json_object_member_or_null(o, "interval");

        if (!total || !interval) {
            continue;
        }
        printf("%s %s: %" G_GINT64_FORMAT " in flight, over the last %.1f s:\n", kind,
               json_object_get_string_member_with_default(o, "name", "?"),
               json_object_get_int_member_with_default(o, "in_flight", 0),
               json_object_get_double_member_with_default(interval, "seconds", 0));
        print_class("read", total, interval);
        print_class("write", total, interval);
        print_class("other", total, interval);
    }
}

static void print_stats(JsonObject *r)
{
    print_stats_list(r, "backends", "backend");
    print_stats_list(r, "controllers", "controller");
}

static int run(const struct opts *o, const char *method, JsonNode *params, const char *what)
{
    g_autoptr(JsonNode) result = NULL;
    g_autofree char *err = NULL;
    int fd = ctl_client_connect(o->control), code, ret;

    if (o->controller && g_str_has_prefix(method, "lun-")) {
        if (!params) {
            params = json_node_new(JSON_NODE_OBJECT);
            json_node_take_object(params, json_object_new());
        }
        json_object_set_string_member(json_node_get_object(params), "controller", o->controller);
    }

    if (fd < 0) {
        fprintf(stderr, "vhost-scsi-ctl target: %s: %s\n", o->control, g_strerror(-fd));
        if (params) {
            json_node_unref(params);
        }
        return 1;
    }
    ret = ctl_client_call(fd, method, params, o->timeout_ms, &result, &code, &err);
    close(fd);
    if (ret < 0) {
        fprintf(stderr, "vhost-scsi-ctl target: %s: %s\n", method, err);
        return 1;
    }
    if (o->json) {
        print_json(result);
        return 0;
    }
    if (!strcmp(method, "version") && JSON_NODE_HOLDS_OBJECT(result)) {
        JsonObject *v = json_node_get_object(result);

        printf("%s %s (control protocol %" G_GINT64_FORMAT ")\n",
               json_object_get_string_member_with_default(v, "program", "?"),
               json_object_get_string_member_with_default(v, "version", "?"),
               json_object_get_int_member_with_default(v, "protocol", 0));
    } else if (!strcmp(method, "method-list") && JSON_NODE_HOLDS_OBJECT(result)) {
        JsonArray *a = json_array_member_or_null(json_node_get_object(result), "methods");

        for (guint i = 0; a && i < json_array_get_length(a); i++) {
            printf("%s\n", json_object_get_string_member_with_default(
                                json_array_get_object_element(a, i), "name", "?"));
        }
    } else if (!strcmp(method, "stats") && JSON_NODE_HOLDS_OBJECT(result)) {
        print_stats(json_node_get_object(result));
    } else if (!strcmp(method, "stats-prometheus") && JSON_NODE_HOLDS_OBJECT(result)) {
        fputs(json_object_get_string_member_with_default(json_node_get_object(result), "text", ""),
              stdout);
    } else if (JSON_NODE_HOLDS_ARRAY(result)) {
        JsonArray *a = json_node_get_array(result);

        for (guint i = 0; i < json_array_get_length(a); i++) {
            print_element(json_array_get_element(a, i));
        }
    } else if (is_lun(result) || is_backend(result) || is_controller(result)) {
        printf("%s ", what);
        print_element(result);
    } else if (JSON_NODE_HOLDS_VALUE(result) && json_node_get_value_type(result) == G_TYPE_STRING) {
        printf("%s %s\n", what, json_node_get_string(result));
    } else {
        printf("%s\n", what);
    }
    return 0;
}

/* "size" from a SIZE argument into params; false (usage printed) if it is not one. */
static bool set_size(JsonNode *p, const char *arg)
{
    uint64_t size;

    if (size_parse(arg, &size) < 0 || !size || size > G_MAXINT64) {
        usage("size '%s': expected bytes with an optional K/M/G/T", arg);
        return false;
    }
    json_object_set_int_member(json_node_get_object(p), "size", (gint64)size);
    return true;
}

static JsonNode *name_params(const char *name)
{
    JsonNode *n = json_node_new(JSON_NODE_OBJECT);
    JsonObject *obj = json_object_new();

    json_object_set_string_member(obj, "name", name);
    json_node_take_object(n, obj);
    return n;
}

/* Appends the id argument to params[key] (an array); false if it is not an id. */
static bool add_id(JsonNode *p, const char *key, const char *arg)
{
    JsonObject *o = json_node_get_object(p);
    guint64 v;

    if (!g_ascii_string_to_unsigned(arg, 10, 0, G_MAXUINT32, &v, NULL)) {
        return false;
    }
    if (!json_object_has_member(o, key)) {
        json_object_set_array_member(o, key, json_array_new());
    }
    json_array_add_int_element(json_object_get_array_member(o, key), (gint64)v);
    return true;
}

/* controller add NAME SOCKET [OPTIONS]: getopt_long over the words after "controller". */
static int controller_add(const struct opts *o, int argc, char **argv)
{
    enum { OPT_QUEUES = 256, OPT_UID, OPT_GID, OPT_GROUP, OPT_INITIATOR };
    static const struct option longopts[] = {
        { "queues", required_argument, NULL, OPT_QUEUES },
        { "allow-uid", required_argument, NULL, OPT_UID },
        { "allow-gid", required_argument, NULL, OPT_GID },
        { "socket-group", required_argument, NULL, OPT_GROUP },
        { "initiator", required_argument, NULL, OPT_INITIATOR },
        { 0 }
    };
    g_autoptr(JsonNode) p = json_node_new(JSON_NODE_OBJECT);
    JsonObject *obj = json_object_new();
    int c;

    json_node_take_object(p, obj);
    /* 0: glibc starts over, permuting (the caller's getopt stopped at the command). */
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        guint64 v;
        bool ok = true;

        switch (c) {
        case OPT_QUEUES:
            ok = g_ascii_string_to_unsigned(optarg, 10, 1, 1024, &v, NULL);
            if (ok) {
                json_object_set_int_member(obj, "queues", (gint64)v);
            }
            break;
        case OPT_UID:
            ok = add_id(p, "allow_uid", optarg);
            break;
        case OPT_GID:
            ok = add_id(p, "allow_gid", optarg);
            break;
        case OPT_GROUP:
            json_object_set_string_member(obj, "socket_group", optarg);
            break;
        case OPT_INITIATOR:
            json_object_set_string_member(obj, "initiator", optarg);
            break;
        default:
            ok = false;
        }
        if (!ok) {
            return usage("controller add: bad option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2) {
        return usage("%s", "controller add: expected NAME SOCKET [OPTIONS]");
    }
    json_object_set_string_member(obj, "name", argv[optind]);
    json_object_set_string_member(obj, "socket", argv[optind + 1]);
    return run(o, "controller-add", g_steal_pointer(&p), "added");
}

static int controller_cmd(const struct opts *o, int argc, char **argv)
{
    if (argc == 1 && !strcmp(argv[0], "list")) {
        return run(o, "controller-list", NULL, "");
    }
    if (argc == 2 && !strcmp(argv[0], "remove")) {
        return run(o, "controller-remove", name_params(argv[1]), "removed");
    }
    if (argc < 3 || strcmp(argv[0], "add")) {
        return usage("unknown controller command '%s'", argc ? argv[0] : "");
    }
    return controller_add(o, argc, argv);
}


static int stats_cmd(const struct opts *o, int argc, char **argv)
{
    JsonNode *p;

    if (argc == 1 && !strcmp(argv[0], "--prometheus")) {
        return run(o, "stats-prometheus", NULL, "");
    }
    if (argc == 0) {
        return run(o, "stats", NULL, "");
    }
    if (argc == 2 && (!strcmp(argv[0], "--controller") || !strcmp(argv[0], "--backend"))) {
        p = json_node_new(JSON_NODE_OBJECT);
        json_node_take_object(p, json_object_new());
        json_object_set_string_member(json_node_get_object(p), argv[0] + 2, argv[1]);
        return run(o, "stats", p, "");
    }
    return usage("stats: expected --prometheus, --controller NAME or --backend NAME, not '%s'",
                 argc ? argv[0] : "");
}

static int qos_cmd(const struct opts *o, int argc, char **argv)
{
    JsonNode *p;
    int i;

    if (argc < 4 || argc % 2 || strcmp(argv[0], "set")) {
        return usage("%s", "expected: qos set BACKEND [--iops N] [--bandwidth SIZE]");
    }
    p = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(p, json_object_new());
    json_object_set_string_member(json_node_get_object(p), "backend", argv[1]);
    for (i = 2; i + 1 < argc; i += 2) {
        uint64_t v;

        if (!strcmp(argv[i], "--iops") && g_ascii_string_to_unsigned(argv[i + 1], 10, 0,
                                                                      G_MAXINT64, &v, NULL)) {
            json_object_set_int_member(json_node_get_object(p), "iops", (gint64)v);
        } else if (!strcmp(argv[i], "--bandwidth") && size_parse(argv[i + 1], &v) == 0 &&
                   v <= G_MAXINT64) {
            json_object_set_int_member(json_node_get_object(p), "bandwidth", (gint64)v);
        } else {
            json_node_unref(p);
            return usage("qos set: bad '%s' (--iops N, --bandwidth SIZE)", argv[i]);
        }
    }
    return run(o, "qos-set", p, "limits set on");
}

static int backend_cmd(const struct opts *o, int argc, char **argv)
{
    JsonNode *p;

    if (argc == 1 && !strcmp(argv[0], "list")) {
        return run(o, "backend-list", NULL, "");
    }
    if (argc == 3 && !strcmp(argv[0], "add")) {
        p = name_params(argv[1]);
        json_object_set_string_member(json_node_get_object(p), "spec", argv[2]);
        return run(o, "backend-add", p, "added");
    }
    if (argc == 2 && !strcmp(argv[0], "remove")) {
        return run(o, "backend-remove", name_params(argv[1]), "removed");
    }
    if ((argc == 2 || argc == 3) && !strcmp(argv[0], "resize")) {
        p = name_params(argv[1]);
        if (argc == 3 && !set_size(p, argv[2])) {
            json_node_unref(p);
            return EXIT_USAGE;
        }
        return run(o, "backend-resize", p, "resized");
    }
    return usage("unknown backend command '%s'", argc ? argv[0] : "");
}

int ctl_target_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "control", required_argument, NULL, 'c' },
        { "controller", required_argument, NULL, 'C' },
        { "json", no_argument, NULL, 'j' },
        { "timeout-ms", required_argument, NULL, 't' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { 0 }
    };
    struct opts o = { .control = getenv("VHOST_SCSI_CONTROL"), .timeout_ms = 60000 };
    const char *cmd;
    guint64 v;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o.control = optarg;
            break;
        case 'C':
            o.controller = optarg;
            break;
        case 'j':
            o.json = true;
            break;
        case 't':
            if (!g_ascii_string_to_unsigned(optarg, 10, 1, 3600000, &v, NULL)) {
                return usage("--timeout-ms '%s': expected 1..3600000", optarg);
            }
            o.timeout_ms = (int)v;
            break;
        case 'V':
            printf("vhost-scsi-ctl %s\n", VHOST_SCSI_VERSION);
            return 0;
        case 'h':
            fputs(usage_text, stdout);
            return 0;
        default:
            return usage("%s", "unknown option");
        }
    }
    if (!o.control) {
        return usage("%s", "no control socket: give --control PATH or set VHOST_SCSI_CONTROL");
    }
    if (optind >= argc) {
        return usage("%s", "missing command");
    }
    cmd = argv[optind];
    argc -= optind + 1;
    argv += optind + 1;
    if (!strcmp(cmd, "version") && argc == 0) {
        return run(&o, "version", NULL, "");
    }
    if (!strcmp(cmd, "method") && argc == 1 && !strcmp(argv[0], "list")) {
        return run(&o, "method-list", NULL, "");
    }
    if (!strcmp(cmd, "connection") && argc == 1 && !strcmp(argv[0], "list")) {
        return run(&o, "connection-list", NULL, "");
    }
    if (!strcmp(cmd, "backend")) {
        return backend_cmd(&o, argc, argv);
    }
    if (!strcmp(cmd, "controller")) {
        return controller_cmd(&o, argc, argv);
    }
    if (!strcmp(cmd, "qos")) {
        return qos_cmd(&o, argc, argv);
    }
    if (!strcmp(cmd, "stats")) {
        return stats_cmd(&o, argc, argv);
    }
    if (!strcmp(cmd, "config") && (argc == 1 || argc == 2) && !strcmp(argv[0], "save")) {
        JsonNode *p = NULL;

        if (argc == 2) {
            g_autofree char *abs = g_canonicalize_filename(argv[1], NULL);

            p = json_node_new(JSON_NODE_OBJECT);
            json_node_take_object(p, json_object_new());
            /* The daemon's working directory is not ours. */
            json_object_set_string_member(json_node_get_object(p), "file", abs);
        }
        return run(&o, "config-save", p, "saved");
    }
    if (strcmp(cmd, "lun") || argc < 1) {
        return usage("unknown command '%s'", cmd);
    }
    if (!strcmp(argv[0], "map") && argc == 3) {
        JsonNode *p = lun_params(argv[1]);

        if (!p) {
            return usage("'%s': expected [TARGET:]LUN (0..255:0..16383)", argv[1]);
        }
        json_object_set_string_member(json_node_get_object(p), "backend", argv[2]);
        return run(&o, "lun-map", p, "mapped");
    }
    if (!strcmp(argv[0], "unmap") && argc == 2) {
        JsonNode *p = lun_params(argv[1]);

        if (!p) {
            return usage("'%s': expected [TARGET:]LUN (0..255:0..16383)", argv[1]);
        }
        return run(&o, "lun-unmap", p, "unmapped");
    }
    if (!strcmp(argv[0], "list") && argc == 1) {
        return run(&o, "lun-list", NULL, "");
    }
    if (!strcmp(argv[0], "add") && argc == 2) {
        g_autoptr(JsonBuilder) b = json_builder_new();

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "lun");
        json_builder_add_string_value(b, argv[1]);
        json_builder_end_object(b);
        return run(&o, "lun-add", json_builder_get_root(b), "added");
    }
    if ((!strcmp(argv[0], "remove") && argc == 2) ||
        (!strcmp(argv[0], "resize") && (argc == 2 || argc == 3))) {
        JsonNode *p = lun_params(argv[1]);

        if (!p) {
            return usage("'%s': expected [TARGET:]LUN (0..255:0..16383)", argv[1]);
        }
        if (!strcmp(argv[0], "remove")) {
            return run(&o, "lun-remove", p, "removed");
        }
        if (argc == 3 && !set_size(p, argv[2])) {
            json_node_unref(p);
            return EXIT_USAGE;
        }
        return run(&o, "lun-resize", p, "resized");
    }
    return usage("unknown lun command '%s'", argv[0]);
}
