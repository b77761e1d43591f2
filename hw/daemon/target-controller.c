/*
 * The daemon's controllers (target.h): each a vhost-user socket with its
 * own SCSI target (LUN map), access control, queue count and initiator
 * port name, made by the command line (the default one), the --config
 * file or controller-add, removed by controller-remove once it has no
 * LUNs and no connections.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "target.h"
#include "vs-error.h"

/*
 * A controller's socket logs a connection's arrival and departure: a burst
 * big enough for every front-end the default limit admits to connect and
 * go at once (a host's VMs after a restart of the daemon) before the limit
 * of one line a second holds a reconnecting loop.
 */
#define CONTROLLER_LOG_BURST (2 * TARGET_DEFAULT_MAX_CONNECTIONS)

struct controller *target_controller_find(struct target *tgt, const char *name)
{
    if (!name) {
        return tgt->dflt;
    }
    for (GList *l = tgt->controllers; l; l = l->next) {
        if (!strcmp(((struct controller *)l->data)->name, name)) {
            return l->data;
        }
    }
    return NULL;
}

struct controller *target_controller_new(struct target *tgt, const char *name,
                                         const GArray *uids, const GArray *gids,
                                         unsigned queues)
{
    struct controller *ctrl = g_new0(struct controller, 1);

    ctrl->tgt = tgt;
    ctrl->name = g_strdup(name);
    ctrl->initiator = g_strdup_printf("iqn.2026-12.org.vhost-scsi:%s", name);
    ctrl->scsi = scsi_target_new(name);
    ctrl->listen_fd = -1;
    ctrl->queues = queues;
    ctrl->allow_uids = g_array_new(FALSE, FALSE, sizeof(uid_t));
    ctrl->allow_gids = g_array_new(FALSE, FALSE, sizeof(gid_t));
    io_stats_init(&ctrl->stats);
    {
        g_autofree char *who = g_strdup_printf("controller %s's connections", name);

        log_limit_init(&ctrl->log, who, CONTROLLER_LOG_BURST, LOG_LIMIT_PER_SEC);
    }
    if (uids) {
        g_array_append_vals(ctrl->allow_uids, uids->data, uids->len);
    }
    if (gids) {
        g_array_append_vals(ctrl->allow_gids, gids->data, gids->len);
    }
    if (tgt->threads) {
        /* Tables a LUN change replaces are freed once these threads have moved on. */
        scsi_target_set_threads(ctrl->scsi, tgt->main, tgt->threads, tgt->nthreads);
    }
    tgt->controllers = g_list_append(tgt->controllers, ctrl);
    return ctrl;
}

/*
 * Listens on fd, or on a new socket at path, and watches it: fd with a
 * path is a socket target_listen_on made there (the controller removes
 * it), fd without one an inherited socket.
 */
int target_controller_listen(struct controller *ctrl, const char *path, int fd,
                             const struct target_file_id *made, const char *group,
                             GError **err)
{
    struct target_file_id id;
    int ret;

    if (fd < 0) {
        fd = target_listen_on(path, group, &id, err);
        if (fd < 0) {
            return fd;
        }
        made = &id;
    }
    if (path) {
        ctrl->socket_path = g_strdup(path);
        ctrl->socket_group = g_strdup(group);
        ctrl->socket_id = *made;
    }
    ctrl->listen_fd = fd;
    ret = target_accept_watch(ctrl);
    if (ret < 0) {
        return vs_error_set(err, ret, "cannot watch socket %s", path ? path : "its fd");
    }
    return 0;
}

void target_controller_free(struct controller *ctrl)
{
    struct target *tgt = ctrl->tgt;

    /* At exit the loop has gone before the controllers (their grace periods ran in it). */
    if (ctrl->watched && tgt->main) {
        iothread_del_fd(tgt->main, ctrl->listen_fd);
    }
    if (ctrl->listen_fd >= 0) {
        close(ctrl->listen_fd);
    }
    if (ctrl->socket_path) {
        target_socket_unlink(ctrl->socket_path, &ctrl->socket_id);
    }
    /* No connection is left: no nexus reads its tables. */
    scsi_target_free(ctrl->scsi);
    tgt->controllers = g_list_remove(tgt->controllers, ctrl);
    g_array_free(ctrl->allow_uids, TRUE);
    g_array_free(ctrl->allow_gids, TRUE);
    io_stats_destroy(&ctrl->stats);
    log_limit_end(&ctrl->log);
    g_free(ctrl->socket_path);
    g_free(ctrl->socket_group);
    g_free(ctrl->initiator);
    g_free(ctrl->name);
    g_free(ctrl);
}

void target_controller_set_initiator(struct controller *ctrl, const char *initiator)
{
    if (initiator && *initiator) {
        g_free(ctrl->initiator);
        ctrl->initiator = g_strdup(initiator);
    }
}

int target_controller_check(struct target *tgt, const char *name, const char *socket,
                            GError **err)
{
    if (!target_name_ok(name) || strchr(name, '/')) {
        return vs_error_set(err, -EINVAL,
                            "controller name '%s': 1-64 of A-Z a-z 0-9 . _ : -", name);
    }
    if (target_controller_find(tgt, name)) {
        return vs_error_set(err, -EEXIST, "a controller named '%s' exists", name);
    }
    for (GList *l = tgt->controllers_adding; l; l = l->next) {
        const struct controller_pending *p = l->data;

        if (p->name && !strcmp(p->name, name)) {
            return vs_error_set(err, -EEXIST, "a controller named '%s' is being added", name);
        }
        if (socket && !strcmp(p->socket, socket)) {
            return vs_error_set(err, -EADDRINUSE,
                                "%s is being made %s controller's socket, or removed", socket,
                                p->name ? p->name : "a removed");
        }
    }
    for (GList *l = tgt->controllers; socket && l; l = l->next) {
        const char *other = ((struct controller *)l->data)->socket_path;

        if (other && !strcmp(other, socket)) {
            return vs_error_set(err, -EADDRINUSE, "%s is controller %s's socket", socket,
                                ((struct controller *)l->data)->name);
        }
    }
    return 0;
}

int target_controller_add(struct target *tgt, const char *name, const char *socket, int fd,
                          const struct target_file_id *made, const char *group, const GArray *uids, const GArray *gids,
                          unsigned queues, struct controller **out, GError **err)
{
    struct controller *ctrl;
    int ret = target_controller_check(tgt, name, socket, err);

    if (ret < 0) {
        return ret;
    }
    ctrl = target_controller_new(tgt, name, uids, gids, queues);
    ret = target_controller_listen(ctrl, socket, fd, made, group, err);
    if (ret < 0) {
        g_prefix_error(err, "controller %s: ", name);
        target_controller_free(ctrl);
        return ret;
    }
    g_message("controller %s: listening on %s", name, socket ? socket : "an inherited socket");
    if (out) {
        *out = ctrl;
    }
    return 0;
}

int target_controller_remove(struct target *tgt, const char *name, char **socket,
                             struct target_file_id *id, GError **err)
{
    struct controller *ctrl = target_controller_find(tgt, name);

    if (!ctrl) {
        return vs_error_set(err, -ENOENT, "no controller named '%s'", name);
    }
    if (ctrl == tgt->dflt) {
        return vs_error_set(err, -EPERM, "the default controller stays (it is the command line's)");
    }
    if (ctrl->nconns || scsi_target_lun_count(ctrl->scsi)) {
        return vs_error_set(err, -EBUSY,
                            "controller %s has %u connection(s) and %u LUN(s); unmap its "
                            "LUNs and let its VMs go first", name, ctrl->nconns,
                            scsi_target_lun_count(ctrl->scsi));
    }
    g_message("controller %s: removed", name);
    /* Its socket file is the caller's to remove, off the main thread. */
    *socket = g_steal_pointer(&ctrl->socket_path);
    *id = ctrl->socket_id;
    target_controller_free(ctrl);
    return 0;
}
