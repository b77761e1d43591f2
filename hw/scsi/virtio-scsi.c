/*
 * virtio-scsi request handling for one front-end connection (see
 * include/virtio-scsi/virtio-scsi.h).  A request queue lives on one iothread and owns a
 * pool of request slots sized to its ring, so the hot path allocates
 * nothing: pop a chain, parse the header, run the CDB on the LUN, and on
 * completion fill the used ring.  Used entries are published and the call
 * eventfd signalled once per loop iteration (flush hook), and only when the
 * driver's EVENT_IDX / NO_INTERRUPT state asks for it.  Task management
 * runs on the main thread and never waits there: a TMF that must wait for
 * the tasks it aborts keeps its control-queue element and is answered by
 * callback when they have completed (virtio-scsi-ctrl.c, the control queue).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_scsi.h>

#include "iov.h"
#include "virtio-scsi-int.h"

uint64_t vscsi_dev_features(void)
{
    /*
     * LUNs come and go and grow live: HOTPLUG and CHANGE events tell the
     * driver (virtio-scsi-event.c).  No T10 PI.
     */
    return (1ull << VIRTIO_SCSI_F_HOTPLUG) | (1ull << VIRTIO_SCSI_F_CHANGE);
}

/* ---- request queues ---------------------------------------------------- */

static void queue_signal_drained(struct vscsi_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->drained = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->lock);
}


static void quiesce_unlink(struct vscsi_quiesce *w)
{
    for (struct vscsi_quiesce **p = &w->dev->quiesces; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    w->dev = NULL;
}

/* Main thread.  done() may free the device: nothing of it is touched after. */
static void quiesce_report(void *opaque)
{
    struct vscsi_quiesce *w = opaque;

    if (w->dev) {
        quiesce_unlink(w);
        w->done(w->arg);
    }
    g_free(w);
}

static void req_release(struct vscsi_queue *q, struct vscsi_req *r)
{
    /* One test per request: TMFs waiting on this queue are rare. */
    if (q->tmf_waits) {
        vscsi_tmf_waits_check(q, r);
    }
    r->in_use = false;
    r->next_free = q->free_list;
    q->free_list = r;
    q->inflight--;
    q->inflight_bytes -= r->admitted_bytes;
    if (q->stopping && q->inflight == 0) {
        queue_signal_drained(q);
        if (q->waiter) {
            iothread_post(q->dev->main_thread, quiesce_report, q->waiter);
            q->waiter = NULL;
        }
    }
}

static void req_finish(struct vscsi_req *r, const struct virtio_scsi_cmd_resp *resp,
                       uint32_t data_in)
{
    struct vscsi_queue *q = r->q;
    size_t resp_len = MIN(sizeof(*resp), r->elem.in_len);
    /*
     * Only the sense bytes sense_len names are written, not the whole
     * 96-byte field: a driver reads no more (the spec's sense_len), and
     * for a GOOD command that leaves the response's second cache line
     * alone, one transfer from the driver's core fewer per request.  The
     * used length still covers the whole response: data-in follows it.
     */
    size_t wr = MIN(offsetof(struct virtio_scsi_cmd_resp, sense) +
                    MIN(le32toh(resp->sense_len), VIRTIO_SCSI_SENSE_SIZE), resp_len);

    iov_from_buf(r->elem.in_sg, r->elem.in_num, 0, resp, wr);
    vq_fill(q->vq, &r->elem, (uint32_t)resp_len + data_in);
    if (vq_unflushed(q->vq) >= VSCSI_PUBLISH_EVERY) {
        vq_flush(q->vq);
        vq_notify(q->vq);
    } else {
        q->need_flush = true;
    }
    req_release(q, r);
}

/* Counts a request that got as far as a readable header. */
static void req_count(struct vscsi_req *r, uint64_t bytes, bool error, uint64_t done_ns)
{
    struct vscsi_queue *q = r->q;

    if (!q->dev->stats) {
        return;
    }
    if (!done_ns) {
        done_ns = iothread_now_after_ns(q->t, r->start_ns);
    }
    io_stats_add(q->dev->stats, iothread_id(q->t),
                 scsi_cdb_class(r->hdr.cdb, VIRTIO_SCSI_CDB_SIZE), bytes, error,
                 done_ns - r->start_ns);
}

static void req_fail(struct vscsi_req *r, uint8_t response)
{
    struct virtio_scsi_cmd_resp resp = { .response = response };

    req_count(r, 0, true, 0);
    req_finish(r, &resp, 0);
}

static void cmd_complete(struct scsi_cmd *cmd)
{
    struct vscsi_req *r = cmd->opaque;
    /* Only the sense bytes it reports are set: req_finish copies no more. */
    struct virtio_scsi_cmd_resp resp;
    uint32_t sense_len = MIN(cmd->sense_len, VIRTIO_SCSI_SENSE_SIZE);
    uint64_t xfer, resid;

    if (r->elem.in_num && r->data_len && cmd->data_in) {
        xfer = MIN(cmd->data_in_xfer, r->data_len);
    } else {
        xfer = MIN(cmd->data_out_xfer, r->data_len);
    }
    resid = r->data_len - xfer;
    resp.sense_len = htole32(sense_len);
    memcpy(resp.sense, cmd->sense, sense_len);
    resp.resid = htole32((uint32_t)MIN(resid, UINT32_MAX));
    resp.status_qualifier = 0;
    resp.status = cmd->status;
    resp.response = VIRTIO_SCSI_S_OK;
    req_count(r, xfer, scsi_cmd_is_error(cmd), cmd->done_ns);
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
    int kind, n = 0;

    if (r->elem.out_len < hdr_len || r->elem.in_len < resp_len) {
        /*
         * Not a virtio-scsi request: there may be no room even for a
         * response, so return the buffers untouched (QEMU marks the device
         * broken here; we keep serving the queue and say why).
         */
        log_limit_warning(q->vq->log_limit, "%s: request %u has a %" PRIu64 "-byte header and %"
                          PRIu64 "-byte response buffer (need %zu and %zu)", q->name, r->elem.head,
                          r->elem.out_len, r->elem.in_len, hdr_len, resp_len);
        vq_fill(q->vq, &r->elem, 0);
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

    scsi_cmd_reset(cmd);
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
    if (kind < 0) {
        req_fail(r, VIRTIO_SCSI_S_BAD_TARGET);
        return;
    }
    cmd->cdb = r->hdr.cdb;
    cmd->cdb_len = VIRTIO_SCSI_CDB_SIZE;
    cmd->tag = le64toh(r->hdr.tag);
    cmd->thread = q->t;
    cmd->start_ns = r->start_ns;
    cmd->complete = cmd_complete;
    cmd->opaque = r;
    /* Set before the command may complete: a TMF matches it by address. */
    r->on_lun = kind == 0;
    r->target = (uint8_t)target;
    r->lun_id = (uint16_t)lun_id;
    /*
     * No such target, or a command other than INQUIRY / REQUEST SENSE /
     * REPORT LUNS for a LUN that is not there: virtio's BAD_TARGET.
     */
    if (scsi_nexus_exec(dev->nexus, target, lun_id, kind == 1, cmd) < 0) {
        r->on_lun = false;
        req_fail(r, VIRTIO_SCSI_S_BAD_TARGET);
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

/* What a queue's turn has taken so far of its budget (VSCSI_TURN_*). */
struct vscsi_turn {
    unsigned reqs;
    uint64_t bytes;
};

/*
 * Pops and starts as many requests as the ring, the pool and what is left
 * of the turn's budget allow (turn_over says the budget ended it).  A turn
 * may drain more than once (a kick handler drains again when re-arming
 * finds new requests), but its budget is the turn's, not each drain's.
 */
static bool queue_drain_avail(struct vscsi_queue *q, struct vscsi_turn *turn)
{
    bool progress = false;
    /*
     * One start time for the whole batch, read when its first request is
     * popped, before any of it runs: a command that completes at once then
     * ends at the first completion's fresh reading and the rest share it
     * (iothread_now_after_ns), two clock readings per batch instead of two
     * per command, and none for a poll that finds the ring empty.
     */
    uint64_t start_ns = 0;

    q->turn_over = false;
    while (q->running && !q->stopping && !q->vq->broken) {
        struct vscsi_req *r = q->free_list;
        int ret;

        if (turn->reqs >= VSCSI_TURN_REQUESTS || turn->bytes >= VSCSI_TURN_BYTES) {
            q->turn_over = vq_has_avail(q->vq);
            break;
        }
        if (q->inflight_bytes >= VSCSI_INFLIGHT_BYTES) {
            /* Resumed by the flush hook once completions bring it down. */
            q->starved = vq_has_avail(q->vq);
            break;
        }
        if (!r) {
            q->starved = vq_has_avail(q->vq);
            if (q->starved && q->nreqs < q->vq->num && !q->limit_logged) {
                /* Normal for a deep queue: said once per queue start, not per request. */
                log_limit_message(q->vq->log_limit,
                                  "%s: %u requests in flight, the per-queue limit; the rest wait "
                                  "in the ring", q->name, q->nreqs);
                q->limit_logged = true;
            }
            break;
        }
        ret = vq_pop(q->vq, &r->elem, r->iov, q->max_sg);
        if (ret <= 0) {
            if (ret < 0) {
                queue_answer_bad_chain(q);
                vscsi_queue_report_broken(q);
            }
            break;
        }
        if (!start_ns && q->dev->stats) {
            start_ns = iothread_now_ns(q->t);
        }
        q->free_list = r->next_free;
        r->in_use = true;
        r->seq = ++q->pop_seq;
        r->on_lun = false;
        r->start_ns = start_ns;
        q->inflight++;
        progress = true;
        turn->reqs++;
        r->admitted_bytes = r->elem.out_len + r->elem.in_len;
        turn->bytes += r->admitted_bytes;
        q->inflight_bytes += r->admitted_bytes;
        req_exec(q, r);
    }
    return progress;
}

static void queue_process(struct vscsi_queue *q);

static void queue_next_turn(struct iothread_task *task)
{
    struct vscsi_queue *q = (struct vscsi_queue *)((char *)task -
                                                   offsetof(struct vscsi_queue, next_turn));

    q->turn_queued = false;
    queue_process(q);
}

/*
 * The turn is over with requests left: kicks stay off (no kick would
 * come: the driver sees us draining) and the queue takes its next turn
 * in the next iteration, after the kicks waiting there (other queues of
 * this thread).  Not a write to the kick eventfd: the front-end shares it
 * and could have made it block.
 */
static void queue_yield(struct vscsi_queue *q)
{
    if (!q->turn_queued) {
        q->turn_queued = true;
        iothread_resume(q->t, &q->next_turn);
    }
}

/* Taken back when the queue stops: the task must not outlive the queue. */
static void queue_unyield(struct vscsi_queue *q)
{
    if (q->turn_queued) {
        q->turn_queued = false;
        iothread_resume_cancel(q->t, &q->next_turn);
    }
}

static void queue_process(struct vscsi_queue *q)
{
    struct vscsi_turn turn = { 0 };

    if (!q->running || q->stopping) {
        return;
    }
    do {
        vq_disable_notify(q->vq);
        queue_drain_avail(q, &turn);
        if (q->turn_over) {
            queue_yield(q);
            return;
        }
    } while (!q->starved && !q->stopping && !q->vq->broken && q->running &&
             !iothread_polling(q->t) && vq_enable_notify(q->vq));
}

static void queue_kick_cb(void *opaque, uint32_t events)
{
    struct vscsi_queue *q = opaque;
    uint64_t v;

    if (++q->kicks_undrained >= VSCSI_KICK_DRAIN_EVERY) {
        q->kicks_undrained = 0;
        if (read(q->vq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
            log_limit_warning(q->vq->log_limit, "%s: kick eventfd read: %s", q->name,
                              g_strerror(errno));
        }
    }
    /* Its next turn is queued already: a driver kicking anyway gets no extra one. */
    if (!q->turn_queued) {
        queue_process(q);
    }
}

static void queue_flush_cb(void *opaque)
{
    struct vscsi_queue *q = opaque;

    if (q->starved && q->free_list && q->inflight_bytes < VSCSI_INFLIGHT_BYTES) {
        /* In the next iteration, like a turn that ended at its budget: one turn per iteration. */
        q->starved = false;
        queue_yield(q);
    }
    if (q->need_flush) {
        q->need_flush = false;
        vq_flush(q->vq);
        vq_notify(q->vq);
    }
    if (q->tmf_waits_done) {
        vscsi_tmf_waits_report(q);
    }
}

static bool queue_poll_cb(void *opaque)
{
    struct vscsi_queue *q = opaque;
    struct vscsi_turn turn = { 0 };   /* a poll is a turn of its own */

    if (q->starved || q->turn_queued) {
        return false;
    }
    return queue_drain_avail(q, &turn);
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
 * leaving it silently dead.  A request queue's kick fd is one a poller
 * reads the ring of (polled): a busy-polling thread looks at it seldom.
 */
static bool watch_kick(struct vscsi_queue *q, iothread_fd_cb *cb, bool polled)
{
    q->kick_watched = false;
    if (q->vq->kick_fd < 0) {
        return true;
    }
    if ((polled ? iothread_add_kick_fd : iothread_add_fd)(q->t, q->vq->kick_fd,
                                                          EPOLLIN | EPOLLET, cb, q) == 0) {
        q->kick_watched = true;
        return true;
    }
    log_limit_warning(q->vq->log_limit, "%s: cannot watch the kick fd; queue marked broken",
                      q->name);
    q->vq->broken = true;
    vscsi_queue_report_broken(q);
    return false;
}

static void unwatch_kick(struct vscsi_queue *q)
{
    if (q->vq->kick_fd >= 0 && q->kick_watched) {
        iothread_del_fd(q->t, q->vq->kick_fd);
    }
}

/* Polls and watches kicks, then takes what the driver queued meanwhile. */
static void queue_arm(struct vscsi_queue *q)
{
    struct iothread_poller p = { .poll = queue_poll_cb, .set_notify = queue_set_notify_cb,
                                 .opaque = q };

    q->poller = iothread_add_poller(q->t, &p);
    q->kicks_undrained = 0;
    if (!watch_kick(q, queue_kick_cb, true)) {
        return;
    }
    queue_process(q);
    if (q->need_flush) {
        queue_flush_cb(q);
    }
}

static void queue_attach(void *opaque)
{
    struct vscsi_queue *q = opaque;

    q->running = true;
    q->stopping = false;
    q->starved = false;
    q->broken_reported = false;
    q->next_turn.fn = queue_next_turn;
    q->flush = iothread_add_flush(q->t, queue_flush_cb, q);
    queue_arm(q);
}

static void queue_begin_stop(void *opaque)
{
    struct vscsi_queue *q = opaque;

    if (q->stopping) {
        return;         /* quiesced first (vscsi_queue_quiesce) */
    }
    q->stopping = true;
    unwatch_kick(q);
    queue_unyield(q);
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
    vscsi_tmf_waits_report(q);
    iothread_del_flush(q->t, q->flush);
    q->running = false;
}

struct quiesce_call {
    struct vscsi_queue *q;
    struct vscsi_quiesce *w;
    bool drained;
};

static void queue_quiesce_on_thread(void *opaque)
{
    struct quiesce_call *c = opaque;

    queue_begin_stop(c->q);
    c->drained = c->q->inflight == 0;
    if (!c->drained) {
        c->q->waiter = c->w;
    }
}

/* Undoes queue_begin_stop: the queue takes requests again. */
static void queue_resume_on_thread(void *opaque)
{
    struct quiesce_call *c = opaque;
    struct vscsi_queue *q = c->q;

    c->w = q->waiter;    /* not reported yet: the caller disowns it */
    q->waiter = NULL;
    if (q->stopping) {
        q->stopping = false;
        queue_arm(q);
    }
}

static int req_queue_start(struct vscsi_queue *q, struct virtqueue *vq)
{
    unsigned num = vq->num;

    q->vq = vq;
    unsigned slots = q->dev->max_inflight && q->dev->max_inflight < num ?
                     q->dev->max_inflight : num;

    /*
     * Not bounded by the ring size: a driver's indirect table may hold more
     * segments than seg_max (vioscsi sends 2 MiB + 4 KiB as 513 pages on a
     * 128-entry ring), and QEMU's own virtio-scsi takes up to 1024.
     */
    q->max_sg = VSCSI_MAX_SG;
    /* calloc'd: slots the ring never fills are never touched, never resident. */
    q->reqs = g_new0(struct vscsi_req, slots);
    q->nreqs = slots;
    q->limit_logged = false;
    /*
     * 32 KiB of iovecs per slot, of which a request touches what its chain
     * needs: fresh anonymous pages (not the heap's, which calloc may clear
     * and so make resident), backed only once a chain that long arrives.
     */
    q->iov_mem_bytes = (size_t)slots * q->max_sg * 2 * sizeof(struct iovec);
    q->iov_mem = mmap(NULL, q->iov_mem_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q->iov_mem == MAP_FAILED) {
        int err = -errno;

        q->iov_mem = NULL;
        g_free(q->reqs);
        q->reqs = NULL;
        q->vq = NULL;
        return err;
    }
    q->free_list = NULL;
    for (unsigned i = slots; i-- > 0;) {
        struct vscsi_req *r = &q->reqs[i];

        r->q = q;
        r->iov = q->iov_mem + (size_t)i * q->max_sg * 2;
        r->data_iov = r->iov + q->max_sg;
        r->next_free = q->free_list;
        q->free_list = r;
    }
    q->inflight = 0;
    q->inflight_bytes = 0;
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
    if (q->iov_mem) {
        munmap(q->iov_mem, q->iov_mem_bytes);
    }
    q->reqs = NULL;
    q->iov_mem = NULL;
    q->free_list = NULL;
    q->vq = NULL;
}

/* ---- control and event queues ------------------------------------------ */

static void ctrl_kick_cb(void *opaque, uint32_t events)
{
    struct vscsi_queue *q = opaque;
    uint64_t v;

    /* Edge-triggered (see watch_kick): this read only keeps the counter low. */
    if (read(q->vq->kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        log_limit_warning(q->vq->log_limit, "%s: kick eventfd read: %s", q->name,
                          g_strerror(errno));
    }
    if (q->idx == VSCSI_CTRL_QUEUE) {
        vscsi_ctrl_process(q);
    } else {
        /* Event buffers stay on the ring until an event needs one. */
        vscsi_event_kick(q);
    }
}

static void aux_attach(void *opaque)
{
    struct vscsi_queue *q = opaque;

    q->running = true;
    q->broken_reported = false;
    if (!watch_kick(q, ctrl_kick_cb, false)) {
        return;
    }
    if (q->idx == VSCSI_CTRL_QUEUE) {
        vscsi_ctrl_process(q);
    } else {
        vscsi_event_kick(q);
    }
}

static void aux_detach(void *opaque)
{
    struct vscsi_queue *q = opaque;

    unwatch_kick(q);
    if (q->idx == VSCSI_CTRL_QUEUE) {
        vscsi_tmf_fail_pending(q);
    }
    q->running = false;
}

/* ---- device ------------------------------------------------------------- */

struct vscsi_dev *vscsi_dev_new(const struct vscsi_dev_config *cfg)
{
    struct vscsi_dev *dev = g_new0(struct vscsi_dev, 1);

    dev->name = g_strdup(cfg->name);
    /* A new connection is a new initiator: each LUN has just powered on for it. */
    dev->nexus = scsi_target_nexus_new(cfg->target, cfg->name);
    if (cfg->initiator) {
        scsi_nexus_set_initiator(dev->nexus, cfg->initiator);
    }
    scsi_nexus_set_events(dev->nexus, &vscsi_nexus_events, dev);
    dev->main_thread = cfg->main_thread;
    dev->threads = cfg->threads;
    dev->nthreads = cfg->nthreads;
    dev->nq = VSCSI_FIRST_REQ_QUEUE + cfg->num_request_queues;
    dev->max_inflight = cfg->max_inflight;
    dev->queue_broken = cfg->queue_broken;
    dev->opaque = cfg->opaque;
    dev->stats = cfg->stats;
    dev->queues = g_new0(struct vscsi_queue, dev->nq);
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

int vscsi_queue_quiesce(struct vscsi_dev *dev, unsigned idx, void (*done)(void *arg),
                        void *arg)
{
    struct quiesce_call c;

    if (idx >= dev->nq || idx < VSCSI_FIRST_REQ_QUEUE || !dev->queues[idx].running) {
        return 0;   /* the control and event queues stop without waiting for I/O */
    }
    c.q = &dev->queues[idx];
    c.w = g_new0(struct vscsi_quiesce, 1);
    c.w->dev = dev;
    c.w->done = done;
    c.w->arg = arg;
    c.w->next = dev->quiesces;
    dev->quiesces = c.w;
    iothread_run_sync(c.q->t, queue_quiesce_on_thread, &c);
    if (c.drained) {
        quiesce_unlink(c.w);
        g_free(c.w);
        return 0;
    }
    return 1;
}

void vscsi_queue_resume(struct vscsi_dev *dev, unsigned idx)
{
    struct quiesce_call c = { 0 };

    if (idx >= dev->nq || idx < VSCSI_FIRST_REQ_QUEUE || !dev->queues[idx].running) {
        return;
    }
    c.q = &dev->queues[idx];
    iothread_run_sync(c.q->t, queue_resume_on_thread, &c);
    if (c.w) {
        quiesce_unlink(c.w);
        g_free(c.w);
    }
}

struct inflight_call {
    struct vscsi_queue *q;
    int n;
};

static void read_inflight_on_thread(void *opaque)
{
    struct inflight_call *c = opaque;

    c->n = c->q->running ? (int)c->q->inflight : -1;
}

int vscsi_queue_inflight(struct vscsi_dev *dev, unsigned idx)
{
    struct inflight_call c = { .n = -1 };

    if (idx >= dev->nq || idx < VSCSI_FIRST_REQ_QUEUE || !dev->queues[idx].running) {
        return -1;
    }
    /* The count is the queue thread's own: read it there (bounded, see run_sync). */
    c.q = &dev->queues[idx];
    iothread_run_sync(c.q->t, read_inflight_on_thread, &c);
    return c.n;
}

unsigned vscsi_dev_num_queues(const struct vscsi_dev *dev)
{
    return dev->nq;
}

void vscsi_dev_set_features(struct vscsi_dev *dev, uint64_t features)
{
    dev->features = features;
}

void vscsi_dev_reset(struct vscsi_dev *dev)
{
    for (unsigned i = 0; i < dev->nq; i++) {
        if (dev->queues[i].running) {
            vscsi_queue_stop(dev, i, dev->queues[i].vq);
        }
    }
    /* A device reset is a bus reset for this initiator, as in QEMU's HBA. */
    scsi_nexus_reset(dev->nexus);
}

void vscsi_dev_free(struct vscsi_dev *dev)
{
    if (!dev) {
        return;
    }
    vscsi_dev_reset(dev);
    /* Reports still posted find no device and only free themselves. */
    while (dev->quiesces) {
        quiesce_unlink(dev->quiesces);
    }
    for (unsigned i = 0; i < dev->nq; i++) {
        pthread_mutex_destroy(&dev->queues[i].lock);
        pthread_cond_destroy(&dev->queues[i].cond);
    }
    g_free(dev->queues);
    scsi_target_nexus_free(dev->nexus);
    g_free(dev->name);
    g_free(dev);
}
