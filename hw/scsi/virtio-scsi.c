/*
 * virtio-scsi request handling for one front-end connection (see
 * include/virtio-scsi.h).  A request queue lives on one iothread and owns a
 * pool of request slots sized to its ring, so the hot path allocates
 * nothing: pop a chain, parse the header, run the CDB on the LUN, and on
 * completion fill the used ring.  Used entries are published and the call
 * eventfd signalled once per loop iteration (flush hook), and only when the
 * driver's EVENT_IDX / NO_INTERRUPT state asks for it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_scsi.h>

#include "iov.h"
#include "virtio-scsi.h"

/* The spec's FUNCTION COMPLETE shares the value of VIRTIO_SCSI_S_OK. */
#define VSCSI_S_FUNCTION_COMPLETE VIRTIO_SCSI_S_OK

#define REPORT_LUNS 0xa0
#define INQUIRY 0x12
#define REQUEST_SENSE 0x03

/* Upper bound on buffers per request, whatever the ring size. */
#define VSCSI_MAX_SG 1026

/*
 * Request queue kick eventfds are watched edge-triggered: an eventfd wakes
 * its epoll waiters on every write, so a wake-up needs no read(2) to re-arm
 * it, saving one system call per wake-up.  The counter is drained every
 * this many kicks so a front-end's writes never reach the eventfd's limit
 * (where its write would fail with EAGAIN).
 */
#define VSCSI_KICK_DRAIN_EVERY 1024

struct vscsi_queue;

struct vscsi_req {
    struct vscsi_queue *q;
    struct vscsi_req *next_free;
    struct vq_elem elem;
    struct virtio_scsi_cmd_req hdr;
    struct scsi_cmd cmd;
    uint64_t data_len;
    bool in_use;
    struct iovec *iov;        /* the chain as popped (header + data) */
    struct iovec *data_iov;   /* the data part only */
};

struct vscsi_queue {
    struct vscsi_dev *dev;
    unsigned idx;
    char name[24];
    struct virtqueue *vq;
    struct iothread *t;
    bool running;
    bool stopping;
    bool need_flush;
    bool starved;             /* pool was empty with work pending */
    bool broken_reported;
    int poller;
    int flush;
    unsigned max_sg;
    struct vscsi_req *reqs;
    struct vscsi_req *free_list;
    struct iovec *iov_mem;
    unsigned inflight;
    unsigned kicks_undrained; /* kick wake-ups since the last read(2) */
    bool kick_watched;        /* the kick fd is in the thread's epoll set */
    pthread_mutex_t lock;     /* guards drained for the stopping thread */
    pthread_cond_t cond;
    bool drained;
};

struct vscsi_dev {
    char *name;
    const struct lun_map *luns;
    struct iothread *main_thread;
    struct iothread **threads;
    unsigned nthreads;
    unsigned nq;              /* 2 + request queues */
    void (*queue_broken)(void *opaque, unsigned idx);
    void *opaque;
    struct vscsi_queue *queues;
    /* This front-end's I_T nexus: its unit attentions, one per luns->e[]. */
    struct scsi_ua_state *ua;
};

uint64_t vscsi_dev_features(void)
{
    /*
     * QEMU acks HOTPLUG and CHANGE for its own config; we accept them and
     * never need to send such an event (our LUN set is fixed).  No T10 PI.
     */
    return (1ull << VIRTIO_SCSI_F_HOTPLUG) | (1ull << VIRTIO_SCSI_F_CHANGE);
}

int vscsi_decode_lun(const uint8_t lun[8], unsigned *target, unsigned *lun_id)
{
    if (lun[0] != 1) {
        return -EINVAL;
    }
    *target = lun[1];
    if (lun[2] == 0xc1 && lun[3] == 0x01 && !lun[4] && !lun[5] && !lun[6] && !lun[7]) {
        *lun_id = 0;
        return 1;
    }
    /* Single-level, flat (01b) or peripheral (00b with LUN < 256) addressing. */
    if ((lun[2] & 0xc0) != 0x40 && (lun[2] & 0xc0) != 0x00) {
        return -EINVAL;
    }
    if ((lun[2] & 0xc0) == 0x00 && lun[2] != 0) {
        return -EINVAL;
    }
    if (lun[4] || lun[5] || lun[6] || lun[7]) {
        return -EINVAL;
    }
    *lun_id = ((unsigned)(lun[2] & 0x3f) << 8) | lun[3];
    return 0;
}

/* ---- request queues ---------------------------------------------------- */

static void queue_signal_drained(struct vscsi_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->drained = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}

static void req_release(struct vscsi_queue *q, struct vscsi_req *r)
{
    r->in_use = false;
    r->next_free = q->free_list;
    q->free_list = r;
    q->inflight--;
    if (q->stopping && q->inflight == 0) {
        queue_signal_drained(q);
    }
}

static void req_finish(struct vscsi_req *r, const struct virtio_scsi_cmd_resp *resp,
                       uint32_t data_in)
{
    struct vscsi_queue *q = r->q;
    size_t resp_len = MIN(sizeof(*resp), r->elem.in_len);

    iov_from_buf(r->elem.in_sg, r->elem.in_num, 0, resp, resp_len);
    vq_fill(q->vq, r->elem.head, (uint32_t)resp_len + data_in);
    q->need_flush = true;
    req_release(q, r);
}

static void req_fail(struct vscsi_req *r, uint8_t response)
{
    struct virtio_scsi_cmd_resp resp = { .response = response };

    req_finish(r, &resp, 0);
}

static void cmd_complete(struct scsi_cmd *cmd)
{
    struct vscsi_req *r = cmd->opaque;
    struct virtio_scsi_cmd_resp resp = { 0 };
    uint64_t xfer, resid;

    if (r->elem.in_num && r->data_len && cmd->data_in) {
        xfer = MIN(cmd->data_in_xfer, r->data_len);
    } else {
        xfer = MIN(cmd->data_out_xfer, r->data_len);
    }
    resid = r->data_len - xfer;
    resp.sense_len = htole32(MIN(cmd->sense_len, VIRTIO_SCSI_SENSE_SIZE));
    memcpy(resp.sense, cmd->sense, MIN(cmd->sense_len, VIRTIO_SCSI_SENSE_SIZE));
    resp.resid = htole32((uint32_t)MIN(resid, UINT32_MAX));
    resp.status = cmd->status;
    resp.response = VIRTIO_SCSI_S_OK;
    req_finish(r, &resp, cmd->data_in ? (uint32_t)MIN(cmd->data_in_xfer, r->data_len) : 0);
}

static void req_exec(struct vscsi_queue *q, struct vscsi_req *r)
{
    struct vscsi_dev *dev = q->dev;
    struct scsi_cmd *cmd = &r->cmd;
    const size_t hdr_len = sizeof(struct virtio_scsi_cmd_req);
    const size_t resp_len = sizeof(struct virtio_scsi_cmd_resp);
    uint64_t out_data, in_data;
    unsigned target, lun_id;
    struct scsi_lun *lun;
    int kind, idx, n = 0;

    if (r->elem.out_len < hdr_len || r->elem.in_len < resp_len) {
        /*
         * Not a virtio-scsi request: there may be no room even for a
         * response, so return the buffers untouched (QEMU marks the device
         * broken here; we keep serving the queue and say why).
         */
        g_warning("%s: request %u has a %" PRIu64 "-byte header and %" PRIu64
                  "-byte response buffer (need %zu and %zu)", q->name, r->elem.head,
                  r->elem.out_len, r->elem.in_len, hdr_len, resp_len);
        vq_fill(q->vq, r->elem.head, 0);
        q->need_flush = true;
        req_release(q, r);
        return;
    }
    iov_to_buf(r->elem.out_sg, r->elem.out_num, 0, &r->hdr, hdr_len);
    out_data = r->elem.out_len - hdr_len;
    in_data = r->elem.in_len - resp_len;
    if (out_data && in_data) {
        /* Bidirectional commands need VIRTIO_SCSI_F_INOUT, which we don't offer. */
        req_fail(r, VIRTIO_SCSI_S_FAILURE);
        return;
    }

    memset(cmd, 0, sizeof(*cmd));
    if (out_data) {
        n = iov_slice(r->elem.out_sg, r->elem.out_num, hdr_len, out_data, r->data_iov,
                      q->max_sg);
        cmd->data_out = r->data_iov;
        cmd->data_out_cnt = n < 0 ? 0 : (unsigned)n;
        r->data_len = out_data;
    } else if (in_data) {
        n = iov_slice(r->elem.in_sg, r->elem.in_num, resp_len, in_data, r->data_iov,
                      q->max_sg);
        cmd->data_in = r->data_iov;
        cmd->data_in_cnt = n < 0 ? 0 : (unsigned)n;
        r->data_len = in_data;
    } else {
        r->data_len = 0;
    }
    if ((out_data || in_data) && n < 0) {
        req_fail(r, VIRTIO_SCSI_S_FAILURE);
        return;
    }

    kind = vscsi_decode_lun(r->hdr.lun, &target, &lun_id);
    if (kind < 0 || !lun_map_has_target(dev->luns, target)) {
        req_fail(r, VIRTIO_SCSI_S_BAD_TARGET);
        return;
    }
    cmd->cdb = r->hdr.cdb;
    cmd->cdb_len = VIRTIO_SCSI_CDB_SIZE;
    cmd->tag = le64toh(r->hdr.tag);
    cmd->thread = q->t;
    cmd->complete = cmd_complete;
    cmd->opaque = r;

    /* REPORT LUNS is the target's answer, whichever LUN it is sent to. */
    if (r->hdr.cdb[0] == REPORT_LUNS) {
        uint16_t ids[256];
        unsigned cnt = lun_map_target_luns(dev->luns, target, ids, G_N_ELEMENTS(ids));

        scsi_report_luns(cmd, ids, MIN(cnt, G_N_ELEMENTS(ids)));
        cmd_complete(cmd);
        return;
    }
    idx = kind == 0 ? lun_map_index(dev->luns, target, lun_id) : -1;
    lun = idx >= 0 ? dev->luns->e[idx].l : NULL;
    if (!lun) {
        /*
         * A hole in the LUN space of an existing target: answer what an
         * initiator scanning LUNs needs (INQUIRY with qualifier 011b,
         * REQUEST SENSE); anything else is for a LUN that isn't there.
         */
        if (r->hdr.cdb[0] == INQUIRY || r->hdr.cdb[0] == REQUEST_SENSE) {
            scsi_no_lun_exec(cmd);
            cmd_complete(cmd);
        } else {
            req_fail(r, VIRTIO_SCSI_S_BAD_TARGET);
        }
        return;
    }
    cmd->ua = &dev->ua[idx];
    scsi_lun_exec(lun, cmd);
}

static void queue_report_broken(struct vscsi_queue *q)
{
    if (!q->broken_reported) {
        q->broken_reported = true;
        if (q->dev->queue_broken) {
            q->dev->queue_broken(q->dev->opaque, q->idx);
        }
    }
}

/*
 * The driver's malformed chain gets a FAILURE response where its response
 * buffer is usable: a driver waiting for it sees an error, not silence
 * (a vhost-user back-end cannot set NEEDS_RESET itself).
 */
static void queue_answer_bad_chain(struct vscsi_queue *q)
{
    struct virtio_scsi_cmd_resp resp = { .response = VIRTIO_SCSI_S_FAILURE };

    vq_answer_bad_chain(q->vq, &resp, sizeof(resp));
}

/* Pops and starts as many requests as the ring and the pool allow. */
static bool queue_drain_avail(struct vscsi_queue *q)
{
    bool progress = false;

    while (q->running && !q->stopping && !q->vq->broken) {
        struct vscsi_req *r = q->free_list;
        int ret;

        if (!r) {
            q->starved = vq_has_avail(q->vq);
            break;
        }
        ret = vq_pop(q->vq, &r->elem, r->iov, q->max_sg);
        if (ret <= 0) {
            if (ret < 0) {
                queue_answer_bad_chain(q);
                queue_report_broken(q);
            }
            break;
        }
        q->free_list = r->next_free;
        r->in_use = true;
        q->inflight++;
        progress = true;
        req_exec(q, r);
    }
    return progress;
}

static void queue_process(struct vscsi_queue *q)
{
    do {
        vq_disable_notify(q->vq);
        queue_drain_avail(q);
    } while (!q->starved && !q->stopping && !q->vq->broken && q->running &&
             vq_enable_notify(q->vq));
}

static void queue_kick_cb(void *opaque, uint32_t events)
{
    struct vscsi_queue *q = opaque;
    uint64_t v;

    if (++q->kicks_undrained >= VSCSI_KICK_DRAIN_EVERY) {
        q->kicks_undrained = 0;
        if (read(q->vq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
            g_warning("%s: kick eventfd read: %s", q->name, g_strerror(errno));
        }
    }
    queue_process(q);
}

static void queue_flush_cb(void *opaque)
{
    struct vscsi_queue *q = opaque;

    if (q->starved && q->free_list) {
        q->starved = false;
        queue_process(q);
    }
    if (q->need_flush) {
        q->need_flush = false;
        vq_flush(q->vq);
        vq_notify(q->vq);
    }
}

static bool queue_poll_cb(void *opaque)
{
    struct vscsi_queue *q = opaque;

    if (q->starved) {
        return false;
    }
    return queue_drain_avail(q);
}

static bool queue_set_notify_cb(void *opaque, bool enable)
{
    struct vscsi_queue *q = opaque;

    if (!enable) {
        vq_disable_notify(q->vq);
        return false;
    }
    return vq_enable_notify(q->vq);
}

/*
 * Kicks are watched edge-triggered on every queue: a wake-up per write,
 * whatever the fd's counter, so a counter that never drains (a
 * semaphore-mode eventfd at its maximum) cannot make the loop spin.  A
 * kick fd that cannot be watched (the server only accepts eventfds, so
 * this is an allocation failure) breaks the queue visibly instead of
 * leaving it silently dead.
 */
static bool watch_kick(struct vscsi_queue *q, iothread_fd_cb *cb)
{
    q->kick_watched = false;
    if (q->vq->kick_fd < 0) {
        return true;
    }
    if (iothread_add_fd(q->t, q->vq->kick_fd, EPOLLIN | EPOLLET, cb, q) == 0) {
        q->kick_watched = true;
        return true;
    }
    g_warning("%s: cannot watch the kick fd; queue marked broken", q->name);
    q->vq->broken = true;
    queue_report_broken(q);
    return false;
}

static void unwatch_kick(struct vscsi_queue *q)
{
    if (q->vq->kick_fd >= 0 && q->kick_watched) {
        iothread_del_fd(q->t, q->vq->kick_fd);
    }
}

static void queue_attach(void *opaque)
{
    struct vscsi_queue *q = opaque;
    struct iothread_poller p = { .poll = queue_poll_cb, .set_notify = queue_set_notify_cb,
                                 .opaque = q };

    q->running = true;
    q->stopping = false;
    q->starved = false;
    q->broken_reported = false;
    q->flush = iothread_add_flush(q->t, queue_flush_cb, q);
    q->poller = iothread_add_poller(q->t, &p);
    q->kicks_undrained = 0;
    if (!watch_kick(q, queue_kick_cb)) {
        return;
    }
    /* Requests may have been queued before we listened for kicks. */
    queue_process(q);
    if (q->need_flush) {
        queue_flush_cb(q);
    }
}

static void queue_begin_stop(void *opaque)
{
    struct vscsi_queue *q = opaque;

    q->stopping = true;
    unwatch_kick(q);
    iothread_del_poller(q->t, q->poller);
    pthread_mutex_lock(&q->lock);
    q->drained = q->inflight == 0;
    pthread_mutex_unlock(&q->lock);
}

static void queue_detach(void *opaque)
{
    struct vscsi_queue *q = opaque;

    /* Publish what completed while draining, then let go of the ring. */
    if (q->need_flush) {
        q->need_flush = false;
        vq_flush(q->vq);
        vq_notify(q->vq);
    }
    iothread_del_flush(q->t, q->flush);
    q->running = false;
}

static int req_queue_start(struct vscsi_queue *q, struct virtqueue *vq)
{
    unsigned num = vq->num;

    q->vq = vq;
    q->max_sg = MIN(num + 2, VSCSI_MAX_SG);
    /* calloc'd: slots the ring never fills are never touched, never resident. */
    q->reqs = g_new0(struct vscsi_req, num);
    q->iov_mem = g_new0(struct iovec, (size_t)num * q->max_sg * 2);
    q->free_list = NULL;
    for (unsigned i = num; i-- > 0;) {
        struct vscsi_req *r = &q->reqs[i];

        r->q = q;
        r->iov = q->iov_mem + (size_t)i * q->max_sg * 2;
        r->data_iov = r->iov + q->max_sg;
        r->next_free = q->free_list;
        q->free_list = r;
    }
    q->inflight = 0;
    iothread_run_sync(q->t, queue_attach, q);
    return 0;
}

static void req_queue_stop(struct vscsi_queue *q)
{
    iothread_run_sync(q->t, queue_begin_stop, q);
    /*
     * Backend I/O cannot be recalled: wait for it, with the iothread still
     * running so completions are delivered.
     */
    pthread_mutex_lock(&q->lock);
    while (!q->drained) {
        pthread_cond_wait(&q->cond, &q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    iothread_run_sync(q->t, queue_detach, q);
    g_free(q->reqs);
    g_free(q->iov_mem);
    q->reqs = NULL;
    q->iov_mem = NULL;
    q->free_list = NULL;
    q->vq = NULL;
}

/* ---- control queue ----------------------------------------------------- */

struct query_task {
    struct vscsi_queue *q;
    uint64_t tag;
    bool found;
};

static void query_task_on_thread(void *opaque)
{
    struct query_task *qt = opaque;
    struct vscsi_queue *q = qt->q;

    if (!q->running || !q->reqs) {
        return;
    }
    for (unsigned i = 0; i < q->vq->num; i++) {
        if (q->reqs[i].in_use && q->reqs[i].cmd.tag == qt->tag) {
            qt->found = true;
        }
    }
}

static bool tag_in_flight(struct vscsi_dev *dev, uint64_t tag)
{
    for (unsigned i = VSCSI_FIRST_REQ_QUEUE; i < dev->nq; i++) {
        struct query_task qt = { .q = &dev->queues[i], .tag = tag };

        if (!qt.q->running) {
            continue;
        }
        iothread_run_sync(qt.q->t, query_task_on_thread, &qt);
        if (qt.found) {
            return true;
        }
    }
    return false;
}

static uint8_t ctrl_tmf(struct vscsi_dev *dev, const struct virtio_scsi_ctrl_tmf_req *req)
{
    uint32_t subtype = le32toh(req->subtype);
    unsigned target, lun_id;
    struct scsi_lun *lun;
    int kind = vscsi_decode_lun(req->lun, &target, &lun_id);

    if (kind != 0 || !lun_map_has_target(dev->luns, target)) {
        return VIRTIO_SCSI_S_BAD_TARGET;
    }
    lun = lun_map_find(dev->luns, target, lun_id);
    if (!lun && subtype != VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET) {
        return VIRTIO_SCSI_S_INCORRECT_LUN;
    }
    switch (subtype) {
    case VIRTIO_SCSI_T_TMF_ABORT_TASK:
    case VIRTIO_SCSI_T_TMF_ABORT_TASK_SET:
    case VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET:
        /*
         * Backend I/O cannot be recalled, so aborting means letting the
         * tasks finish: when we answer, none of them is still running.
         */
        scsi_lun_drain(lun);
        return VSCSI_S_FUNCTION_COMPLETE;
    case VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
        scsi_lun_drain(lun);
        scsi_lun_set_ua(lun, SCSI_UA_LUN_RESET);
        g_message("%s: LOGICAL UNIT RESET on %s", dev->name, scsi_lun_name(lun));
        return VSCSI_S_FUNCTION_COMPLETE;
    case VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET: {
        for (unsigned i = 0; i < dev->luns->n; i++) {
            if (dev->luns->e[i].target == target) {
                /* Only this front-end's nexus was reset: other initiators see nothing. */
                scsi_lun_drain(dev->luns->e[i].l);
                scsi_ua_set(&dev->ua[i], SCSI_UA_NEXUS_LOSS);
            }
        }
        g_message("%s: I_T NEXUS RESET on target %u", dev->name, target);
        return VSCSI_S_FUNCTION_COMPLETE;
    }
    case VIRTIO_SCSI_T_TMF_QUERY_TASK:
        return tag_in_flight(dev, le64toh(req->tag)) ? VIRTIO_SCSI_S_FUNCTION_SUCCEEDED
                                                     : VSCSI_S_FUNCTION_COMPLETE;
    case VIRTIO_SCSI_T_TMF_QUERY_TASK_SET:
        return scsi_lun_inflight(lun) ? VIRTIO_SCSI_S_FUNCTION_SUCCEEDED
                                      : VSCSI_S_FUNCTION_COMPLETE;
    case VIRTIO_SCSI_T_TMF_CLEAR_ACA:
    default:
        return VIRTIO_SCSI_S_FUNCTION_REJECTED;
    }
}

static void ctrl_handle(struct vscsi_queue *q, struct vq_elem *e)
{
    struct vscsi_dev *dev = q->dev;
    uint32_t type;
    uint32_t len = 0;

    if (iov_to_buf(e->out_sg, e->out_num, 0, &type, sizeof(type)) != sizeof(type)) {
        g_warning("%s: control request %u without a type", q->name, e->head);
        goto done;
    }
    type = le32toh(type);
    if (type == VIRTIO_SCSI_T_TMF) {
        struct virtio_scsi_ctrl_tmf_req req;
        struct virtio_scsi_ctrl_tmf_resp resp;

        if (iov_to_buf(e->out_sg, e->out_num, 0, &req, sizeof(req)) != sizeof(req) ||
            e->in_len < sizeof(resp)) {
            g_warning("%s: short TMF request %u", q->name, e->head);
            goto done;
        }
        resp.response = ctrl_tmf(dev, &req);
        len = iov_from_buf(e->in_sg, e->in_num, 0, &resp, sizeof(resp));
    } else if (type == VIRTIO_SCSI_T_AN_QUERY || type == VIRTIO_SCSI_T_AN_SUBSCRIBE) {
        struct virtio_scsi_ctrl_an_req req;
        struct virtio_scsi_ctrl_an_resp resp = { 0 };
        unsigned target, lun_id;

        if (iov_to_buf(e->out_sg, e->out_num, 0, &req, sizeof(req)) != sizeof(req) ||
            e->in_len < sizeof(resp)) {
            g_warning("%s: short AN request %u", q->name, e->head);
            goto done;
        }
        /* No asynchronous notification classes are supported: event_actual 0. */
        resp.event_actual = 0;
        resp.response = vscsi_decode_lun(req.lun, &target, &lun_id) == 0 &&
                        lun_map_has_target(dev->luns, target)
                            ? VIRTIO_SCSI_S_OK : VIRTIO_SCSI_S_BAD_TARGET;
        len = iov_from_buf(e->in_sg, e->in_num, 0, &resp, sizeof(resp));
    } else {
        /* Nothing sensible to write into a layout we don't know: used len 0. */
        g_warning("%s: unknown control request type %u", q->name, type);
    }
done:
    vq_push(q->vq, e->head, len);
    vq_notify(q->vq);
}

static void ctrl_process(struct vscsi_queue *q)
{
    struct iovec iov[64];
    struct vq_elem e;
    int ret;

    while (q->running && !q->vq->broken) {
        ret = vq_pop(q->vq, &e, iov, G_N_ELEMENTS(iov));
        if (ret < 0) {
            /* The TMF response's first byte is its response code, too. */
            uint8_t failure = VIRTIO_SCSI_S_FAILURE;

            vq_answer_bad_chain(q->vq, &failure, sizeof(failure));
            queue_report_broken(q);
        }
        if (ret <= 0) {
            return;
        }
        ctrl_handle(q, &e);
    }
}

static void ctrl_kick_cb(void *opaque, uint32_t events)
{
    struct vscsi_queue *q = opaque;
    uint64_t v;

    /* Edge-triggered (see watch_kick): this read only keeps the counter low. */
    if (read(q->vq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        g_warning("%s: kick eventfd read: %s", q->name, g_strerror(errno));
    }
    if (q->idx == VSCSI_CTRL_QUEUE) {
        ctrl_process(q);
    }
    /*
     * Event queue: the driver's buffers stay in the avail ring until an
     * event needs one; nothing to do on a kick.
     */
}

static void aux_attach(void *opaque)
{
    struct vscsi_queue *q = opaque;

    q->running = true;
    q->broken_reported = false;
    if (!watch_kick(q, ctrl_kick_cb)) {
        return;
    }
    if (q->idx == VSCSI_CTRL_QUEUE) {
        ctrl_process(q);
    }
}

static void aux_detach(void *opaque)
{
    struct vscsi_queue *q = opaque;

    unwatch_kick(q);
    q->running = false;
}

/* ---- device ------------------------------------------------------------- */

struct vscsi_dev *vscsi_dev_new(const struct vscsi_dev_config *cfg)
{
    struct vscsi_dev *dev = g_new0(struct vscsi_dev, 1);

    dev->name = g_strdup(cfg->name);
    dev->luns = cfg->luns;
    dev->main_thread = cfg->main_thread;
    dev->threads = cfg->threads;
    dev->nthreads = cfg->nthreads;
    dev->nq = VSCSI_FIRST_REQ_QUEUE + cfg->num_request_queues;
    dev->queue_broken = cfg->queue_broken;
    dev->opaque = cfg->opaque;
    dev->queues = g_new0(struct vscsi_queue, dev->nq);
    /* A new connection is a new initiator: each LUN has just powered on for it. */
    dev->ua = g_new0(struct scsi_ua_state, MAX(dev->luns->n, 1u));
    for (unsigned i = 0; i < dev->luns->n; i++) {
        scsi_ua_init(&dev->ua[i], dev->luns->e[i].l);
    }
    for (unsigned i = 0; i < dev->nq; i++) {
        struct vscsi_queue *q = &dev->queues[i];

        q->dev = dev;
        q->idx = i;
        if (i < VSCSI_FIRST_REQ_QUEUE || !cfg->nthreads) {
            q->t = cfg->main_thread;
        } else {
            q->t = cfg->threads[(i - VSCSI_FIRST_REQ_QUEUE) % cfg->nthreads];
        }
        snprintf(q->name, sizeof(q->name), "%s:vq%u", cfg->name, i);
        pthread_mutex_init(&q->lock, NULL);
        pthread_cond_init(&q->cond, NULL);
    }
    return dev;
}

int vscsi_queue_start(struct vscsi_dev *dev, unsigned idx, struct virtqueue *vq)
{
    struct vscsi_queue *q;

    if (idx >= dev->nq) {
        g_warning("%s: no queue %u (have %u)", dev->name, idx, dev->nq);
        return -EINVAL;
    }
    q = &dev->queues[idx];
    if (q->running) {
        return 0;
    }
    vq->name = q->name;
    if (idx < VSCSI_FIRST_REQ_QUEUE) {
        q->vq = vq;
        iothread_run_sync(q->t, aux_attach, q);
        return 0;
    }
    return req_queue_start(q, vq);
}

void vscsi_queue_stop(struct vscsi_dev *dev, unsigned idx, struct virtqueue *vq)
{
    struct vscsi_queue *q;

    if (idx >= dev->nq) {
        return;
    }
    q = &dev->queues[idx];
    if (!q->running) {
        return;
    }
    if (idx < VSCSI_FIRST_REQ_QUEUE) {
        iothread_run_sync(q->t, aux_detach, q);
        q->vq = NULL;
        return;
    }
    req_queue_stop(q);
}

void vscsi_dev_reset(struct vscsi_dev *dev)
{
    for (unsigned i = 0; i < dev->nq; i++) {
        if (dev->queues[i].running) {
            vscsi_queue_stop(dev, i, dev->queues[i].vq);
        }
    }
    /* A device reset is a bus reset for this initiator, as in QEMU's HBA. */
    for (unsigned i = 0; i < dev->luns->n; i++) {
        scsi_ua_set(&dev->ua[i], SCSI_UA_POWER_ON);
    }
}

void vscsi_dev_free(struct vscsi_dev *dev)
{
    if (!dev) {
        return;
    }
    vscsi_dev_reset(dev);
    for (unsigned i = 0; i < dev->nq; i++) {
        pthread_mutex_destroy(&dev->queues[i].lock);
        pthread_cond_destroy(&dev->queues[i].cond);
    }
    g_free(dev->queues);
    g_free(dev->ua);
    g_free(dev->name);
    g_free(dev);
}
