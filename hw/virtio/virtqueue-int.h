/*
 * What the two ring layouts of virtqueue.c (split) and virtqueue-packed.c
 * (packed) share: single-access reads of guest-written fields, barriers,
 * dirty-log marking, the bounds-checked gathering of one chain's buffers
 * into iovecs, and the failure, call and resubmission paths (defined in
 * virtqueue-common.c, below both layouts).  Everything here is inline,
 * cold, or a system call's wrapper (the call eventfd), so the split hot
 * path costs what it did in one file.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_VIRTQUEUE_INT_H
#define VHOST_SCSI_VIRTQUEUE_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "virtqueue.h"

#define VQ_MAX_SIZE 32768u
/* An indirect table is walked with 16-bit next fields: larger ones cannot be valid. */
#define VQ_MAX_INDIRECT 65536u

/*
 * The guest writes these fields concurrently; a single volatile access
 * stops the compiler from re-reading a value after it was checked.
 */
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

static inline void smp_rmb_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
static inline void smp_wmb_release(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
static inline void smp_mb(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* Orders stores for a successor process that reads them after we die. */
static inline void program_order(void) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

/* Marks the queue broken and logs the first malformation only; returns err. */
int G_GNUC_PRINTF(3, 4) __attribute__((cold))
vq_fail(struct virtqueue *vq, int err, const char *fmt, ...);

/* Writes the call eventfd (the caller decided the driver wants it). */
bool vq_signal_call(struct virtqueue *vq);

bool vq_host_range_in_mem(const struct guest_mem *mem, const void *p, uint64_t len);

/* Every store into guest memory of the ring code goes through one of these. */
static inline void vq_log_host(struct virtqueue *vq, const void *p, uint64_t len)
{
    if (__builtin_expect(vq->log != NULL, 0)) {
        vhost_log_mark_host(vq->log, vq->mem, p, len);
    }
}

/*
 * guest_mem_gpa_iov with the common case inlined: the buffer lies inside
 * one region (the hot path of every request).
 */
static inline int vq_map_buffer(const struct guest_mem *mem, uint64_t gpa, uint32_t len,
                                struct iovec *iov, unsigned max)
{
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_mem_region *r = &mem->r[i];
        uint64_t off = gpa - r->gpa;

        if (gpa >= r->gpa && off < r->size) {
            if (len > r->size - off) {
                break;              /* crosses into another region: slow path */
            }
            if (max == 0) {
                return -ENOBUFS;
            }
            iov->iov_base = (char *)r->host + off;
            iov->iov_len = len;
            return 1;
        }
    }
    return guest_mem_gpa_iov(mem, gpa, len, iov, max);
}

/* One chain's buffers as they are gathered, whatever the ring layout. */
struct vq_chain {
    struct iovec *iov;
    unsigned max_iov;
    unsigned n;                 /* iovecs so far */
    unsigned out_num;           /* of which device-readable */
    uint64_t out_len, in_len;
    bool seen_writable;
    unsigned head;              /* for messages: head index or ring slot */
};

/*
 * Adds one descriptor's buffer: readable buffers must all come before the
 * writable ones, the buffer must lie in guest memory and fit the caller's
 * iovecs.  Zero-length descriptors yield no iovec.
 */
static inline int vq_chain_add(struct virtqueue *vq, struct vq_chain *c, uint64_t addr,
                               uint32_t len, bool writable)
{
    int r;

    if (!len) {
        return 0;
    }
    if (!writable && c->seen_writable) {
        return vq_fail(vq, -EINVAL, "device-readable descriptor after a writable "
                       "one in chain at head %u", c->head);
    }
    r = vq_map_buffer(vq->mem, addr, len, c->iov + c->n, c->max_iov - c->n);
    if (r == -ENOBUFS) {
        return vq_fail(vq, -ENOBUFS, "chain at head %u needs more than %u buffers",
                       c->head, c->max_iov);
    }
    if (r < 0) {
        return vq_fail(vq, -EFAULT, "buffer 0x%" G_GINT64_MODIFIER "x+%u in chain "
                       "at head %u is outside guest memory", (uint64_t)addr, len, c->head);
    }
    c->n += r;
    if (writable) {
        c->seen_writable = true;
        c->in_len += len;
    } else {
        c->out_num = c->n;
        c->out_len += len;
    }
    return 0;
}

/* Checks an indirect descriptor's table length; the caller maps it. */
static inline int vq_check_indirect(struct virtqueue *vq, bool in_indirect, uint32_t len,
                                    unsigned head)
{
    if (!vq->indirect) {
        return vq_fail(vq, -EINVAL, "indirect descriptor at head %u but "
                       "INDIRECT_DESC was not negotiated", head);
    }
    if (in_indirect) {
        return vq_fail(vq, -EINVAL, "nested indirect descriptor in chain at head %u", head);
    }
    if (len == 0 || len % 16 || len / 16 > VQ_MAX_INDIRECT) {
        return vq_fail(vq, -EINVAL, "indirect table of %u bytes at head %u is "
                       "empty, not a multiple of 16 or too large", len, head);
    }
    return 0;
}

static inline void vq_chain_to_elem(const struct vq_chain *c, uint16_t head,
                                    struct vq_elem *elem)
{
    elem->head = head;
    elem->out_num = c->out_num;
    elem->in_num = c->n - c->out_num;
    elem->out_sg = c->iov;
    elem->in_sg = c->iov + c->out_num;
    elem->out_len = c->out_len;
    elem->in_len = c->in_len;
}

/* A request a previous back-end left in flight, found in the inflight area. */
struct vq_resubmit {
    uint16_t head;              /* split: the head index; packed: the chain's first entry */
    uint64_t counter;           /* its pop order */
};

/*
 * Makes vq_pop hand out list's requests, oldest counter first, before
 * anything new, and continues the counter after the newest; frees list.
 */
void vq_resubmit_take(struct virtqueue *vq, struct vq_resubmit *list, unsigned count);

/* The packed layout (virtqueue-packed.c); vq.c's entry points branch to these. */
/* vq_setup's checks of a packed ring's placement, before anything changes. */
int vq_packed_check(struct virtqueue *vq, const struct guest_mem *mem, unsigned num,
                    const void *ring, const void *driver_event, const void *device_event);
/* The rest of vq_setup for a packed ring (the common fields are set). */
void vq_packed_setup(struct virtqueue *vq, void *ring, void *driver_event, void *device_event,
                     uint32_t base);
int vq_packed_pop(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
                  unsigned max_iov);
void vq_packed_unpop(struct virtqueue *vq);
/* The oldest chain a previous back-end left in flight, from the inflight area's copies. */
int vq_packed_pop_resubmit(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
                           unsigned max_iov);
int vq_packed_answer_bad_chain(struct virtqueue *vq, const void *resp, size_t resp_len);
void vq_packed_fill(struct virtqueue *vq, const struct vq_elem *elem, uint32_t len);
void vq_packed_flush(struct virtqueue *vq);
bool vq_packed_has_avail(struct virtqueue *vq);
bool vq_packed_should_notify(struct virtqueue *vq);
void vq_packed_disable_notify(struct virtqueue *vq);
bool vq_packed_enable_notify(struct virtqueue *vq);
uint32_t vq_packed_get_base(const struct virtqueue *vq);

#endif
