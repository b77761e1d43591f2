/*
 * The daemon's connections (target.h): one per front-end a controller
 * accepted (target-accept.c), a vhost-user conversation and a
 * virtio-scsi device over the controller's SCSI target.  A connection
 * that ends is freed once its queues are quiet.  Also the main loop's
 * timer, armed for the earliest message deadline of any connection or
 * the end of an accept back-off, and what connection-list and the
 * statistics read of them.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <glib.h>

#include "target.h"
#include "vhost-user-server.h"
#include "virtio-scsi.h"

struct conn {
    struct target *tgt;
    struct controller *ctrl;
    char name[32];
    int fd;
    uid_t uid;
    pid_t pid;
    uint32_t events;              /* what the main loop waits for on fd */
    struct vu_dev *vu;
    struct vscsi_dev *vs;
    bool closing;                 /* ended; freed once its queues are quiet */
};

static int conn_queue_start(void *opaque, unsigned idx, struct virtqueue *vq)
{
    struct conn *c = opaque;

    /* Fixed by now (FEATURES_OK before DRIVER_OK): which events the driver wants. */
    vscsi_dev_set_features(c->vs, vu_dev_features(c->vu));
    return vscsi_queue_start(c->vs, idx, vq);
}

static void conn_queue_stop(void *opaque, unsigned idx, struct virtqueue *vq)
{
    struct conn *c = opaque;

    vscsi_queue_stop(c->vs, idx, vq);
}

static int conn_queue_quiesce(void *opaque, unsigned idx, void (*done)(void *arg), void *arg)
{
    struct conn *c = opaque;

    return vscsi_queue_quiesce(c->vs, idx, done, arg);
}

static void conn_queue_resume(void *opaque, unsigned idx)
{
    struct conn *c = opaque;

    vscsi_queue_resume(c->vs, idx);
}

static void conn_wake(void *opaque);

static void conn_reset(void *opaque)
{
    struct conn *c = opaque;

    vscsi_dev_reset(c->vs);
}

static void conn_queue_broken(void *opaque, unsigned idx)
{
    struct conn *c = opaque;

    vu_dev_queue_error(c->vu, idx);
}

static const struct vu_dev_ops conn_ops = {
    .queue_start = conn_queue_start,
    .queue_stop = conn_queue_stop,
    .reset = conn_reset,
    .queue_quiesce = conn_queue_quiesce,
    .queue_resume = conn_queue_resume,
    .wake = conn_wake,
};

static void conn_free(struct conn *c)
{
    struct target *tgt = c->tgt;

    if (!c->closing) {
        iothread_del_fd(tgt->main, c->fd);
    }
    /* vu_dev_free stops the running queues through conn_ops first. */
    vu_dev_free(c->vu);
    vscsi_dev_free(c->vs);
    tgt->conns = g_list_remove(tgt->conns, c);
    tgt->nconns--;
    c->ctrl->nconns--;
    log_limit_message(&c->ctrl->log, "%s: disconnected", c->name);
    g_free(c);
}

/*
 * A connection that ended may still have I/O in flight on its queues,
 * into guest memory it maps: it is freed when that I/O has completed
 * (conn_wake), and the main loop goes on serving the others meanwhile.
 */
static void conn_close(struct conn *c)
{
    if (!c->closing) {
        c->closing = true;
        iothread_del_fd(c->tgt->main, c->fd);
        /* The front-end learns now that the connection is over. */
        shutdown(c->fd, SHUT_RDWR);
    }
    if (vu_dev_quiesce_all(c->vu)) {
        conn_free(c);
    } else {
        log_limit_message(&c->ctrl->log, "%s: waiting for its requests in flight before letting go",
                          c->name);
    }
}

static void conn_cb(void *opaque, uint32_t events)
{
    struct conn *c = opaque;
    struct target *tgt = c->tgt;
    uint32_t want, ev;
    int ret;

    /*
     * A hang-up is reported whatever we wait for, also while a message is
     * held and the socket is not read: the connection is over, and
     * waiting for the held message's queues would only spin on it.
     */
    if ((events & (EPOLLHUP | EPOLLERR)) && vu_dev_poll_events(c->vu) == 0) {
        conn_close(c);
        target_timer_update(tgt);
        return;
    }
    ret = vu_dev_dispatch(c->vu);
    if (ret < 0) {
        if (ret != -ECONNRESET) {
            log_limit_warning(&c->ctrl->log, "%s: closing connection: %s", c->name,
                              g_strerror(-ret));
        }
        conn_close(c);
        target_timer_update(tgt);
        return;
    }
    /*
     * A peer that does not take its replies is not read from until it
     * does, nor one whose message waits for its queues to quiesce.
     */
    ev = vu_dev_poll_events(c->vu);
    want = ev == POLLOUT ? EPOLLOUT : ev == POLLIN ? EPOLLIN : 0;
    if (want != c->events && iothread_mod_fd(tgt->main, c->fd, want) == 0) {
        c->events = want;
    }
    target_timer_update(tgt);
}

/* The device's queues went quiet: a held message or a closing connection goes on. */
static void conn_wake(void *opaque)
{
    struct conn *c = opaque;
    struct target *tgt = c->tgt;

    if (c->closing) {
        conn_close(c);          /* may free c */
        target_timer_update(tgt);
        return;
    }
    conn_cb(c, 0);
}

static void timer_arm(struct target *tgt, int64_t at)
{
    struct itimerspec its = { 0 };

    if (at == tgt->timer_armed) {
        return;
    }
    if (at) {
        its.it_value.tv_sec = at / G_USEC_PER_SEC;
        its.it_value.tv_nsec = (at % G_USEC_PER_SEC) * 1000;
    }
    /* g_get_monotonic_time() is CLOCK_MONOTONIC, like the timer. */
    if (timerfd_settime(tgt->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        g_warning("main loop timer: %s", g_strerror(errno));
        return;
    }
    tgt->timer_armed = at;
}

void target_timer_update(struct target *tgt)
{
    int64_t at = tgt->accept_resume;

    for (GList *l = tgt->conns; l; l = l->next) {
        int64_t d = vu_dev_deadline(((struct conn *)l->data)->vu);

        if (d && (!at || d < at)) {
            at = d;
        }
    }
    timer_arm(tgt, at);
}

int target_connection_new(struct controller *ctrl, int fd, const struct ucred *cred,
                          const char *name)
{
    struct target *tgt = ctrl->tgt;
    struct vu_dev_config cfg = { 0 };
    struct vscsi_dev_config vcfg = { 0 };
    struct conn *c = g_new0(struct conn, 1);

    c->tgt = tgt;
    c->ctrl = ctrl;
    c->fd = fd;
    c->uid = cred->uid;
    c->pid = cred->pid;
    c->events = EPOLLIN;
    g_strlcpy(c->name, name, sizeof(c->name));

    vcfg.name = c->name;
    vcfg.target = ctrl->scsi;
    vcfg.main_thread = tgt->main;
    vcfg.threads = tgt->threads;
    vcfg.nthreads = tgt->nthreads;
    vcfg.num_request_queues = ctrl->queues;
    vcfg.max_inflight = tgt->opts->max_inflight;
    vcfg.queue_broken = conn_queue_broken;
    vcfg.opaque = c;
    vcfg.stats = &ctrl->stats;
    vcfg.initiator = ctrl->initiator;
    c->vs = vscsi_dev_new(&vcfg);

    cfg.name = c->name;
    cfg.num_queues = VSCSI_FIRST_REQ_QUEUE + ctrl->queues;
    cfg.features = vscsi_dev_features();
    cfg.message_timeout_ms = tgt->opts->message_timeout_ms;
    cfg.max_mem_slots = tgt->opts->max_mem_regions;
    cfg.test_log_skip_data_in = tgt->opts->fault_log_skip_data_in;
    cfg.ops = &conn_ops;
    cfg.opaque = c;
    c->vu = vu_dev_new(fd, &cfg);
    if (!c->vu || iothread_add_fd(tgt->main, fd, EPOLLIN, conn_cb, c) < 0) {
        if (c->vu) {
            vu_dev_free(c->vu);
        } else {
            close(fd);
        }
        vscsi_dev_free(c->vs);
        g_free(c);
        return -EIO;
    }
    tgt->conns = g_list_prepend(tgt->conns, c);
    tgt->nconns++;
    ctrl->nconns++;
    log_limit_message(&ctrl->log, "%s: front-end connected to %s (pid %d uid %u)", c->name,
                      ctrl->name, cred->pid, cred->uid);
    return 0;
}

void target_connections_expire(struct target *tgt, int64_t now)
{
    GList *l = tgt->conns;

    while (l) {
        struct conn *c = l->data;

        l = l->next;
        if (vu_dev_expired(c->vu, now)) {
            conn_close(c);
        }
    }
}

unsigned target_connections_of_uid(struct target *tgt, uid_t uid)
{
    unsigned n = 0;

    for (GList *l = tgt->conns; l; l = l->next) {
        n += ((struct conn *)l->data)->uid == uid;
    }
    return n;
}

void target_connections_free(struct target *tgt)
{
    while (tgt->conns) {
        conn_free(tgt->conns->data);
    }
}

JsonNode *target_connections_json(struct target *tgt)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_array(b);
    /* Oldest first: the list is kept newest first. */
    for (GList *l = g_list_last(tgt->conns); l; l = l->prev) {
        struct conn *c = l->data;

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, c->name);
        /* Which VM's: without it, two controllers' connections could not be told apart. */
        json_builder_set_member_name(b, "controller");
        json_builder_add_string_value(b, c->ctrl->name);
        json_builder_set_member_name(b, "pid");
        json_builder_add_int_value(b, c->pid);
        json_builder_set_member_name(b, "uid");
        json_builder_add_int_value(b, c->uid);
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, c->closing ? "closing" : "connected");
        json_builder_set_member_name(b, "features");
        json_builder_add_int_value(b, (gint64)vu_dev_features(c->vu));
        json_builder_set_member_name(b, "queues");
        json_builder_begin_array(b);
        for (unsigned q = VSCSI_FIRST_REQ_QUEUE; q < vscsi_dev_num_queues(c->vs); q++) {
            int n = vscsi_queue_inflight(c->vs, q);

            json_builder_begin_object(b);
            json_builder_set_member_name(b, "index");
            json_builder_add_int_value(b, q - VSCSI_FIRST_REQ_QUEUE);
            json_builder_set_member_name(b, "running");
            json_builder_add_boolean_value(b, n >= 0);
            json_builder_set_member_name(b, "in_flight");
            json_builder_add_int_value(b, n >= 0 ? n : 0);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    return json_builder_get_root(b);
}

unsigned target_controller_connections(struct target *tgt, struct controller *ctrl,
                                       unsigned *in_flight)
{
    unsigned n = 0;

    *in_flight = 0;
    for (GList *l = tgt->conns; l; l = l->next) {
        struct conn *c = l->data;

        if (c->ctrl != ctrl) {
            continue;
        }
        n++;
        for (unsigned q = VSCSI_FIRST_REQ_QUEUE; q < vscsi_dev_num_queues(c->vs); q++) {
            int k = vscsi_queue_inflight(c->vs, q);

            *in_flight += k > 0 ? (unsigned)k : 0;
        }
    }
    return n;
}
