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
#include "size.h"

#define EXIT_USAGE 2

static const char usage_text[] =
    "Usage: vhost-scsi-ctl target [--control PATH] [--json] [--timeout-ms N] COMMAND\n"
    "\n"
    "Operate a running vhost-scsi-target through its --control socket\n"
    "(default: $VHOST_SCSI_CONTROL).\n"
    "\n"
    "Commands:\n"
    "  version                      the daemon's version and protocol\n"
    "  lun list                     the LUNs served\n"
    "  lun add ID=SPEC              map a LUN (the --lun grammar, e.g. 1=file:/d.img)\n"
    "  lun remove [TARGET:]LUN      unmap it; returns once its I/O has drained\n"
    "  lun resize [TARGET:]LUN [SIZE]\n"
    "                               grow it to SIZE (bytes, K/M/G/T), or without\n"
    "                               SIZE to what its device has grown to\n"
    "\n"
    "Exit status: 0 success, 1 the daemon refused or failed, 2 usage.\n";

struct opts {
    const char *control;
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

static void print_lun(JsonObject *o)
{
    g_autofree char *size = g_format_size_full((guint64)json_object_get_int_member(o, "size"),
                                               G_FORMAT_SIZE_IEC_UNITS);

    printf("%" G_GINT64_FORMAT ":%-5" G_GINT64_FORMAT " %-10s %-10s %5" G_GINT64_FORMAT
           "-byte blocks  %s  %s\n",
           json_object_get_int_member(o, "target"), json_object_get_int_member(o, "lun"),
           json_object_get_string_member(o, "name"), size,
           json_object_get_int_member(o, "block_size"),
           json_object_get_boolean_member(o, "read_only") ? "ro" : "rw",
           json_object_get_string_member(o, "backend"));
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
static bool is_lun(JsonNode *n)
{
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;

    return o && json_object_has_member(o, "target") && json_object_has_member(o, "lun") &&
           json_object_has_member(o, "size") && json_object_has_member(o, "name") &&
           json_object_has_member(o, "backend") && json_object_has_member(o, "block_size") &&
           json_object_has_member(o, "read_only");
}

static int run(const struct opts *o, const char *method, JsonNode *params, const char *what)
{
    g_autoptr(JsonNode) result = NULL;
    g_autofree char *err = NULL;
    int fd = ctl_client_connect(o->control), code, ret;

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
    } else if (JSON_NODE_HOLDS_ARRAY(result)) {
        JsonArray *a = json_node_get_array(result);

        for (guint i = 0; i < json_array_get_length(a); i++) {
            if (is_lun(json_array_get_element(a, i))) {
                print_lun(json_array_get_object_element(a, i));
            }
        }
    } else if (is_lun(result)) {
        printf("%s ", what);
        print_lun(json_node_get_object(result));
    } else {
        printf("%s\n", what);
    }
    return 0;
}

int ctl_target_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "control", required_argument, NULL, 'c' },
        { "json", no_argument, NULL, 'j' },
        { "timeout-ms", required_argument, NULL, 't' },
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
        case 'j':
            o.json = true;
            break;
        case 't':
            if (!g_ascii_string_to_unsigned(optarg, 10, 1, 3600000, &v, NULL)) {
                return usage("--timeout-ms '%s': expected 1..3600000", optarg);
            }
            o.timeout_ms = (int)v;
            break;
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
    if (strcmp(cmd, "lun") || argc < 1) {
        return usage("unknown command '%s'", cmd);
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
        uint64_t size;

        if (!p) {
            return usage("'%s': expected [TARGET:]LUN (0..255:0..16383)", argv[1]);
        }
        if (!strcmp(argv[0], "remove")) {
            return run(&o, "lun-remove", p, "removed");
        }
        if (argc == 3) {
            if (size_parse(argv[2], &size) < 0 || !size || size > G_MAXINT64) {
                json_node_unref(p);
                return usage("size '%s': expected bytes with an optional K/M/G/T", argv[2]);
            }
            json_object_set_int_member(json_node_get_object(p), "size", (gint64)size);
        }
        return run(&o, "lun-resize", p, "resized");
    }
    return usage("unknown lun command '%s'", argv[0]);
}
