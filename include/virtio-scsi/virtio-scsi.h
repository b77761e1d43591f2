/*
 * The virtio-scsi device model on the back-end side (virtio 1.2, 5.6): it
 * serves the control, event and request virtqueues of one front-end
 * connection (one I_T nexus of the shared scsi_target), turning each
 * request into a SCSI command for the target.  Request queues run on iothreads (queue i on thread
 * i mod nthreads); the control and event queues run on the main thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VIRTIO_SCSI_H
#define VHOST_SCSI_VIRTIO_SCSI_H

#include <stdint.h>

#include "iothread.h"
#include "scsi-target.h"
#include "virtqueue.h"

#define VSCSI_CTRL_QUEUE 0
#define VSCSI_EVENT_QUEUE 1
#define VSCSI_FIRST_REQ_QUEUE 2

struct vscsi_dev;

struct vscsi_dev_config {
    const char *name;               /* for log lines ("conn1") */
    struct scsi_target *target;     /* shared, must outlive the device */
    struct iothread *main_thread;   /* control and event queues */
    struct iothread **threads;      /* request queue threads */
    unsigned nthreads;
    unsigned num_request_queues;
    /*
     * Requests one request queue has in flight at most (0: as many as its
     * ring holds): the pool of request slots is this big, and the rest of
     * a fuller ring waits there until slots come back, so what one
     * front-end holds of the daemon is bounded whatever its ring sizes.
     */
    unsigned max_inflight;
    /*
     * The controller's statistics (NULL: none), kept across its
     * connections, so owned by the caller and outliving the device: every
     * request is counted as scsi_lun_stats counts a command, from the time
     * it was popped, and a request refused before it reached a LUN
     * (BAD_TARGET, bad buffers) as an error of its class.
     */
    struct io_stats *stats;
    /*
     * The initiator port name this connection's nexus presents to
     * persistent reservations (NULL: its name): stable across reconnections
     * of the same VM, so its registrations stay its own.
     */
    const char *initiator;
    /* Called (on the queue's thread) when a queue's ring turns out malformed. */
    void (*queue_broken)(void *opaque, unsigned idx);
    void *opaque;
};

struct vscsi_dev *vscsi_dev_new(const struct vscsi_dev_config *cfg);
/* Stops every queue (draining it) and frees. */
void vscsi_dev_free(struct vscsi_dev *dev);

/* Virtio device features this model offers (besides ring/transport bits). */
uint64_t vscsi_dev_features(void);

/* vu_dev_ops-compatible hooks (called on the main thread). */
int vscsi_queue_start(struct vscsi_dev *dev, unsigned idx, struct virtqueue *vq);
void vscsi_queue_stop(struct vscsi_dev *dev, unsigned idx, struct virtqueue *vq);
/*
 * Main thread.  Stops a running request queue taking new requests without
 * waiting for the ones in flight: returns 0 if none is, else 1, and
 * done(arg) runs later on the main thread (never inside this call) once
 * the last has completed, unless the device is freed first.
 * vscsi_queue_stop then detaches at once; vscsi_queue_resume makes the
 * queue take requests again.  The control and event queues, which never
 * wait for I/O to stop, return 0.
 */
int vscsi_queue_quiesce(struct vscsi_dev *dev, unsigned idx, void (*done)(void *arg),
                        void *arg);
void vscsi_queue_resume(struct vscsi_dev *dev, unsigned idx);
void vscsi_dev_reset(struct vscsi_dev *dev);
/*
 * The features the driver accepted (main thread, before the queues
 * start): VIRTIO_SCSI_F_HOTPLUG and _CHANGE decide which LUN changes
 * become events on the event queue.
 */
void vscsi_dev_set_features(struct vscsi_dev *dev, uint64_t features);
/* Queues of the device: control, event and request queues. */
unsigned vscsi_dev_num_queues(const struct vscsi_dev *dev);
/*
 * Main thread: the requests in flight on request queue idx, read on its
 * thread, or -1 if it is not a running request queue.  For monitoring.
 */
int vscsi_queue_inflight(struct vscsi_dev *dev, unsigned idx);

/*
 * Decodes a virtio-scsi LUN field.  Returns 0 and sets target/lun, 1 for
 * the REPORT LUNS well-known LUN of target, or -EINVAL for an address this
 * device does not use (the request then gets BAD_TARGET).
 */
int vscsi_decode_lun(const uint8_t lun[8], unsigned *target, unsigned *lun_id);

#endif
