/*
 * The daemon's control methods (include/daemon/target.h), served on the --control
 * socket (control-server.h): version; named backends (backend-add — for
 * iSCSI answered once it has opened off the main thread — -remove,
 * -resize, -list); mappings (lun-map, lun-unmap — answered once the LUN's
 * commands have drained — lun-list, and the shortcuts lun-add, answered
 * like backend-add, lun-remove, lun-resize that make and drop an implicit
 * backend); controllers (controller-add, answered once its socket
 * listens, controller-remove, once its socket file is gone: both made off
 * the main thread); connection-list.
 * Each checks its params against a schema first, so a wrong type or an
 * unknown member is an "invalid params" error naming the member.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <glib.h>

#include "backend.h"
#include "lun-spec.h"
#include "json-strict.h"
#include "size.h"
#include "target.h"
#include "vs-error.h"

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

static void add_str(JsonBuilder *b, const char *k, const char *v)
{
    json_builder_set_member_name(b, k);
    json_builder_add_string_value(b, v);
}

static void add_int(JsonBuilder *b, const char *k, gint64 v)
{
    json_builder_set_member_name(b, k);
    json_builder_add_int_value(b, v);
}

/* The device fields a LUN and its backend share. */
static void add_device(JsonBuilder *b, struct scsi_lun *l)
{
    struct lun_backend *be = scsi_lun_backend(l);

    add_str(b, "device", be->name);
    add_int(b, "size", (gint64)backend_size(be));
    add_int(b, "block_size", be->block_size);
    json_builder_set_member_name(b, "read_only");
    json_builder_add_boolean_value(b, be->read_only);
}

/* The controller "controller" names (absent: the default one); NULL, answered, if none. */
static struct controller *controller_param(struct ctl_call *call, JsonObject *params,
                                           struct target *tgt)
{
    const char *name = json_object_get_string_member_with_default(params, "controller", NULL);
    struct controller *ctrl = target_controller_find(tgt, name);

    if (!ctrl) {
        ctl_call_fail(call, -ENOENT, "no such controller");
    }
    return ctrl;
}

static JsonNode *lun_json(struct controller *ctrl, unsigned port, unsigned lun)
{
    struct scsi_lun *l = scsi_target_lun(ctrl->scsi, port, lun);
    struct target_backend *tb = target_backend_of(ctrl->tgt, l);
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    add_str(b, "controller", ctrl->name);
    add_int(b, "target", port);
    add_int(b, "lun", lun);
    add_str(b, "backend", tb ? tb->name : scsi_lun_name(l));
    add_device(b, l);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static JsonNode *backend_json(struct target *tgt, struct target_backend *tb)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *spec = lun_spec_redact(tb->spec);

    json_builder_begin_object(b);
    add_str(b, "name", tb->name);
    /* Without an iSCSI password: what list shows may end up in a ticket. */
    add_str(b, "spec", spec);
    add_device(b, tb->lun);
    json_builder_set_member_name(b, "implicit");
    json_builder_add_boolean_value(b, tb->implicit);
    {
        struct scsi_qos q;

        scsi_lun_get_qos(tb->lun, &q);
        json_builder_set_member_name(b, "qos");
        json_builder_begin_object(b);
        add_int(b, "iops", (gint64)MIN(q.iops, (uint64_t)G_MAXINT64));
        add_int(b, "bandwidth", (gint64)MIN(q.bytes_per_s, (uint64_t)G_MAXINT64));
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "mapped_at");
    json_builder_begin_array(b);
    for (GList *c = tgt->controllers; c; c = c->next) {
        struct controller *ctrl = c->data;

        for (unsigned i = 0; i < scsi_target_lun_count(ctrl->scsi); i++) {
            unsigned port, lun;

            if (scsi_target_lun_at(ctrl->scsi, i) != tb->lun) {
                continue;
            }
            scsi_target_lun_id_at(ctrl->scsi, i, &port, &lun);
            json_builder_begin_object(b);
            add_str(b, "controller", ctrl->name);
            add_int(b, "target", port);
            add_int(b, "lun", lun);
            json_builder_end_object(b);
        }
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void m_version(struct ctl_call *call, JsonObject *params, void *opaque)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
#ifdef VHOST_SCSI_TEST_HOOKS
    if (((struct target *)opaque)->opts->fault_refused_call) {
        /* A call no set allows and none makes fatal: the filter refuses it with ENOSYS. */
        if (syscall(SYS_getpgid, 0) < 0 && errno != ENOSYS) {
            g_warning("getpgid: %s", g_strerror(errno));
        }
    }
#endif
    json_builder_begin_object(b);
    add_str(b, "program", "vhost-scsi-target");
    add_str(b, "version", VHOST_SCSI_VERSION);
    add_int(b, "protocol", CONTROL_PROTOCOL);
    json_builder_end_object(b);
    ctl_call_reply(call, json_builder_get_root(b));
}

static JsonNode *array_node(JsonArray *a)
{
    JsonNode *n = json_node_new(JSON_NODE_ARRAY);

    json_node_take_array(n, a);
    return n;
}

static void m_lun_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "controller", JSON_M_STR, true } };
    struct target *tgt = opaque;
    struct controller *only = NULL;
    JsonArray *a;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    if (json_object_has_member(params, "controller") &&
        !(only = controller_param(call, params, tgt))) {
        return;
    }
    a = json_array_new();
    for (GList *c = tgt->controllers; c; c = c->next) {
        struct controller *ctrl = c->data;

        for (unsigned i = 0; (!only || ctrl == only) && i < scsi_target_lun_count(ctrl->scsi);
             i++) {
            unsigned port, lun;

            scsi_target_lun_id_at(ctrl->scsi, i, &port, &lun);
            json_array_add_element(a, lun_json(ctrl, port, lun));
        }
    }
    ctl_call_reply(call, array_node(a));
}

/*
 * Fails call with err, its code the answer's errno (logged: a refused
 * control request is an operator's event, and the daemon's log is where
 * the program says it).
 */
static void fail(struct ctl_call *call, const char *what, const GError *err)
{
    g_warning("control: %s: %s", what, err->message);
    ctl_call_fail_error(call, err);
}

static void lun_added(const struct target_added *a, void *opaque)
{
    struct ctl_call *call = opaque;

    if (a->ret < 0) {
        fail(call, "lun-add", a->err);
        return;
    }
    ctl_call_reply(call, lun_json(a->ctrl, a->port, a->lun));
}

/* Answered later for a backend that opens slowly (target-opening.c). */
static void m_lun_add(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "controller", JSON_M_STR, true }, { "lun", JSON_M_STR },
    };
    struct target *tgt = opaque;
    struct controller *ctrl;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !(ctrl = controller_param(call, params, tgt))) {
        return;
    }
    target_lun_add_async(ctrl, json_object_get_string_member(params, "lun"), lun_added, call);
}

static void unmapped(int ret, void *opaque)
{
    struct ctl_call *call = opaque;

    if (ret < 0) {
        ctl_call_fail(call, ret, ret == -ENOENT ? "no LUN is mapped there" : NULL);
    } else {
        ctl_call_reply(call, NULL);
    }
}

/* lun-remove and lun-unmap: the same unmapping (an implicit backend goes with it). */
static void m_lun_unmap(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "controller", JSON_M_STR, true }, { "target", JSON_M_INT, true }, { "lun", JSON_M_INT },
    };
    struct target *tgt = opaque;
    struct controller *ctrl;
    unsigned port, lun;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !lun_address(call, params, &port, &lun) || !(ctrl = controller_param(call, params, tgt))) {
        return;
    }
    target_lun_unmap(ctrl, port, lun, unmapped, call);
}

/* "size": bytes as a number, or a size string as --lun takes ("20G"); absent: 0. */
static bool size_param(struct ctl_call *call, JsonObject *params, uint64_t *size)
{
    JsonNode *sz = json_object_get_member(params, "size");

    *size = 0;
    if (!sz) {
        return true;
    }
    if (JSON_NODE_HOLDS_VALUE(sz) && json_node_get_value_type(sz) == G_TYPE_INT64 &&
        json_node_get_int(sz) > 0) {
        *size = (uint64_t)json_node_get_int(sz);
        return true;
    }
    if (JSON_NODE_HOLDS_VALUE(sz) && json_node_get_value_type(sz) == G_TYPE_STRING &&
        size_parse(json_node_get_string(sz), size) == 0 && *size > 0) {
        return true;
    }
    ctl_call_error(call, CTL_E_INVALID_PARAMS, 0,
                   "size must be a positive number of bytes or a size like \"20G\"");
    return false;
}

/* A lun-resize's address, for its answer once the resize is done. */
struct lun_resizing {
    struct ctl_call *call;
    char *ctrl_name;
    unsigned port, lun;
};

static void lun_resized(struct target *tgt, int ret, const GError *err, void *opaque)
{
    struct lun_resizing *r = opaque;
    struct controller *ctrl = target_controller_find(tgt, r->ctrl_name);
    g_autoptr(GError) gone = NULL;

    if (ret == 0 && (!ctrl || !scsi_target_lun(ctrl->scsi, r->port, r->lun))) {
        ret = vs_error_set(&gone, -ENOENT, "grown, but unmapped meanwhile");
        err = gone;
    }
    if (ret < 0) {
        fail(r->call, "lun-resize", err);
    } else {
        ctl_call_reply(r->call, lun_json(ctrl, r->port, r->lun));
    }
    g_free(r->ctrl_name);
    g_free(r);
}

/* Answered once the backend has grown (target-resize.c). */
static void m_lun_resize(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "controller", JSON_M_STR, true }, { "target", JSON_M_INT, true }, { "lun", JSON_M_INT },
        { "size", JSON_M_ANY, true },
    };
    struct target *tgt = opaque;
    struct target_backend *tb;
    struct controller *ctrl;
    struct lun_resizing *r;
    unsigned port, lun;
    uint64_t size;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !lun_address(call, params, &port, &lun) || !size_param(call, params, &size) ||
        !(ctrl = controller_param(call, params, tgt))) {
        return;
    }
    tb = target_backend_of(tgt, scsi_target_lun(ctrl->scsi, port, lun));
    if (!tb) {
        ctl_call_fail(call, -ENOENT, "no LUN is mapped there");
        return;
    }
    r = g_new0(struct lun_resizing, 1);
    r->call = call;
    r->ctrl_name = g_strdup(ctrl->name);
    r->port = port;
    r->lun = lun;
    target_backend_resize_async(tgt, tb->name, size, lun_resized, r);
}

static void m_lun_map(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "controller", JSON_M_STR, true }, { "target", JSON_M_INT, true }, { "lun", JSON_M_INT },
        { "backend", JSON_M_STR },
    };
    struct target *tgt = opaque;
    g_autoptr(GError) err = NULL;
    struct controller *ctrl;
    unsigned port, lun;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !lun_address(call, params, &port, &lun) || !(ctrl = controller_param(call, params, tgt))) {
        return;
    }
    ret = target_lun_map(ctrl, port, lun, json_object_get_string_member(params, "backend"), &err);
    if (ret < 0) {
        fail(call, "lun-map", err);
        return;
    }
    ctl_call_reply(call, lun_json(ctrl, port, lun));
}

static void backend_added(const struct target_added *a, void *opaque)
{
    struct ctl_call *call = opaque;

    if (a->ret < 0) {
        fail(call, "backend-add", a->err);
        return;
    }
    ctl_call_reply(call, backend_json(a->tgt, a->backend));
}

/* Answered later for a backend that opens slowly (target-opening.c). */
static void m_backend_add(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "name", JSON_M_STR }, { "spec", JSON_M_STR } };
    struct target *tgt = opaque;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    target_backend_add_async(tgt, json_object_get_string_member(params, "name"),
                             json_object_get_string_member(params, "spec"), backend_added, call);
}

static void m_backend_remove(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "name", JSON_M_STR } };
    struct target *tgt = opaque;
    g_autoptr(GError) err = NULL;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    ret = target_backend_remove(tgt, json_object_get_string_member(params, "name"), &err);
    if (ret < 0) {
        fail(call, "backend-remove", err);
        return;
    }
    ctl_call_reply(call, NULL);
}

struct backend_resizing {
    struct ctl_call *call;
    char *name;
};

static void backend_resized(struct target *tgt, int ret, const GError *err, void *opaque)
{
    struct backend_resizing *r = opaque;
    struct target_backend *tb = target_backend_find(tgt, r->name);
    g_autoptr(GError) gone = NULL;

    if (ret < 0) {
        fail(r->call, "backend-resize", err);
    } else if (!tb) {
        vs_error_set(&gone, -ENOENT, "grown, but removed meanwhile");
        fail(r->call, "backend-resize", gone);
    } else {
        ctl_call_reply(r->call, backend_json(tgt, tb));
    }
    g_free(r->name);
    g_free(r);
}

/* Answered once the backend has grown (target-resize.c). */
static void m_backend_resize(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "name", JSON_M_STR }, { "size", JSON_M_ANY, true } };
    struct target *tgt = opaque;
    struct backend_resizing *r;
    uint64_t size;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) || !size_param(call, params, &size)) {
        return;
    }
    r = g_new0(struct backend_resizing, 1);
    r->call = call;
    r->name = g_strdup(json_object_get_string_member_with_default(params, "name", ""));
    target_backend_resize_async(tgt, r->name, size, backend_resized, r);
}

/* A rate param: absent (unchanged), a count >= 0, or for bandwidth a size ("100M"). */
static bool rate_param(struct ctl_call *call, JsonObject *params, const char *key,
                       bool sizes, uint64_t *v)
{
    JsonNode *n = json_object_get_member(params, key);

    if (!n) {
        return true;
    }
    if (JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64 &&
        json_node_get_int(n) >= 0) {
        *v = (uint64_t)json_node_get_int(n);
        return true;
    }
    if (sizes && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING &&
        size_parse(json_node_get_string(n), v) == 0) {
        return true;
    }
    ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "%s must be %s (0: no limit)", key,
                   sizes ? "bytes per second, a number or a size like \"100M\"" :
                           "commands per second, a number >= 0");
    return false;
}

/* Rate limits on a backend: each one given is set, each one left out stays. */
static void m_qos_set(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "backend", JSON_M_STR }, { "iops", JSON_M_ANY, true }, { "bandwidth", JSON_M_ANY, true },
    };
    struct target *tgt = opaque;
    struct target_backend *tb;
    struct scsi_qos q;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    tb = target_backend_find(tgt, json_object_get_string_member(params, "backend"));
    if (!tb) {
        ctl_call_fail(call, -ENOENT, "no such backend");
        return;
    }
    scsi_lun_get_qos(tb->lun, &q);
    if (!rate_param(call, params, "iops", false, &q.iops) ||
        !rate_param(call, params, "bandwidth", true, &q.bytes_per_s)) {
        return;
    }
    scsi_lun_set_qos(tb->lun, &q);
    ctl_call_reply(call, backend_json(tgt, tb));
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(((const struct target_backend *)a)->name,
                  ((const struct target_backend *)b)->name);
}

static void m_backend_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct target *tgt = opaque;
    g_autoptr(GList) all = NULL;
    JsonArray *a;

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
    all = g_list_sort(g_hash_table_get_values(tgt->backends), by_name);
    a = json_array_new();
    for (GList *l = all; l; l = l->next) {
        json_array_add_element(a, backend_json(tgt, l->data));
    }
    ctl_call_reply(call, array_node(a));
}

/* A config-save: the text is made on the main thread, written on a job's. */
struct config_saving {
    struct ctl_call *call;
    char *file;
    char *text;
    GError *err;
};

static void saving_free(struct config_saving *c)
{
    g_free(c->file);
    g_free(c->text);
    g_clear_error(&c->err);
    g_free(c);
}

static int save_run(void *arg)
{
    struct config_saving *c = arg;

    return target_config_write(c->file, c->text, &c->err);
}

static void save_answer(struct config_saving *c, int ret)
{
    if (ret < 0) {
        fail(c->call, "config-save", c->err);
        return;
    }
    ctl_call_reply(c->call, json_node_init_string(json_node_alloc(), c->file));
}

static void save_done(void *arg, int ret)
{
    save_answer(arg, ret);
    saving_free(arg);
}

static void save_abandoned(void *arg, int why)
{
    struct config_saving *c = arg;
    g_autoptr(GError) err = NULL;

    vs_error_set(&err, why, "%s: %s", c->file,
                 why == -ETIMEDOUT ? "not written within --control-timeout-ms; it may still be"
                                   : "the daemon is shutting down");
    fail(c->call, "config-save", err);
}

static void save_discard(void *arg, int ret)
{
    saving_free(arg);
}

static const struct target_job_ops save_ops = {
    .run = save_run,
    .done = save_done,
    .abandoned = save_abandoned,
    .discard = save_discard,
};

/* Answered once the file is written (or not within --control-timeout-ms). */
static void m_config_save(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "file", JSON_M_STR, true } };
    struct target *tgt = opaque;
    struct config_saving *c;
    const char *file;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    file = json_object_get_string_member_with_default(params, "file", tgt->opts->config_path);
    if (!file || !*file) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0,
                       "no file: give \"file\" or start the daemon with --config");
        return;
    }
    c = g_new0(struct config_saving, 1);
    c->call = call;
    c->file = g_strdup(file);
    c->text = target_config_json(tgt);
    ret = target_job_start(tgt, "config-save", &save_ops, c, true, &c->err);
    if (ret < 0) {
        save_answer(c, ret);
        saving_free(c);
    }
}

static JsonNode *controller_json(struct controller *ctrl)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    add_str(b, "name", ctrl->name);
    if (ctrl->socket_path) {
        add_str(b, "socket", ctrl->socket_path);
    }
    add_int(b, "queues", ctrl->queues);
    add_str(b, "initiator", ctrl->initiator);
    add_int(b, "luns", scsi_target_lun_count(ctrl->scsi));
    add_int(b, "connections", ctrl->nconns);
    json_builder_set_member_name(b, "allow_uid");
    json_builder_begin_array(b);
    for (guint i = 0; i < ctrl->allow_uids->len; i++) {
        json_builder_add_int_value(b, g_array_index(ctrl->allow_uids, uid_t, i));
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "allow_gid");
    json_builder_begin_array(b);
    for (guint i = 0; i < ctrl->allow_gids->len; i++) {
        json_builder_add_int_value(b, g_array_index(ctrl->allow_gids, gid_t, i));
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* An array of ids (uids or gids) from params[key]; false, answered, if it is not one. */
static bool ids_param(struct ctl_call *call, JsonObject *params, const char *key, GArray *out)
{
    JsonArray *a;

    if (!json_object_has_member(params, key)) {
        return true;
    }
    a = json_object_get_array_member(params, key);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *n = json_array_get_element(a, i);
        gint64 v;

        if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
            (v = json_node_get_int(n)) < 0 || v > (gint64)UINT32_MAX - 1) {
            ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "%s[%u] must be an id", key, i);
            return false;
        }
        {
            uint32_t id = (uint32_t)v;

            g_array_append_val(out, id);
        }
    }
    return true;
}

/*
 * A controller-add's socket work (a stale socket's removal, bind, the
 * group's look-up, chown, chmod) waits on the file system holding the
 * path and on the group database: a job does it, and the request is
 * answered when it is done, or at --control-timeout-ms.
 */
struct controller_adding {
    struct controller_pending p;    /* in tgt->controllers_adding until answered */
    struct target *tgt;
    struct ctl_call *call;
    char *group;
    char *initiator;
    GArray *uids;
    GArray *gids;
    unsigned queues;
    int fd;                         /* the job's: the socket it made */
    struct target_file_id made;     /* the job's: its file */
    GError *err;                    /* the job's: why it did not */
};

static void adding_free(struct controller_adding *a)
{
    g_free(a->p.name);
    g_free(a->p.socket);
    g_free(a->group);
    g_free(a->initiator);
    g_array_unref(a->uids);
    g_array_unref(a->gids);
    g_clear_error(&a->err);
    g_free(a);
}

static int adding_run(void *arg)
{
    struct controller_adding *a = arg;

    a->fd = target_listen_on(a->p.socket, a->group, &a->made, &a->err);
    return a->fd < 0 ? a->fd : 0;
}

/* Main thread: the name and the socket are free again. */
static void adding_forget(struct controller_adding *a)
{
    a->tgt->controllers_adding = g_list_remove(a->tgt->controllers_adding, &a->p);
}

static void adding_done(void *arg, int ret)
{
    struct controller_adding *a = arg;
    struct target *tgt = a->tgt;
    g_autoptr(GError) err = NULL;
    struct controller *ctrl;

    adding_forget(a);
    if (ret == 0 && tgt->quitting) {
        close(a->fd);
        target_socket_unlink(a->p.socket, &a->made);
        ret = vs_error_set(&err, -ECANCELED, "%s: the daemon is shutting down", a->p.name);
    } else if (ret == 0) {
        ret = target_controller_add(tgt, a->p.name, a->p.socket, a->fd, &a->made, a->group,
                                    a->uids, a->gids, a->queues, &ctrl, &err);
    } else if (a->err) {
        g_propagate_prefixed_error(&err, g_steal_pointer(&a->err), "controller %s: ",
                                   a->p.name);
    } else {
        vs_error_set(&err, ret, "controller %s: %s", a->p.name, g_strerror(-ret));
    }
    if (ret < 0) {
        fail(a->call, "controller-add", err);
    } else {
        target_controller_set_initiator(ctrl, a->initiator);
        ctl_call_reply(a->call, controller_json(ctrl));
    }
    adding_free(a);
}

static void adding_abandoned(void *arg, int why)
{
    struct controller_adding *a = arg;
    g_autoptr(GError) err = NULL;

    vs_error_set(&err, why, "%s: %s", a->p.socket,
                 why == -ETIMEDOUT ? "not listening within --control-timeout-ms; no controller "
                                     "was added"
                                   : "the daemon is shutting down");
    adding_forget(a);
    fail(a->call, "controller-add", err);
}

/* The thread's, given up: a socket made after all is nobody's. */
static void adding_discard(void *arg, int ret)
{
    struct controller_adding *a = arg;

    if (ret == 0) {
        close(a->fd);
        target_socket_unlink(a->p.socket, &a->made);
    }
    adding_free(a);
}

static const struct target_job_ops adding_ops = {
    .run = adding_run,
    .done = adding_done,
    .abandoned = adding_abandoned,
    .discard = adding_discard,
};

static void m_controller_add(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "name", JSON_M_STR }, { "socket", JSON_M_STR }, { "queues", JSON_M_INT, true },
        { "allow_uid", JSON_M_ARR, true }, { "allow_gid", JSON_M_ARR, true },
        { "socket_group", JSON_M_STR, true }, { "initiator", JSON_M_STR, true },
    };
    struct target *tgt = opaque;
    g_autoptr(GArray) uids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    g_autoptr(GArray) gids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    g_autoptr(GError) err = NULL;
    struct controller_adding *a;
    const char *initiator, *name, *socket;
    gint64 queues;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec)) ||
        !ids_param(call, params, "allow_uid", uids) || !ids_param(call, params, "allow_gid", gids)) {
        return;
    }
    queues = json_object_get_int_member_with_default(params, "queues", tgt->opts->queues);
    if (queues < 1 || queues > tgt->opts->queues) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "queues must be 1..%u (the daemon's --queues)",
                       tgt->opts->queues);
        return;
    }
    initiator = json_object_get_string_member_with_default(params, "initiator", NULL);
    if (initiator && !target_initiator_ok(initiator)) {
        ctl_call_error(call, CTL_E_INVALID_PARAMS, 0, "initiator '%s': 1-%d of A-Z a-z 0-9 . - : _",
                       initiator, TARGET_INITIATOR_MAX);
        return;
    }
    name = json_object_get_string_member(params, "name");
    socket = json_object_get_string_member(params, "socket");
    ret = target_controller_check(tgt, name, socket, &err);
    if (ret < 0) {
        fail(call, "controller-add", err);
        return;
    }
    a = g_new0(struct controller_adding, 1);
    a->p.name = g_strdup(name);
    a->p.socket = g_strdup(socket);
    a->tgt = tgt;
    a->call = call;
    a->group = g_strdup(json_object_get_string_member_with_default(params, "socket_group", NULL));
    a->initiator = g_strdup(initiator);
    a->uids = g_array_ref(uids);
    a->gids = g_array_ref(gids);
    a->queues = (unsigned)queues;
    a->fd = -1;
    ret = target_job_start(tgt, "controller-add", &adding_ops, a, true, &err);
    if (ret < 0) {
        fail(call, "controller-add", err);
        adding_free(a);
        return;
    }
    tgt->controllers_adding = g_list_prepend(tgt->controllers_adding, &a->p);
}

/*
 * A controller-remove's socket file goes off the main thread too (an
 * unlink waits on the file system holding it): the controller is gone at
 * once, the request is answered when its file is, or at
 * --control-timeout-ms; the path is taken until then.
 */
struct controller_unlinking {
    struct controller_pending p;    /* in tgt->controllers_adding until answered */
    struct target_file_id id;       /* the file the controller made there */
    struct target *tgt;
    struct ctl_call *call;
};

static void unlinking_free(struct controller_unlinking *u)
{
    g_free(u->p.socket);
    g_free(u);
}

static int unlinking_run(void *arg)
{
    struct controller_unlinking *u = arg;

    target_test_socket_hold(u->p.socket);
    /* Given up, it may come after a newer controller made its socket there: that one stays. */
    return target_socket_unlink(u->p.socket, &u->id);
}

static void unlinking_done(void *arg, int ret)
{
    struct controller_unlinking *u = arg;
    g_autoptr(GError) err = NULL;

    u->tgt->controllers_adding = g_list_remove(u->tgt->controllers_adding, &u->p);
    if (ret < 0) {
        vs_error_set(&err, ret, "removed, but not its socket file %s: %s", u->p.socket,
                     g_strerror(-ret));
        fail(u->call, "controller-remove", err);
    } else {
        ctl_call_reply(u->call, NULL);
    }
    unlinking_free(u);
}

static void unlinking_abandoned(void *arg, int why)
{
    struct controller_unlinking *u = arg;
    g_autoptr(GError) err = NULL;

    vs_error_set(&err, why, "removed, but its socket file %s %s", u->p.socket,
                 why == -ETIMEDOUT ? "not within --control-timeout-ms"
                                   : "not before the daemon stopped");
    u->tgt->controllers_adding = g_list_remove(u->tgt->controllers_adding, &u->p);
    fail(u->call, "controller-remove", err);
}

static void unlinking_discard(void *arg, int ret)
{
    unlinking_free(arg);
}

static const struct target_job_ops unlinking_ops = {
    .run = unlinking_run,
    .done = unlinking_done,
    .abandoned = unlinking_abandoned,
    .discard = unlinking_discard,
};

static void m_controller_remove(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = { { "name", JSON_M_STR } };
    struct target *tgt = opaque;
    g_autoptr(GError) err = NULL;
    struct controller_unlinking *u;
    char *socket = NULL;
    struct target_file_id id;
    int ret;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    ret = target_controller_remove(tgt, json_object_get_string_member(params, "name"), &socket,
                                   &id, &err);
    if (ret < 0) {
        fail(call, "controller-remove", err);
        return;
    }
    if (!socket) {
        ctl_call_reply(call, NULL);
        return;
    }
    u = g_new0(struct controller_unlinking, 1);
    u->p.socket = socket;
    u->id = id;
    u->tgt = tgt;
    u->call = call;
    ret = target_job_start(tgt, "controller-remove", &unlinking_ops, u, true, &err);
    if (ret < 0) {
        /* Too many jobs: the file stays, the name and the path are free. */
        g_message("controller-remove: %s; its socket file %s is left", err->message, socket);
        ctl_call_reply(call, NULL);
        unlinking_free(u);
        return;
    }
    tgt->controllers_adding = g_list_prepend(tgt->controllers_adding, &u->p);
}

static void m_controller_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct target *tgt = opaque;
    JsonArray *a;

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
    a = json_array_new();
    for (GList *c = tgt->controllers; c; c = c->next) {
        json_array_add_element(a, controller_json(c->data));
    }
    ctl_call_reply(call, array_node(a));
}

static void m_connection_list(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct target *tgt = opaque;

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
    ctl_call_reply(call, target_connections_json(tgt));
}

/*
 * Per backend and per controller; "controller" or "backend" narrows it to
 * one.  Each object's interval runs from the previous call of the same
 * client that reported it: the client's marks are its own, kept with its
 * connection (docs/control.md).
 */
static void m_stats(struct ctl_call *call, JsonObject *params, void *opaque)
{
    static const struct json_member spec[] = {
        { "controller", JSON_M_STR, true }, { "backend", JSON_M_STR, true },
    };
    struct target *tgt = opaque;
    struct controller *ctrl = NULL;
    struct target_backend *tb = NULL;
    struct stats_marks *marks;
    const char *name;

    if (!params_ok(call, params, spec, G_N_ELEMENTS(spec))) {
        return;
    }
    if (json_object_has_member(params, "controller") &&
        !(ctrl = controller_param(call, params, tgt))) {
        return;
    }
    name = json_object_get_string_member_with_default(params, "backend", NULL);
    if (name && !(tb = target_backend_find(tgt, name))) {
        ctl_call_fail(call, -ENOENT, "no such backend");
        return;
    }
    marks = ctl_call_client_data(call, "stats-marks");
    if (!marks) {
        ctl_call_set_client_data(call, "stats-marks", target_stats_marks_new(),
                                 target_stats_marks_free);
        marks = ctl_call_client_data(call, "stats-marks");
    }
    if (!marks) {
        ctl_call_reply(call, NULL);     /* its client has gone: answered nowhere */
        return;
    }
    ctl_call_reply(call, target_stats_json(tgt, marks, ctrl, tb));
}

/* The same counters as Prometheus text (a string), for a textfile collector. */
static void m_stats_prometheus(struct ctl_call *call, JsonObject *params, void *opaque)
{
    struct target *tgt = opaque;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *text = NULL;

    if (!params_ok(call, params, NULL, 0)) {
        return;
    }
    text = target_stats_prometheus(tgt);
    json_builder_begin_object(b);
    add_str(b, "content_type", "text/plain; version=0.0.4");
    add_str(b, "text", text);
    json_builder_end_object(b);
    ctl_call_reply(call, json_builder_get_root(b));
}

static const struct ctl_method methods[] = {
    { "version", m_version },
    { "lun-list", m_lun_list },
    { "lun-add", m_lun_add },
    { "lun-remove", m_lun_unmap },
    { "lun-resize", m_lun_resize },
    { "lun-map", m_lun_map },
    { "lun-unmap", m_lun_unmap },
    { "backend-add", m_backend_add },
    { "backend-remove", m_backend_remove },
    { "backend-resize", m_backend_resize },
    { "backend-list", m_backend_list },
    { "connection-list", m_connection_list },
    { "controller-add", m_controller_add },
    { "controller-remove", m_controller_remove },
    { "controller-list", m_controller_list },
    { "config-save", m_config_save },
    { "stats", m_stats },
    { "qos-set", m_qos_set },
    { "stats-prometheus", m_stats_prometheus },
};

int target_control_start(struct target *tgt, GError **err)
{
    struct ctl_server_config cfg = {
        .name = tgt->opts->control_path, .main = tgt->main, .methods = methods,
        .nmethods = G_N_ELEMENTS(methods), .opaque = tgt,
        .max_request = tgt->opts->control_max_request,
    };

    g_autoptr(GError) why = NULL;

    tgt->ctl = ctl_server_new(&cfg, tgt->opts->control_path, &why);
    if (!tgt->ctl) {
        int ret = vs_error_errno(why);

        g_propagate_error(err, g_steal_pointer(&why));
        return ret;
    }
    return 0;
}

void target_control_stop(struct target *tgt)
{
    ctl_server_free(tgt->ctl);
    tgt->ctl = NULL;
}
