/*
 * The vrings of a vhost-user connection: when a queue runs (it has a size,
 * addresses inside the memory table, a kick fd or polling, and is
 * enabled), starting and stopping it through the device's operations, and
 * the SET_VRING_* / GET_VRING_BASE requests that configure it.  A running
 * queue's thread may be using its call and err fds: they are swapped in
 * place, never closed under it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/vhost_types.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include <glib.h>
#include <glib-unix.h>

#include "guest-mem-guard.h"
#include "notify-fd.h"
#include "vhost-user-int.h"

/* ---- queue lifecycle ---------------------------------------------------- */

static bool queue_enabled(const struct vu_dev *dev, const struct vu_queue *q)
{
    /* Without PROTOCOL_FEATURES there is no SET_VRING_ENABLE: a kick enables. */
    return q->enabled || !(dev->features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES));
}

static bool queue_configured(const struct vu_dev *dev, const struct vu_queue *q)
{
    return q->num && q->addr_set && q->started && queue_enabled(dev, q);
}

/* A configured queue runs only where every write it makes can be logged. */
static bool queue_wanted(const struct vu_dev *dev, const struct vu_queue *q)
{
    return queue_configured(dev, q) && vu_log_ready(dev);
}

/*
 * Tracks the ring in its slice of the inflight area, resuming from what
 * the slice holds: a previous back-end's record, or ours from before the
 * queue stopped.  On this connection's later starts the record is ours
 * only in the layout we kept it in, and a packed ring's front-end base
 * wins where it is not where we stopped (a virtio reset without
 * RESET_DEVICE, say: the slice describes the previous driver's ring).
 */
static int queue_attach_inflight(struct vu_dev *dev, struct vu_queue *q, unsigned idx)
{
    bool packed = q->vq.packed, first = !q->inflight_attached;
    /* version and desc_num sit at the same place in both layouts. */
    struct vhost_user_inflight_queue *iq;
    uint16_t version, desc_num;
    bool restore;

    if (!dev->inflight.area || idx >= dev->inflight.num_queues) {
        return 0;
    }
    iq = vu_inflight_slice(dev, idx);
    /* The front-end shares the slice: each field is read once, then used from here. */
    version = __atomic_load_n(&iq->version, __ATOMIC_RELAXED);
    desc_num = __atomic_load_n(&iq->desc_num, __ATOMIC_RELAXED);
    /*
     * Slices are sized for the device's maximum ring; a driver may choose
     * a smaller ring (its entries fit the slice), never a larger one.
     */
    if (q->num > dev->inflight.queue_size) {
        log_limit_warning(q->vq.log_limit,
                          "%s: ring of %u entries does not fit the inflight area (%u per queue); "
                          "running without inflight tracking", q->name, q->num,
                          dev->inflight.queue_size);
        return 0;
    }
    if (packed && dev->inflight.stride < vu_inflight_packed_bytes(dev->inflight.queue_size)) {
        if (first) {
            log_limit_warning(q->vq.log_limit,
                              "%s: the inflight area has %zu bytes per queue, a packed ring's "
                              "record needs %zu (an area made by an earlier back-end for split "
                              "rings); running without inflight tracking%s", q->name,
                              dev->inflight.stride,
                              vu_inflight_packed_bytes(dev->inflight.queue_size),
                              version ? ": where a previous back-end left this ring and "
                                        "what it had popped are lost" : "");
        }
        q->inflight_attached = true;
        q->inflight_was_packed = true;
        return 0;
    }
    /* A zero version means nobody tracked this queue yet: nothing to resubmit. */
    restore = version != 0;
    if (!first && (packed != q->inflight_was_packed || (packed && q->base != q->stop_base))) {
        restore = false;
    }
    if (restore && desc_num != q->num) {
        /* Tracking of a differently sized ring (before a guest reset) says nothing now. */
        log_limit_warning(q->vq.log_limit,
                          "%s: inflight area tracked a %u-entry ring, the ring now has %u "
                          "entries; starting afresh", q->name, desc_num, q->num);
        restore = false;
    }
    if (!restore) {
        iq->version = 1;
        iq->desc_num = q->num;
    }
    q->inflight_attached = true;
    q->inflight_was_packed = packed;
    if (packed) {
        return vq_set_inflight_packed(&q->vq, (void *)iq, restore);
    }
    return vq_set_inflight(&q->vq, iq, restore);
}

void vu_queue_stop(struct vu_dev *dev, struct vu_queue *q)
{
    if (!q->running) {
        return;
    }
    if (dev->ops && dev->ops->queue_stop) {
        dev->ops->queue_stop(dev->opaque, q->vq.index, &q->vq);
    }
    q->base = vq_get_base(&q->vq);
    q->stop_base = q->base;
    q->running = false;
    q->quiesced = false;
    g_debug("%s: stopped at ring base 0x%x", q->name, q->base);
}

static void queue_try_start(struct vu_dev *dev, struct vu_queue *q, unsigned idx)
{
    uint64_t n = q->num;
    /* used_event/avail_event exist only with EVENT_IDX (SeaBIOS omits them). */
    uint64_t ev = dev->features & (1ull << VIRTIO_RING_F_EVENT_IDX) ? 2 : 0;
    /* A packed ring's "avail" and "used" are the driver's and device's 4-byte event areas. */
    bool packed = dev->features & (1ull << VIRTIO_F_RING_PACKED);
    void *desc, *avail, *used;
    int r;

    desc = guest_mem_uva_ptr(&dev->mem, q->addr.desc_user_addr, 16 * n);
    avail = guest_mem_uva_ptr(&dev->mem, q->addr.avail_user_addr, packed ? 4 : 4 + 2 * n + ev);
    used = guest_mem_uva_ptr(&dev->mem, q->addr.used_user_addr, packed ? 4 : 4 + 8 * n + ev);
    if (!desc || !avail || !used) {
        if (dev->mem.nregions == 0) {
            g_debug("%s: waiting for a memory table to translate the ring", q->name);
        } else {
            log_limit_warning(q->vq.log_limit,
                              "%s: ring (desc 0x%llx avail 0x%llx used 0x%llx, %u entries) is "
                              "not inside the memory table; queue stays stopped", q->name,
                              (unsigned long long)q->addr.desc_user_addr,
                              (unsigned long long)q->addr.avail_user_addr,
                              (unsigned long long)q->addr.used_user_addr, q->num);
        }
        return;
    }
    /* Before vq_setup, which writes the used ring too. */
    vq_set_log(&q->vq, vu_log_wanted(dev) ? &dev->log.log : NULL);
    q->vq.log_skip_data_in = dev->log_skip_data_in;
    /* vq_setup also drops what a previous run's inflight restore left behind. */
    r = vq_setup(&q->vq, &dev->mem, q->num, desc, avail, used, dev->features, q->base);
    if (r < 0) {
        log_limit_warning(q->vq.log_limit, "%s: cannot set up the ring: %s; queue stays stopped",
                          q->name, g_strerror(-r));
        return;
    }
    q->vq.kick_fd = q->kick_fd;
    q->vq.call_fd = q->call_fd;
    q->vq.err_fd = q->err_fd;
    r = queue_attach_inflight(dev, q, idx);
    if (r < 0) {
        log_limit_warning(q->vq.log_limit,
                          "%s: cannot attach the inflight area: %s; queue stays stopped", q->name,
                          g_strerror(-r));
        return;
    }
    r = dev->ops && dev->ops->queue_start ?
        dev->ops->queue_start(dev->opaque, idx, &q->vq) : 0;
    if (r < 0) {
        log_limit_warning(q->vq.log_limit, "%s: device refused to start the queue: %s", q->name,
                          g_strerror(-r));
        return;
    }
    q->running = true;
    g_debug("%s: started (%u entries, %s ring, base 0x%x, %s)", q->name, q->num,
            q->vq.packed ? "packed" : "split", q->base,
            q->kick_fd >= 0 ? "kick fd" : "polling");
}

/* Brings the queue's running state in line with its configuration. */
void vu_queue_refresh(struct vu_dev *dev, unsigned idx)
{
    struct vu_queue *q = &dev->q[idx];

    if (q->running && !queue_wanted(dev, q)) {
        vu_queue_stop(dev, q);
    } else if (!q->running && queue_wanted(dev, q)) {
        queue_try_start(dev, q, idx);
    } else if (!q->running && queue_configured(dev, q)) {
        log_limit_message(q->vq.log_limit,
                          "%s: dirty logging is on but no log covers guest memory yet; the queue "
                          "waits for SET_LOG_BASE", q->name);
    }
}

void vu_stop_all(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        vu_queue_stop(dev, &dev->q[i]);
    }
}

void vu_refresh_all(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        vu_queue_refresh(dev, i);
    }
}

/* After a memory table change (queues stopped): tell the device, restart on the new table. */
void vu_memory_changed(struct vu_dev *dev)
{
    if (dev->ops && dev->ops->mem_changed) {
        dev->ops->mem_changed(dev->opaque);
    }
    vu_refresh_all(dev);
}

/*
 * Replaces a call or err fd (QEMU swaps call fds of running queues when
 * the guest masks MSI-X vectors).  While the queue runs, its thread may be
 * writing the old fd: swapping the file behind the same number keeps it
 * from ever writing a closed (or reused) fd, and a first fd can simply be
 * published; only dropping an fd needs a stop and restart.
 *
 * A completion signalled on the old call fd may never reach the guest:
 * QEMU's vhost-user-scsi starts the rings with a "masked" call fd and
 * unmasks them afterwards without checking it (it has no
 * guest_notifier_pending), and before a first fd there is nobody to tell.
 * Virtio drivers must tolerate spurious interrupts, so a running queue's
 * new call fd is signalled once.
 */
/* See notify-fd.c: the connection ends at the next read of its socket. */
void vu_hang_up_hostile(struct vu_dev *dev, const char *name, const char *what)
{
    log_limit_warning(&dev->log_limit,
                      "%s: the front-end's %s eventfd blocked (its O_NONBLOCK was cleared and "
                      "the counter filled); dropping the connection", name, what);
    shutdown(dev->fd, SHUT_RDWR);
}

static void queue_replace_notify_fd(struct vu_dev *dev, unsigned idx, int *slot,
                                    int *vq_slot, int fd, bool is_call)
{
    struct vu_queue *q = &dev->q[idx];

    if (q->running && *slot >= 0 && fd >= 0 && dup3(fd, *slot, O_CLOEXEC) >= 0) {
        close(fd);
    } else if (q->running && *slot < 0 && fd >= 0) {
        *slot = fd;
        __atomic_store_n(vq_slot, fd, __ATOMIC_RELEASE);
    } else {
        vu_queue_stop(dev, q);
        vu_close_fd(slot);
        *slot = fd;
        vu_queue_refresh(dev, idx);
        return;
    }
    if (is_call) {
        int r = notify_fd_signal(*slot);

        if (r == -ETIMEDOUT) {
            vu_hang_up_hostile(dev, q->name, "call");
        } else if (r < 0 && r != -EAGAIN) {
            log_limit_warning(q->vq.log_limit, "%s: cannot signal the new call fd: %s", q->name,
                              g_strerror(-r));
        }
    }
}

static void queue_reset(struct vu_dev *dev, struct vu_queue *q)
{
    vu_queue_stop(dev, q);
    vq_cleanup(&q->vq);
    vu_close_fd(&q->kick_fd);
    vu_close_fd(&q->call_fd);
    vu_close_fd(&q->err_fd);
    q->num = 0;
    memset(&q->addr, 0, sizeof(q->addr));
    q->addr_set = false;
    q->base = 0;
    q->started = false;
    q->enabled = false;
}

void vu_reset_device(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        queue_reset(dev, &dev->q[i]);
    }
    /*
     * Nothing is in flight across a virtio reset: the next driver's rings
     * must not be "restored" from the previous driver's tracking.
     */
    for (unsigned i = 0; dev->inflight.area && i < dev->inflight.num_queues; i++) {
        struct vhost_user_inflight_queue *iq = vu_inflight_slice(dev, i);

        /*
         * Version 0 reads as "never tracked" (see queue_attach_inflight),
         * which clears a slice's entries when its queue next starts; the
         * rest of the area is not touched, so a reset commits no memory.
         */
        iq->version = 0;
    }
    dev->status = 0;
    if (dev->ops && dev->ops->reset) {
        dev->ops->reset(dev->opaque);
    }
}

/* A request about queue idx: -EINVAL (logged) when there is no such queue. */
static int check_queue_index(struct vu_dev *dev, const struct vu_msg *msg, uint64_t idx)
{
    if (idx >= dev->num_queues) {
        log_limit_warning(&dev->log_limit, "%s: %s for queue %llu, but there are only %u queues",
                          dev->name, vhost_user_request_name(msg->hdr.request),
                          (unsigned long long)idx, dev->num_queues);
        return -EINVAL;
    }
    return 0;
}

int vu_handle_set_vring_num(struct vu_dev *dev, struct vu_msg *msg)
{
    unsigned idx = msg->p.state.index, num = msg->p.state.num;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    if (num == 0 || num > VU_MAX_RING_SIZE || (num & (num - 1))) {
        log_limit_warning(&dev->log_limit, "%s: ring size %u is not a power of two in [1, %u]",
                          dev->q[idx].name, num, VU_MAX_RING_SIZE);
        return -EINVAL;
    }
    vu_queue_stop(dev, &dev->q[idx]);
    dev->q[idx].num = num;
    vu_queue_refresh(dev, idx);
    return 0;
}

int vu_handle_set_vring_addr(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_vring_addr *a = &msg->p.addr;
    int r = check_queue_index(dev, msg, a->index);

    if (r < 0) {
        return r;
    }
    /* Translation waits for the start: the memory table may come later. */
    vu_queue_stop(dev, &dev->q[a->index]);
    dev->q[a->index].addr = *a;
    dev->q[a->index].addr_set = true;
    vu_queue_refresh(dev, a->index);
    return 0;
}

int vu_handle_set_vring_base(struct vu_dev *dev, struct vu_msg *msg)
{
    unsigned idx = msg->p.state.index;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    /* A packed ring's base carries both indices and wrap counters (vq_setup). */
    if (msg->p.state.num > UINT16_MAX &&
        !(dev->features & (1ull << VIRTIO_F_RING_PACKED))) {
        log_limit_warning(&dev->log_limit, "%s: ring base %u does not fit a split ring index",
                          dev->q[idx].name, msg->p.state.num);
        return -EINVAL;
    }
    vu_queue_stop(dev, &dev->q[idx]);
    dev->q[idx].base = msg->p.state.num;
    vu_queue_refresh(dev, idx);
    return 0;
}

int vu_handle_get_vring_base(struct vu_dev *dev, struct vu_msg *msg,
                             struct vu_reply *reply)
{
    unsigned idx = msg->p.state.index;
    struct vu_queue *q;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    q = &dev->q[idx];
    vu_queue_stop(dev, q);
    /* The ring stays stopped until the front-end gives a kick fd again. */
    q->started = false;
    vu_close_fd(&q->kick_fd);
    reply->send = true;
    reply->size = sizeof(struct vhost_vring_state);
    reply->p.state.index = idx;
    reply->p.state.num = q->base;
    return 0;
}

/*
 * Kick, call and err fds must be eventfds: anything else can be unwatchable
 * (/dev/null), never drain (a pipe whose writer is gone) or block.  They
 * are made non-blocking here, once, so a front-end that lets a counter
 * fill up costs itself its notifications, never a thread of ours.
 */
static bool fd_is_eventfd(int fd)
{
    char path[32], link[32];
    struct stat st;
    ssize_t n;

    g_snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, link, sizeof(link) - 1);
    if (n >= 0) {
        link[n] = '\0';
        return strcmp(link, "anon_inode:[eventfd]") == 0;
    }
    /* Without /proc: at least no file, pipe or socket (anon inodes have no type). */
    return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == 0;
}

static int check_notify_fd(const struct vu_queue *q, const char *what, int fd)
{
    g_autoptr(GError) err = NULL;

    if (!fd_is_eventfd(fd)) {
        log_limit_warning(q->vq.log_limit, "%s: %s fd is not an eventfd; refused", q->name, what);
        return -EINVAL;
    }
    if (!g_unix_set_fd_nonblocking(fd, TRUE, &err)) {
        log_limit_warning(q->vq.log_limit, "%s: cannot make the %s eventfd non-blocking: %s",
                          q->name, what, err->message);
        return -EINVAL;
    }
    return 0;
}

int vu_handle_vring_fd(struct vu_dev *dev, struct vu_msg *msg)
{
    uint64_t v = msg->p.u64;
    unsigned idx = v & VHOST_USER_VRING_IDX_MASK;
    bool nofd = v & VHOST_USER_VRING_NOFD_MASK;
    struct vu_queue *q;
    int fd, r;

    r = check_queue_index(dev, msg, idx);
    if (r < 0) {
        return r;
    }
    q = &dev->q[idx];
    fd = nofd ? -1 : vu_take_fd(msg, 0);
    if (!nofd && fd < 0) {
        log_limit_warning(q->vq.log_limit, "%s: %s without an fd and without the no-fd flag",
                          q->name, vhost_user_request_name(msg->hdr.request));
        return -EINVAL;
    }
    if (fd >= 0) {
        static const char *const what[] = {
            [VHOST_USER_SET_VRING_KICK] = "kick", [VHOST_USER_SET_VRING_CALL] = "call",
            [VHOST_USER_SET_VRING_ERR] = "err",
        };

        r = check_notify_fd(q, what[msg->hdr.request], fd);
        if (r < 0) {
            close(fd);
            return r;
        }
    }
    switch (msg->hdr.request) {
    case VHOST_USER_SET_VRING_KICK:
        /* The device watches the kick fd from its thread: never swap it under it. */
        vu_queue_stop(dev, q);
        vu_close_fd(&q->kick_fd);
        q->kick_fd = fd;
        q->started = true;
        vu_queue_refresh(dev, idx);
        break;
    case VHOST_USER_SET_VRING_CALL:
        queue_replace_notify_fd(dev, idx, &q->call_fd, &q->vq.call_fd, fd, true);
        break;
    default:
        queue_replace_notify_fd(dev, idx, &q->err_fd, &q->vq.err_fd, fd, false);
        break;
    }
    return 0;
}

int vu_handle_set_vring_enable(struct vu_dev *dev, struct vu_msg *msg)
{
    unsigned idx = msg->p.state.index;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    if (msg->p.state.num > 1) {
        log_limit_warning(&dev->log_limit, "%s: SET_VRING_ENABLE with %u (not 0 or 1)",
                          dev->q[idx].name, msg->p.state.num);
        return -EINVAL;
    }
    dev->q[idx].enabled = msg->p.state.num;
    vu_queue_refresh(dev, idx);
    return 0;
}
