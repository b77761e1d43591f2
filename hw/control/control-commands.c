/*
 * `vhost-scsi-ctl target …` words into a JSON-RPC request
 * (include/control/control-commands.h).  Each command is one method;
 * the parameters are built as the server reads them (docs/control.md),
 * and what the server would refuse for its shape is refused here with
 * the words the user sees: the command, the word at fault and what it
 * accepts.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <string.h>

#include "control-commands.h"
#include "size.h"

G_DEFINE_QUARK(vhost-scsi-ctl-command-error-quark, ctl_command_error)

#define LUN_WORDS "expected [TARGET:]LUN (0..255:0..16383)"

static bool usage(GError **err, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static bool usage(GError **err, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_propagate_error(err, g_error_new_valist(CTL_COMMAND_ERROR, CTL_COMMAND_ERROR_USAGE, fmt, ap));
    va_end(ap);
    return false;
}

static JsonObject *new_params(struct ctl_request *req)
{
    req->params = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(req->params, json_object_new());
    return json_node_get_object(req->params);
}

static bool set(struct ctl_request *req, const char *method, const char *what)
{
    req->method = method;
    req->what = what;
    return true;
}

/* "[TARGET:]LUN" into the params' target and lun. */
static bool lun_params(struct ctl_request *req, const char *id, GError **err)
{
    g_auto(GStrv) parts = g_strsplit(id, ":", 3);
    guint n = g_strv_length(parts);
    guint64 t = 0, l;
    JsonObject *p;

    if (n < 1 || n > 2 ||
        (n == 2 && !g_ascii_string_to_unsigned(parts[0], 10, 0, 255, &t, NULL)) ||
        !g_ascii_string_to_unsigned(parts[n - 1], 10, 0, 16383, &l, NULL)) {
        return usage(err, "'%s': " LUN_WORDS, id);
    }
    p = new_params(req);
    json_object_set_int_member(p, "target", (gint64)t);
    json_object_set_int_member(p, "lun", (gint64)l);
    return true;
}

/* "size" from a SIZE argument. */
static bool set_size(struct ctl_request *req, const char *arg, GError **err)
{
    uint64_t size;

    if (size_parse(arg, &size) < 0 || !size || size > G_MAXINT64) {
        return usage(err, "size '%s': expected bytes with an optional K/M/G/T", arg);
    }
    json_object_set_int_member(json_node_get_object(req->params), "size", (gint64)size);
    return true;
}

static void name_params(struct ctl_request *req, const char *name)
{
    json_object_set_string_member(new_params(req), "name", name);
}

/* Appends the id arg to params[key], an array. */
static bool add_id(JsonObject *p, const char *key, const char *arg)
{
    guint64 v;

    if (!g_ascii_string_to_unsigned(arg, 10, 0, G_MAXUINT32, &v, NULL)) {
        return false;
    }
    if (!json_object_has_member(p, key)) {
        json_object_set_array_member(p, key, json_array_new());
    }
    json_array_add_int_element(json_object_get_array_member(p, key), (gint64)v);
    return true;
}

/* One option of controller add with its value; false if the value is not one. */
static bool controller_option(JsonObject *p, const char *opt, const char *val, bool *known)
{
    guint64 v;

    *known = true;
    if (!strcmp(opt, "--queues")) {
        if (!g_ascii_string_to_unsigned(val, 10, 1, 1024, &v, NULL)) {
            return false;
        }
        json_object_set_int_member(p, "queues", (gint64)v);
        return true;
    }
    if (!strcmp(opt, "--allow-uid") || !strcmp(opt, "--allow-gid")) {
        return add_id(p, opt[8] == 'u' ? "allow_uid" : "allow_gid", val);
    }
    if (!strcmp(opt, "--socket-group") || !strcmp(opt, "--initiator")) {
        json_object_set_string_member(p, opt[2] == 's' ? "socket_group" : "initiator", val);
        return true;
    }
    *known = false;
    return false;
}

/*
 * controller add NAME SOCKET [OPTIONS]: options anywhere among the words,
 * "--opt value" or "--opt=value".
 */
static bool controller_add(struct ctl_request *req, int argc, char **argv, GError **err)
{
    JsonObject *p = new_params(req);
    const char *pos[2];
    int npos = 0;

    for (int i = 1; i < argc; i++) {
        g_autofree char *opt = NULL;
        const char *val;
        bool known;

        if (!g_str_has_prefix(argv[i], "--")) {
            if (npos == 2) {
                return usage(err, "controller add: expected NAME SOCKET [OPTIONS], not '%s'",
                             argv[i]);
            }
            pos[npos++] = argv[i];
            continue;
        }
        opt = g_strndup(argv[i], strcspn(argv[i], "="));
        val = argv[i][strlen(opt)] ? argv[i] + strlen(opt) + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) {
            return usage(err, "controller add: %s needs a value", opt);
        }
        if (!controller_option(p, opt, val, &known)) {
            return known ? usage(err, "controller add: %s '%s': not a valid value", opt, val)
                         : usage(err, "controller add: unknown option '%s'", opt);
        }
    }
    if (npos != 2) {
        return usage(err, "controller add: expected NAME SOCKET [OPTIONS]");
    }
    json_object_set_string_member(p, "name", pos[0]);
    json_object_set_string_member(p, "socket", pos[1]);
    return set(req, "controller-add", "added");
}

static bool controller_cmd(struct ctl_request *req, int argc, char **argv, GError **err)
{
    if (argc == 1 && !strcmp(argv[0], "list")) {
        return set(req, "controller-list", "");
    }
    if (argc == 2 && !strcmp(argv[0], "remove")) {
        name_params(req, argv[1]);
        return set(req, "controller-remove", "removed");
    }
    if (argc >= 1 && !strcmp(argv[0], "add")) {
        return controller_add(req, argc, argv, err);
    }
    return usage(err, "unknown controller command '%s'", argc ? argv[0] : "");
}

static bool stats_cmd(struct ctl_request *req, int argc, char **argv, GError **err)
{
    if (argc == 1 && !strcmp(argv[0], "--prometheus")) {
        return set(req, "stats-prometheus", "");
    }
    if (argc == 2 && (!strcmp(argv[0], "--controller") || !strcmp(argv[0], "--backend"))) {
        json_object_set_string_member(new_params(req), argv[0] + 2, argv[1]);
    } else if (argc) {
        return usage(err, "stats: expected --prometheus, --controller NAME or --backend NAME, "
                     "not '%s'", argv[0]);
    }
    return set(req, "stats", "");
}

static bool qos_cmd(struct ctl_request *req, int argc, char **argv, GError **err)
{
    JsonObject *p;

    if (argc < 4 || argc % 2 || strcmp(argv[0], "set")) {
        return usage(err, "expected: qos set BACKEND [--iops N] [--bandwidth SIZE]");
    }
    p = new_params(req);
    json_object_set_string_member(p, "backend", argv[1]);
    for (int i = 2; i + 1 < argc; i += 2) {
        uint64_t v;

        if (!strcmp(argv[i], "--iops") &&
            g_ascii_string_to_unsigned(argv[i + 1], 10, 0, G_MAXINT64, &v, NULL)) {
            json_object_set_int_member(p, "iops", (gint64)v);
        } else if (!strcmp(argv[i], "--bandwidth") && size_parse(argv[i + 1], &v) == 0 &&
                   v <= G_MAXINT64) {
            json_object_set_int_member(p, "bandwidth", (gint64)v);
        } else {
            return usage(err, "qos set: bad '%s' (--iops N, --bandwidth SIZE)", argv[i]);
        }
    }
    return set(req, "qos-set", "limits set on");
}

static bool backend_cmd(struct ctl_request *req, int argc, char **argv, GError **err)
{
    if (argc == 1 && !strcmp(argv[0], "list")) {
        return set(req, "backend-list", "");
    }
    if (argc == 3 && !strcmp(argv[0], "add")) {
        name_params(req, argv[1]);
        json_object_set_string_member(json_node_get_object(req->params), "spec", argv[2]);
        return set(req, "backend-add", "added");
    }
    if (argc == 2 && !strcmp(argv[0], "remove")) {
        name_params(req, argv[1]);
        return set(req, "backend-remove", "removed");
    }
    if ((argc == 2 || argc == 3) && !strcmp(argv[0], "resize")) {
        name_params(req, argv[1]);
        return (argc == 2 || set_size(req, argv[2], err)) && set(req, "backend-resize", "resized");
    }
    return usage(err, "unknown backend command '%s'", argc ? argv[0] : "");
}

static bool lun_cmd(struct ctl_request *req, int argc, char **argv, GError **err)
{
    const char *sub = argc ? argv[0] : "";

    if (!strcmp(sub, "list") && argc == 1) {
        return set(req, "lun-list", "");
    }
    if (!strcmp(sub, "add") && argc == 2) {
        json_object_set_string_member(new_params(req), "lun", argv[1]);
        return set(req, "lun-add", "added");
    }
    if (!strcmp(sub, "map") && argc == 3) {
        if (!lun_params(req, argv[1], err)) {
            return false;
        }
        json_object_set_string_member(json_node_get_object(req->params), "backend", argv[2]);
        return set(req, "lun-map", "mapped");
    }
    if ((!strcmp(sub, "unmap") || !strcmp(sub, "remove")) && argc == 2) {
        return lun_params(req, argv[1], err) &&
               (sub[0] == 'u' ? set(req, "lun-unmap", "unmapped") : set(req, "lun-remove", "removed"));
    }
    if (!strcmp(sub, "resize") && (argc == 2 || argc == 3)) {
        return lun_params(req, argv[1], err) && (argc == 2 || set_size(req, argv[2], err)) &&
               set(req, "lun-resize", "resized");
    }
    return usage(err, argc ? "unknown lun command '%s'" : "lun: expected a command%s", sub);
}

static bool config_cmd(struct ctl_request *req, int argc, char **argv, GError **err)
{
    if ((argc != 1 && argc != 2) || strcmp(argv[0], "save")) {
        return usage(err, "expected: config save [FILE]");
    }
    if (argc == 2) {
        g_autofree char *abs = g_canonicalize_filename(argv[1], NULL);

        /* The daemon's working directory is not ours. */
        json_object_set_string_member(new_params(req), "file", abs);
    }
    return set(req, "config-save", "saved");
}

static bool dispatch(struct ctl_request *req, const char *cmd, int argc, char **argv, GError **err)
{
    if (!strcmp(cmd, "version") && argc == 0) {
        return set(req, "version", "");
    }
    if (!strcmp(cmd, "method") && argc == 1 && !strcmp(argv[0], "list")) {
        return set(req, "method-list", "");
    }
    if (!strcmp(cmd, "connection") && argc == 1 && !strcmp(argv[0], "list")) {
        return set(req, "connection-list", "");
    }
    if (!strcmp(cmd, "backend")) {
        return backend_cmd(req, argc, argv, err);
    }
    if (!strcmp(cmd, "controller")) {
        return controller_cmd(req, argc, argv, err);
    }
    if (!strcmp(cmd, "qos")) {
        return qos_cmd(req, argc, argv, err);
    }
    if (!strcmp(cmd, "stats")) {
        return stats_cmd(req, argc, argv, err);
    }
    if (!strcmp(cmd, "config")) {
        return config_cmd(req, argc, argv, err);
    }
    if (!strcmp(cmd, "lun")) {
        return lun_cmd(req, argc, argv, err);
    }
    return usage(err, "unknown command '%s'", cmd);
}

bool ctl_command_parse(int argc, char **argv, const char *controller, struct ctl_request *req,
                       GError **err)
{
    memset(req, 0, sizeof(*req));
    if (argc < 1) {
        return usage(err, "missing command");
    }
    if (!dispatch(req, argv[0], argc - 1, argv + 1, err)) {
        ctl_request_clear(req);
        return false;
    }
    if (controller && g_str_has_prefix(req->method, "lun-")) {
        JsonObject *p = req->params ? json_node_get_object(req->params) : new_params(req);

        json_object_set_string_member(p, "controller", controller);
    }
    return true;
}

void ctl_request_clear(struct ctl_request *req)
{
    g_clear_pointer(&req->params, json_node_unref);
    req->method = NULL;
    req->what = NULL;
}
