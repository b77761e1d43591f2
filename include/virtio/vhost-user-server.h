/*
 * The back-end side of one vhost-user connection: reads and answers the
 * front-end's messages, keeps the memory table and the vring state, and
 * tells the device (virtio-scsi) when a queue starts and must stop.  It
 * knows nothing about SCSI.  All its functions run on one thread (the
 * target's main loop); the device moves queues to its iothreads itself.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VHOST_USER_SERVER_H
#define VHOST_SCSI_VHOST_USER_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "guest-mem.h"
#include "virtqueue.h"
#include "vhost-user-proto.h"

#define VU_MAX_QUEUES 66   /* control + event + 64 request queues */

struct vu_dev;

struct vu_dev_ops {
    /*
     * A queue has everything it needs (memory, addresses, kick fd or
     * polling, enabled): the device starts serving vq from its thread.
     * Returns 0 or -errno (the queue then stays stopped and is logged).
     */
    int (*queue_start)(void *opaque, unsigned idx, struct virtqueue *vq);
    /*
     * The front-end stops the queue (GET_VRING_BASE, disable, reset,
     * disconnect): the device must stop popping, complete or drain every
     * request in flight and detach vq before returning; the server then
     * reports vq->last_avail_idx.
     */
    void (*queue_stop)(void *opaque, unsigned idx, struct virtqueue *vq);
    /*
     * The memory table is about to change / has changed.  The server stops
     * and restarts running queues around the change itself; these hooks
     * are optional.
     */
    void (*mem_changed)(void *opaque);
    /* Virtio-level reset (RESET_DEVICE, RESET_OWNER, SET_STATUS 0). */
    void (*reset)(void *opaque);
    /*
     * Optional, all three or none: they keep the main thread from waiting
     * for a queue's I/O.  queue_quiesce stops a running queue taking new
     * requests and returns 0 if nothing is in flight, or 1 and calls
     * done(arg) later on the main thread when the last in-flight request
     * has completed; queue_resume undoes it.  A message that will stop
     * queues (GET_VRING_BASE, a memory table change, a reset...) is then
     * held, and the connection not read, until they are quiet; wake tells
     * the owner to call vu_dev_dispatch again (main thread).  Without
     * them, queue_stop waits for the I/O itself.
     */
    int (*queue_quiesce)(void *opaque, unsigned idx, void (*done)(void *arg), void *arg);
    void (*queue_resume)(void *opaque, unsigned idx);
    void (*wake)(void *opaque);
};

struct vu_dev_config {
    const char *name;          /* for log lines, e.g. "conn3" */
    unsigned num_queues;       /* total: control + event + request queues */
    uint64_t features;         /* device features to offer (VIRTIO_SCSI_F_*, ring features) */
    uint64_t protocol_features;/* protocol features to offer; 0: the server's default set */
    unsigned max_mem_slots;    /* reported by GET_MAX_MEM_SLOTS; 0: GUEST_MEM_MAX_REGIONS */
    unsigned message_timeout_ms;   /* a message must arrive whole, and a reply be
                                      taken, this long after it starts; 0: 5000 */
    const struct vu_dev_ops *ops;
    void *opaque;
    /* Test hook: dirty logging skips data-in buffers (see vq->log_skip_data_in). */
    bool test_log_skip_data_in;
};

/*
 * Wraps a connected socket.  The server owns fd from now on (closes it in
 * vu_dev_free).  Returns NULL on allocation failure only.
 */
struct vu_dev *vu_dev_new(int fd, const struct vu_dev_config *cfg);
void vu_dev_free(struct vu_dev *dev);   /* stops all queues, unmaps memory */
/*
 * Before vu_dev_free of a connection that ended: quiesces every running
 * queue and returns true if nothing is in flight, so vu_dev_free will not
 * wait.  Otherwise ops->wake is called when that changes; call it again.
 * The connection is not served any more (see vu_dev_poll_events).
 */
bool vu_dev_quiesce_all(struct vu_dev *dev);

int vu_dev_fd(const struct vu_dev *dev);

/*
 * Called when the socket is ready (see vu_dev_poll_events): sends what is
 * left of a pending reply, then reads what has arrived and handles each
 * complete message (answering it, if it needs an answer), a bounded number
 * per call.  Never blocks: a partial message is kept for the next call.
 * Returns 0 to go on, -ECONNRESET when the peer closed the socket, or
 * another -errno on a protocol violation; on any negative return the
 * caller frees the device (the connection is over).
 */
int vu_dev_dispatch(struct vu_dev *dev);

/*
 * What to wait for before the next vu_dev_dispatch: POLLIN, or POLLOUT
 * while the peer has not taken a reply (the values of EPOLLIN/EPOLLOUT),
 * or 0 while a message is held for quiesced queues (ops->wake says when
 * to dispatch again) and once vu_dev_quiesce_all was called.
 */
uint32_t vu_dev_poll_events(const struct vu_dev *dev);

/*
 * The g_get_monotonic_time() by which the message under way must have
 * arrived whole, or its reply been taken; 0 when none is under way.  The
 * caller drops the connection once vu_dev_expired says so (it logs why).
 */
int64_t vu_dev_deadline(const struct vu_dev *dev);
bool vu_dev_expired(struct vu_dev *dev, int64_t now);

/* The device's view, for the device layer and tests. */
const struct guest_mem *vu_dev_mem(const struct vu_dev *dev);
struct virtqueue *vu_dev_queue(struct vu_dev *dev, unsigned idx);
uint64_t vu_dev_features(const struct vu_dev *dev);   /* negotiated */
bool vu_dev_queue_running(const struct vu_dev *dev, unsigned idx);

/*
 * A queue turned broken (malformed ring): tell the front-end through the
 * queue's err eventfd (if any) and log.  Callable from the device.
 */
void vu_dev_queue_error(struct vu_dev *dev, unsigned idx);

#endif
