/*
 * Internals of the virtio-scsi device model shared by its files, which
 * call one way: virtio-scsi.c (the device and its request queues) calls
 * virtio-scsi-ctrl.c (the control queue: task management, AN queries) and
 * virtio-scsi-event.c (the event queue), and all three
 * virtio-scsi-lun.c (the LUN field).  The request slot, queue and device
 * structures live here because a TMF matches tasks by looking at the
 * request slots of each queue, on that queue's thread.  Not an interface
 * for other layers: use virtio-scsi.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VIRTIO_SCSI_INT_H
#define VHOST_SCSI_VIRTIO_SCSI_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <linux/virtio_scsi.h>

#include "virtio-scsi.h"

/* The spec's FUNCTION COMPLETE shares the value of VIRTIO_SCSI_S_OK. */
#define VSCSI_S_FUNCTION_COMPLETE VIRTIO_SCSI_S_OK

/*
 * Buffers per request, whatever the ring size: QEMU's VIRTQUEUE_MAX_SIZE
 * (its limit on an indirect table) and the header and response.
 */
#define VSCSI_MAX_SG 1026

/*
 * TMFs of one front-end waiting for their tasks at once.  Each holds a
 * control-queue element and a little memory; beyond this the control
 * queue is not popped until one completes (Linux issues one at a time).
 */
#define VSCSI_MAX_PENDING_TMFS 64

/*
 * Request queue kick eventfds are watched edge-triggered: an eventfd wakes
 * its epoll waiters on every write, so a wake-up needs no read(2) to re-arm
 * it, saving one system call per wake-up.  The counter is drained every
 * this many kicks so a front-end's writes never reach the eventfd's limit
 * (where its write would fail with EAGAIN).
 */
#define VSCSI_KICK_DRAIN_EVERY 1024

/*
 * A request queue's turn: the requests it pops when kicked or polled,
 * at most this many, and no more once the requests popped carry this
 * many bytes (guest buffers: header, data, response).  A queue with more
 * on its ring takes its next turn in the thread's next iteration, after
 * the kicks waiting there (iothread_resume), or, polled, in the next
 * round of the pollers, so the queues sharing a thread take turns and each
 * turn's inline work is bounded (docs/security.md).  A well-behaved
 * queue (QD32 of 4 KiB) fits in one turn and never pays for this.
 */
#define VSCSI_TURN_REQUESTS 64
#define VSCSI_TURN_BYTES (256u << 10)
/*
 * A request queue stops popping while the requests it has in flight
 * carry this many bytes of guest buffers (one more is always admitted
 * when none is in flight, so the largest READ still runs): the rest stay
 * in guest memory, on the ring, and a flood of large requests cannot
 * fill the thread's io_uring and the device's queue ahead of the other
 * queues' requests.  Sixteen 1 MiB requests keep a disk streaming; a
 * QD32 of 4 KiB is 128 KiB.
 */
#define VSCSI_INFLIGHT_BYTES (16u << 20)
/*
 * Completions of one iteration are published to the used ring (and the
 * driver signalled, if it asked) every this many, not only at the
 * iteration's end: a driver that waits for interrupts then wakes while
 * the rest of the batch is still being answered and refills the ring in
 * parallel, instead of the two sides taking turns a whole batch at a time.
 * A QD1 request is alone in its iteration and is unaffected.
 */
#define VSCSI_PUBLISH_EVERY 8

struct vscsi_queue;
struct vscsi_tmf;

struct vscsi_req {
    struct vscsi_queue *q;
    struct vscsi_req *next_free;
    struct vq_elem elem;
    struct virtio_scsi_cmd_req hdr;
    struct scsi_cmd cmd;
    uint64_t data_len;
    uint64_t admitted_bytes;  /* counted in q->inflight_bytes while in flight */
    bool in_use;
    uint64_t seq;             /* pop order on its queue (TMFs wait for older ones) */
    bool on_lun;              /* runs on the LUN at (target, lun_id) */
    uint8_t target;
    uint16_t lun_id;
    struct iovec *iov;        /* the chain as popped (header + data) */
    struct iovec *data_iov;   /* the data part only */
    uint64_t start_ns;        /* popped (io_stats_now_ns()), if the device keeps stats */
};

/* The tasks a TMF is about, as the request queues' threads match them. */
struct tmf_match {
    uint32_t subtype;
    unsigned target;
    unsigned lun_id;
    uint64_t tag;             /* ABORT TASK, QUERY TASK */
};

/*
 * A TMF's wait on one request queue, for the matching requests popped
 * before it was registered; owned by the queue's thread while linked.
 */
struct vscsi_tmf_wait {
    struct vscsi_tmf *tmf;
    struct vscsi_queue *q;
    struct vscsi_tmf_wait *next;   /* in q->tmf_waits */
    uint64_t last_seq;             /* requests popped later are not waited for */
    unsigned left;                 /* matching requests still running */
    /*
     * Set by the registration and read by the main thread after it: left
     * may already be back to 0 by then, with the report on its way.
     */
    bool linked;
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
    bool starved;             /* pool empty or in-flight bytes at their cap, work pending */
    bool turn_over;           /* the last turn ended at its budget, work left */
    bool turn_queued;         /* next_turn is queued (iothread_resume) */
    struct iothread_task next_turn;
    bool broken_reported;
    int poller;
    int flush;
    unsigned max_sg;
    struct vscsi_req *reqs;   /* the pool: the ring's size or the in-flight limit */
    unsigned nreqs;
    bool limit_logged;        /* the in-flight limit was reached (said once per start) */
    struct vscsi_req *free_list;
    struct iovec *iov_mem;    /* mapped: iov_mem_bytes */
    size_t iov_mem_bytes;
    unsigned inflight;
    uint64_t inflight_bytes;  /* the guest buffers of those requests (VSCSI_INFLIGHT_BYTES) */
    unsigned kicks_undrained; /* kick wake-ups since the last read(2) */
    bool kick_watched;        /* the kick fd is in the thread's epoll set */
    /* Never reset, so a request of a restarted queue is never taken for an older one. */
    uint64_t pop_seq;
    struct vscsi_tmf_wait *tmf_waits;
    struct vscsi_tmf_wait *tmf_waits_done; /* reported after the next publication */
    pthread_mutex_t lock;     /* guards drained for the stopping thread */
    pthread_cond_t cond;
    bool drained;
    struct vscsi_quiesce *waiter; /* reports when inflight reaches 0 (queue's thread) */
};

/*
 * A quiesce waiting for a request queue's last in-flight request.  The
 * queue's thread posts it to the main thread once; it stays on the
 * device's list (main thread only) until then, so a device freed first
 * can disown it (dev = NULL) and the late report only frees it.
 */
struct vscsi_quiesce {
    struct vscsi_dev *dev;
    struct vscsi_quiesce *next;
    void (*done)(void *arg);
    void *arg;
};

struct vscsi_dev {
    char *name;
    struct scsi_nexus *nexus; /* this front-end's I_T nexus to the target */
    struct iothread *main_thread;
    struct iothread **threads;
    unsigned nthreads;
    unsigned nq;              /* 2 + request queues */
    unsigned max_inflight;    /* per request queue; 0: the ring's size */
    void (*queue_broken)(void *opaque, unsigned idx);
    void *opaque;
    struct vscsi_queue *queues;
    /* TMFs waiting for their tasks, answered by callback (main thread). */
    struct vscsi_tmf *tmfs;
    unsigned ntmfs;
    bool ctrl_throttled;      /* the control queue waits for a TMF to finish */
    struct vscsi_quiesce *quiesces; /* posted or to be posted (main thread) */
    uint64_t features;        /* negotiated (vscsi_dev_set_features) */
    bool events_missed;       /* an event found no buffer: flag the next one */
    struct io_stats *stats;   /* the controller's, or NULL */
};

/* ---- virtio-scsi-ctrl.c: the control queue, for the device ------------- */

/* Pops and answers what the control queue holds. */
void vscsi_ctrl_process(struct vscsi_queue *q);
/* A request of q completed: count it against the TMF waits registered on q. */
void vscsi_tmf_waits_check(struct vscsi_queue *q, struct vscsi_req *r);
/* After q published its used entries: report the waits that have ended. */
void vscsi_tmf_waits_report(struct vscsi_queue *q);
/* The control queue stops: answer its pending TMFs FAILURE and orphan them. */
void vscsi_tmf_fail_pending(struct vscsi_queue *cq);

/* ---- virtio-scsi-event.c: the event queue, for the device -------------- */

/* What the device's nexus reports (main thread), turned into events. */
extern const struct scsi_nexus_events vscsi_nexus_events;
/* The driver posted event buffers: deliver a missed-events notice if one is due. */
void vscsi_event_kick(struct vscsi_queue *q);

/* ---- virtio-scsi-lun.c (vscsi_decode_lun is in virtio-scsi.h) ---------- */

/* The LUN field of an event about LUN lun_id of target. */
void vscsi_encode_lun(uint8_t lun[8], unsigned target, unsigned lun_id);

/* ---- shared by the queues ---------------------------------------------- */

/* Marks q broken (a malformed chain) and tells the device's owner, once. */
static inline void vscsi_queue_report_broken(struct vscsi_queue *q)
{
    if (!q->broken_reported) {
        q->broken_reported = true;
        if (q->dev->queue_broken) {
            q->dev->queue_broken(q->dev->opaque, q->idx);
        }
    }
}

#endif
