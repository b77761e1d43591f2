/*
 * The device side of a virtqueue, split (virtio 1.2, 2.7) or packed (2.8,
 * VIRTIO_F_RING_PACKED): popping descriptor chains the driver made
 * available into iovecs, returning them as used, and deciding when the
 * driver must be notified (EVENT_IDX, NO_INTERRUPT / event suppression,
 * NOTIFY_ON_EMPTY).  Everything read from the rings is
 * untrusted; a malformed ring marks the queue broken, it never crashes us.
 *
 * A virtqueue is owned by exactly one thread while it runs.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VIRTQUEUE_H
#define VHOST_SCSI_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/virtio_ring.h>

#include "guest-mem.h"
#include "iov.h"
#include "log-limit.h"
#include "vhost-log.h"

/* Hard upper bound on iovecs for one request, independent of ring size. */
#define VQ_MAX_SG 1024

struct vq_elem {
    uint16_t head;            /* split: the chain's head index; packed: its buffer id */
    uint16_t ndescs;          /* packed: ring slots the chain took (vq_fill needs it) */
    uint16_t inflight_entry;  /* packed, tracked: the chain's first entry in the inflight area */
    unsigned out_num;         /* device-readable iovecs (driver -> device) */
    unsigned in_num;          /* device-writable iovecs (device -> driver) */
    struct iovec *out_sg;     /* points into the caller's iov array */
    struct iovec *in_sg;      /* points into the caller's iov array, after out_sg */
    uint64_t out_len;         /* total bytes in out_sg */
    uint64_t in_len;          /* total bytes in in_sg */
};

#define VQ_HEAD_CACHE 64          /* power of two */

struct virtqueue {
    const char *name;             /* for log lines, e.g. "vq2"; not owned */
    struct log_limit *log_limit;  /* the connection's, for the lines a front-end causes; not owned */
    unsigned index;
    unsigned num;                 /* ring size, power of two, <= 32768 */
    bool packed;                  /* VIRTIO_F_RING_PACKED: the fields below marked packed */
    struct vring_desc *desc;
    struct vring_avail *avail;
    struct vring_used *used;
    const struct guest_mem *mem;

    /*
     * Packed rings: the descriptor ring (used descriptors are written back
     * into it), the driver's event suppression area (read: may we
     * interrupt?) and ours (written: should it kick?).  Indices below are
     * then ring slots (< num), each with its lap's wrap counter.
     */
    struct vring_packed_desc *ring;
    struct vring_packed_desc_event *driver_event;
    struct vring_packed_desc_event *device_event;
    bool avail_wrap;              /* packed: wrap counter of last_avail_idx */
    bool used_wrap;               /* packed: wrap counter of used_idx */
    bool flushed_wrap;            /* packed: wrap counter of flushed_used_idx */
    bool signalled_wrap;          /* packed: wrap counter of signalled_used */
    uint16_t unflushed;           /* packed: used descriptors written, not yet published */
    uint16_t batch_slot;          /* packed: first of them, published last ... */
    uint16_t batch_flags;         /* ... with these flags */
    uint16_t last_pop_slot;       /* packed: where the last vq_pop began, for vq_unpop */
    bool last_pop_wrap;
    bool bad_wrap;                /* packed: lap of bad_head (then a ring slot) */

    uint16_t last_avail_idx;      /* next avail entry we will read */
    uint16_t shadow_avail_idx;    /* last avail->idx we read */
    /*
     * Heads of avail entries [last_avail_idx, heads_end), read in one pass
     * over the ring when the index moved: one cache miss for a batch
     * instead of one per request while the driver writes the next entries
     * into the same line, and the descriptors' lines fetched in parallel.
     */
    uint16_t heads_end;
    uint16_t heads[VQ_HEAD_CACHE];
    uint16_t used_idx;            /* our copy of used->idx (incl. unpublished) */
    uint16_t signalled_used;      /* used idx at the last notification */
    bool signalled_used_valid;
    bool event_idx;               /* VIRTIO_RING_F_EVENT_IDX negotiated */
    bool indirect;                /* VIRTIO_RING_F_INDIRECT_DESC negotiated */
    bool notify_on_empty;         /* VIRTIO_F_NOTIFY_ON_EMPTY negotiated */
    bool broken;                  /* malformed ring seen: stop serving */
    bool has_bad_head;            /* the chain that broke it had a valid head */
    uint16_t bad_head;
    bool notify_off;              /* vq_disable_notify() in effect */
    unsigned inflight;            /* popped and not yet pushed */
    uint16_t flushed_used_idx;    /* used->idx as last published by vq_flush */
    uint16_t last_head;           /* head (packed: tracked entry) of the last vq_pop, for vq_unpop */
    bool last_from_resubmit;      /* ... and whether it came from resubmit[] */

    int kick_fd;                  /* -1 if none (polling) */
    int call_fd;                  /* -1 if none */
    int err_fd;                   /* -1 if none */

    uint64_t notifications;       /* call eventfd writes, for statistics */

    /*
     * Dirty logging (live migration): while set, every write into guest
     * memory the queue makes or returns to the driver marks its pages.
     * Set with vq_set_log() while the queue is stopped; NULL: off, at the
     * cost of one predictable branch per write site.
     */
    struct vhost_log *log;
    /*
     * Test hook: vq_fill leaves the element's buffers unmarked, the bug
     * the migration tests must catch (VHOST_SCSI_TEST_FAULT in the daemon).
     */
    bool log_skip_data_in;

    /*
     * Optional INFLIGHT_SHMFD tracking (vhost-user.rst, "Inflight I/O
     * tracking"), so a restarted back-end can complete what a killed one
     * had popped.  Split rings (inflight_region): vq_pop marks the head in
     * flight and vq_fill/vq_flush clear it.  Packed rings (inflight_packed):
     * vq_pop copies the chain's descriptors into entries of the area's free
     * list, and vq_flush gives a batch's entries back and records the used
     * slot.  The track_* fields are our own copies of the list's state;
     * the links the hot path still follows in the area (the front-end can
     * rewrite them) are each read once and checked or masked, and a walk
     * never takes more steps than the ring has entries.  Restores decide
     * from a private copy of the area, read once.
     */
    struct vhost_user_inflight_queue *inflight_region;
    struct vhost_user_inflight_queue_packed *inflight_packed;
    uint16_t track_free;          /* packed: the first free entry (>= num: none) */
    uint16_t track_batch;         /* first entry (split: the head) of the last chain filled ... */
    uint16_t track_batch_last;    /* ... and last entry of the first one filled ... */
    uint16_t track_batch_n;       /* ... of this many chains, not yet flushed */
    uint16_t *resubmit;           /* heads (packed: entries) to hand out again before new ones */
    unsigned resubmit_num;
    /* packed: a private copy of the record taken over, the resubmitted chains' descriptors */
    struct vhost_user_inflight_queue_packed *resubmit_record;
    uint64_t inflight_counter;
};

void vq_init(struct virtqueue *vq, unsigned index, const char *name);

/* Frees what vq_set_inflight(restore) allocated; the vq can be set up again. */
void vq_cleanup(struct virtqueue *vq);

/*
 * Sets up the ring from host pointers already translated by the caller
 * (the vhost-user layer translates front-end addresses).  Checks alignment
 * and that num is a power of two <= 32768.  features is the negotiated
 * virtio feature set (RING_PACKED, EVENT_IDX, INDIRECT_DESC,
 * NOTIFY_ON_EMPTY are used).  base is SET_VRING_BASE's value: for a split
 * ring the first avail index to process (the used index is in memory);
 * for a packed ring, as vhost-user.rst has it, bits 0-14 the next avail
 * slot, bit 15 its wrap counter, bits 16-30 the used slot, bit 31 its wrap
 * counter (a fresh ring: 0x80008000).  A packed ring's desc is the
 * descriptor ring, avail the driver's event area, used the device's.
 */
int vq_setup(struct virtqueue *vq, const struct guest_mem *mem, unsigned num,
             void *desc, void *avail, void *used, uint64_t features,
             uint32_t base);

/* What GET_VRING_BASE answers: the base to resume from, encoded as vq_setup takes it. */
uint32_t vq_get_base(const struct virtqueue *vq);

/* Used elements filled but not yet published by vq_flush. */
static inline unsigned vq_unflushed(const struct virtqueue *vq)
{
    return vq->packed ? vq->unflushed : (uint16_t)(vq->used_idx - vq->flushed_used_idx);
}

/*
 * Pops the next available chain.  iov/max_iov is caller storage for the
 * chain's buffers; elem's sg pointers point into it.
 * Returns 1 when a chain was popped, 0 when the ring is empty, and a
 * negative errno when the ring is malformed (vq->broken is then set and
 * the reason logged once with the queue's name):
 *   head or next index >= num, a loop or a chain longer than num (or longer
 *   than an indirect table), an address outside guest memory, a zero-length
 *   indirect table or one not a multiple of 16, nested indirect, a readable
 *   descriptor after a writable one, more than max_iov buffers, the avail
 *   index moving by more than num.
 * Codes: -EINVAL bad index/flags/table length, -ELOOP loop or overlong chain,
 * -EFAULT address outside guest memory, -ENOBUFS too many buffers, -EIO
 * queue already broken (not logged again).  Breaking a queue also signals
 * err_fd (SET_VRING_ERR) once.  Zero-length descriptors yield no
 * iovec.  An indirect descriptor ends the main-table chain (its NEXT flag is
 * ignored, as QEMU does) and needs VIRTIO_RING_F_INDIRECT_DESC.  Packed
 * rings: a chain is consecutive ring slots, its buffer id (elem->head) is
 * the last descriptor's; an indirect ring descriptor with NEXT set is
 * refused (the driver and we would disagree on the slots it takes).
 */
int vq_pop(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
           unsigned max_iov);

/*
 * Attaches an inflight tracking region of num descriptors (num must equal
 * vq->num).  When restore is true, the region comes from a previous
 * back-end instance: heads it marks in flight are handed out first by
 * vq_pop (oldest counter first), and used_idx is reconciled as the spec
 * describes, all decided from one private copy of the region (the
 * front-end may rewrite it meanwhile).  Returns -EINVAL on a region that
 * does not fit.  Call it after
 * vq_setup(); on restore it replaces base with used->idx plus the number
 * of in-flight heads (everything popped was either used or is in flight),
 * and vq->inflight counts the heads still to resubmit.  restore=false
 * zeroes the region (nothing from an earlier instance is trusted).  NULL
 * detaches.  A packed ring needs vq_set_inflight_packed: -EINVAL here.
 */
struct vhost_user_inflight_queue;
int vq_set_inflight(struct virtqueue *vq, struct vhost_user_inflight_queue *region,
                    bool restore);

/*
 * The same for a packed ring, with the packed layout of the region.
 * restore=false starts a fresh record at the ring's current position.
 * restore=true takes over a previous back-end's record: its last batch
 * of completions is committed if the driver could already see it and
 * rolled back if not; the ring's used slot and wrap counter come from the
 * record and the avail slot lies past the slots its in-flight chains
 * took, replacing vq_setup's base (for a packed ring QEMU has no fresher
 * one to give after a crash); vq_pop hands out those chains first, from
 * the record's copies of their descriptors (as the restore read them into
 * private memory, once: the front-end may rewrite the area meanwhile),
 * oldest first; and used
 * descriptors of a batch the driver never saw are made unreadable to it
 * again.  A record that does not hold together (an index, count or link
 * out of range, a loop, chains sharing entries) is warned about and
 * replaced by a fresh one: its requests are lost, nothing else.
 * -EINVAL when desc_num differs from the ring's size or the ring is split.
 */
struct vhost_user_inflight_queue_packed;
int vq_set_inflight_packed(struct virtqueue *vq, struct vhost_user_inflight_queue_packed *region,
                           bool restore);

/*
 * After vq_pop failed on a malformed chain whose head index was valid
 * (has_bad_head), answers that request before the queue stops: copies
 * resp into the chain's device-writable buffers that do map to guest
 * memory (up to the first bad descriptor), returns the head on the used
 * ring with the bytes written, publishes it and notifies the driver, so a
 * driver waiting for that request sees an error instead of silence.
 * Returns the bytes written, or -ENOENT when there is no such request.
 */
int vq_answer_bad_chain(struct virtqueue *vq, const void *resp, size_t resp_len);

/* Gives back the last popped chain without using it (e.g. out of resources). */
void vq_unpop(struct virtqueue *vq);

/*
 * Returns elem to the driver with len bytes written (a used element, not
 * visible until vq_flush()).  While logging, every page of elem's
 * device-writable buffers is marked dirty first — all of them, not only
 * len bytes: whatever wrote there (io_uring, libiscsi, a memcpy, even
 * after an error) wrote only inside them, and an extra page costs the
 * migration a copy where a missing one would corrupt the guest.  Only
 * elem->head, in_sg and in_num are read (packed: ndescs and
 * inflight_entry too).
 */
void vq_fill(struct virtqueue *vq, const struct vq_elem *elem, uint32_t len);

/* Publishes filled used elements (with the required write barrier). */
void vq_flush(struct virtqueue *vq);

/* vq_fill + vq_flush. */
void vq_push(struct virtqueue *vq, const struct vq_elem *elem, uint32_t len);

/*
 * Starts (log != NULL) or stops dirty logging.  Call it before vq_setup,
 * which writes the ring too, or while the queue is stopped; log must
 * cover the memory table and outlive the queue's use of it.
 */
void vq_set_log(struct virtqueue *vq, struct vhost_log *log);

/* True if the driver asked to be notified of what was flushed so far. */
bool vq_should_notify(struct virtqueue *vq);

/*
 * Writes the call eventfd if vq_should_notify(); returns true if it did
 * (false, too, when call_fd is -1).  The first decision after vq_setup()
 * always notifies; later ones only if something new was flushed.
 */
bool vq_notify(struct virtqueue *vq);

/*
 * Turns driver->device notifications (kicks) off/on.  vq_enable_notify
 * returns true if buffers became available meanwhile (caller must poll
 * again to avoid a lost wake-up).  A caller that never disables kicks may
 * simply pop until vq_pop returns 0 and then wait: with notifications on,
 * an empty vq_pop re-arms EVENT_IDX (avail_event) and re-checks the ring
 * behind a full barrier itself.
 */
void vq_disable_notify(struct virtqueue *vq);
bool vq_enable_notify(struct virtqueue *vq);

/* True if the avail ring holds entries we have not popped. */
bool vq_has_avail(struct virtqueue *vq);

#endif
