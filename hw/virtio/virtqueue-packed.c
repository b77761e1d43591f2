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
 * With an INFLIGHT_SHMFD area attached, popped chains and the used slot
 * are recorded there in vhost-user.rst's packed layout, so that a
 * back-end restarted under a running guest finds where the ring stands
 * and what to resubmit (the "inflight tracking" part below).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include <glib.h>

#include "vhost-user-proto.h"
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
        log_limit_warning(vq->log_limit,
                          "%s: misaligned packed ring (ring %p driver area %p device area %p)",
                          vq->name, ring, driver_event, device_event);
        return -EINVAL;
    }
    if (!vq_host_range_in_mem(mem, ring, (uint64_t)num * sizeof(struct vring_packed_desc)) ||
        !vq_host_range_in_mem(mem, driver_event, sizeof(struct vring_packed_desc_event)) ||
        !vq_host_range_in_mem(mem, device_event, sizeof(struct vring_packed_desc_event))) {
        log_limit_warning(vq->log_limit, "%s: packed ring of %u entries is not inside guest memory",
                          vq->name, num);
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

/* One descriptor's buffers, direct or through its indirect table. */
static inline int add_desc(struct virtqueue *vq, struct vq_chain *c, uint64_t addr, uint32_t len,
                           uint16_t flags)
{
    if (flags & VRING_DESC_F_INDIRECT) {
        return map_indirect(vq, c, addr, len);
    }
    return vq_chain_add(vq, c, addr, len, flags & VRING_DESC_F_WRITE);
}

/*
 * Copies a descriptor into the inflight area's entry *entry, the next one
 * of the free list (the slot it came from may be overwritten by a used
 * descriptor before the request completes), and moves *entry on.  The
 * list's links come from shared memory: one that leads out of the area
 * ends it, and a chain that finds no entry left means more descriptors
 * in flight than the ring has slots (or a front-end that rewrote links).
 */
static inline int track_desc(struct virtqueue *vq, struct vhost_user_inflight_queue_packed *ip,
                             uint16_t *entry, uint64_t addr, uint32_t len, uint16_t flags,
                             uint16_t id, unsigned head)
{
    struct vhost_user_inflight_desc_packed *e;

    if (*entry >= vq->num) {
        return vq_fail(vq, -ENOSPC, "chain at slot %u finds no free entry in the inflight "
                       "area: more descriptors in flight than the ring's %u slots", head,
                       vq->num);
    }
    e = &ip->desc[*entry];
    e->addr = addr;
    e->len = len;
    e->flags = flags;
    e->id = id;
    *entry = READ_ONCE(e->next);
    return 0;
}

/*
 * Commits a chain copied from the free list's first entry on to before
 * next: its state, then marked in flight, then the list's new head,
 * current and old (vhost-user.rst's order; a successor that finds the
 * mark but the head not moved on rolls the pop back).
 */
static void track_pop(struct virtqueue *vq, struct vq_elem *elem, uint16_t last, uint16_t next)
{
    struct vhost_user_inflight_queue_packed *ip = vq->inflight_packed;
    uint16_t first = vq->track_free;
    struct vhost_user_inflight_desc_packed *h = &ip->desc[first];

    h->num = elem->ndescs;
    h->last = last;
    h->counter = ++vq->inflight_counter;
    program_order();
    h->inflight = 1;
    program_order();
    ip->free_head = next;
    ip->old_free_head = next;
    vq->track_free = next;
    vq->last_head = first;
    elem->inflight_entry = first;
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
    uint16_t slot = vq->last_avail_idx, id, entry = vq->track_free, last = entry;
    /* In a local: the calls below would make the compiler load it again per descriptor. */
    struct vhost_user_inflight_queue_packed *ip = vq->inflight_packed;
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
        if ((flags & VRING_DESC_F_INDIRECT) && (flags & VRING_DESC_F_NEXT)) {
            return vq_fail(vq, -EINVAL, "indirect descriptor at slot %u has NEXT set", slot);
        }
        if (ip) {
            last = entry;
            r = track_desc(vq, ip, &entry, addr, len, flags, id, c.head);
            if (r < 0) {
                return r;
            }
        }
        r = add_desc(vq, &c, addr, len, flags);
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
    if (ip) {
        track_pop(vq, elem, last, entry);
    }
    vq->last_avail_idx = slot;
    vq->avail_wrap = wrap;
    return 1;
}

/*
 * Hands out the oldest chain a previous back-end left in flight, from our
 * private copy of the record (vq_set_inflight_packed checked its links in
 * that copy, which the front-end cannot rewrite since; the checks below
 * stay as a second line).
 */
int vq_packed_pop_resubmit(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
                           unsigned max_iov)
{
    const struct vhost_user_inflight_queue_packed *ip = vq->resubmit_record;
    uint16_t first = vq->resubmit[vq->resubmit_num - 1], entry = first, id = 0;
    struct vq_chain c = { .iov = iov, .max_iov = MIN(max_iov, VQ_MAX_SG), .head = first };
    unsigned n = ip->desc[first].num;

    if (n == 0 || n > vq->num) {
        return vq_fail(vq, -EINVAL, "resubmitted chain at inflight entry %u has %u "
                       "descriptors, ring size %u", first, n, vq->num);
    }
    for (unsigned k = 0; k < n; k++) {
        const struct vhost_user_inflight_desc_packed *e;
        int r;

        if (entry >= vq->num) {
            return vq_fail(vq, -EINVAL, "resubmitted chain at inflight entry %u links to "
                           "entry %u, ring size %u", first, entry, vq->num);
        }
        e = &ip->desc[entry];
        id = e->id;
        r = add_desc(vq, &c, e->addr, e->len, e->flags);
        if (r < 0) {
            return r;
        }
        entry = e->next;
    }
    vq_chain_to_elem(&c, id, elem);
    elem->ndescs = (uint16_t)n;
    elem->inflight_entry = first;
    vq->resubmit_num--;
    vq->last_head = first;
    vq->last_from_resubmit = true;
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

/*
 * Gives the last popped chain's entries back to the free list, in front
 * (linked first, so a successor never finds them lost), then unmarks it.
 */
static void track_unpop(struct virtqueue *vq)
{
    struct vhost_user_inflight_queue_packed *ip = vq->inflight_packed;
    uint16_t first = vq->last_head, last = READ_ONCE(ip->desc[first].last) & (vq->num - 1);

    ip->desc[last].next = vq->track_free;
    program_order();
    ip->free_head = first;
    ip->old_free_head = first;
    vq->track_free = first;
    program_order();
    ip->desc[first].inflight = 0;
}

void vq_packed_unpop(struct virtqueue *vq)
{
    vq->last_avail_idx = vq->last_pop_slot;
    vq->avail_wrap = vq->last_pop_wrap;
    vq->inflight--;
    if (vq->inflight_packed) {
        track_unpop(vq);
    }
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

/*
 * Links a completed chain's entries in front of the batch's (its last
 * entry's link, unused while the chain is in flight): vq_flush gives the
 * batch to the free list at once.  Pops before that flush take entries
 * from the list as it was.  Entry indices are masked, not trusted.
 */
static void track_fill(struct virtqueue *vq, uint16_t first)
{
    struct vhost_user_inflight_queue_packed *ip = vq->inflight_packed;
    uint16_t mask = (uint16_t)(vq->num - 1), last;

    first &= mask;
    last = READ_ONCE(ip->desc[first].last) & mask;
    if (vq->track_batch_n++ == 0) {
        vq->track_batch_last = last;
    }
    ip->desc[last].next = vq->track_batch;
    vq->track_batch = first;
}

static void track_publish_begin(struct virtqueue *vq)
{
    struct vhost_user_inflight_queue_packed *ip = vq->inflight_packed;

    if (vq->track_batch_n > 0) {
        ip->desc[vq->track_batch_last].next = vq->track_free;
        ip->free_head = vq->track_batch;
    }
    ip->used_idx = vq->used_idx;
    ip->used_wrap_counter = vq->used_wrap;
    program_order();
}

static void track_publish_end(struct virtqueue *vq)
{
    struct vhost_user_inflight_queue_packed *ip = vq->inflight_packed;
    uint16_t mask = (uint16_t)(vq->num - 1), e = vq->track_batch;

    program_order();
    for (unsigned k = 0; k < vq->track_batch_n; k++) {
        ip->desc[e].inflight = 0;
        e = READ_ONCE(ip->desc[READ_ONCE(ip->desc[e].last) & mask].next) & mask;
    }
    program_order();
    if (vq->track_batch_n > 0) {
        vq->track_free = vq->track_batch;
        vq->track_batch_n = 0;
    }
    ip->old_free_head = vq->track_free;
    ip->old_used_idx = vq->used_idx;
    ip->old_used_wrap_counter = vq->used_wrap;
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
    if (vq->inflight_packed) {
        track_fill(vq, elem->inflight_entry);
    }
}

/*
 * Hands the batch of used descriptors to the driver: its first one's
 * flags.  With tracking, as vhost-user.rst orders it: the batch's entries
 * go to the head of the free list and the used slot is recorded before,
 * the chains are unmarked after, and then the old_* copies commit it all.
 */
static void used_publish(struct virtqueue *vq)
{
    struct vring_packed_desc *d = &vq->ring[vq->batch_slot];

    if (vq->inflight_packed) {
        track_publish_begin(vq);
    }
    smp_wmb_release();
    WRITE_ONCE(d->flags, htole16(vq->batch_flags));
    /* Again: a log sync between vq_fill's mark and this store would miss it. */
    vq_log_host(vq, &d->flags, sizeof(d->flags));
    vq->unflushed = 0;
    vq->flushed_used_idx = vq->used_idx;
    vq->flushed_wrap = vq->used_wrap;
    if (vq->inflight_packed) {
        track_publish_end(vq);
    }
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

/* ---- inflight tracking: a fresh record, or a previous back-end's taken over ---- */

enum { ENTRY_UNSEEN, ENTRY_FREE, ENTRY_CHAIN };

/* What a previous back-end's record says, from a private copy of it, checked. */
struct track_restore {
    struct virtqueue *vq;
    const struct vhost_user_inflight_queue_packed *ip;  /* the copy, not the shared area */
    uint8_t *role;              /* ENTRY_* of each entry */
    uint16_t free_head, used;
    bool used_wrap;
    struct vq_resubmit *chains;
    unsigned nchains, slots;    /* in-flight chains and the ring slots they took */
    char why[128];              /* what did not hold together */
};

static bool G_GNUC_PRINTF(2, 3) restore_bad(struct track_restore *t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    g_vsnprintf(t->why, sizeof(t->why), fmt, ap);
    va_end(ap);
    return false;
}

/*
 * The record's state after its last complete batch: a batch whose used
 * slot was recorded (used_idx moved past old_used_idx) is committed when
 * the driver can see it (its first descriptor is no longer available in
 * that lap), else rolled back with the free list's head.
 */
static bool restore_positions(struct track_restore *t)
{
    const struct vhost_user_inflight_queue_packed *ip = t->ip;
    unsigned num = t->vq->num;
    uint16_t used = ip->used_idx, old_used = ip->old_used_idx;
    uint8_t wrap = ip->used_wrap_counter, old_wrap = ip->old_used_wrap_counter;

    if (used >= num || old_used >= num || wrap > 1 || old_wrap > 1) {
        return restore_bad(t, "used slot %u/%u or wrap counter %u/%u out of range", used,
                           old_used, wrap, old_wrap);
    }
    if ((used != old_used || wrap != old_wrap) &&
        !desc_is_avail(slot_flags(t->vq, old_used), old_wrap)) {
        t->free_head = ip->free_head;
        t->used = used;
        t->used_wrap = wrap;
    } else {
        t->free_head = ip->old_free_head;
        t->used = old_used;
        t->used_wrap = old_wrap;
    }
    return true;
}

/* The free list: inside the area, no entry twice; an index past it ends the list. */
static bool restore_free_list(struct track_restore *t)
{
    unsigned num = t->vq->num;
    uint16_t e = t->free_head;

    while (e < num) {
        if (t->role[e] != ENTRY_UNSEEN) {
            return restore_bad(t, "the free list loops at entry %u", e);
        }
        t->role[e] = ENTRY_FREE;
        e = t->ip->desc[e].next;
    }
    return true;
}

/*
 * The in-flight chains: each marked entry off the free list starts one of
 * num entries linked by next and ending at last, sharing none with
 * another; together they take no more slots than the ring has.
 */
static bool restore_chains(struct track_restore *t)
{
    const struct vhost_user_inflight_queue_packed *ip = t->ip;
    unsigned num = t->vq->num;

    for (unsigned i = 0; i < num; i++) {
        const struct vhost_user_inflight_desc_packed *h = &ip->desc[i];
        uint16_t n, e = (uint16_t)i;

        if (t->role[i] == ENTRY_FREE || !h->inflight) {
            continue;
        }
        n = h->num;
        if (n == 0 || n > num - t->slots) {
            return restore_bad(t, "in-flight chains take more than the ring's %u slots "
                               "(%u at entry %u)", num, n, i);
        }
        for (unsigned k = 0;; k++) {
            if (e >= num || t->role[e] != ENTRY_UNSEEN) {
                return restore_bad(t, "the chain at entry %u links to entry %u, out of the "
                                   "area, free or another chain's", i, e);
            }
            t->role[e] = ENTRY_CHAIN;
            if (k + 1 == n) {
                break;
            }
            e = ip->desc[e].next;
        }
        if (h->last != e) {
            return restore_bad(t, "the chain at entry %u ends at entry %u, not at its "
                               "last (%u)", i, e, h->last);
        }
        t->chains[t->nchains].head = (uint16_t)i;
        t->chains[t->nchains].counter = h->counter;
        t->nchains++;
        t->slots += n;
    }
    return true;
}

/*
 * The chains' slots lie between the used slot and the avail slot, and
 * the driver reads none of them until we write a used descriptor there.
 * One a dead back-end wrote there without publishing its batch (every
 * used descriptor of a batch but the first has its flags) would be read
 * as soon as the driver gets there: it becomes available again.
 */
static void restore_hide_unpublished(struct virtqueue *vq, unsigned slots)
{
    uint16_t slot = vq->used_idx;
    bool wrap = vq->used_wrap;

    for (unsigned k = 0; k < slots; k++) {
        struct vring_packed_desc *d = &vq->ring[slot];
        uint16_t flags = slot_flags(vq, slot);

        if (!desc_is_avail(flags, wrap)) {
            flags &= (uint16_t)~(DESC_F_AVAIL | DESC_F_USED);
            WRITE_ONCE(d->flags, htole16(flags | (wrap ? DESC_F_AVAIL : DESC_F_USED)));
            vq_log_host(vq, &d->flags, sizeof(d->flags));
        }
        slot_advance(vq, &slot, &wrap, 1);
    }
}

/*
 * Writes the record as the ring stands now: the chains in flight kept
 * (role: ENTRY_* of each entry; NULL: a fresh record, none), every other
 * entry free and unmarked, linked in order (leaked entries of a torn
 * update included), and one state for current and old.
 */
static void record_rewrite(struct virtqueue *vq, struct vhost_user_inflight_queue_packed *ip,
                           const uint8_t *role)
{
    uint16_t first = (uint16_t)vq->num, *link = &first;

    for (unsigned i = 0; i < vq->num; i++) {
        if (!role || role[i] != ENTRY_CHAIN) {
            ip->desc[i].inflight = 0;
            *link = (uint16_t)i;
            link = &ip->desc[i].next;
        }
    }
    *link = (uint16_t)vq->num;
    ip->free_head = first;
    ip->old_free_head = first;
    ip->used_idx = vq->used_idx;
    ip->old_used_idx = vq->used_idx;
    ip->used_wrap_counter = vq->used_wrap;
    ip->old_used_wrap_counter = vq->used_wrap;
    vq->track_free = first;
}

/*
 * The front-end can rewrite the area while we read it, so the record is
 * copied once (g_memdup2 reads each byte once) and checked, restored and
 * resubmitted from the copy: nothing checked is read again from the area.
 */
static bool track_restore(struct virtqueue *vq, struct vhost_user_inflight_queue_packed *ip)
{
    struct vhost_user_inflight_queue_packed *rec =
        g_memdup2(ip, sizeof(*ip) + vq->num * sizeof(ip->desc[0]));
    struct track_restore t = { .vq = vq, .ip = rec };
    uint32_t base = vq_packed_get_base(vq);
    bool ok;

    t.role = g_malloc0(vq->num);
    t.chains = g_new(struct vq_resubmit, vq->num);
    ok = restore_positions(&t) && restore_free_list(&t) && restore_chains(&t);
    if (!ok) {
        log_limit_warning(vq->log_limit,
                          "%s: the inflight area's record of this packed ring does not hold "
                          "together (%s); starting afresh: requests a previous back-end had "
                          "popped from it are lost", vq->name, t.why);
        g_free(t.role);
        g_free(t.chains);
        g_free(rec);
        return false;
    }
    vq->used_idx = t.used;
    vq->used_wrap = t.used_wrap;
    vq->flushed_used_idx = t.used;
    vq->flushed_wrap = t.used_wrap;
    vq->signalled_used_valid = false;
    /* Everything popped is either used or in flight; the rest is new. */
    vq->last_avail_idx = t.used;
    vq->avail_wrap = t.used_wrap;
    slot_advance(vq, &vq->last_avail_idx, &vq->avail_wrap, t.slots);
    vq->inflight = t.nchains;
    restore_hide_unpublished(vq, t.slots);
    record_rewrite(vq, ip, t.role);
    g_free(t.role);
    if (vq_packed_get_base(vq) != base) {
        log_limit_message(vq->log_limit,
                          "%s: resuming the packed ring at base 0x%08x from the inflight area, "
                          "not at the front-end's 0x%08x", vq->name, vq_packed_get_base(vq), base);
    }
    if (t.nchains > 0) {
        vq_resubmit_take(vq, t.chains, t.nchains);
        vq->resubmit_record = rec;
    } else {
        g_free(t.chains);
        g_free(rec);
    }
    /* Kicks were armed at the front-end's avail slot. */
    arm_kicks(vq);
    smp_mb();
    return true;
}

int vq_set_inflight_packed(struct virtqueue *vq, struct vhost_user_inflight_queue_packed *region,
                           bool restore)
{
    uint16_t desc_num;

    vq_cleanup(vq);
    if (!region) {
        return 0;
    }
    desc_num = READ_ONCE(region->desc_num);
    if (!vq->packed || vq->num == 0 || desc_num != vq->num) {
        log_limit_warning(vq->log_limit,
                          "%s: packed inflight region has %u descriptors, %s ring has %u", vq->name,
                          desc_num, vq->packed ? "packed" : "split", vq->num);
        return -EINVAL;
    }
    vq->inflight_counter = 0;
    if (!restore || !track_restore(vq, region)) {
        record_rewrite(vq, region, NULL);
    }
    vq->inflight_packed = region;
    return 0;
}
