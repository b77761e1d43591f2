/*
 * The transport-independent core of the vhost front-end library: it owns
 * the memfd that stands in for guest RAM, lays out the rings and the
 * per-request headers in it, allocates data buffers from the rest, builds
 * virtio-scsi descriptor chains, decides when to kick (EVENT_IDX or
 * NO_NOTIFY), reaps the used rings and waits on the call eventfds.  Rings
 * are split, or packed (virtio 1.2 section 2.8) when the caller asks: a
 * queue's format is fixed at vfe_open, and the submit, kick and reap paths
 * branch on it once, into functions of their own, so that the split path
 * pays nothing for the packed one.  The back-end is untrusted here too: a
 * used entry that names a descriptor (or buffer ID) we did not post marks
 * the queue broken instead of corrupting our state.  One struct vfe is
 * used by one thread at a time.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <glib.h>
#include <linux/virtio_config.h>

#include "vhost-frontend-int.h"

#define VFE_EVENT_BUFS 8

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* ---- data heap ------------------------------------------------------- */

static int heap_insert(struct vfe *fe, unsigned pos, size_t off, size_t len)
{
    if (fe->n_free_ext == fe->cap_free_ext) {
        fe->cap_free_ext = fe->cap_free_ext ? fe->cap_free_ext * 2 : 16;
        fe->free_ext = g_renew(struct vfe_extent, fe->free_ext, fe->cap_free_ext);
    }
    memmove(&fe->free_ext[pos + 1], &fe->free_ext[pos],
            (fe->n_free_ext - pos) * sizeof(fe->free_ext[0]));
    fe->free_ext[pos] = (struct vfe_extent){ off, len };
    fe->n_free_ext++;
    return 0;
}

static void heap_remove(struct vfe *fe, unsigned pos)
{
    memmove(&fe->free_ext[pos], &fe->free_ext[pos + 1],
            (fe->n_free_ext - pos - 1) * sizeof(fe->free_ext[0]));
    fe->n_free_ext--;
}

void *vfe_alloc(struct vfe *fe, size_t len, size_t align)
{
    if (!fe || len == 0) {
        return NULL;
    }
    if (align < 8) {
        align = 8;
    }
    if (align & (align - 1)) {
        return NULL;
    }
    len = align_up(len, 8);
    for (unsigned i = 0; i < fe->n_free_ext; i++) {
        struct vfe_extent e = fe->free_ext[i];
        size_t start = align_up(e.off, align);
        if (start < e.off || start - e.off > e.len || e.len - (start - e.off) < len) {
            continue;
        }
        size_t head = start - e.off;
        size_t tail = e.len - head - len;
        heap_remove(fe, i);
        if (tail) {
            heap_insert(fe, i, start + len, tail);
        }
        if (head) {
            heap_insert(fe, i, e.off, head);
        }
        g_hash_table_insert(fe->allocs, GSIZE_TO_POINTER(start), GSIZE_TO_POINTER(len));
        return fe->mem + start;
    }
    return NULL;
}

void vfe_free(struct vfe *fe, void *p)
{
    if (!fe || !p) {
        return;
    }
    size_t off = (uint8_t *)p - fe->mem;
    gpointer v;
    if (!g_hash_table_lookup_extended(fe->allocs, GSIZE_TO_POINTER(off), NULL, &v)) {
        g_warning("vhost front-end: vfe_free of %p, which vfe_alloc did not return", p);
        return;
    }
    size_t len = GPOINTER_TO_SIZE(v);
    g_hash_table_remove(fe->allocs, GSIZE_TO_POINTER(off));

    unsigned pos = 0;
    while (pos < fe->n_free_ext && fe->free_ext[pos].off < off) {
        pos++;
    }
    heap_insert(fe, pos, off, len);
    /* coalesce with the following, then the preceding extent */
    if (pos + 1 < fe->n_free_ext &&
        fe->free_ext[pos].off + fe->free_ext[pos].len == fe->free_ext[pos + 1].off) {
        fe->free_ext[pos].len += fe->free_ext[pos + 1].len;
        heap_remove(fe, pos + 1);
    }
    if (pos > 0 &&
        fe->free_ext[pos - 1].off + fe->free_ext[pos - 1].len == fe->free_ext[pos].off) {
        fe->free_ext[pos - 1].len += fe->free_ext[pos].len;
        heap_remove(fe, pos);
    }
}

/* ---- rings ----------------------------------------------------------- */

static uint16_t *used_event_ptr(struct vfe_queue *q)
{
    return &q->avail->ring[q->num];
}

static uint16_t *avail_event_ptr(struct vfe_queue *q)
{
    return (uint16_t *)&q->used->ring[q->num];
}

/*
 * A packed ring's free-running index (struct vfe_queue) as the ring says
 * it: the slot, and the wrap counter in bit 15.  That is off_wrap's
 * layout, and each half of vhost-user's packed ring base.
 */
static uint16_t packed_pos(const struct vfe_queue *q, uint16_t idx)
{
    return (idx & (q->num - 1)) | (idx & q->num ? 0 : 1u << VRING_PACKED_EVENT_F_WRAP_CTR);
}

/* Our end of a packed ring as vhost-user's ring base (0x80008000 for a fresh one). */
static uint32_t packed_base(const struct vfe_queue *q)
{
    return packed_pos(q, q->avail_idx) | (uint32_t)packed_pos(q, q->last_used) << 16;
}

static void queue_reset_state(struct vfe_queue *q)
{
    memset(q->desc, 0, sizeof(q->desc[0]) * q->num);
    memset(q->avail, 0, sizeof(*q->avail) + sizeof(uint16_t) * (q->num + 1));
    memset(q->used, 0, sizeof(*q->used) + sizeof(struct vring_used_elem) * q->num + 2);
    for (unsigned i = 0; i < q->num; i++) {
        q->next[i] = i + 1;
        q->slots[i] = (struct vfe_slot){ 0 };
    }
    q->free_head = 0;
    q->num_free = q->num;
    q->avail_idx = q->kick_old = q->last_used = q->base = q->used_event = 0;
    q->driver_flags = VRING_PACKED_EVENT_FLAG_ENABLE;
    if (q->packed) {
        q->base = packed_base(q);
    }
    q->inflight = 0;
    q->broken = false;
}

/* Lays out rings, slot areas and the heap in the shared region. */
static int layout_memory(struct vfe *fe)
{
    size_t off = 0;
    unsigned num = fe->cfg.queue_size;

    for (unsigned i = 0; i < fe->num_queues; i++) {
        struct vfe_queue *q = &fe->queues[i];
        q->index = i;
        q->num = num;
        /* the transports fail vfe_open when the back-end cannot have what was asked */
        q->packed = fe->cfg.packed;
        snprintf(q->name, sizeof(q->name), "vq%u", i);
        off = align_up(off, 4096);
        q->desc = (struct vring_desc *)(fe->mem + off);
        off += sizeof(struct vring_desc) * num;
        q->avail = (struct vring_avail *)(fe->mem + off);
        off += sizeof(struct vring_avail) + sizeof(uint16_t) * (num + 1);
        off = align_up(off, 64);
        q->used = (struct vring_used *)(fe->mem + off);
        off += sizeof(struct vring_used) + sizeof(struct vring_used_elem) * num + 2;
        off = align_up(off, 64);
        q->slot_mem = (struct vfe_slot_mem *)(fe->mem + off);
        off += sizeof(struct vfe_slot_mem) * num;
        if (off > fe->mem_size) {
            g_warning("vhost front-end: %zu bytes of memory cannot hold %u rings of %u",
                      fe->mem_size, fe->num_queues, num);
            return -ENOMEM;
        }
        q->slots = g_new0(struct vfe_slot, num);
        q->next = g_new0(uint16_t, num);
        q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        q->call_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (q->kick_fd < 0 || q->call_fd < 0) {
            int err = -errno;
            g_warning("vhost front-end: eventfd for %s: %s", q->name, g_strerror(errno));
            return err;
        }
        queue_reset_state(q);
    }
    fe->heap_off = align_up(off, 4096);
    if (fe->heap_off < fe->mem_size) {
        heap_insert(fe, 0, fe->heap_off, fe->mem_size - fe->heap_off);
    }
    return 0;
}

static int desc_alloc_chain(struct vfe_queue *q, unsigned n, uint16_t *out)
{
    if (q->num_free < n) {
        return -EAGAIN;
    }
    uint16_t head = q->free_head;
    uint16_t d = head;
    for (unsigned i = 0; i < n; i++) {
        out[i] = d;
        d = q->next[d];
    }
    q->free_head = d;
    q->num_free -= n;
    /* private chain links so the completion frees exactly these */
    for (unsigned i = 0; i + 1 < n; i++) {
        q->next[out[i]] = out[i + 1];
    }
    return 0;
}

static void desc_free_chain(struct vfe_queue *q, uint16_t head, unsigned n)
{
    uint16_t last = head;
    for (unsigned i = 1; i < n; i++) {
        last = q->next[last];
    }
    q->next[last] = q->free_head;
    q->free_head = head;
    q->num_free += n;
}

struct vfe_seg {
    void *addr;
    uint32_t len;
    bool write;       /* device-writable */
};

/* Marks the slot of a chain just posted in flight. */
static inline __attribute__((always_inline)) void slot_post(struct vfe_queue *q, uint16_t id,
                                                            unsigned ndesc,
                                                            const struct vfe_seg *segs,
                                                            unsigned nseg)
{
    struct vfe_slot *s = &q->slots[id];

    s->ndesc = ndesc;
    s->busy = true;
    s->tmf = NULL;
    s->len = 0;
    s->in_len = 0;
    for (unsigned i = 0; i < nseg; i++) {
        s->in_len += segs[i].write ? segs[i].len : 0;
    }
}

/* Posts one chain; returns its head or -EAGAIN. */
static int queue_post(struct vfe *fe, struct vfe_queue *q, const struct vfe_seg *segs,
                      unsigned nseg, bool *used_indirect)
{
    bool indirect = nseg > 1 && vfe_has(fe, VIRTIO_RING_F_INDIRECT_DESC) && fe->cfg.indirect;
    unsigned ndesc = indirect ? 1 : nseg;
    uint16_t ids[4];

    if (q->broken) {
        return -EIO;
    }
    g_assert(nseg <= 4);
    int r = desc_alloc_chain(q, ndesc, ids);
    if (r < 0) {
        return r;
    }
    uint16_t head = ids[0];
    struct vring_desc *table = indirect ? q->slot_mem[head].indirect.split : NULL;
    for (unsigned i = 0; i < nseg; i++) {
        struct vring_desc *d = indirect ? &table[i] : &q->desc[ids[i]];
        d->addr = vfe_gpa(fe, segs[i].addr);
        d->len = segs[i].len;
        d->flags = (segs[i].write ? VRING_DESC_F_WRITE : 0) |
                   (i + 1 < nseg ? VRING_DESC_F_NEXT : 0);
        d->next = i + 1 < nseg ? (indirect ? i + 1 : ids[i + 1]) : 0;
    }
    if (indirect) {
        struct vring_desc *d = &q->desc[head];
        d->addr = vfe_gpa(fe, table);
        d->len = nseg * sizeof(struct vring_desc);
        d->flags = VRING_DESC_F_INDIRECT;
        d->next = 0;
    }
    slot_post(q, head, ndesc, segs, nseg);

    q->avail->ring[q->avail_idx & (q->num - 1)] = head;
    q->avail_idx++;
    /* the entry and its descriptors must be visible before the index */
    __atomic_store_n(&q->avail->idx, q->avail_idx, __ATOMIC_RELEASE);
    q->inflight++;
    if (used_indirect) {
        *used_indirect = indirect;
    }
    return head;
}

/* The AVAIL and USED bits that make a descriptor at free-running index idx available. */
static uint16_t packed_avail_flags(const struct vfe_queue *q, uint16_t idx)
{
    return idx & q->num ? 1u << VRING_PACKED_DESC_F_USED : 1u << VRING_PACKED_DESC_F_AVAIL;
}

/*
 * Posts one chain on a packed ring; returns its buffer ID or -EAGAIN.  The
 * chain takes the next ndesc ring slots, but its ID comes from the free-ID
 * list: the device writes each used descriptor where its used index has
 * got to, in whatever order the chains complete, so the slots a chain was
 * posted in say nothing of which chain it is.  Every descriptor of the
 * chain carries the ID (as Linux writes them).
 */
static int queue_post_packed(struct vfe *fe, struct vfe_queue *q, const struct vfe_seg *segs,
                             unsigned nseg)
{
    bool indirect = nseg > 1 && vfe_has(fe, VIRTIO_RING_F_INDIRECT_DESC) && fe->cfg.indirect;
    unsigned ndesc = indirect ? 1 : nseg;

    if (q->broken) {
        return -EIO;
    }
    g_assert(nseg <= 4);
    /* a chain takes at least one slot, so a free slot means a free ID */
    if (q->num_free < ndesc) {
        return -EAGAIN;
    }
    uint16_t id = q->free_head;
    q->free_head = q->next[id];
    q->num_free -= ndesc;

    /* an indirect table's entries are consecutive: no NEXT, and the device ignores their ID */
    struct vring_packed_desc *table = q->slot_mem[id].indirect.packed;
    for (unsigned i = 0; indirect && i < nseg; i++) {
        table[i] = (struct vring_packed_desc){
            .addr = vfe_gpa(fe, segs[i].addr), .len = segs[i].len,
            .flags = segs[i].write ? VRING_DESC_F_WRITE : 0,
        };
    }
    uint16_t head = q->avail_idx;
    uint16_t head_flags = 0;
    for (unsigned i = 0; i < ndesc; i++) {
        uint16_t idx = head + i;
        struct vring_packed_desc *d = &q->pdesc[idx & (q->num - 1)];
        uint16_t flags = packed_avail_flags(q, idx);

        if (indirect) {
            d->addr = vfe_gpa(fe, table);
            d->len = nseg * sizeof(table[0]);
            flags |= VRING_DESC_F_INDIRECT;
        } else {
            d->addr = vfe_gpa(fe, segs[i].addr);
            d->len = segs[i].len;
            flags |= (segs[i].write ? VRING_DESC_F_WRITE : 0) |
                     (i + 1 < nseg ? VRING_DESC_F_NEXT : 0);
        }
        d->id = id;
        if (i == 0) {
            head_flags = flags;
        } else {
            d->flags = flags;
        }
    }
    slot_post(q, id, ndesc, segs, nseg);
    q->inflight++;
    q->avail_idx = head + ndesc;
    /* the first descriptor last: the device sees the whole chain at once */
    __atomic_store_n(&q->pdesc[head & (q->num - 1)].flags, head_flags, __ATOMIC_RELEASE);
    return id;
}

static int queue_post_any(struct vfe *fe, struct vfe_queue *q, const struct vfe_seg *segs,
                          unsigned nseg)
{
    return q->packed ? queue_post_packed(fe, q, segs, nseg) : queue_post(fe, q, segs, nseg, NULL);
}

/*
 * Whether the device wants a kick for the descriptors posted since the
 * last decision (kick_old up to avail_idx), by its event suppression
 * structure, read in one load so that flags and off_wrap agree (as
 * Linux's virtqueue_kick_prepare_packed reads it).  Out of line, as is
 * the packed reap: the split path's callers compile as they did without
 * them (callgrind's instructions per I/O of the bench).
 */
static __attribute__((noinline)) bool packed_need_kick(struct vfe *fe, struct vfe_queue *q)
{
    typedef uint32_t __attribute__((may_alias)) word_t;
    word_t raw = __atomic_load_n((word_t *)q->device_event, __ATOMIC_RELAXED);
    struct vring_packed_desc_event ev;

    memcpy(&ev, &raw, sizeof(ev));
    /* DESC is EVENT_IDX's: without it, a device that says DESC gets every kick */
    if (ev.flags != VRING_PACKED_EVENT_FLAG_DESC || !vfe_has(fe, VIRTIO_RING_F_EVENT_IDX)) {
        return ev.flags != VRING_PACKED_EVENT_FLAG_DISABLE;
    }
    /* off_wrap in our index space: in this lap if its wrap counter is ours, else the last */
    uint16_t off = ev.off_wrap & ~(1u << VRING_PACKED_EVENT_F_WRAP_CTR);
    bool wrap = ev.off_wrap >> VRING_PACKED_EVENT_F_WRAP_CTR;
    uint16_t event = (q->avail_idx & ~(q->num - 1)) + off;
    if (wrap != !(q->avail_idx & q->num)) {
        event -= q->num;
    }
    return vring_need_event(event, q->avail_idx, q->kick_old);
}

static void queue_kick(struct vfe *fe, struct vfe_queue *q)
{
    if (!fe->started || q->avail_idx == q->kick_old) {
        return;
    }
    /* our avail idx store must be ordered before reading the device's suppression state */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    bool need;
    if (q->packed) {
        need = packed_need_kick(fe, q);
    } else if (vfe_has(fe, VIRTIO_RING_F_EVENT_IDX)) {
        uint16_t ev = __atomic_load_n(avail_event_ptr(q), __ATOMIC_RELAXED);
        need = vring_need_event(ev, q->avail_idx, q->kick_old);
    } else {
        need = !(__atomic_load_n(&q->used->flags, __ATOMIC_RELAXED) & VRING_USED_F_NO_NOTIFY);
    }
    q->kick_old = q->avail_idx;
    if (need) {
        uint64_t one = 1;
        if (write(q->kick_fd, &one, sizeof(one)) == sizeof(one)) {
            fe->stats.kicks++;
        }
    }
}

void vfe_kick(struct vfe *fe)
{
    for (unsigned i = 0; i < fe->num_queues; i++) {
        queue_kick(fe, &fe->queues[i]);
    }
}

static void post_event_buf(struct vfe *fe, struct vfe_queue *q)
{
    /* the buffer lives in the slot of the head queue_post will take */
    uint16_t head = q->free_head;
    struct vfe_seg seg = { &q->slot_mem[head].resp.event, sizeof(struct virtio_scsi_event), true };
    memset(seg.addr, 0, seg.len);
    queue_post_any(fe, q, &seg, 1);
}

/*
 * The slot of one used entry, taken out of flight: NULL, the queue
 * broken, if the device names one we did not post.  A length beyond what
 * we gave the device is cut to that.
 */
static inline __attribute__((always_inline)) struct vfe_slot *used_slot(struct vfe_queue *q,
                                                                        uint32_t id,
                                                                        uint32_t *len)
{
    if (id >= q->num || !q->slots[id].busy) {
        g_warning("vhost front-end: %s: device returned descriptor %u that is not in flight",
                  q->name, id);
        q->broken = true;
        return NULL;
    }
    struct vfe_slot *s = &q->slots[id];
    if (*len > s->in_len) {
        g_warning("vhost front-end: %s: device claims %u bytes written into %u", q->name,
                  *len, s->in_len);
        *len = s->in_len;
    }
    s->busy = false;
    s->len = *len;
    return s;
}

/*
 * Hands a used chain, its descriptors already free, to its owner; returns
 * 1 for a request or TMF completion, 0 for an event.
 */
static inline __attribute__((always_inline)) int complete_slot(struct vfe *fe,
                                                              struct vfe_queue *q, uint16_t id,
                                                              struct vfe_slot *s, uint32_t len)
{
    q->inflight--;

    if (q->index == 0) {
        if (s->tmf) {
            s->tmf->response = q->slot_mem[id].resp.tmf.response;
            s->tmf->done = true;
            s->tmf = NULL;
        }
        return 1;
    }
    if (q->index == 1) {
        fe->stats.events++;
        if (fe->started) {
            post_event_buf(fe, q);
        }
        return 0;
    }
    struct vfe_req *req = s->req;
    s->req = NULL;
    memcpy(&req->resp, &q->slot_mem[id].resp.cmd, sizeof(req->resp));
    req->used_len = len;
    req->done = true;
    req->hdr = NULL;
    fe->stats.completions++;
    if (req->complete) {
        req->complete(req);
    }
    return 1;
}

/* Processes one used entry of a split ring. */
static int complete_one(struct vfe *fe, struct vfe_queue *q, uint32_t id, uint32_t len)
{
    struct vfe_slot *s = used_slot(q, id, &len);

    if (!s) {
        return -EIO;
    }
    desc_free_chain(q, id, s->ndesc);
    return complete_slot(fe, q, id, s, len);
}

/* Reaps everything on q's used ring without blocking. */
static int queue_reap(struct vfe *fe, struct vfe_queue *q)
{
    int n = 0;

    for (;;) {
        uint16_t used_idx = __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE);
        if ((uint16_t)(used_idx - q->last_used) > q->inflight) {
            g_warning("vhost front-end: %s: used idx %u runs %u ahead of %u requests in flight",
                      q->name, used_idx, (uint16_t)(used_idx - q->last_used), q->inflight);
            q->broken = true;
            return n ? n : -EIO;
        }
        while (q->last_used != used_idx) {
            struct vring_used_elem e = q->used->ring[q->last_used & (q->num - 1)];
            q->last_used++;
            int r = complete_one(fe, q, e.id, e.len);
            if (r < 0) {
                return n ? n : r;
            }
            n += r;
        }
        if (fe->cfg.poll) {
            /*
             * A polling driver wants no signals: with EVENT_IDX a used_event
             * half the index space ahead is never crossed (at most num <=
             * 0x8000 entries are in flight); without it, NO_INTERRUPT.
             * Written again only once the device could come within reach
             * of it, as NO_INTERRUPT is written once: a store on every
             * reap made the line the device reads at each completion
             * bounce between the two cores (a cache miss per I/O on both
             * sides that a polling Linux driver, which leaves used_event
             * alone, does not pay).
             */
            if (vfe_has(fe, VIRTIO_RING_F_EVENT_IDX)) {
                if ((uint16_t)(q->used_event - q->last_used) <= q->num) {
                    q->used_event = (uint16_t)(q->last_used + 0x8000);
                    __atomic_store_n(used_event_ptr(q), q->used_event, __ATOMIC_RELAXED);
                }
            } else if (!(q->avail->flags & VRING_AVAIL_F_NO_INTERRUPT)) {
                __atomic_store_n(&q->avail->flags, VRING_AVAIL_F_NO_INTERRUPT,
                                 __ATOMIC_RELAXED);
            }
            break;
        }
        if (!vfe_has(fe, VIRTIO_RING_F_EVENT_IDX)) {
            break;
        }
        /* ask for a signal at the next completion, then recheck for a racing one */
        q->used_event = q->last_used;
        __atomic_store_n(used_event_ptr(q), q->used_event, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE) == q->last_used) {
            break;
        }
    }
    return n;
}

/*
 * Whether the descriptor at last_used is used: its AVAIL and USED bits
 * both equal our used wrap counter.  An acquire, so that the ID and
 * length read after it are the device's.
 */
static bool packed_used_ready(const struct vfe_queue *q)
{
    const uint16_t both = 1u << VRING_PACKED_DESC_F_AVAIL | 1u << VRING_PACKED_DESC_F_USED;
    uint16_t flags = __atomic_load_n(&q->pdesc[q->last_used & (q->num - 1)].flags,
                                     __ATOMIC_ACQUIRE);

    return (flags & both) == (q->last_used & q->num ? 0 : both);
}

static void packed_set_driver_flags(struct vfe_queue *q, uint16_t flags)
{
    /* written only on a change: the device reads the line at every completion */
    if (q->driver_flags != flags) {
        q->driver_flags = flags;
        /* release: a device that sees DESC sees the off_wrap written before it */
        __atomic_store_n(&q->driver_event->flags, flags, __ATOMIC_RELEASE);
    }
}

/* queue_reap for a packed ring. */
static __attribute__((noinline)) int queue_reap_packed(struct vfe *fe, struct vfe_queue *q)
{
    int n = 0;

    /*
     * Broken by a used descriptor we did not post, which stays where it
     * is: read again, it would be reported again at every poll.
     */
    if (q->broken) {
        return 0;
    }
    for (;;) {
        while (packed_used_ready(q)) {
            const struct vring_packed_desc *d = &q->pdesc[q->last_used & (q->num - 1)];
            uint16_t id = d->id;
            uint32_t len = d->len;
            struct vfe_slot *s = used_slot(q, id, &len);

            if (!s) {
                return n ? n : -EIO;
            }
            /* the device's used index skips the chain's descriptors: so does ours */
            q->last_used += s->ndesc;
            q->next[id] = q->free_head;
            q->free_head = id;
            q->num_free += s->ndesc;
            n += complete_slot(fe, q, id, s, len);
        }
        if (fe->cfg.poll) {
            /* as NO_INTERRUPT on a split ring: no signals, and one store */
            packed_set_driver_flags(q, VRING_PACKED_EVENT_FLAG_DISABLE);
            break;
        }
        if (!vfe_has(fe, VIRTIO_RING_F_EVENT_IDX)) {
            break;      /* ENABLE, as reset: a signal for every used buffer */
        }
        /* ask for a signal at the next used descriptor, then recheck for a racing one */
        q->used_event = packed_pos(q, q->last_used);
        __atomic_store_n(&q->driver_event->off_wrap, q->used_event, __ATOMIC_RELAXED);
        packed_set_driver_flags(q, VRING_PACKED_EVENT_FLAG_DESC);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (!packed_used_ready(q)) {
            break;
        }
    }
    return n;
}

static int reap_all(struct vfe *fe)
{
    int n = 0;
    for (unsigned i = 0; i < fe->num_queues; i++) {
        struct vfe_queue *q = &fe->queues[i];
        if (q->inflight == 0 && !q->broken) {
            continue;
        }
        int r = q->packed ? queue_reap_packed(fe, q) : queue_reap(fe, q);
        if (r < 0) {
            return r;
        }
        n += r;
    }
    /* posting reused event buffers may need a kick */
    queue_kick(fe, &fe->queues[1]);
    return n;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Waits for call signals or a hang-up; returns >0 when something arrived,
 * 0 on timeout, -errno on error or when the back-end went away.
 */
static int wait_calls(struct vfe *fe, int timeout_ms)
{
    unsigned n = fe->num_queues;
    if (fe->dead) {
        return -ENOTCONN;
    }
    int wfd = fe->ops->watch_fd && !fe->dead ? fe->ops->watch_fd(fe) : -1;

    for (unsigned i = 0; i < n; i++) {
        fe->pfds[i] = (struct pollfd){ .fd = fe->queues[i].call_fd, .events = POLLIN };
    }
    fe->pfds[n] = (struct pollfd){ .fd = wfd, .events = POLLIN };
    int r = poll(fe->pfds, n + (wfd >= 0), timeout_ms);
    if (r < 0) {
        return errno == EINTR ? 0 : -errno;
    }
    if (r == 0) {
        return 0;
    }
    for (unsigned i = 0; i < n; i++) {
        if (fe->pfds[i].revents & POLLIN) {
            uint64_t v;
            if (read(fe->pfds[i].fd, &v, sizeof(v)) == sizeof(v)) {
                fe->stats.calls += v;
            }
        }
    }
    if (wfd >= 0 && fe->pfds[n].revents) {
        fe->dead = true;
        g_warning("vhost front-end: %s: back-end closed the connection", fe->path);
        return -ECONNRESET;
    }
    return r;
}

/*
 * vfe_poll for a polling driver: no call signals will come, so spin on the
 * used rings.  With a timeout, every 4096 empty rounds it asks the kernel
 * (poll(2), timeout 0) whether the back-end hung up, and checks the clock;
 * timeout 0 is one look, no system call (the caller spins).
 */
static int poll_spin(struct vfe *fe, int timeout_ms)
{
    int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;

    for (unsigned spins = 1;; spins++) {
        int n = reap_all(fe);
        if (n != 0 || timeout_ms == 0) {
            return n;
        }
        if (spins % 4096 == 0) {
            int r = wait_calls(fe, 0);
            if (r < 0) {
                return r;
            }
            if (timeout_ms > 0 && now_ms() >= deadline) {
                return reap_all(fe);
            }
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

int vfe_poll(struct vfe *fe, int timeout_ms)
{
    int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;

    if (fe->cfg.poll) {
        return poll_spin(fe, timeout_ms);
    }

    for (;;) {
        int n = reap_all(fe);
        if (n != 0) {
            return n;
        }
        int wait = timeout_ms;
        if (timeout_ms > 0) {
            int64_t left = deadline - now_ms();
            wait = left > 0 ? (int)left : 0;
        }
        int r = wait_calls(fe, wait);
        if (r < 0) {
            return r;
        }
        if (r == 0 && timeout_ms >= 0 && (timeout_ms == 0 || now_ms() >= deadline)) {
            return reap_all(fe);
        }
    }
}

void vfe_lun(uint8_t out[8], unsigned target, unsigned lun)
{
    memset(out, 0, 8);
    out[0] = 1;
    out[1] = target & 0xff;
    out[2] = 0x40 | ((lun >> 8) & 0x3f);
    out[3] = lun & 0xff;
}

static bool in_heap(struct vfe *fe, const void *p, size_t len)
{
    const uint8_t *b = p;
    return b >= fe->mem + fe->heap_off && b <= fe->mem + fe->mem_size &&
           len <= (size_t)(fe->mem + fe->mem_size - b);
}

/*
 * vfe_submit on a started front-end, inlined twice with packed a
 * constant: into vfe_submit for split rings, and out of line for packed
 * ones, so that the split path compiles as it did before there were
 * packed rings.  (Callgrind, the bench's submit and completion per I/O:
 * with the branch down at the post, 12 instructions more; on the queue's
 * flag once the queue was known, 10; on cfg.packed at the top, 5; folded
 * into the started test, none.)
 */
static inline __attribute__((always_inline)) int submit(struct vfe *fe, struct vfe_req *req,
                                                        bool packed)
{
    if (req->queue >= fe->cfg.num_request_queues) {
        return -EINVAL;
    }
    if (req->data_len && (!req->data || !in_heap(fe, req->data, req->data_len))) {
        g_warning("vhost front-end: request buffer %p+%u is not from vfe_alloc",
                  req->data, req->data_len);
        return -EINVAL;
    }
    struct vfe_queue *q = &fe->queues[2 + req->queue];
    bool indirect = fe->cfg.indirect && vfe_has(fe, VIRTIO_RING_F_INDIRECT_DESC);
    unsigned nseg = 2 + (req->data_len ? 1 : 0);
    if (q->num_free < (indirect ? 1 : nseg)) {
        return -EAGAIN;
    }
    uint16_t head = q->free_head;   /* queue_post takes the free head first */
    struct vfe_slot_mem *sm = &q->slot_mem[head];
    memcpy(sm->req.cmd.lun, req->lun, 8);
    sm->req.cmd.tag = req->tag;
    sm->req.cmd.task_attr = VIRTIO_SCSI_S_SIMPLE;
    sm->req.cmd.prio = 0;
    sm->req.cmd.crn = 0;
    memcpy(sm->req.cmd.cdb, req->cdb, VIRTIO_SCSI_CDB_SIZE);
    memset(&sm->resp.cmd, 0, offsetof(struct virtio_scsi_cmd_resp, sense));

    struct vfe_seg segs[3];
    unsigned k = 0;
    segs[k++] = (struct vfe_seg){ &sm->req.cmd, sizeof(sm->req.cmd), false };
    if (req->data_len && !req->data_in) {
        segs[k++] = (struct vfe_seg){ req->data, req->data_len, false };
    }
    segs[k++] = (struct vfe_seg){ &sm->resp.cmd, sizeof(sm->resp.cmd), true };
    if (req->data_len && req->data_in) {
        segs[k++] = (struct vfe_seg){ req->data, req->data_len, true };
    }
    int r = packed ? queue_post_packed(fe, q, segs, k) : queue_post(fe, q, segs, k, NULL);
    if (r < 0) {
        return r;
    }
    g_assert(r == head);
    q->slots[head].req = req;
    req->head = head;
    req->hdr = sm;
    req->done = false;
    req->used_len = 0;
    if (!fe->cfg.batch) {
        queue_kick(fe, q);
    }
    return 0;
}

static __attribute__((noinline)) int submit_packed(struct vfe *fe, struct vfe_req *req)
{
    return submit(fe, req, true);
}

int vfe_submit(struct vfe *fe, struct vfe_req *req)
{
    /* one test, where there was one for started */
    if (!fe->split_started) {
        return fe->started ? submit_packed(fe, req) : -ENOTCONN;
    }
    return submit(fe, req, false);
}

int vfe_exec(struct vfe *fe, struct vfe_req *req, int timeout_ms)
{
    int r = vfe_submit(fe, req);
    if (r < 0) {
        return r;
    }
    vfe_kick(fe);
    int64_t deadline = now_ms() + timeout_ms;
    while (!req->done) {
        int left = timeout_ms < 0 ? -1 : (int)MAX(deadline - now_ms(), 0);
        r = vfe_poll(fe, left);
        if (r < 0) {
            return r;
        }
        if (!req->done && timeout_ms >= 0 && now_ms() >= deadline) {
            g_warning("vhost front-end: request tag %" G_GUINT64_FORMAT " timed out", req->tag);
            return -ETIMEDOUT;
        }
    }
    return 0;
}

int vfe_tmf_submit(struct vfe *fe, const uint8_t lun[8], uint32_t subtype, uint64_t tag,
                   struct vfe_tmf *t)
{
    if (!fe->started) {
        return -ENOTCONN;
    }
    struct vfe_queue *q = &fe->queues[0];
    if (q->num_free < 2) {
        return -EAGAIN;
    }
    uint16_t head = q->free_head;
    struct vfe_slot_mem *sm = &q->slot_mem[head];
    sm->req.tmf = (struct virtio_scsi_ctrl_tmf_req){
        .type = VIRTIO_SCSI_T_TMF, .subtype = subtype, .tag = tag,
    };
    memcpy(sm->req.tmf.lun, lun, 8);
    sm->resp.tmf.response = 0xff;
    struct vfe_seg segs[2] = {
        { &sm->req.tmf, sizeof(sm->req.tmf), false },
        { &sm->resp.tmf, sizeof(sm->resp.tmf), true },
    };
    int r = queue_post_any(fe, q, segs, 2);
    if (r < 0) {
        return r;
    }
    /*
     * The used length is not checked: the kernel's vhost-scsi reports 0
     * for TMFs (and commands) although it wrote the response, and guest
     * drivers read the response regardless.
     */
    t->done = false;
    t->response = 0xff;
    t->head = head;
    q->slots[head].tmf = t;
    queue_kick(fe, q);
    return 0;
}

int vfe_tmf(struct vfe *fe, const uint8_t lun[8], uint32_t subtype, uint64_t tag,
            uint8_t *response, int timeout_ms)
{
    struct vfe_tmf t;
    int r = vfe_tmf_submit(fe, lun, subtype, tag, &t);

    if (r < 0) {
        return r;
    }
    int64_t deadline = now_ms() + timeout_ms;
    while (!t.done) {
        int left = timeout_ms < 0 ? -1 : (int)MAX(deadline - now_ms(), 0);
        r = vfe_poll(fe, left);
        if (r >= 0 && !t.done && timeout_ms >= 0 && now_ms() >= deadline) {
            g_warning("vhost front-end: TMF %u timed out on the control queue", subtype);
            r = -ETIMEDOUT;
        }
        if (r < 0) {
            /* t lives on this stack: a late answer must not reach it. */
            fe->queues[0].slots[t.head].tmf = NULL;
            return r;
        }
    }
    *response = t.response;
    return 0;
}

/* ---- lifecycle ------------------------------------------------------- */

/* Descriptors we posted that the device had not taken when it reported q->base. */
static uint16_t queue_unconsumed(const struct vfe_queue *q)
{
    if (!q->packed) {
        return (uint16_t)(q->avail_idx - q->base);
    }
    /* the base's avail slot and wrap counter place it within two laps of us */
    uint16_t dev = (q->base & (q->num - 1)) |
                   (q->base & 1u << VRING_PACKED_EVENT_F_WRAP_CTR ? 0 : q->num);
    return (uint16_t)(q->avail_idx - dev) & (2 * q->num - 1);
}

int vfe_start(struct vfe *fe)
{
    if (fe->started) {
        return 0;
    }
    if (!fe->connected) {
        return -ENOTCONN;
    }
    int r = fe->ops->set_mem(fe);
    for (unsigned i = 0; r == 0 && i < fe->num_queues; i++) {
        struct vfe_queue *q = &fe->queues[i];
        if (queue_unconsumed(q)) {
            /* legal: the device picks them up after the restart (event buffers wait there) */
            g_debug("vhost front-end: %s: restarting with %u entries not consumed",
                    q->name, queue_unconsumed(q));
        }
        r = fe->ops->start_queue(fe, q);
    }
    if (r == 0 && fe->ops->start_done) {
        r = fe->ops->start_done(fe);
    }
    if (r < 0) {
        return r;
    }
    fe->started = true;
    fe->split_started = !fe->cfg.packed;
    /* keep the event queue stocked; buffers survive a stop/start cycle */
    struct vfe_queue *evq = &fe->queues[1];
    while (evq->inflight < VFE_EVENT_BUFS && evq->num_free > 0) {
        post_event_buf(fe, evq);
    }
    /* entries posted before the back-end looked (or after it stopped) need one kick */
    for (unsigned i = 0; i < fe->num_queues; i++) {
        struct vfe_queue *q = &fe->queues[i];
        uint64_t one = 1;
        if (queue_unconsumed(q) && write(q->kick_fd, &one, sizeof(one)) == sizeof(one)) {
            fe->stats.kicks++;
        }
        q->kick_old = q->avail_idx;
    }
    return 0;
}

int vfe_stop(struct vfe *fe)
{
    if (!fe || !fe->started) {
        return 0;
    }
    fe->started = false;
    fe->split_started = false;
    int ret = 0;
    if (fe->ops->stop_begin) {
        ret = fe->ops->stop_begin(fe);
    }
    for (unsigned i = 0; i < fe->num_queues; i++) {
        struct vfe_queue *q = &fe->queues[i];
        uint32_t base;
        int r = fe->ops->get_base(fe, q, &base);
        if (r < 0) {
            ret = ret ? ret : r;
            q->base = q->packed ? packed_base(q) : q->avail_idx;
            continue;
        }
        /* packed: all 32 bits, the device's used index too, go back at the start */
        q->base = q->packed ? base : (uint16_t)base;
    }
    /* the back-end finished what it took; collect it */
    reap_all(fe);
    return ret;
}

int vfe_open(const struct vfe_config *cfg, struct vfe **out)
{
    *out = NULL;
    if (!cfg || cfg->num_request_queues < 1 || cfg->num_request_queues > 64) {
        g_warning("vhost front-end: num_request_queues must be 1..64");
        return -EINVAL;
    }
    struct vfe *fe = g_new0(struct vfe, 1);
    fe->cfg = *cfg;
    fe->fd = -1;
    fe->mem_fd = -1;
    fe->log_fd = -1;
    if (!fe->cfg.queue_size) {
        fe->cfg.queue_size = 128;
    }
    if (!fe->cfg.mem_size) {
        fe->cfg.mem_size = 64u << 20;
    }
    if (!fe->cfg.timeout_ms) {
        fe->cfg.timeout_ms = 10000;
    }
    unsigned qs = fe->cfg.queue_size;
    if (qs > 32768 || (qs & (qs - 1))) {
        g_warning("vhost front-end: queue size %u is not a power of two <= 32768", qs);
        g_free(fe);
        return -EINVAL;
    }
    fe->path = g_strdup(cfg->path ? cfg->path :
                        cfg->transport == VFE_VHOST_KERNEL ? "/dev/vhost-scsi" : NULL);
    fe->wwpn = g_strdup(cfg->wwpn);
    fe->cfg.path = fe->path;
    fe->cfg.wwpn = fe->wwpn;
    fe->ops = cfg->transport == VFE_VHOST_KERNEL ? &vfe_kernel_ops : &vfe_user_ops;
    fe->num_queues = 2 + cfg->num_request_queues;
    fe->queues = g_new0(struct vfe_queue, fe->num_queues);
    for (unsigned i = 0; i < fe->num_queues; i++) {
        fe->queues[i].kick_fd = fe->queues[i].call_fd = -1;
    }
    fe->pfds = g_new0(struct pollfd, fe->num_queues + 1);
    fe->allocs = g_hash_table_new(g_direct_hash, g_direct_equal);
    fe->mem_size = align_up(fe->cfg.mem_size, 4096);

    int r;
    if (!fe->path) {
        g_warning("vhost front-end: no socket path");
        r = -EINVAL;
        goto fail;
    }
    fe->mem_fd = memfd_create("vfe-guest-ram", MFD_CLOEXEC);
    if (fe->mem_fd < 0 || ftruncate(fe->mem_fd, fe->mem_size) < 0) {
        r = -errno;
        g_warning("vhost front-end: memfd of %zu bytes: %s", fe->mem_size, g_strerror(errno));
        goto fail;
    }
    void *m = mmap(NULL, fe->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, fe->mem_fd, 0);
    if (m == MAP_FAILED) {
        r = -errno;
        g_warning("vhost front-end: mmap of guest RAM: %s", g_strerror(errno));
        goto fail;
    }
    fe->mem = m;
    r = layout_memory(fe);
    if (r < 0) {
        goto fail;
    }
    r = fe->ops->connect(fe);
    if (r < 0) {
        goto fail;
    }
    fe->connected = true;
    r = vfe_start(fe);
    if (r < 0) {
        goto fail;
    }
    *out = fe;
    return 0;

fail:
    vfe_close(fe);
    return r;
}

void vfe_close(struct vfe *fe)
{
    if (!fe) {
        return;
    }
    vfe_stop(fe);
    if (fe->connected || fe->fd >= 0) {
        fe->ops->disconnect(fe);
        fe->connected = false;
    }
    for (unsigned i = 0; fe->queues && i < fe->num_queues; i++) {
        struct vfe_queue *q = &fe->queues[i];
        if (q->kick_fd >= 0) {
            close(q->kick_fd);
        }
        if (q->call_fd >= 0) {
            close(q->call_fd);
        }
        g_free(q->slots);
        g_free(q->next);
    }
    g_free(fe->queues);
    if (fe->mem) {
        munmap(fe->mem, fe->mem_size);
    }
    if (fe->mem_fd >= 0) {
        close(fe->mem_fd);
    }
    vfe_log_free(fe);
    g_hash_table_destroy(fe->allocs);
    g_free(fe->free_ext);
    g_free(fe->pfds);
    g_free(fe->path);
    g_free(fe->wwpn);
    g_free(fe);
}

void vfe_get_stats(struct vfe *fe, struct vfe_stats *st)
{
    /*
     * Signals that arrived while we were busy reaping are still in the
     * eventfds; count them now.  Consuming them is safe: vfe_poll always
     * reads the used ring before it waits.
     */
    for (unsigned i = 0; i < fe->num_queues; i++) {
        uint64_t v;
        if (read(fe->queues[i].call_fd, &v, sizeof(v)) == sizeof(v)) {
            fe->stats.calls += v;
        }
    }
    *st = fe->stats;
}

int vfe_call_fd(struct vfe *fe, unsigned queue)
{
    return queue < fe->num_queues ? fe->queues[queue].call_fd : -1;
}

int vfe_kick_fd(struct vfe *fe, unsigned queue)
{
    return queue < fe->num_queues ? fe->queues[queue].kick_fd : -1;
}

int vfe_mem_fd(struct vfe *fe)
{
    return fe->mem_fd;
}

int vfe_conn_fd(struct vfe *fe)
{
    return fe->fd;
}

const void *vfe_inflight_area(struct vfe *fe, size_t *size)
{
    *size = fe->inflight_size;
    return fe->inflight_area;
}

uint64_t vfe_features(struct vfe *fe)
{
    return fe->features;
}

const char *vfe_version(void)
{
    return VHOST_SCSI_VERSION;
}
