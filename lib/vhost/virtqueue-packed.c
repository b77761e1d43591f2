/*
 * Device side of a packed virtqueue (virtio 1.2, 2.8; VIRTIO_F_RING_PACKED):
 * one ring of descriptors that the driver makes available in place and we
 * write back as used, each lap told apart by a wrap counter, and two small
 * event areas that replace the split ring's flags and event indices.  A
 * request's descriptors and its completion share the ring's cache lines,
 * which is why a front-end asks for this layout.  As in virtqueue.c every
 * field the guest writes is read once and checked where it is read; a
 * malformed ring breaks the queue, never us.  Completions may come in any
 * order: a used descriptor goes to the next used slot, whichever request
 * it completes, and the used index moves on by that request's slot count.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "virtqueue.h"
#include "virtqueue-int.h"

#define DESC_F_AVAIL (1u << VRING_PACKED_DESC_F_AVAIL)
#define DESC_F_USED (1u << VRING_PACKED_DESC_F_USED)
#define WRAP_BIT (1u << VRING_PACKED_EVENT_F_WRAP_CTR)

/* A descriptor is available in the lap whose wrap counter is wrap (2.8.1). */
static inline bool desc_is_avail(uint16_t flags, bool wrap)
{
    return !!(flags & DESC_F_AVAIL) == wrap && !!(flags & DESC_F_USED) != wrap;
}

static inline uint16_t slot_flags(const struct virtqueue *vq, uint16_t slot)
{
    return le16toh(READ_ONCE(vq->ring[slot].flags));
}

/* Moves a slot and its wrap counter on by n slots (n <= num). */
static inline void slot_advance(const struct virtqueue *vq, uint16_t *slot, bool *wrap,
                                unsigned n)
{
    unsigned s = *slot + n;

    if (s >= vq->num) {
        s -= vq->num;
        *wrap = !*wrap;
    }
    *slot = (uint16_t)s;
}

static void set_device_event(struct virtqueue *vq, uint16_t flags)
{
    if (flags == VRING_PACKED_EVENT_FLAG_DESC) {
        /* The driver kicks when it makes this slot available (its kick_prepare). */
        WRITE_ONCE(vq->device_event->off_wrap,
                   htole16(vq->last_avail_idx | (vq->avail_wrap ? WRAP_BIT : 0)));
    }
    WRITE_ONCE(vq->device_event->flags, htole16(flags));
    vq_log_host(vq, vq->device_event, sizeof(*vq->device_event));
}

/* Kicks wanted: only at our next slot with EVENT_IDX, else at every addition. */
static void arm_kicks(struct virtqueue *vq)
{
    set_device_event(vq, vq->event_idx ? VRING_PACKED_EVENT_FLAG_DESC
                                       : VRING_PACKED_EVENT_FLAG_ENABLE);
}

int vq_packed_check(struct virtqueue *vq, const struct guest_mem *mem, unsigned num,
                    const void *ring, const void *driver_event, const void *device_event)
{
    if ((uintptr_t)ring % 16 || (uintptr_t)driver_event % 4 || (uintptr_t)device_event % 4) {
        g_warning("%s: misaligned packed ring (ring %p driver area %p device area %p)",
                  vq->name, ring, driver_event, device_event);
        return -EINVAL;
    }
    if (!vq_host_range_in_mem(mem, ring, (uint64_t)num * sizeof(struct vring_packed_desc)) ||
        !vq_host_range_in_mem(mem, driver_event, sizeof(struct vring_packed_desc_event)) ||
        !vq_host_range_in_mem(mem, device_event, sizeof(struct vring_packed_desc_event))) {
        g_warning("%s: packed ring of %u entries is not inside guest memory", vq->name, num);
        return -EFAULT;
    }
    return 0;
}

void vq_packed_setup(struct virtqueue *vq, void *ring, void *driver_event, void *device_event,
                     uint32_t base)
{
    unsigned num = vq->num;

    vq->desc = NULL;
    vq->avail = NULL;
    vq->used = NULL;
    vq->ring = ring;
    vq->driver_event = driver_event;
    vq->device_event = device_event;
    /* The indices are ring slots; a front-end counting freely past num still fits. */
    vq->last_avail_idx = (uint16_t)(base & (num - 1));
    vq->avail_wrap = base & WRAP_BIT;
    vq->used_idx = (uint16_t)((base >> 16) & (num - 1));
    vq->used_wrap = (base >> 16) & WRAP_BIT;
    vq->flushed_used_idx = vq->used_idx;
    vq->flushed_wrap = vq->used_wrap;
    vq->unflushed = 0;
    /* A previous back-end may have left kicks suppressed; turn them on. */
    arm_kicks(vq);
    smp_mb();
}

uint32_t vq_packed_get_base(const struct virtqueue *vq)
{
    uint32_t avail = vq->last_avail_idx | (vq->avail_wrap ? WRAP_BIT : 0);
    uint32_t used = vq->used_idx | (vq->used_wrap ? WRAP_BIT : 0);

    return avail | used << 16;
}

/* Reads an indirect table's entries: consecutive, only their WRITE flag counts (2.8.8). */
static int map_indirect(struct virtqueue *vq, struct vq_chain *c, uint64_t addr, uint32_t len)
{
    const struct vring_packed_desc *table;
    int r = vq_check_indirect(vq, false, len, c->head);

    if (r < 0) {
        return r;
    }
    table = guest_mem_gpa_ptr(vq->mem, addr, len);
    if (!table || (uintptr_t)table % 16) {
        return vq_fail(vq, -EFAULT, "indirect table 0x%" G_GINT64_MODIFIER "x+%u at slot "
                       "%u is not in guest memory or misaligned", addr, len, c->head);
    }
    for (unsigned i = 0; i < len / sizeof(*table); i++) {
        uint16_t flags = le16toh(READ_ONCE(table[i].flags));

        if (flags & VRING_DESC_F_INDIRECT) {
            return vq_check_indirect(vq, true, 0, c->head);
        }
        r = vq_chain_add(vq, c, le64toh(READ_ONCE(table[i].addr)),
                         le32toh(READ_ONCE(table[i].len)), flags & VRING_DESC_F_WRITE);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/*
 * Walks the chain that starts at last_avail_idx (available: the caller
 * checked its first descriptor).  The driver writes the first descriptor's
 * flags last, so the others are in place; they are read without their
 * flags' availability, and a chain that never ends is cut at num slots.
 */
static int map_chain(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
                     unsigned max_iov)
{
    struct vq_chain c = { .iov = iov, .max_iov = MIN(max_iov, VQ_MAX_SG),
                          .head = vq->last_avail_idx };
    uint16_t slot = vq->last_avail_idx, id;
    bool wrap = vq->avail_wrap;
    unsigned count = 0;

    for (;;) {
        const struct vring_packed_desc *d = &vq->ring[slot];
        uint64_t addr = le64toh(READ_ONCE(d->addr));
        uint32_t len = le32toh(READ_ONCE(d->len));
        uint16_t flags = le16toh(READ_ONCE(d->flags));
        int r;

        if (++count > vq->num) {
            return vq_fail(vq, -ELOOP, "descriptor chain at slot %u is longer than the "
                           "ring (%u)", c.head, vq->num);
        }
        id = le16toh(READ_ONCE(d->id));
        if (flags & VRING_DESC_F_INDIRECT) {
            if (flags & VRING_DESC_F_NEXT) {
                return vq_fail(vq, -EINVAL, "indirect descriptor at slot %u has NEXT set",
                               slot);
            }
            r = map_indirect(vq, &c, addr, len);
        } else {
            r = vq_chain_add(vq, &c, addr, len, flags & VRING_DESC_F_WRITE);
        }
        if (r < 0) {
            return r;
        }
        slot_advance(vq, &slot, &wrap, 1);
        if (!(flags & VRING_DESC_F_NEXT)) {
            break;
        }
    }
    vq_chain_to_elem(&c, id, elem);
    elem->ndescs = (uint16_t)count;
    vq->last_avail_idx = slot;
    vq->avail_wrap = wrap;
    return 1;
}

int vq_packed_pop(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
                  unsigned max_iov)
{
    uint16_t slot = vq->last_avail_idx;
    bool wrap = vq->avail_wrap;
    int r;

    if (!desc_is_avail(slot_flags(vq, slot), wrap)) {
        if (!vq->event_idx || vq->notify_off) {
            return 0;
        }
        /* Ask for a kick at this slot, then look again: it may have come meanwhile. */
        set_device_event(vq, VRING_PACKED_EVENT_FLAG_DESC);
        smp_mb();
        if (!desc_is_avail(slot_flags(vq, slot), wrap)) {
            return 0;
        }
    }
    /* The descriptors' contents must not be read before their flags. */
    smp_rmb_acquire();
    r = map_chain(vq, elem, iov, max_iov);
    if (r < 0) {
        vq->has_bad_head = true;
        vq->bad_head = slot;
        vq->bad_wrap = wrap;
        return r;
    }
    vq->last_pop_slot = slot;
    vq->last_pop_wrap = wrap;
    vq->inflight++;
    return 1;
}

void vq_packed_unpop(struct virtqueue *vq)
{
    vq->last_avail_idx = vq->last_pop_slot;
    vq->avail_wrap = vq->last_pop_wrap;
    vq->inflight--;
}

/*
 * Writes a used descriptor at used_idx.  Its id and length go first; its
 * flags make it the driver's, so they follow a release barrier, and the
 * first of a batch keeps its flags back until vq_packed_flush: the driver
 * reads used descriptors in ring order and so sees the batch at once.
 */
static void used_put(struct virtqueue *vq, uint16_t id, uint32_t len, unsigned ndescs)
{
    struct vring_packed_desc *d = &vq->ring[vq->used_idx];
    uint16_t flags = vq->used_wrap ? DESC_F_AVAIL | DESC_F_USED : 0;

    if (len) {
        flags |= VRING_DESC_F_WRITE;
    }
    WRITE_ONCE(d->id, htole16(id));
    WRITE_ONCE(d->len, htole32(len));
    if (vq->unflushed++ == 0) {
        vq->batch_slot = vq->used_idx;
        vq->batch_flags = flags;
    } else {
        smp_wmb_release();
        WRITE_ONCE(d->flags, htole16(flags));
    }
    vq_log_host(vq, d, sizeof(*d));
    slot_advance(vq, &vq->used_idx, &vq->used_wrap, ndescs);
}

void vq_packed_fill(struct virtqueue *vq, const struct vq_elem *elem, uint32_t len)
{
    if (elem->ndescs == 0 || elem->ndescs > vq->num) {
        vq_fail(vq, -EINVAL, "completing a chain of %u slots, ring size %u", elem->ndescs,
                vq->num);
        return;
    }
    used_put(vq, elem->head, len, elem->ndescs);
    if (vq->inflight > 0) {
        vq->inflight--;
    }
}

/* Hands the batch of used descriptors to the driver: its first one's flags. */
static void used_publish(struct virtqueue *vq)
{
    struct vring_packed_desc *d = &vq->ring[vq->batch_slot];

    smp_wmb_release();
    WRITE_ONCE(d->flags, htole16(vq->batch_flags));
    /* Again: a log sync between vq_fill's mark and this store would miss it. */
    vq_log_host(vq, &d->flags, sizeof(d->flags));
    vq->unflushed = 0;
    vq->flushed_used_idx = vq->used_idx;
    vq->flushed_wrap = vq->used_wrap;
}

void vq_packed_flush(struct virtqueue *vq)
{
    if (!vq->broken && vq->unflushed > 0) {
        used_publish(vq);
    }
}

int vq_packed_answer_bad_chain(struct virtqueue *vq, const void *resp, size_t resp_len)
{
    const uint8_t *src = resp;
    uint16_t slot, id = 0;
    bool wrap, ended = false;
    unsigned count = 0;
    size_t written = 0;

    if (!vq->has_bad_head) {
        return -ENOENT;
    }
    vq->has_bad_head = false;
    slot = vq->bad_head;
    wrap = vq->bad_wrap;
    /*
     * Salvage walk of the ring slots: copy into writable direct buffers
     * that map, skip the rest, and find where the chain ends (its id and
     * slot count are what the driver needs back).
     */
    while (count < vq->num) {
        const struct vring_packed_desc *d = &vq->ring[slot];
        uint16_t flags = le16toh(READ_ONCE(d->flags));
        uint32_t len = le32toh(READ_ONCE(d->len));

        count++;
        id = le16toh(READ_ONCE(d->id));
        if ((flags & VRING_DESC_F_WRITE) && !(flags & VRING_DESC_F_INDIRECT) && len &&
            written < resp_len) {
            size_t n = MIN((size_t)len, resp_len - written);
            uint8_t *p = guest_mem_gpa_ptr(vq->mem, le64toh(READ_ONCE(d->addr)), n);

            if (p) {
                memcpy(p, src + written, n);
                vq_log_host(vq, p, n);
                written += n;
            }
        }
        slot_advance(vq, &slot, &wrap, 1);
        if (!(flags & VRING_DESC_F_NEXT)) {
            ended = true;
            break;
        }
    }
    if (!ended) {
        return -ENOENT;     /* no end to answer for: the driver's ring is beyond repair */
    }
    /*
     * The queue is broken, so vq_fill/vq_flush refuse to run: publish this
     * one directly (after anything filled before it) and interrupt.
     */
    used_put(vq, id, (uint32_t)written, count);
    used_publish(vq);
    vq_signal_call(vq);
    return (int)written;
}

bool vq_packed_has_avail(struct virtqueue *vq)
{
    return desc_is_avail(slot_flags(vq, vq->last_avail_idx), vq->avail_wrap);
}

/*
 * vring_need_event on ring slots: old and the driver's event slot are
 * moved into the lap of new (one lap back at most) so that the
 * free-running 16-bit comparison holds.
 */
static bool need_event(const struct virtqueue *vq, uint16_t off_wrap, uint16_t new,
                       uint16_t old)
{
    uint16_t off = off_wrap & ~WRAP_BIT;

    if (new <= old) {
        old = (uint16_t)(old - vq->num);
    }
    if (!!(off_wrap & WRAP_BIT) != vq->flushed_wrap) {
        off = (uint16_t)(off - vq->num);
    }
    return vring_need_event(off, new, old);
}

bool vq_packed_should_notify(struct virtqueue *vq)
{
    uint16_t old = vq->signalled_used, new = vq->flushed_used_idx;
    bool valid = vq->signalled_used_valid, lapped = vq->signalled_wrap != vq->flushed_wrap;
    uint16_t flags;

    /* Our used descriptors must be visible before we read the driver's wishes. */
    smp_mb();
    vq->signalled_used = new;
    vq->signalled_wrap = vq->flushed_wrap;
    vq->signalled_used_valid = true;

    if (valid && old == new && !lapped) {
        return false;
    }
    if (vq->notify_on_empty && vq->inflight == 0 && !vq_packed_has_avail(vq)) {
        return true;
    }
    flags = le16toh(READ_ONCE(vq->driver_event->flags));
    if (flags == VRING_PACKED_EVENT_FLAG_DISABLE) {
        return false;
    }
    if (flags != VRING_PACKED_EVENT_FLAG_DESC || !vq->event_idx || !valid) {
        return true;
    }
    return need_event(vq, le16toh(READ_ONCE(vq->driver_event->off_wrap)), new, old);
}

void vq_packed_disable_notify(struct virtqueue *vq)
{
    set_device_event(vq, VRING_PACKED_EVENT_FLAG_DISABLE);
}

bool vq_packed_enable_notify(struct virtqueue *vq)
{
    arm_kicks(vq);
    /* The driver must see the request before we re-check; pairs with its mb. */
    smp_mb();
    return vq_packed_has_avail(vq);
}
