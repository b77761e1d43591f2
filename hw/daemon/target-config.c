/*
 * The daemon's saved configuration (include/daemon/target.h): `--config FILE`
 * brings back the backends and LUN mappings that `config-save` wrote, so
 * a restart (or a systemd unit) serves the same disks.  The file is JSON,
 * parsed through json-strict.h:
 *
 *   {"version": 1,
 *    "backends": [{"name": "data", "spec": "file:/var/d.img,direct", "implicit": false}],
 *    "controllers": [{"name": "default", "socket": "/run/vm1.sock",
 *                     "luns": [{"target": 0, "lun": 1, "backend": "data"}]}]}
 *
 * "default" is the command line's controller (--socket-path / --fd, --lun,
 * --allow-*): its socket in the file is used only when the command line
 * gives none; every other controller has its own socket, queues and
 * allowed peers, as controller-add made it.  Saving is atomic: a temporary file in
 * the same directory, written, fsynced, renamed over the old one, and the
 * directory fsynced, so a crash leaves the old file or the new one, never
 * half of one.  The file is mode 0600: an iSCSI spec may carry a password.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "json-member.h"
#include "json-strict.h"
#include "scsi-disk.h"
#include "target.h"
#include "vs-error.h"

#define CONFIG_MAX_BYTES (16u << 20)

/* An array of ids from o[key] (absent: empty); false if an element is not one. */
static bool ids_of(JsonObject *o, const char *key, GArray *out)
{
    JsonArray *a = json_array_member_or_null(o, key);

    for (guint i = 0; a && i < json_array_get_length(a); i++) {
        JsonNode *n = json_array_get_element(a, i);
        uint32_t id;

        if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64 ||
            json_node_get_int(n) < 0 || json_node_get_int(n) > (gint64)UINT32_MAX - 1) {
            return false;
        }
        id = (uint32_t)json_node_get_int(n);
        g_array_append_val(out, id);
    }
    return true;
}

/*
 * The controllers' sockets could be made, before any backend opens (the
 * default's only where the command line leaves it to the file).
 */
static int sockets_check(struct target *tgt, const char *file, JsonArray *controllers,
                         GError **err)
{
    bool dflt_given = tgt->opts->socket_path || tgt->opts->listen_fd >= 0;

    for (guint i = 0; i < json_array_get_length(controllers); i++) {
        JsonObject *c = json_array_get_object_element(controllers, i);
        const char *socket = json_object_get_string_member_with_default(c, "socket", NULL);
        int ret;

        if (!socket || (dflt_given && !strcmp(json_object_get_string_member(c, "name"),
                                              "default"))) {
            continue;
        }
        ret = target_socket_path_check("socket", socket, err);
        if (ret < 0) {
            g_prefix_error(err, "%s: controllers[%u]: ", file, i);
            return ret;
        }
    }
    return 0;
}

int target_config_load(struct target *tgt, const char *file, char **socket_path, GError **err)
{
    g_autofree char *text = NULL;
    g_autoptr(GError) gerr = NULL;
    g_autoptr(JsonNode) root = NULL;
    JsonObject *top;
    JsonArray *a;
    gsize len;
    int ret;

    *socket_path = NULL;
    if (!g_file_get_contents(file, &text, &len, &gerr)) {
        return vs_error_set(err, -ENOENT, "%s: %s", file, gerr->message);
    }
    if (len > CONFIG_MAX_BYTES) {
        return vs_error_set(err, -EFBIG, "%s: larger than %u bytes", file, CONFIG_MAX_BYTES);
    }
    root = target_config_parse(text, len, err);
    if (!root) {
        g_prefix_error(err, "%s: ", file);
        return -EINVAL;
    }
    top = json_node_get_object(root);
    ret = sockets_check(tgt, file, json_object_get_array_member(top, "controllers"), err);
    if (ret < 0) {
        return ret;
    }
    a = json_object_get_array_member(top, "backends");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *b = json_array_get_object_element(a, i);
        JsonObject *q = json_object_member_or_null(b, "qos");
        struct target_backend *tb;

        ret = target_backend_add(tgt, json_object_get_string_member(b, "name"),
                                 json_object_get_string_member(b, "spec"),
                                 json_object_get_boolean_member_with_default(b, "implicit",
                                                                             false),
                                 &tb, err);
        if (ret < 0) {
            g_prefix_error(err, "%s: backends[%u]: ", file, i);
            return ret;
        }
        if (q) {
            struct scsi_qos limits = {
                .iops = (uint64_t)json_object_get_int_member_with_default(q, "iops", 0),
                .bytes_per_s = (uint64_t)json_object_get_int_member_with_default(q, "bandwidth",
                                                                                 0),
            };

            scsi_lun_set_qos(tb->lun, &limits);
        }
    }
    a = json_object_get_array_member(top, "controllers");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *c = json_array_get_object_element(a, i);
        JsonArray *luns = json_object_get_array_member(c, "luns");
        const char *name = json_object_get_string_member(c, "name");
        struct controller *ctrl = target_controller_find(tgt, name);

        if (ctrl == tgt->dflt) {
            /* The command line's controller: its socket is the caller's to decide. */
            if (json_object_has_member(c, "socket")) {
                g_free(*socket_path);
                *socket_path = g_strdup(json_object_get_string_member(c, "socket"));
            }
        } else {
            g_autoptr(GArray) uids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
            g_autoptr(GArray) gids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
            gint64 queues = json_object_get_int_member_with_default(c, "queues",
                                                                    tgt->opts->queues);

            if (!ids_of(c, "allow_uid", uids) || !ids_of(c, "allow_gid", gids) || queues < 1 ||
                queues > tgt->opts->queues) {
                return vs_error_set(err, -EINVAL,
                                    "%s: controllers[%u]: allow_uid/allow_gid must be ids, "
                                    "queues 1..%u", file, i, tgt->opts->queues);
            }
            ret = target_controller_add(tgt, name, json_object_get_string_member(c, "socket"), -1,
                                        NULL,
                                        json_object_get_string_member_with_default(
                                            c, "socket_group", NULL),
                                        uids, gids, (unsigned)queues, &ctrl, err);
            if (ret < 0) {
                g_prefix_error(err, "%s: controllers[%u]: ", file, i);
                return ret;
            }
        }
        /* The default controller's too: a reconnecting VM keeps its registrations. */
        target_controller_set_initiator(ctrl, json_object_get_string_member_with_default(
                                                  c, "initiator", NULL));
        for (guint j = 0; j < json_array_get_length(luns); j++) {
            JsonObject *l = json_array_get_object_element(luns, j);
            gint64 port = json_object_get_int_member(l, "target");
            gint64 lun = json_object_get_int_member(l, "lun");

            if (port < 0 || port > SCSI_TARGET_MAX_PORT || lun < 0 || lun > SCSI_TARGET_MAX_LUN) {
                return vs_error_set(err, -EINVAL,
                                    "%s: controllers[%u].luns[%u]: target 0..%d, lun 0..%d",
                                    file, i, j, SCSI_TARGET_MAX_PORT, SCSI_TARGET_MAX_LUN);
            }
            ret = target_lun_map(ctrl, (unsigned)port, (unsigned)lun,
                                 json_object_get_string_member(l, "backend"), err);
            if (ret < 0) {
                g_prefix_error(err, "%s: controllers[%u].luns[%u]: ", file, i, j);
                return ret;
            }
        }
    }
    return 0;
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    return strcmp(((const struct target_backend *)a)->name,
                  ((const struct target_backend *)b)->name);
}

char *target_config_json(struct target *tgt)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autoptr(GList) all = g_list_sort(g_hash_table_get_values(tgt->backends), by_name);
    struct scsi_qos q;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "version");
    json_builder_add_int_value(b, TARGET_CONFIG_VERSION);
    json_builder_set_member_name(b, "backends");
    json_builder_begin_array(b);
    for (GList *l = all; l; l = l->next) {
        struct target_backend *tb = l->data;

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, tb->name);
        /* As given, password and all: the file is the daemon's, mode 0600. */
        json_builder_set_member_name(b, "spec");
        json_builder_add_string_value(b, tb->spec);
        json_builder_set_member_name(b, "implicit");
        json_builder_add_boolean_value(b, tb->implicit);
        scsi_lun_get_qos(tb->lun, &q);
        if (q.iops || q.bytes_per_s) {
            json_builder_set_member_name(b, "qos");
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "iops");
            json_builder_add_int_value(b, (gint64)MIN(q.iops, (uint64_t)G_MAXINT64));
            json_builder_set_member_name(b, "bandwidth");
            json_builder_add_int_value(b, (gint64)MIN(q.bytes_per_s, (uint64_t)G_MAXINT64));
            json_builder_end_object(b);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "controllers");
    json_builder_begin_array(b);
    for (GList *cl = tgt->controllers; cl; cl = cl->next) {
        struct controller *ctrl = cl->data;

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, ctrl->name);
        if (ctrl->socket_path) {
            json_builder_set_member_name(b, "socket");
            json_builder_add_string_value(b, ctrl->socket_path);
        }
        if (ctrl != tgt->dflt) {
            /* Else it came back 0600 and its VM, allowed by group, could not connect. */
            if (ctrl->socket_group) {
                json_builder_set_member_name(b, "socket_group");
                json_builder_add_string_value(b, ctrl->socket_group);
            }
            json_builder_set_member_name(b, "queues");
            json_builder_add_int_value(b, ctrl->queues);
            json_builder_set_member_name(b, "initiator");
            json_builder_add_string_value(b, ctrl->initiator);
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
        }
        json_builder_set_member_name(b, "luns");
        json_builder_begin_array(b);
        for (unsigned i = 0; i < scsi_target_lun_count(ctrl->scsi); i++) {
            struct target_backend *tb = target_backend_of(tgt, scsi_target_lun_at(ctrl->scsi, i));
            unsigned port, lun;

            scsi_target_lun_id_at(ctrl->scsi, i, &port, &lun);
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "target");
            json_builder_add_int_value(b, port);
            json_builder_set_member_name(b, "lun");
            json_builder_add_int_value(b, lun);
            json_builder_set_member_name(b, "backend");
            json_builder_add_string_value(b, tb->name);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int target_config_save(struct target *tgt, const char *file, GError **err)
{
    g_autofree char *text = target_config_json(tgt);

    return target_config_write(file, text, err);
}

int target_config_write(const char *file, const char *text, GError **err)
{
    g_autofree char *dir = g_path_get_dirname(file);
    g_autofree char *tmp = g_strdup_printf("%s.XXXXXX", file);
    int fd, dfd, ret;

    /* mkstemp creates it 0600. */
    fd = mkstemp(tmp);
    if (fd < 0) {
        ret = -errno;
        return vs_error_set(err, ret, "%s: cannot create a file beside it: %s", file,
                            g_strerror(-ret));
    }
    ret = write_all(fd, text, strlen(text));
    if (ret == 0) {
        ret = write_all(fd, "\n", 1);
    }
    if (ret == 0 && fsync(fd) < 0) {
        ret = -errno;
    }
    if (close(fd) < 0 && ret == 0) {
        ret = -errno;
    }
    if (ret == 0 && rename(tmp, file) < 0) {
        ret = -errno;
    }
    if (ret < 0) {
        unlink(tmp);
        return vs_error_set(err, ret, "%s: cannot write: %s", file, g_strerror(-ret));
    }
    /* The rename itself is durable once the directory is. */
    dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) < 0) {
        ret = -errno;
        vs_error_set(err, ret, "%s: saved, but its directory not synced: %s", file,
                     g_strerror(-ret));
    }
    if (dfd >= 0) {
        close(dfd);
    }
    if (ret == 0) {
        g_message("configuration saved to %s", file);
    }
    return ret;
}
