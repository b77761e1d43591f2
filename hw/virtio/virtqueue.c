/*
 * Device side of a split virtqueue, and the entry points that branch to the
 * packed layout (virtqueue-packed.c): pops descriptor chains the guest made
 * available, returns them on the used ring, and decides when to interrupt
 * the driver and when to ask for kicks.  The rings live in guest memory and
 * the guest may rewrite them at any moment, so every index, length and
 * address is read once, bounds-checked where it is read, and a malformed
 * ring marks the queue broken instead of being trusted.  This is the
 * per-request hot path: no allocation and no system call except the call
 * eventfd write in vq_notify().
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_config.h>

#include "notify-fd.h"
#include "virtqueue.h"
#include "virtqueue-int.h"
#include "vhost-user-proto.h"

void vq_init(struct virtqueue *vq, unsigned index, const char *name)
{
    memset(vq, 0, sizeof(*vq));
    vq->index = index;
    vq->name = name;
    vq->kick_fd = -1;
    vq->call_fd = -1;
    vq->err_fd = -1;
}

static inline void set_used_flags(struct virtqueue *vq, uint16_t flags)
{
    WRITE_ONCE(vq->used->flags, htole16(flags));
    vq_log_host(vq, &vq->used->flags, sizeof(vq->used->flags));
}

static inline void set_avail_event(struct virtqueue *vq, uint16_t val)
{
    /* vring_avail_event() of linux/virtio_ring.h, on our split pointers. */
    __virtio16 *ev = (__virtio16 *)((char *)vq->used + offsetof(struct vring_used, ring) +
                                    vq->num * sizeof(struct vring_used_elem));

    WRITE_ONCE(*ev, htole16(val));
    vq_log_host(vq, ev, sizeof(*ev));
}

static inline uint16_t get_used_event(const struct virtqueue *vq)
{
    return le16toh(READ_ONCE(vq->avail->ring[vq->num]));
}

int vq_setup(struct virtqueue *vq, const struct guest_mem *mem, unsigned num,
             void *desc, void *avail, void *used, uint64_t features,
             uint32_t base)
{
    bool packed = features & (1ull << VIRTIO_F_RING_PACKED);
    uint64_t event_bytes;

    if (num == 0 || num > VQ_MAX_SIZE || (num & (num - 1))) {
        log_limit_warning(vq->log_limit, "%s: ring size %u is not a power of two <= %u", vq->name,
                          num, VQ_MAX_SIZE);
        return -EINVAL;
    }
    if (!mem || !desc || !avail || !used) {
        log_limit_warning(vq->log_limit, "%s: ring addresses not set", vq->name);
        return -EINVAL;
    }
    if (packed) {
        int r = vq_packed_check(vq, mem, num, desc, avail, used);

        if (r < 0) {
            return r;
        }
    } else {
        if ((uintptr_t)desc % 16 || (uintptr_t)avail % 2 || (uintptr_t)used % 4) {
            log_limit_warning(vq->log_limit, "%s: misaligned ring (desc %p avail %p used %p)",
                              vq->name, desc, avail, used);
            return -EINVAL;
        }
        event_bytes = (features & (1ull << VIRTIO_RING_F_EVENT_IDX)) ? 2 : 0;
        if (!vq_host_range_in_mem(mem, desc, (uint64_t)num * sizeof(struct vring_desc)) ||
            !vq_host_range_in_mem(mem, avail, 4 + 2ull * num + event_bytes) ||
            !vq_host_range_in_mem(mem, used, 4 + 8ull * num + event_bytes)) {
            log_limit_warning(vq->log_limit, "%s: ring of %u entries is not inside guest memory",
                              vq->name, num);
            return -EFAULT;
        }
        if (base > UINT16_MAX) {
            log_limit_warning(vq->log_limit, "%s: ring base 0x%x does not fit a split ring's index",
                              vq->name, base);
            return -EINVAL;
        }
    }

    vq_cleanup(vq);
    vq->mem = mem;
    vq->num = num;
    vq->packed = packed;
    vq->event_idx = features & (1ull << VIRTIO_RING_F_EVENT_IDX);
    vq->indirect = features & (1ull << VIRTIO_RING_F_INDIRECT_DESC);
    vq->notify_on_empty = features & (1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
    vq->signalled_used_valid = false;
    vq->broken = false;
    vq->has_bad_head = false;
    vq->notify_off = false;
    vq->inflight = 0;
    vq->inflight_counter = 0;
    vq->last_from_resubmit = false;
    if (packed) {
        vq_packed_setup(vq, desc, avail, used, base);
        return 0;
    }

    vq->desc = desc;
    vq->avail = avail;
    vq->used = used;
    vq->last_avail_idx = (uint16_t)base;
    vq->shadow_avail_idx = (uint16_t)base;
    vq->heads_end = (uint16_t)base;
    /* Like Linux vhost, resume the used ring where the driver last saw it. */
    vq->used_idx = le16toh(READ_ONCE(vq->used->idx));
    vq->flushed_used_idx = vq->used_idx;

    /* A previous back-end may have left kicks suppressed; turn them on. */
    set_used_flags(vq, 0);
    if (vq->event_idx) {
        set_avail_event(vq, (uint16_t)base);
    }
    smp_mb();
    return 0;
}

/*
 * Reads avail->idx.  Returns 1 if entries are pending, 0 if not, <0 if the
 * driver moved the index by more than the ring can hold.
 */
static int vq_refresh_avail(struct virtqueue *vq)
{
    uint16_t idx = le16toh(READ_ONCE(vq->avail->idx));
    uint16_t pending = idx - vq->last_avail_idx;

    if (pending > vq->num) {
        return vq_fail(vq, -EINVAL, "avail index moved from %u to %u, more than the "
                       "ring size %u", vq->last_avail_idx, idx, vq->num);
    }
    vq->shadow_avail_idx = idx;
    /* Ring entries and descriptors must not be read before the index. */
    smp_rmb_acquire();
    return pending != 0;
}

static inline void read_desc(const struct vring_desc *table, unsigned i,
                             struct vring_desc *d)
{
    d->addr = le64toh(READ_ONCE(table[i].addr));
    d->len = le32toh(READ_ONCE(table[i].len));
    d->flags = le16toh(READ_ONCE(table[i].flags));
    d->next = le16toh(READ_ONCE(table[i].next));
}

/*
 * Walks the chain starting at head into iov.  An indirect descriptor ends
 * the main-table chain (its NEXT flag is ignored, as QEMU does; the spec
 * forbids drivers to set it); nested indirect tables are rejected, as the
 * spec forbids them and no driver produces them.
 */
static int vq_map_chain(struct virtqueue *vq, uint16_t head, struct vq_elem *elem,
                        struct iovec *iov, unsigned max_iov)
{
    const struct vring_desc *table = vq->desc;
    unsigned table_n = vq->num;
    unsigned i = head, visited = 0;
    bool in_indirect = false;
    struct vq_chain c = { .iov = iov, .max_iov = MIN(max_iov, VQ_MAX_SG), .head = head };

    for (;;) {
        struct vring_desc d;
        int r;

        if (i >= table_n) {
            return vq_fail(vq, -EINVAL, "%sdescriptor index %u out of range (%u entries), "
                           "chain head %u", in_indirect ? "indirect " : "", i, table_n,
                           head);
        }
        if (++visited > table_n) {
            return vq_fail(vq, -ELOOP, "descriptor chain at head %u loops or is longer "
                           "than its %s (%u)", head,
                           in_indirect ? "indirect table" : "ring", table_n);
        }
        read_desc(table, i, &d);

        if (d.flags & VRING_DESC_F_INDIRECT) {
            r = vq_check_indirect(vq, in_indirect, d.len, head);
            if (r < 0) {
                return r;
            }
            table = guest_mem_gpa_ptr(vq->mem, d.addr, d.len);
            if (!table || (uintptr_t)table % __alignof__(struct vring_desc)) {
                return vq_fail(vq, -EFAULT, "indirect table 0x%" G_GINT64_MODIFIER
                               "x+%u at head %u is not in guest memory or misaligned",
                               (uint64_t)d.addr, d.len, head);
            }
            table_n = d.len / sizeof(struct vring_desc);
            in_indirect = true;
            i = 0;
            visited = 0;
            continue;
        }
        r = vq_chain_add(vq, &c, d.addr, d.len, d.flags & VRING_DESC_F_WRITE);
        if (r < 0) {
            return r;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            break;
        }
        i = d.next;
    }
    vq_chain_to_elem(&c, head, elem);
    return 1;
}

/*
 * Copies the heads of the entries up to shadow_avail_idx and asks for
 * their descriptors' cache lines; each head is still checked by vq_pop.
 */
static void vq_read_heads(struct virtqueue *vq)
{
    uint16_t n = (uint16_t)(vq->shadow_avail_idx - vq->last_avail_idx);

    if (n > VQ_HEAD_CACHE) {
        n = VQ_HEAD_CACHE;
    }
    for (uint16_t i = 0; i < n; i++) {
        uint16_t idx = (uint16_t)(vq->last_avail_idx + i);
        uint16_t head = le16toh(READ_ONCE(vq->avail->ring[idx & (vq->num - 1)]));

        vq->heads[idx & (VQ_HEAD_CACHE - 1)] = head;
        if (head < vq->num) {
            __builtin_prefetch(&vq->desc[head]);
        }
    }
    vq->heads_end = (uint16_t)(vq->last_avail_idx + n);
}

/*
 * Asks for the first buffer of the next request's chain (the virtio-scsi
 * header, read first by the caller): its descriptor was prefetched by
 * vq_read_heads, so its address is usually there by now, and the header's
 * miss overlaps this request's work instead of following it.
 */
static inline void vq_prefetch_next(const struct virtqueue *vq)
{
    uint16_t idx = vq->last_avail_idx;
    uint16_t head;
    uint64_t gpa;

    if (idx == vq->heads_end) {
        return;
    }
    head = vq->heads[idx & (VQ_HEAD_CACHE - 1)];
    if (head >= vq->num) {
        return;
    }
    gpa = le64toh(READ_ONCE(vq->desc[head].addr));
    for (unsigned i = 0; i < vq->mem->nregions; i++) {
        const struct guest_mem_region *r = &vq->mem->r[i];

        if (gpa - r->gpa < r->size) {
            __builtin_prefetch((const char *)r->host + (gpa - r->gpa));
            return;
        }
    }
}

/* Hands out the oldest head a previous back-end left in flight. */
static int __attribute__((noinline)) pop_resubmit(struct virtqueue *vq, struct vq_elem *elem,
                                                  struct iovec *iov, unsigned max_iov)
{
    uint16_t head = vq->resubmit[vq->resubmit_num - 1];
    int r = vq_map_chain(vq, head, elem, iov, max_iov);

    if (r < 0) {
        return r;
    }
    vq->resubmit_num--;
    vq->last_head = head;
    vq->last_from_resubmit = true;
    return 1;
}

int vq_pop(struct virtqueue *vq, struct vq_elem *elem, struct iovec *iov,
           unsigned max_iov)
{
    uint16_t head;
    int r;

    if (vq->broken) {
        return -EIO;
    }
    if (__builtin_expect(vq->resubmit != NULL, 0)) {
        if (vq->resubmit_num > 0) {
            return vq->packed ? vq_packed_pop_resubmit(vq, elem, iov, max_iov)
                              : pop_resubmit(vq, elem, iov, max_iov);
        }
        /* Restore is over; done here so vq_unpop of the last resubmit still works. */
        g_free(vq->resubmit);
        vq->resubmit = NULL;
        g_free(vq->resubmit_record);
        vq->resubmit_record = NULL;
        vq->last_from_resubmit = false;
    }
    if (vq->packed) {
        return vq_packed_pop(vq, elem, iov, max_iov);
    }

    if (vq->last_avail_idx == vq->shadow_avail_idx) {
        r = vq_refresh_avail(vq);
        if (r == 0 && vq->event_idx && !vq->notify_off) {
            /*
             * Ask for a kick on the next entry, then look again: the driver
             * may have added one before it could see our request.
             */
            set_avail_event(vq, vq->last_avail_idx);
            smp_mb();
            r = vq_refresh_avail(vq);
        }
        if (r <= 0) {
            return r;
        }
    }

    if (vq->last_avail_idx == vq->heads_end) {
        vq_read_heads(vq);
    }
    head = vq->heads[vq->last_avail_idx & (VQ_HEAD_CACHE - 1)];
    if (head >= vq->num) {
        return vq_fail(vq, -EINVAL, "avail ring entry %u holds head %u, ring size %u",
                       vq->last_avail_idx, head, vq->num);
    }
    r = vq_map_chain(vq, head, elem, iov, max_iov);
    if (r < 0) {
        /* Consumed, so vq_answer_bad_chain can return it to the driver. */
        vq->last_avail_idx++;
        vq->has_bad_head = true;
        vq->bad_head = head;
        return r;
    }
    vq->last_avail_idx++;
    vq->inflight++;
    vq->last_head = head;
    vq->last_from_resubmit = false;
    vq_prefetch_next(vq);

    if (vq->inflight_region) {
        struct vhost_user_inflight_desc *d = &vq->inflight_region->desc[head];

        d->counter = ++vq->inflight_counter;
        program_order();
        d->inflight = 1;
    }
    return 1;
}

/* Writes one used element at used_idx; not visible until used_publish(). */
static void used_put(struct virtqueue *vq, uint16_t head, uint32_t len)
{
    struct vring_used_elem *e = &vq->used->ring[vq->used_idx & (vq->num - 1)];

    WRITE_ONCE(e->id, htole32(head));
    WRITE_ONCE(e->len, htole32(len));
    vq_log_host(vq, e, sizeof(*e));
    vq->used_idx++;
}

static void used_publish(struct virtqueue *vq)
{
    /* Used elements must be visible before the index that publishes them. */
    smp_wmb_release();
    WRITE_ONCE(vq->used->idx, htole16(vq->used_idx));
    vq_log_host(vq, &vq->used->idx, sizeof(vq->used->idx));
    vq->flushed_used_idx = vq->used_idx;
}

int vq_answer_bad_chain(struct virtqueue *vq, const void *resp, size_t resp_len)
{
    const uint8_t *src = resp;
    unsigned i, visited = 0;
    size_t written = 0;

    if (vq->packed) {
        return vq_packed_answer_bad_chain(vq, resp, resp_len);
    }
    if (!vq->has_bad_head || !vq->used) {
        return -ENOENT;
    }
    vq->has_bad_head = false;
    /*
     * Salvage walk of the direct chain only, with every check of the real
     * walker: stop at the first descriptor that is out of range, indirect,
     * or outside guest memory.
     */
    for (i = vq->bad_head; i < vq->num && visited++ < vq->num && written < resp_len;) {
        struct vring_desc d;
        uint8_t *p;

        read_desc(vq->desc, i, &d);
        if (d.flags & VRING_DESC_F_INDIRECT) {
            break;
        }
        if ((d.flags & VRING_DESC_F_WRITE) && d.len) {
            size_t n = MIN((size_t)d.len, resp_len - written);

            p = guest_mem_gpa_ptr(vq->mem, d.addr, n);
            if (!p) {
                break;
            }
            memcpy(p, src + written, n);
            vq_log_host(vq, p, n);
            written += n;
        }
        if (!(d.flags & VRING_DESC_F_NEXT)) {
            break;
        }
        i = d.next;
    }
    /*
     * The queue is broken, so vq_fill/vq_flush refuse to run, and the
     * request never counted as in flight: write the used ring directly,
     * and interrupt unconditionally — the driver must learn of this one.
     */
    used_put(vq, vq->bad_head, (uint32_t)written);
    used_publish(vq);
    vq_signal_call(vq);
    return (int)written;
}

void vq_unpop(struct virtqueue *vq)
{
    if (vq->last_from_resubmit) {
        vq->resubmit_num++;
        vq->last_from_resubmit = false;
        return;
    }
    if (vq->packed) {
        vq_packed_unpop(vq);
        return;
    }
    vq->last_avail_idx--;
    vq->heads_end = vq->last_avail_idx;   /* read the entry from the ring again */
    vq->inflight--;
    if (vq->inflight_region) {
        vq->inflight_region->desc[vq->last_head].inflight = 0;
    }
}

void vq_fill(struct virtqueue *vq, const struct vq_elem *elem, uint32_t len)
{
    uint16_t head = elem->head;

    /* Even on a broken queue: the buffers were written all the same. */
    if (__builtin_expect(vq->log != NULL, 0) && !vq->log_skip_data_in) {
        vhost_log_mark_iov(vq->log, vq->mem, elem->in_sg, elem->in_num);
    }
    if (vq->broken) {
        return;
    }
    if (vq->packed) {
        vq_packed_fill(vq, elem, len);
        return;
    }
    if (head >= vq->num) {
        vq_fail(vq, -EINVAL, "completing head %u, ring size %u", head, vq->num);
        return;
    }
    used_put(vq, head, len);
    if (vq->inflight > 0) {
        vq->inflight--;
    }
    if (vq->inflight_region) {
        struct vhost_user_inflight_queue *q = vq->inflight_region;

        q->desc[head].next = vq->track_batch;
        program_order();
        q->last_batch_head = head;
        vq->track_batch = head;
    }
}

/*
 * Clears the inflight marks of the last batch, the list vq_fill linked
 * from our own copy of its head.  The links are in the shared area: each
 * is read once and checked, and the walk stops after the batch's size, so
 * a front-end rewriting them only loses marks of its own record.
 */
static void inflight_clear_batch(struct virtqueue *vq, uint16_t batch)
{
    struct vhost_user_inflight_queue *q = vq->inflight_region;
    uint16_t h = vq->track_batch;

    for (unsigned k = 0; k < batch && k < vq->num && h < vq->num; k++) {
        q->desc[h].inflight = 0;
        h = READ_ONCE(q->desc[h].next);
    }
}

void vq_flush(struct virtqueue *vq)
{
    uint16_t batch = vq->used_idx - vq->flushed_used_idx;

    if (vq->packed) {
        vq_packed_flush(vq);
        return;
    }
    if (vq->broken || batch == 0) {
        return;
    }
    used_publish(vq);

    if (vq->inflight_region) {
        struct vhost_user_inflight_queue *q = vq->inflight_region;

        program_order();
        inflight_clear_batch(vq, batch);
        program_order();
        q->used_idx = vq->used_idx;
    }
}

void vq_push(struct virtqueue *vq, const struct vq_elem *elem, uint32_t len)
{
    vq_fill(vq, elem, len);
    vq_flush(vq);
}

uint32_t vq_get_base(const struct virtqueue *vq)
{
    return vq->packed ? vq_packed_get_base(vq) : vq->last_avail_idx;
}

void vq_set_log(struct virtqueue *vq, struct vhost_log *log)
{
    vq->log = log;
}

bool vq_has_avail(struct virtqueue *vq)
{
    if (vq->broken) {
        return false;
    }
    if (vq->packed) {
        return vq_packed_has_avail(vq);
    }
    if (vq->last_avail_idx != vq->shadow_avail_idx) {
        return true;
    }
    return le16toh(READ_ONCE(vq->avail->idx)) != vq->last_avail_idx;
}

bool vq_should_notify(struct virtqueue *vq)
{
    uint16_t old = vq->signalled_used, new = vq->flushed_used_idx;
    bool valid = vq->signalled_used_valid;

    if (vq->broken) {
        return false;
    }
    if (vq->packed) {
        return vq_packed_should_notify(vq);
    }
    /* Our used->idx store must be visible before we read the driver's wishes. */
    smp_mb();
    vq->signalled_used = new;
    vq->signalled_used_valid = true;

    if (valid && old == new) {
        return false;
    }
    if (vq->notify_on_empty && vq->inflight == 0 && !vq_has_avail(vq)) {
        return true;
    }
    if (!vq->event_idx) {
        return !(le16toh(READ_ONCE(vq->avail->flags)) & VRING_AVAIL_F_NO_INTERRUPT);
    }
    return !valid || vring_need_event(get_used_event(vq), new, old);
}

bool vq_notify(struct virtqueue *vq)
{
    if (vq->call_fd < 0 || !vq_should_notify(vq)) {
        return false;
    }
    return vq_signal_call(vq);
}

void vq_disable_notify(struct virtqueue *vq)
{
    vq->notify_off = true;
    if (vq->packed) {
        vq_packed_disable_notify(vq);
        return;
    }
    if (!vq->event_idx) {
        /* NO_NOTIFY is the field's only flag: written whole, the guest's copy is never read. */
        set_used_flags(vq, VRING_USED_F_NO_NOTIFY);
    }
    /* With EVENT_IDX, leaving avail_event behind suppresses further kicks. */
}

bool vq_enable_notify(struct virtqueue *vq)
{
    vq->notify_off = false;
    if (vq->packed) {
        return vq_packed_enable_notify(vq);
    }
    if (vq->event_idx) {
        set_avail_event(vq, vq->shadow_avail_idx);
    } else {
        set_used_flags(vq, 0);
    }
    /* The driver must see the request before we re-check; pairs with its mb. */
    smp_mb();
    return vq_has_avail(vq);
}

/*
 * A dead back-end may have published a batch but not cleared its inflight
 * marks: the difference between the used index and the one it recorded
 * is that batch's size.  Walks the batch in rec, the private copy, at most
 * once round the ring, and clears its marks there and in the area.
 */
static void restore_clear_batch(struct virtqueue *vq, struct vhost_user_inflight_queue *rec,
                                uint16_t batch)
{
    uint16_t h = rec->last_batch_head;

    for (unsigned k = 0; k < batch && k < vq->num && h < vq->num; k++) {
        rec->desc[h].inflight = 0;
        vq->inflight_region->desc[h].inflight = 0;
        h = rec->desc[h].next;
    }
}

int vq_set_inflight(struct virtqueue *vq, struct vhost_user_inflight_queue *region,
                    bool restore)
{
    struct vhost_user_inflight_queue *rec;
    struct vq_resubmit *list;
    unsigned count = 0;
    uint16_t used, desc_num;

    vq_cleanup(vq);
    if (!region) {
        return 0;
    }
    if (vq->packed) {
        log_limit_warning(vq->log_limit,
                          "%s: the split layout of the inflight area cannot track a packed ring",
                          vq->name);
        return -EINVAL;
    }
    desc_num = READ_ONCE(region->desc_num);
    if (vq->num == 0 || desc_num != vq->num) {
        log_limit_warning(vq->log_limit, "%s: inflight region has %u descriptors, ring has %u",
                          vq->name, desc_num, vq->num);
        return -EINVAL;
    }
    vq->inflight_region = region;
    vq->inflight_counter = 0;
    vq->track_batch = 0;
    used = vq->used_idx;

    if (!restore) {
        for (unsigned i = 0; i < vq->num; i++) {
            region->desc[i].inflight = 0;
        }
        region->used_idx = used;
        region->last_batch_head = 0;
        return 0;
    }

    /*
     * The front-end can rewrite the area while we read it: everything
     * below is decided from one copy (g_memdup2 reads each byte once), so
     * a flag that flips between two looks cannot make them disagree.
     */
    rec = g_memdup2(region, sizeof(*region) + vq->num * sizeof(region->desc[0]));
    used = le16toh(READ_ONCE(vq->used->idx));
    if (rec->used_idx != used) {
        restore_clear_batch(vq, rec, (uint16_t)(used - rec->used_idx));
        program_order();
        region->used_idx = used;
    }
    /* One entry per head at most: the list cannot outgrow the ring. */
    list = g_new(struct vq_resubmit, vq->num);
    for (unsigned i = 0; i < vq->num; i++) {
        if (rec->desc[i].inflight) {
            list[count].head = (uint16_t)i;
            list[count].counter = rec->desc[i].counter;
            count++;
        }
    }
    g_free(rec);
    vq->used_idx = used;
    vq->flushed_used_idx = used;
    vq->signalled_used_valid = false;
    vq->inflight = count;
    /* Everything popped is either used or in flight; the rest is new. */
    vq->last_avail_idx = used + count;
    vq->shadow_avail_idx = vq->last_avail_idx;
    vq->heads_end = vq->last_avail_idx;
    if (count == 0) {
        g_free(list);
        return 0;
    }
    vq_resubmit_take(vq, list, count);
    return 0;
}
