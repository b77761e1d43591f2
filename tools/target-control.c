/*
 * The daemon's control methods (tools/target.h), served on the --control
 * socket (control-server.h): version, and the live LUN operations —
 * lun-list, lun-add (the --lun grammar), lun-remove (answered once the
 * LUN's commands have drained and its backend is closed) and lun-resize.
 * Each checks its params against a schema first, so a wrong type or an
 * unknown member is an "invalid params" error naming the member.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "backend.h"
#include "json-strict.h"
#include "size.h"
#include "target.h"

#define CONTROL_PROTOCOL 1

static bool params_ok(struct ctl_call *call, JsonObject *params,
                      const struct json_member *spec, unsigned n)
{
    g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(), params);
    g_autofree char *err = json_check_object(node, spec, n);

    if (err) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "%s", err);
        return false;
    }
    return true;
}

/* (target, lun) from params: "target" defaults to 0, "lun" is required. */
static bool lun_address(struct ctl_call *call, JsonObject *params, unsigned *port,
                        unsigned *lun)
{
    gint64 t = json_object_get_int_member_with_default(params, "target", 0);
    gint64 l = json_object_get_int_member(params, "lun");

    if (t < 0 || t > SCSI_TARGET_MAX_PORT || l < 0 || l > SCSI_TARGET_MAX_LUN) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "target must be 0..%d, lun 0..%d",
                       SCSI_TARGET_MAX_PORT, SCSI_TARGET_MAX_LUN);
        return false;
    }
    *port = (unsigned)t;
    *lun = (unsigned)l;
    return true;
}

static JsonNode *lun_json(struct scsi_lun *l, unsigned port, unsigned lun)
{
    struct lun_backend *be = scsi_lun_backend(l);
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "target");
    json_builder_add_int_value(b, port);
    json_builder_set_member_name(b, "lun");
    json_builder_add_int_value(b, lun);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, scsi_lun_name(l));
    json_builder_set_member_name(b, "backend");
    json_builder_add_string_value(b, be->name);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, (gint64)backend_size(be));
    json_builder_set_member_name(b, "block_size");
    json_builder_add_int_value(b, be->block_size);
    json_builder_set_member_name(b, "read_only");
    json_builder_add_boolean_value(b, be->read_only);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void m_version(struct ctl_call *call, JsonObject *params, void *opaque)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "program");
    json_builder_add_string_value(b, "vhost-scsi-target");
    json_builder_set_member_name(b, "version");
    json_builder_add_string_value(b, VHOST_SCSI_VERSION);
    json_builder_set_member_name(b, "protocol");
    json_builder_add_int_value(b, CONTROL_PROTOCOL);
    json_builder_end_object(b);
    ctl_call_reply(call, json_builder_get_root(b));
}

static void m_lun_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct target *tgt = opaque;
    JsonArray *a;
    JsonNode *n;

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
    a = json_array_new();
    for (unsigned i = 0; i < scsi_target_lun_count(tgt->scsi); i++) {
        unsigned port, lun;

        scsi_target_lun_id_at(tgt->scsi, i, &port, &lun);
        json_array_add_element(a, lun_json(scsi_target_lun_at(tgt->scsi, i), port, lun));
    }
    n = json_node_new(JSON_NODE_ARRAY);
    json_node_take_array(n, a);
    ctl_call_reply(call, n);
}

static void m_lun_add(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "lun", JSON_M_STR } };
    struct target *tgt = opaque;
    g_autofree char *err = NULL;
    unsigned port, lun;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    ret = target_lun_add(tgt, json_object_get_string_member(params, "lun"), &port, &lun, &err);
    if (ret < 0) {
        g_warning("control: lun-add %s", err);
        ctl_call_fail(call, ret, err);
        return;
    }
    ctl_call_reply(call, lun_json(scsi_target_lun(tgt->scsi, port, lun), port, lun));
}

static void removed(int ret, void *opaque)
{
    struct ctl_call *call = opaque;

    if (ret < 0) {
        ctl_call_fail(call, ret, ret == -ENOENT ? "no LUN is mapped there" : NULL);
    } else {
        ctl_call_reply(call, NULL);
    }
}

static void m_lun_remove(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "target", JSON_M_INT, true }, { "lun", JSON_M_INT },
    };
    struct target *tgt = opaque;
    unsigned port, lun;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !lun_address(call, params, &port, &lun)) {
        return;
    }
    target_lun_remove(tgt, port, lun, removed, call);
}

static void m_lun_resize(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "target", JSON_M_INT, true }, { "lun", JSON_M_INT }, { "size", JSON_M_ANY, true },
    };
    struct target *tgt = opaque;
    unsigned port, lun;
    uint64_t size = 0;
    JsonNode *sz;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !lun_address(call, params, &port, &lun)) {
        return;
    }
    /* Bytes as a number, or a size string as --lun takes ("20G"); absent: re-read. */
    sz = json_object_get_member(params, "size");
    if (sz && JSON_NODE_HOLDS_VALUE(sz) && json_node_get_value_type(sz) == G_TYPE_INT64 &&
        json_node_get_int(sz) > 0) {
        size = (uint64_t)json_node_get_int(sz);
    } else if (sz && JSON_NODE_HOLDS_VALUE(sz) && json_node_get_value_type(sz) == G_TYPE_STRING &&
               size_parse(json_node_get_string(sz), &size) == 0 && size > 0) {
        /* parsed */
    } else if (sz) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0,
                       "size must be a positive number of bytes or a size like \"20G\"");
        return;
    }
    ret = target_lun_resize(tgt, port, lun, size);
    if (ret < 0) {
        ctl_call_fail(call, ret, ret == -ENOENT   ? "no LUN is mapped there"
                                 : ret == -EINVAL ? "refused: smaller than now, or not whole "
                                                    "blocks"
                                 : ret == -ENOTSUP ? "this backend cannot grow"
                                                   : NULL);
        return;
    }
    ctl_call_reply(call, lun_json(scsi_target_lun(tgt->scsi, port, lun), port, lun));
}

static const struct ctl_method methods[] = {
    { "version", m_version },
    { "lun-list", m_lun_list },
    { "lun-add", m_lun_add },
    { "lun-remove", m_lun_remove },
    { "lun-resize", m_lun_resize },
};

int target_control_start(struct target *tgt)
{
    struct ctl_server_config cfg = {
        .name = tgt->opts->control_path, .main = tgt->main, .methods = methods,
        .nmethods = G_N_ELEMENTS(methods), .opaque = tgt,
    };

    tgt->ctl = ctl_server_new(&cfg, tgt->opts->control_path);
    return tgt->ctl ? 0 : -EIO;
}

void target_control_stop(struct target *tgt)
{
    ctl_server_free(tgt->ctl);
    tgt->ctl = NULL;
}
