/*
 * The event queue of the virtio-scsi device model (virtio 1.2 5.6.6.3):
 * LUN changes the target reports on this front-end's nexus become
 * events in the buffers the driver has posted — a LUN mapped or unmapped
 * is a TRANSPORT_RESET with reason RESCAN or REMOVED (VIRTIO_SCSI_F_HOTPLUG),
 * a parameter change a PARAM_CHANGE carrying the unit attention's ASC and
 * ASCQ (VIRTIO_SCSI_F_CHANGE).  An event with no buffer to go in is lost,
 * and the next event carries VIRTIO_SCSI_T_EVENTS_MISSED so the driver
 * rescans; once the driver posts a buffer after a loss, it gets a
 * NO_EVENT with that flag at once, as QEMU's device does.  Main thread,
 * like the control queue.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>

#include <glib.h>

#include "iov.h"
#include "virtio-scsi-int.h"

/* Pushes one event, or records that it was missed.  Returns whether it went. */
static bool event_push(struct vscsi_dev *dev, uint32_t event, unsigned port, unsigned lun,
                       uint32_t reason)
{
    struct vscsi_queue *q = &dev->queues[VSCSI_EVENT_QUEUE];
    struct virtio_scsi_event ev = { 0 };
    struct iovec iov[8];
    struct vq_elem e;
    int ret;

    if (!q->running || !q->vq || q->vq->broken) {
        dev->events_missed = true;
        return false;
    }
    ret = vq_pop(q->vq, &e, iov, G_N_ELEMENTS(iov));
    if (ret < 0) {
        vq_answer_bad_chain(q->vq, NULL, 0);
        vscsi_queue_report_broken(q);
    }
    if (ret <= 0) {
        dev->events_missed = true;
        return false;
    }
    if (e.in_len < sizeof(ev)) {
        /* Not room for an event: give the buffer back empty, and count it lost. */
        log_limit_warning(q->vq->log_limit, "%s: event buffer %u has %" G_GUINT64_FORMAT
                          " bytes (need %zu)", q->name, e.head, (guint64)e.in_len, sizeof(ev));
        vq_push(q->vq, &e, 0);
        vq_notify(q->vq);
        dev->events_missed = true;
        return false;
    }
    ev.event = htole32(event | (dev->events_missed ? VIRTIO_SCSI_T_EVENTS_MISSED : 0));
    if (event != VIRTIO_SCSI_T_NO_EVENT) {
        vscsi_encode_lun(ev.lun, port, lun);
    }
    ev.reason = htole32(reason);
    iov_from_buf(e.in_sg, e.in_num, 0, &ev, sizeof(ev));
    dev->events_missed = false;
    vq_push(q->vq, &e, sizeof(ev));
    vq_notify(q->vq);
    g_debug("%s: event %#x reason %u for %u:%u", q->name, event, reason, port, lun);
    return true;
}

static bool negotiated(const struct vscsi_dev *dev, unsigned feature)
{
    return dev->features >> feature & 1;
}

static void lun_added(void *opaque, unsigned port, unsigned lun)
{
    struct vscsi_dev *dev = opaque;

    if (negotiated(dev, VIRTIO_SCSI_F_HOTPLUG)) {
        event_push(dev, VIRTIO_SCSI_T_TRANSPORT_RESET, port, lun, VIRTIO_SCSI_EVT_RESET_RESCAN);
    }
}

static void lun_removed(void *opaque, unsigned port, unsigned lun)
{
    struct vscsi_dev *dev = opaque;

    if (negotiated(dev, VIRTIO_SCSI_F_HOTPLUG)) {
        event_push(dev, VIRTIO_SCSI_T_TRANSPORT_RESET, port, lun,
                   VIRTIO_SCSI_EVT_RESET_REMOVED);
    }
}

static void lun_changed(void *opaque, unsigned port, unsigned lun, uint8_t asc, uint8_t ascq)
{
    struct vscsi_dev *dev = opaque;

    /* The spec's layout: ASC in the low byte of reason, ASCQ in the next. */
    if (negotiated(dev, VIRTIO_SCSI_F_CHANGE)) {
        event_push(dev, VIRTIO_SCSI_T_PARAM_CHANGE, port, lun, asc | (uint32_t)ascq << 8);
    }
}

const struct scsi_nexus_events vscsi_nexus_events = {
    .lun_added = lun_added,
    .lun_removed = lun_removed,
    .lun_changed = lun_changed,
};

void vscsi_event_kick(struct vscsi_queue *q)
{
    if (q->dev->events_missed) {
        event_push(q->dev, VIRTIO_SCSI_T_NO_EVENT, 0, 0, 0);
    }
}
