/*
 * What the daemon is told to serve, checked before anything is opened: the
 * saved configuration's shape (`--config FILE`, hw/daemon/target-config.c,
 * which then opens what it names) and the initiator names a controller may
 * carry.  Pure functions of their text, with no target behind them, so the
 * fuzz target tests/fuzz/fuzz-config.c links this file alone.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "json-member.h"
#include "json-strict.h"
#include "target.h"
#include "vs-error.h"

/* Backends and mappings nest 4 deep; the largest object has 3 members. */
static const struct json_limits config_limits = { .max_depth = 8, .max_members = 16 };

static const struct json_member top_members[] = {
    { "version", JSON_M_INT }, { "backends", JSON_M_ARR }, { "controllers", JSON_M_ARR },
};
static const struct json_member backend_members[] = {
    { "name", JSON_M_STR }, { "spec", JSON_M_STR }, { "implicit", JSON_M_BOOL, true },
    { "qos", JSON_M_OBJ, true },
};
static const struct json_member qos_members[] = {
    { "iops", JSON_M_INT, true }, { "bandwidth", JSON_M_INT, true },
};
static const struct json_member controller_members[] = {
    { "name", JSON_M_STR }, { "socket", JSON_M_STR, true }, { "queues", JSON_M_INT, true },
    { "allow_uid", JSON_M_ARR, true }, { "allow_gid", JSON_M_ARR, true },
    { "socket_group", JSON_M_STR, true }, { "luns", JSON_M_ARR },
    { "initiator", JSON_M_STR, true },
};
static const struct json_member lun_members[] = {
    { "target", JSON_M_INT }, { "lun", JSON_M_INT }, { "backend", JSON_M_STR },
};

/* What a config file asks for, checked whole before anything is opened. */
static int config_check(JsonNode *root, GError **err)
{
    g_autofree char *shape = json_check_object(root, top_members, G_N_ELEMENTS(top_members));
    JsonObject *top;
    JsonArray *a;

    if (shape) {
        return vs_error_set(err, -EINVAL, "%s", shape);
    }
    top = json_node_get_object(root);
    if (json_object_get_int_member(top, "version") != TARGET_CONFIG_VERSION) {
        return vs_error_set(err, -EINVAL, "unsupported version (expected %d)",
                            TARGET_CONFIG_VERSION);
    }
    a = json_object_get_array_member(top, "backends");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        g_autofree char *e = json_check_object(json_array_get_element(a, i), backend_members,
                                               G_N_ELEMENTS(backend_members));
        JsonObject *b, *q;

        if (e) {
            return vs_error_set(err, -EINVAL, "backends[%u]: %s", i, e);
        }
        b = json_array_get_object_element(a, i);
        q = json_object_member_or_null(b, "qos");
        if (q && (e = json_check_object(json_object_get_member(b, "qos"), qos_members,
                                        G_N_ELEMENTS(qos_members)))) {
            return vs_error_set(err, -EINVAL, "backends[%u].qos: %s", i, e);
        }
        if (q && (json_object_get_int_member_with_default(q, "iops", 0) < 0 ||
                  json_object_get_int_member_with_default(q, "bandwidth", 0) < 0)) {
            return vs_error_set(err, -EINVAL, "backends[%u].qos: limits must be >= 0 (0: none)", i);
        }
    }
    a = json_object_get_array_member(top, "controllers");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        g_autofree char *e = json_check_object(json_array_get_element(a, i), controller_members,
                                               G_N_ELEMENTS(controller_members));
        JsonObject *c;
        JsonArray *luns;

        if (e) {
            return vs_error_set(err, -EINVAL, "controllers[%u]: %s", i, e);
        }
        c = json_array_get_object_element(a, i);
        if (strcmp(json_object_get_string_member(c, "name"), "default") &&
            !json_object_has_member(c, "socket")) {
            return vs_error_set(err, -EINVAL,
                                "controllers[%u]: a controller other than \"default\" "
                                "needs a socket", i);
        }
        if (json_object_has_member(c, "initiator") &&
            !target_initiator_ok(json_object_get_string_member(c, "initiator"))) {
            return vs_error_set(err, -EINVAL,
                                "controllers[%u]: initiator '%s': 1-%d of A-Z a-z 0-9 . - : _",
                                i, json_object_get_string_member(c, "initiator"),
                                TARGET_INITIATOR_MAX);
        }
        luns = json_object_get_array_member(c, "luns");
        for (guint j = 0; j < json_array_get_length(luns); j++) {
            g_autofree char *le = json_check_object(json_array_get_element(luns, j), lun_members,
                                                    G_N_ELEMENTS(lun_members));

            if (le) {
                return vs_error_set(err, -EINVAL, "controllers[%u].luns[%u]: %s", i, j, le);
            }
        }
    }
    return 0;
}

JsonNode *target_config_parse(const char *text, size_t len, GError **err)
{
    g_autofree char *why = NULL;
    JsonNode *root;
    size_t at;

    root = json_strict_parse(text, len, &config_limits, &why, &at);
    if (!root) {
        if (at == JSON_AT_NONE) {
            vs_error_set(err, -EINVAL, "%s", why);
        } else {
            vs_error_set(err, -EINVAL, "byte %zu: %s", at, why);
        }
        return NULL;
    }
    if (config_check(root, err) < 0) {
        json_node_unref(root);
        return NULL;
    }
    return root;
}

bool target_initiator_ok(const char *name)
{
    size_t n = strlen(name);

    /* RFC 3720's bound on an iSCSI name; PR TransportIDs carry it whole. */
    if (n == 0 || n > TARGET_INITIATOR_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!g_ascii_isalnum(name[i]) && !strchr(".-:_", name[i])) {
            return false;
        }
    }
    return true;
}

/* Names are printable and short: they appear in logs, JSON and Prometheus labels. */
bool target_name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > 64) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!g_ascii_isalnum(name[i]) && !strchr("._:-/", name[i])) {
            return false;
        }
    }
    return true;
}
