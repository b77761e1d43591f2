/*
 * A split virtqueue (virtio 1.2 section 2.7) living in guest RAM, driven
 * from the test.  The driver-side state (free list, shadow indexes) lives
 * here; the rings themselves are written with qtest memory writes in the
 * order the spec requires (descriptors, then the ring entry, then idx),
 * so a concurrently running back-end never sees a half-built chain.
 * A ring with vq->packed set is vring-packed.c's: the entry points that
 * both layouts have (add, pop, free, reset, kick) hand it over there, and
 * the waiting and out-of-order bookkeeping built on them serve both.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "libqt.h"

#include <string.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_pci.h>

static uint64_t used_event_addr(struct qt_vring *vq)
{
    return vq->avail + 4 + 2ull * vq->size;
}

void qt_vring_init_state(struct qt_vring *vq, struct qts *s, uint16_t index, uint16_t size,
                         bool event_idx, bool packed)
{
    /* Packed rings need not be powers of two, but vhost-user back-ends ask for it. */
    g_assert(size && !(size & (size - 1)));
    memset(vq, 0, sizeof(*vq));
    vq->s = s;
    vq->index = index;
    vq->size = size;
    vq->event_idx = event_idx;
    vq->packed = packed;
    vq->vector = VIRTIO_MSI_NO_VECTOR;
    vq->next_free = g_new0(uint16_t, size);
    vq->chain_len = g_new0(uint16_t, size);
    vq->done = g_new0(bool, size);
    vq->done_len = g_new0(uint32_t, size);
    vq->buf_addr = g_new0(uint64_t, size);
}

void qt_vring_init(struct qt_vring *vq, struct qts *s, struct qt_alloc *a,
                   uint16_t index, uint16_t size, bool event_idx)
{
    qt_vring_init_state(vq, s, index, size, event_idx, false);
    vq->desc = qt_alloc(a, 16ull * size, 4096);
    vq->avail = qt_alloc(a, 6 + 2ull * size, 2);
    vq->used = qt_alloc(a, 6 + 8ull * size, 4096);
    qt_vring_reset(vq);
}

void qt_vring_free(struct qt_vring *vq)
{
    g_free(vq->next_free);
    g_free(vq->chain_len);
    g_free(vq->done);
    g_free(vq->done_len);
    g_free(vq->buf_addr);
    vq->next_free = vq->chain_len = NULL;
    vq->done = NULL;
    vq->done_len = NULL;
    vq->buf_addr = NULL;
}

void qt_vring_reset(struct qt_vring *vq)
{
    if (vq->packed) {
        qt_vring_packed_reset(vq);
        return;
    }
    for (unsigned i = 0; i < vq->size; i++) {
        vq->next_free[i] = i + 1;
        vq->chain_len[i] = 0;
        vq->done[i] = false;
    }
    vq->free_head = 0;
    vq->num_free = vq->size;
    vq->avail_idx = 0;
    vq->last_used = 0;
    qts_memset(vq->s, vq->desc, 0, 16ull * vq->size);
    qts_memset(vq->s, vq->avail, 0, 6 + 2ull * vq->size);
    qts_memset(vq->s, vq->used, 0, 6 + 8ull * vq->size);
}

void qt_vring_write_desc(struct qt_vring *vq, uint16_t i, uint64_t addr,
                         uint32_t len, uint16_t flags, uint16_t next)
{
    struct vring_desc d = {
        .addr = GUINT64_TO_LE(addr), .len = GUINT32_TO_LE(len),
        .flags = GUINT16_TO_LE(flags), .next = GUINT16_TO_LE(next),
    };
    g_assert(!vq->packed);
    g_assert_cmpuint(i, <, vq->size);
    qts_memwrite(vq->s, vq->desc + 16ull * i, &d, sizeof(d));
}

void qt_vring_publish(struct qt_vring *vq, uint16_t head)
{
    g_assert(!vq->packed);
    qts_writew(vq->s, vq->avail + 4 + 2ull * (vq->avail_idx % vq->size), head);
    vq->avail_idx++;
    qts_writew(vq->s, vq->avail + 2, vq->avail_idx);
}

int qt_vring_prepare(struct qt_vring *vq, const struct qt_sg *sg, unsigned n)
{
    g_assert(!vq->packed);
    g_assert(n > 0);
    g_assert_cmpuint(n, <=, vq->num_free);
    uint16_t head = vq->free_head, i = head;
    for (unsigned k = 0; k < n; k++) {
        uint16_t flags = sg[k].write ? VRING_DESC_F_WRITE : 0;
        uint16_t next = vq->next_free[i];
        if (k + 1 < n) {
            flags |= VRING_DESC_F_NEXT;
        }
        qt_vring_write_desc(vq, i, sg[k].addr, sg[k].len, flags, k + 1 < n ? next : 0);
        if (k + 1 < n) {
            i = next;
        }
    }
    vq->free_head = vq->next_free[i];
    vq->num_free -= n;
    vq->chain_len[head] = n;
    return head;
}

int qt_vring_add(struct qt_vring *vq, const struct qt_sg *sg, unsigned n)
{
    if (vq->packed) {
        return qt_vring_packed_add(vq, sg, n);
    }
    int head = qt_vring_prepare(vq, sg, n);
    qt_vring_publish(vq, head);
    return head;
}

uint16_t qt_vring_used_idx(struct qt_vring *vq)
{
    g_assert(!vq->packed);
    return qts_readw(vq->s, vq->used + 2);
}

void qt_vring_mark_used(struct qt_vring *vq, uint32_t id, uint32_t len)
{
    /* The device must only return heads we made available, and only once. */
    g_assert_cmpuint(id, <, vq->size);
    g_assert_cmpuint(vq->chain_len[id], >, 0);
    g_assert(!vq->done[id]);
    vq->done[id] = true;
    vq->done_len[id] = len;
}

bool qt_vring_pop(struct qt_vring *vq, uint32_t *head, uint32_t *len)
{
    if (vq->packed) {
        return qt_vring_packed_pop(vq, head, len);
    }
    if (qt_vring_used_idx(vq) == vq->last_used) {
        return false;
    }
    struct vring_used_elem e;
    qts_memread(vq->s, vq->used + 4 + 8ull * (vq->last_used % vq->size), &e, sizeof(e));
    vq->last_used++;
    uint32_t id = GUINT32_FROM_LE(e.id);
    qt_vring_mark_used(vq, id, GUINT32_FROM_LE(e.len));
    *head = id;
    if (len) {
        *len = vq->done_len[id];
    }
    return true;
}

void qt_vring_free_chain(struct qt_vring *vq, uint16_t id)
{
    if (vq->packed) {
        qt_vring_packed_free_chain(vq, id);
        return;
    }
    g_assert_cmpuint(vq->chain_len[id], >, 0);
    uint16_t last = id;
    for (unsigned k = 1; k < vq->chain_len[id]; k++) {
        last = vq->next_free[last];
    }
    vq->next_free[last] = vq->free_head;
    vq->free_head = id;
    vq->num_free += vq->chain_len[id];
    vq->chain_len[id] = 0;
    vq->done[id] = false;
}

bool qt_vring_get(struct qt_vring *vq, uint32_t *head, uint32_t *len)
{
    uint32_t id;
    if (!qt_vring_pop(vq, &id, len)) {
        return false;
    }
    qt_vring_free_chain(vq, id);
    if (head) {
        *head = id;
    }
    return true;
}

bool qt_vring_wait_head(struct qt_vring *vq, uint16_t head, uint32_t *len,
                        gint64 timeout_us)
{
    gint64 deadline = g_get_monotonic_time() + timeout_us;
    for (;;) {
        if (vq->done[head]) {
            if (len) {
                *len = vq->done_len[head];
            }
            qt_vring_free_chain(vq, head);
            return true;
        }
        uint32_t id;
        if (!qt_vring_pop(vq, &id, NULL) && g_get_monotonic_time() > deadline) {
            return false;
        }
    }
}

bool qt_vring_wait(struct qt_vring *vq, uint32_t *head, uint32_t *len,
                   gint64 timeout_us)
{
    gint64 deadline = g_get_monotonic_time() + timeout_us;
    do {
        if (qt_vring_get(vq, head, len)) {
            return true;
        }
    } while (g_get_monotonic_time() < deadline);
    return false;
}

bool qt_vring_kick_needed(struct qt_vring *vq)
{
    /* The split driver ignores VRING_USED_F_NO_NOTIFY and avail_event: it always kicks. */
    bool need = !vq->packed || qt_vring_packed_kick_needed(vq);

    vq->kicks_skipped += !need;
    return need;
}

uint64_t qt_vring_buf_addr(struct qt_vring *vq, uint16_t head)
{
    /* A split chain's head descriptor keeps its address; a packed ring reuses slots. */
    return vq->packed ? vq->buf_addr[head] : qts_readq(vq->s, vq->desc + 16ull * head);
}

void qt_vring_set_used_event(struct qt_vring *vq, uint16_t v)
{
    g_assert(!vq->packed);
    g_assert(vq->event_idx);
    qts_writew(vq->s, used_event_addr(vq), v);
}

void qt_vring_set_no_interrupt(struct qt_vring *vq, bool on)
{
    g_assert(!vq->packed);
    qts_writew(vq->s, vq->avail, on ? VRING_AVAIL_F_NO_INTERRUPT : 0);
}
