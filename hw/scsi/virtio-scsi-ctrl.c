/*
 * The control queue of the virtio-scsi device model (virtio 1.2 5.6.6.2):
 * its requests popped and answered on the main thread — the asynchronous
 * notification queries (no classes supported) and task management: ABORT
 * TASK, ABORT TASK SET, CLEAR TASK SET, LOGICAL UNIT RESET, I_T NEXUS
 * RESET, QUERY TASK and QUERY TASK SET, answered without ever waiting
 * there, as the comment below describes.  The device (virtio-scsi.c)
 * starts and stops the queue and reports its request queues' completions
 * here; nothing here calls back into it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>

#include <glib.h>

#include "iov.h"
#include "virtio-scsi-int.h"

/*
 * Task management (main thread).  Backend I/O cannot be recalled, so a TMF
 * that aborts tasks answers when they have completed, and nothing waits
 * for that: the TMF keeps its control-queue element and counts the waits
 * it started; each reports back by a callback posted to the main thread,
 * and the last one answers the element (vq_push + vq_notify), setting the
 * unit attention a reset leaves.  The tasks waited for are those in
 * flight when the TMF arrived, never later ones:
 *   - ABORT TASK, ABORT TASK SET and I_T NEXUS RESET concern this I_T
 *     nexus only (SAM-5): a wait on each request queue of this front-end,
 *     registered on the queue's thread, counts the matching requests
 *     popped so far and ends when the last of them completes;
 *   - LOGICAL UNIT RESET and CLEAR TASK SET concern every initiator's
 *     tasks: the LUN's drain (scsi_lun_drain_async) closes the epoch of
 *     the commands in flight and calls back when it has emptied; they
 *     also wait on this front-end's queues like ABORT TASK SET does.
 * A queue wait reports back only after the queue has published the used
 * entries of the requests it waited for: the driver finds them on the
 * used rings when the TMF's answer arrives, as virtio requires (Linux
 * polls the request queues once on a TMF's answer, then forgets them).
 * Registration and QUERY TASK / QUERY TASK SET hop to each request
 * queue's thread with iothread_run_sync: that waits for the thread's loop
 * to reach the end of an iteration, never for I/O (I/O threads do not
 * block on backend I/O), so it is bounded like any other run_sync.
 *
 * When the control queue stops (GET_VRING_BASE, reset, disconnect, a
 * memory table change) with TMFs pending, they are answered FAILURE while
 * the ring is still ours, so the driver is never left waiting for an
 * element (QEMU's virtio-scsi answers pending TMFs at reset likewise), and
 * orphaned: their waits end later and only free them, touching neither
 * the device nor the LUN's unit attentions.
 */
struct vscsi_tmf {
    struct vscsi_dev *dev;      /* NULL once orphaned */
    struct vscsi_tmf *next;     /* in dev->tmfs */
    /* The control-queue element to answer: head and its writable buffers (owned). */
    struct vq_elem elem;
    struct tmf_match m;
    struct scsi_lun *lun;       /* LUN-wide TMFs */
    unsigned pending;           /* waits not reported yet, +1 while setting up */
    struct scsi_drain drain;
    unsigned nwaits;
    struct vscsi_tmf_wait waits[];  /* one per request queue */
};

static bool tmf_matches(const struct tmf_match *m, const struct vscsi_req *r)
{
    if (!r->in_use || !r->on_lun || r->target != m->target) {
        return false;
    }
    switch (m->subtype) {
    case VIRTIO_SCSI_T_TMF_ABORT_TASK:
    case VIRTIO_SCSI_T_TMF_QUERY_TASK:
        return r->lun_id == m->lun_id && r->cmd.tag == m->tag;
    case VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET:
        return true;
    default:
        return r->lun_id == m->lun_id;
    }
}

static void tmf_wait_done(void *opaque);

/* On a request queue's thread: r completes; end the waits it was the last of. */
void vscsi_tmf_waits_check(struct vscsi_queue *q, struct vscsi_req *r)
{
    struct vscsi_tmf_wait **p = &q->tmf_waits;

    while (*p) {
        struct vscsi_tmf_wait *w = *p;

        if (r->seq <= w->last_seq && tmf_matches(&w->tmf->m, r) &&
            --w->left == 0) {
            *p = w->next;
            w->next = q->tmf_waits_done;
            q->tmf_waits_done = w;
            continue;
        }
        p = &w->next;
    }
}

/* On a request queue's thread, once r's used entry is published: report. */
void vscsi_tmf_waits_report(struct vscsi_queue *q)
{
    while (q->tmf_waits_done) {
        struct vscsi_tmf_wait *w = q->tmf_waits_done;

        q->tmf_waits_done = w->next;
        iothread_post(q->dev->main_thread, tmf_wait_done, w);
    }
}

/* On a request queue's thread: counts the matching requests; waits if any. */
static void tmf_wait_register(void *opaque)
{
    struct vscsi_tmf_wait *w = opaque;
    struct vscsi_queue *q = w->q;

    if (!q->running || !q->reqs) {
        return;
    }
    for (unsigned i = 0; i < q->nreqs; i++) {
        if (tmf_matches(&w->tmf->m, &q->reqs[i])) {
            w->left++;
        }
    }
    if (w->left) {
        w->linked = true;
        w->last_seq = q->pop_seq;
        w->next = q->tmf_waits;
        q->tmf_waits = w;
    } else if (q->need_flush) {
        /*
         * A matching request may have completed earlier in this loop
         * iteration, its used entry not published yet: report after the
         * publication, at the end of this iteration.
         */
        w->linked = true;
        w->next = q->tmf_waits_done;
        q->tmf_waits_done = w;
    }
}

struct query_task {
    struct vscsi_queue *q;
    const struct tmf_match *m;
    bool found;
};

static void query_task_on_thread(void *opaque)
{
    struct query_task *qt = opaque;
    struct vscsi_queue *q = qt->q;

    if (!q->running || !q->reqs) {
        return;
    }
    for (unsigned i = 0; i < q->nreqs && !qt->found; i++) {
        qt->found = tmf_matches(qt->m, &q->reqs[i]);
    }
}

/* QUERY TASK / QUERY TASK SET: is a matching task of this nexus running? */
static bool tasks_in_flight(struct vscsi_dev *dev, const struct tmf_match *m)
{
    for (unsigned i = VSCSI_FIRST_REQ_QUEUE; i < dev->nq; i++) {
        struct query_task qt = { .q = &dev->queues[i], .m = m };

        if (!qt.q->running) {
            continue;
        }
        /* Waits for the thread's loop, not for I/O: see "Task management" above. */
        iothread_run_sync(qt.q->t, query_task_on_thread, &qt);
        if (qt.found) {
            return true;
        }
    }
    return false;
}

static void tmf_unlink(struct vscsi_tmf *tmf)
{
    struct vscsi_dev *dev = tmf->dev;
    struct vscsi_tmf **p = &dev->tmfs;

    while (*p != tmf) {
        p = &(*p)->next;
    }
    *p = tmf->next;
    dev->ntmfs--;
}

static void tmf_free(struct vscsi_tmf *tmf)
{
    g_free(tmf->elem.in_sg);
    g_free(tmf);
}

/* Writes the response into the element; the caller publishes it. */
static void tmf_fill(struct vscsi_queue *cq, struct vscsi_tmf *tmf, uint8_t response)
{
    struct virtio_scsi_ctrl_tmf_resp resp = { .response = response };
    size_t len = iov_from_buf(tmf->elem.in_sg, tmf->elem.in_num, 0, &resp, sizeof(resp));

    vq_fill(cq->vq, &tmf->elem, (uint32_t)len);
}

/* The tasks are gone: the function is complete (main thread). */
static void tmf_finish(struct vscsi_tmf *tmf)
{
    struct vscsi_dev *dev = tmf->dev;
    struct vscsi_queue *cq;

    if (!dev) {
        /* Answered when its control queue stopped. */
        tmf_free(tmf);
        return;
    }
    cq = &dev->queues[VSCSI_CTRL_QUEUE];
    switch (tmf->m.subtype) {
    case VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
        scsi_lun_set_ua(tmf->lun, SCSI_UA_LUN_RESET);
        log_limit_message(cq->vq->log_limit, "%s: LOGICAL UNIT RESET on %s", dev->name,
                          scsi_lun_name(tmf->lun));
        break;
    case VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET:
        /* Only this front-end's nexus was reset: other initiators see nothing. */
        scsi_nexus_loss(dev->nexus, tmf->m.target);
        log_limit_message(cq->vq->log_limit, "%s: I_T NEXUS RESET on target %u", dev->name,
                          tmf->m.target);
        break;
    }
    tmf_unlink(tmf);
    tmf_fill(cq, tmf, VSCSI_S_FUNCTION_COMPLETE);
    vq_flush(cq->vq);
    vq_notify(cq->vq);
    tmf_free(tmf);
    if (dev->ctrl_throttled && dev->ntmfs < VSCSI_MAX_PENDING_TMFS) {
        dev->ctrl_throttled = false;
        vscsi_ctrl_process(cq);
    }
}

static void tmf_put(struct vscsi_tmf *tmf)
{
    if (--tmf->pending == 0) {
        tmf_finish(tmf);
    }
}

static void tmf_wait_done(void *opaque)
{
    struct vscsi_tmf_wait *w = opaque;

    tmf_put(w->tmf);
}

static void tmf_drain_done(struct scsi_drain *d)
{
    tmf_put(d->opaque);
}

/* At control queue stop: answer what is pending while the ring is ours, orphan it. */
void vscsi_tmf_fail_pending(struct vscsi_queue *cq)
{
    struct vscsi_dev *dev = cq->dev;
    unsigned n = dev->ntmfs;

    if (!n) {
        return;
    }
    while (dev->tmfs) {
        struct vscsi_tmf *tmf = dev->tmfs;

        dev->tmfs = tmf->next;
        if (!cq->vq->broken) {
            tmf_fill(cq, tmf, VIRTIO_SCSI_S_FAILURE);
        }
        tmf->dev = NULL;
    }
    dev->ntmfs = 0;
    dev->ctrl_throttled = false;
    if (!cq->vq->broken) {
        vq_flush(cq->vq);
        vq_notify(cq->vq);
    }
    log_limit_message(cq->vq->log_limit,
                      "%s: control queue stopped with %u task management function%s waiting for "
                      "I/O; answered FAILURE", cq->name, n, n == 1 ? "" : "s");
}

/*
 * Starts a TMF that waits for tasks; it answers e itself, perhaps before
 * this returns (nothing to wait for on the request queues).
 */
static void tmf_start(struct vscsi_queue *cq, const struct vq_elem *e,
                      const struct tmf_match *m, struct scsi_lun *lun)
{
    struct vscsi_dev *dev = cq->dev;
    unsigned nreq = dev->nq - VSCSI_FIRST_REQ_QUEUE;
    struct vscsi_tmf *tmf = g_malloc0(sizeof(*tmf) + nreq * sizeof(tmf->waits[0]));

    tmf->dev = dev;
    /* The element's iovecs live in vscsi_ctrl_process's stack array: keep a copy. */
    tmf->elem = (struct vq_elem) {
        .head = e->head,
        .ndescs = e->ndescs,
        .inflight_entry = e->inflight_entry,
        .in_num = e->in_num,
        .in_len = e->in_len,
        .in_sg = g_memdup2(e->in_sg, e->in_num * sizeof(*e->in_sg)),
    };
    tmf->m = *m;
    tmf->lun = lun;
    tmf->pending = 1;
    tmf->next = dev->tmfs;
    dev->tmfs = tmf;
    dev->ntmfs++;
    if (m->subtype == VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET ||
        m->subtype == VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET) {
        tmf->pending++;
        tmf->drain = (struct scsi_drain){ .done = tmf_drain_done,
                                          .thread = dev->main_thread, .opaque = tmf };
        scsi_lun_drain_async(lun, &tmf->drain);
    }
    for (unsigned i = 0; i < nreq; i++) {
        struct vscsi_tmf_wait *w = &tmf->waits[tmf->nwaits];

        w->tmf = tmf;
        w->q = &dev->queues[VSCSI_FIRST_REQ_QUEUE + i];
        if (!w->q->running) {
            continue;
        }
        /* Waits for the thread's loop, not for I/O: see "Task management" above. */
        iothread_run_sync(w->q->t, tmf_wait_register, w);
        if (w->linked) {
            tmf->pending++;
            tmf->nwaits++;
        }
    }
    tmf_put(tmf);
}

/*
 * Returns true with *response set when the TMF is answered now, false when
 * a vscsi_tmf took the element over.
 */
static bool ctrl_tmf(struct vscsi_queue *cq, const struct vq_elem *e,
                     const struct virtio_scsi_ctrl_tmf_req *req, uint8_t *response)
{
    struct vscsi_dev *dev = cq->dev;
    uint32_t subtype = le32toh(req->subtype);
    unsigned target, lun_id;
    struct scsi_lun *lun;
    int kind = vscsi_decode_lun(req->lun, &target, &lun_id);
    struct tmf_match m = { .subtype = subtype, .target = target, .lun_id = lun_id,
                           .tag = le64toh(req->tag) };

    if (kind != 0 || !scsi_nexus_has_port(dev->nexus, target)) {
        *response = VIRTIO_SCSI_S_BAD_TARGET;
        return true;
    }
    lun = scsi_nexus_lun(dev->nexus, target, lun_id);
    if (!lun && subtype != VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET) {
        *response = VIRTIO_SCSI_S_INCORRECT_LUN;
        return true;
    }
    switch (subtype) {
    case VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET:
    case VIRTIO_SCSI_T_TMF_ABORT_TASK:
    case VIRTIO_SCSI_T_TMF_ABORT_TASK_SET:
    case VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET:
    case VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
        tmf_start(cq, e, &m, lun);
        return false;
    case VIRTIO_SCSI_T_TMF_QUERY_TASK:
    case VIRTIO_SCSI_T_TMF_QUERY_TASK_SET:
        *response = tasks_in_flight(dev, &m) ? VIRTIO_SCSI_S_FUNCTION_SUCCEEDED
                                             : VSCSI_S_FUNCTION_COMPLETE;
        return true;
    case VIRTIO_SCSI_T_TMF_CLEAR_ACA:
    default:
        *response = VIRTIO_SCSI_S_FUNCTION_REJECTED;
        return true;
    }
}

/* ---- the control queue's requests -------------------------------------- */

static void ctrl_handle(struct vscsi_queue *q, struct vq_elem *e)
{
    struct vscsi_dev *dev = q->dev;
    /* The guest may rewrite its buffer meanwhile: one copy, its type and body read from it. */
    union {
        uint32_t type;
        struct virtio_scsi_ctrl_tmf_req tmf;
        struct virtio_scsi_ctrl_an_req an;
    } req;
    size_t got = iov_to_buf(e->out_sg, e->out_num, 0, &req, sizeof(req));
    uint32_t type;
    uint32_t len = 0;

    if (got < sizeof(req.type)) {
        log_limit_warning(q->vq->log_limit, "%s: control request %u without a type", q->name,
                          e->head);
        goto done;
    }
    type = le32toh(req.type);
    if (type == VIRTIO_SCSI_T_TMF) {
        struct virtio_scsi_ctrl_tmf_resp resp;

        if (got < sizeof(req.tmf) || e->in_len < sizeof(resp)) {
            log_limit_warning(q->vq->log_limit, "%s: short TMF request %u", q->name, e->head);
            goto done;
        }
        if (!ctrl_tmf(q, e, &req.tmf, &resp.response)) {
            return;
        }
        len = iov_from_buf(e->in_sg, e->in_num, 0, &resp, sizeof(resp));
    } else if (type == VIRTIO_SCSI_T_AN_QUERY || type == VIRTIO_SCSI_T_AN_SUBSCRIBE) {
        struct virtio_scsi_ctrl_an_resp resp = { 0 };
        unsigned target, lun_id;

        if (got < sizeof(req.an) || e->in_len < sizeof(resp)) {
            log_limit_warning(q->vq->log_limit, "%s: short AN request %u", q->name, e->head);
            goto done;
        }
        /* No asynchronous notification classes are supported: event_actual 0. */
        resp.event_actual = 0;
        resp.response = vscsi_decode_lun(req.an.lun, &target, &lun_id) == 0 &&
                        scsi_nexus_has_port(dev->nexus, target)
                            ? VIRTIO_SCSI_S_OK : VIRTIO_SCSI_S_BAD_TARGET;
        len = iov_from_buf(e->in_sg, e->in_num, 0, &resp, sizeof(resp));
    } else {
        /* Nothing sensible to write into a layout we don't know: used len 0. */
        log_limit_warning(q->vq->log_limit, "%s: unknown control request type %u", q->name, type);
    }
done:
    vq_push(q->vq, e, len);
    vq_notify(q->vq);
}

void vscsi_ctrl_process(struct vscsi_queue *q)
{
    struct iovec iov[64];
    struct vq_elem e;
    int ret;

    while (q->running && !q->vq->broken) {
        if (q->dev->ntmfs >= VSCSI_MAX_PENDING_TMFS) {
            /* The next request stays on the ring until a TMF finishes. */
            q->dev->ctrl_throttled = true;
            return;
        }
        ret = vq_pop(q->vq, &e, iov, G_N_ELEMENTS(iov));
        if (ret < 0) {
            /* The TMF response's first byte is its response code, too. */
            uint8_t failure = VIRTIO_SCSI_S_FAILURE;

            vq_answer_bad_chain(q->vq, &failure, sizeof(failure));
            vscsi_queue_report_broken(q);
        }
        if (ret <= 0) {
            return;
        }
        ctrl_handle(q, &e);
    }
}
