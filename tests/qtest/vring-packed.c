/*
 * The driver side of a packed virtqueue (virtio 1.2 section 2.8;
 * VIRTIO_F_RING_PACKED) in guest RAM: one ring of descriptors, the
 * driver event area and the device event area.  The transport takes them
 * where a split ring has its descriptor table, avail ring and used ring
 * (queue_desc, queue_driver, queue_device), so a qt_vring keeps them in
 * desc, avail and used.
 *
 * A chain takes consecutive ring slots and carries one buffer id, taken
 * from a free list, in each descriptor.  Its first descriptor's flags are
 * written last, by a qtest write of their own after the rest of the chain
 * is in guest memory, so a running device never sees half a chain.  A
 * used descriptor is one whose AVAIL and USED bits both equal the
 * driver's used wrap counter; the driver moves on by the slot count of
 * the chain it completes, whichever chain that is.  Both wrap counters
 * start at 1 (2.8.1).  Kicks follow the device event area as Linux's
 * virtqueue_kick_prepare_packed decides them; interrupts are asked for in
 * the driver event area.  The layout-independent parts (waiting, freeing
 * by head, out-of-order bookkeeping) are vring.c's: a "head" here is the
 * buffer id.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"

#include <linux/virtio_pci.h>
#include <linux/virtio_ring.h>

#define DESC_F_AVAIL (1u << VRING_PACKED_DESC_F_AVAIL)
#define DESC_F_USED (1u << VRING_PACKED_DESC_F_USED)
#define EVENT_WRAP (1u << VRING_PACKED_EVENT_F_WRAP_CTR)
#define DESC_SIZE sizeof(struct vring_packed_desc)
#define EVENT_SIZE sizeof(struct vring_packed_desc_event)

static uint64_t slot_addr(struct qt_vring *vq, uint16_t slot)
{
    return vq->desc + DESC_SIZE * slot;
}

/* Moves a slot and its wrap counter on by n slots (n <= size). */
static void slot_advance(struct qt_vring *vq, uint16_t *slot, bool *wrap, unsigned n)
{
    unsigned s = *slot + n;

    if (s >= vq->size) {
        s -= vq->size;
        *wrap = !*wrap;
    }
    *slot = s;
}

void qt_vring_packed_init(struct qt_vring *vq, struct qts *s, struct qt_alloc *a,
                          uint16_t index, uint16_t size, bool event_idx)
{
    qt_vring_init_state(vq, s, index, size, event_idx, true);
    vq->desc = qt_alloc(a, DESC_SIZE * size, 4096);   /* 16-byte alignment required */
    vq->avail = qt_alloc(a, EVENT_SIZE, 4);             /* driver event area */
    vq->used = qt_alloc(a, EVENT_SIZE, 4);              /* device event area */
    qt_vring_packed_reset(vq);
}

void qt_vring_packed_reset(struct qt_vring *vq)
{
    for (unsigned i = 0; i < vq->size; i++) {
        vq->next_free[i] = i + 1;      /* buffer ids, not slots */
        vq->chain_len[i] = 0;
        vq->done[i] = false;
    }
    vq->free_head = 0;
    vq->num_free = vq->size;           /* ring slots */
    vq->avail_idx = 0;
    vq->last_used = 0;
    vq->avail_wrap = true;
    vq->used_wrap = true;
    vq->num_added = 0;
    /* Zeroed flags are neither available nor used in the first lap. */
    qts_memset(vq->s, vq->desc, 0, DESC_SIZE * vq->size);
    qts_memset(vq->s, vq->avail, 0, EVENT_SIZE);
    qts_memset(vq->s, vq->used, 0, EVENT_SIZE);
}

int qt_vring_packed_add(struct qt_vring *vq, const struct qt_sg *sg, unsigned n)
{
    /* A descriptor is available when AVAIL equals the wrap counter and USED does not. */
    uint16_t lap_bits = vq->avail_wrap ? DESC_F_AVAIL : DESC_F_USED;
    uint16_t head_slot = vq->avail_idx, head_flags = 0;
    uint16_t id = vq->free_head;

    g_assert(n > 0);
    g_assert_cmpuint(n, <=, vq->num_free);
    g_assert_cmpuint(id, <, vq->size);
    vq->free_head = vq->next_free[id];
    for (unsigned k = 0; k < n; k++) {
        uint16_t flags = lap_bits | (sg[k].write ? VRING_DESC_F_WRITE : 0) |
                         (k + 1 < n ? VRING_DESC_F_NEXT : 0);
        struct vring_packed_desc d = {
            .addr = GUINT64_TO_LE(sg[k].addr), .len = GUINT32_TO_LE(sg[k].len),
            .id = GUINT16_TO_LE(id), .flags = GUINT16_TO_LE(flags),
        };

        if (k == 0) {
            /* Everything but the flags now; they hand the chain over, last. */
            head_flags = flags;
            qts_memwrite(vq->s, slot_addr(vq, vq->avail_idx), &d,
                         offsetof(struct vring_packed_desc, flags));
        } else {
            qts_memwrite(vq->s, slot_addr(vq, vq->avail_idx), &d, sizeof(d));
        }
        /* A chain that reaches the end goes on at slot 0, in the next lap's colours. */
        slot_advance(vq, &vq->avail_idx, &vq->avail_wrap, 1);
        lap_bits = vq->avail_wrap ? DESC_F_AVAIL : DESC_F_USED;
    }
    /* Each qtest command completes before the next is sent: the body is in place. */
    qts_writew(vq->s, slot_addr(vq, head_slot) + offsetof(struct vring_packed_desc, flags),
               head_flags);
    vq->num_free -= n;
    vq->num_added += n;
    vq->chain_len[id] = n;
    vq->buf_addr[id] = sg[0].addr;
    return id;
}

bool qt_vring_packed_pop(struct qt_vring *vq, uint32_t *head, uint32_t *len)
{
    uint64_t at = slot_addr(vq, vq->last_used);
    uint16_t flags = qts_readw(vq->s, at + offsetof(struct vring_packed_desc, flags));
    uint16_t lap_bits = vq->used_wrap ? DESC_F_AVAIL | DESC_F_USED : 0;
    struct vring_packed_desc d;

    if ((flags & (DESC_F_AVAIL | DESC_F_USED)) != lap_bits) {
        return false;
    }
    /* The flags were read first (their own qtest read): id and len are the device's. */
    qts_memread(vq->s, at, &d, offsetof(struct vring_packed_desc, flags));
    uint16_t id = GUINT16_FROM_LE(d.id);
    /*
     * The spec reserves the length of a used descriptor without WRITE, but
     * QEMU's own devices never set WRITE there: like Linux, take it anyway.
     */
    qt_vring_mark_used(vq, id, GUINT32_FROM_LE(d.len));
    slot_advance(vq, &vq->last_used, &vq->used_wrap, vq->chain_len[id]);
    *head = id;
    if (len) {
        *len = vq->done_len[id];
    }
    return true;
}

void qt_vring_packed_free_chain(struct qt_vring *vq, uint16_t id)
{
    g_assert_cmpuint(vq->chain_len[id], >, 0);
    vq->next_free[id] = vq->free_head;
    vq->free_head = id;
    vq->num_free += vq->chain_len[id];
    vq->chain_len[id] = 0;
    vq->done[id] = false;
}

/* Linux's virtqueue_kick_prepare_packed, on the slots added since the last call. */
bool qt_vring_packed_kick_needed(struct qt_vring *vq)
{
    uint16_t new = vq->avail_idx, old = new - vq->num_added;
    uint16_t flags, off_wrap;

    vq->num_added = 0;
    qt_vring_packed_device_event(vq, &flags, &off_wrap);
    if (flags != VRING_PACKED_EVENT_FLAG_DESC) {
        return flags != VRING_PACKED_EVENT_FLAG_DISABLE;
    }
    uint16_t event = off_wrap & ~EVENT_WRAP;
    if (!!(off_wrap & EVENT_WRAP) != vq->avail_wrap) {
        event -= vq->size;      /* a slot of the previous lap */
    }
    return vring_need_event(event, new, old);
}

void qt_vring_packed_device_event(struct qt_vring *vq, uint16_t *flags, uint16_t *off_wrap)
{
    /* One 32-bit read: off_wrap and flags from the same moment, as Linux reads them. */
    uint32_t v = qts_readl(vq->s, vq->used);

    G_STATIC_ASSERT(offsetof(struct vring_packed_desc_event, off_wrap) == 0);
    G_STATIC_ASSERT(offsetof(struct vring_packed_desc_event, flags) == 2);
    *off_wrap = v & 0xffff;
    *flags = v >> 16;
}

void qt_vring_packed_set_event(struct qt_vring *vq, uint16_t flags)
{
    g_assert(flags == VRING_PACKED_EVENT_FLAG_ENABLE || flags == VRING_PACKED_EVENT_FLAG_DISABLE);
    qts_writew(vq->s, vq->avail + offsetof(struct vring_packed_desc_event, flags), flags);
}

void qt_vring_packed_event_desc(struct qt_vring *vq, int ahead)
{
    int slot = vq->last_used + ahead;
    bool wrap = vq->used_wrap;

    g_assert(vq->event_idx);
    g_assert_cmpint(ahead, >, -(int)vq->size);
    g_assert_cmpint(ahead, <, vq->size);
    if (slot >= vq->size || slot < 0) {
        slot += slot < 0 ? vq->size : -(int)vq->size;
        wrap = !wrap;
    }
    /* The slot before the flags that make the device read it (Linux's order). */
    qts_writew(vq->s, vq->avail + offsetof(struct vring_packed_desc_event, off_wrap),
               slot | (wrap ? EVENT_WRAP : 0));
    qts_writew(vq->s, vq->avail + offsetof(struct vring_packed_desc_event, flags),
               VRING_PACKED_EVENT_FLAG_DESC);
}
