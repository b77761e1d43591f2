/*
 * The back-end side of one vhost-user connection (QEMU
 * docs/interop/vhost-user.rst).  It frames and validates each message
 * from the front-end, keeps the memory table, the vring configuration and
 * the inflight-tracking area, and decides when a queue runs: it calls the
 * device's queue_start once a queue has a ring size, translatable
 * addresses, a kick fd (or polling) and is enabled, and queue_stop before
 * anything the running queue depends on changes.  Everything the front-end
 * sends is untrusted: a malformed message ends the connection, a failed
 * request gets an error reply when the front-end asked for one.
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
#include "vhost-user-server.h"

/*
 * A front-end that stops sending in the middle of a message (or stops
 * reading our reply) loses its connection after this long.
 */
#define VU_DEFAULT_TIMEOUT_MS 5000

/* Messages handled per wake-up, so one chatty front-end cannot starve the others. */
#define VU_DISPATCH_BUDGET 32

/* process(): the message waits for quiesced queues (see "holding"). */
#define VU_HELD 1

#define VU_MAX_RING_SIZE 32768u

/*
 * Inflight tracking for rings up to QEMU's largest (VIRTQUEUE_MAX_SIZE):
 * at most 66 queues x 16 KiB, about 1 MiB per connection.  Larger rings
 * run untracked, rather than let each front-end make us commit 33 MiB.
 */
#define VU_INFLIGHT_MAX_QUEUE_SIZE 1024u

#define VU_RING_FEATURES ((1ull << VIRTIO_F_VERSION_1) |            \
                          (1ull << VIRTIO_RING_F_INDIRECT_DESC) |   \
                          (1ull << VIRTIO_RING_F_EVENT_IDX) |       \
                          (1ull << VIRTIO_F_NOTIFY_ON_EMPTY) |      \
                          (1ull << VHOST_USER_F_PROTOCOL_FEATURES))

#define VU_PROTOCOL_DEFAULT ((1ull << VHOST_USER_PROTOCOL_F_MQ) |                  \
                             (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |           \
                             (1ull << VHOST_USER_PROTOCOL_F_BACKEND_REQ) |         \
                             (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) |      \
                             (1ull << VHOST_USER_PROTOCOL_F_RESET_DEVICE) |        \
                             (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS))
/* What this server implements; a configuration may offer less. */
#define VU_PROTOCOL_SUPPORTED (VU_PROTOCOL_DEFAULT | (1ull << VHOST_USER_PROTOCOL_F_STATUS))

struct vu_queue {
    struct virtqueue vq;
    char name[48];
    unsigned num;                /* 0 until SET_VRING_NUM */
    struct vhost_vring_addr addr;
    bool addr_set;
    uint16_t base;               /* where the next start resumes */
    bool started;                /* kick fd or polling given since the last stop */
    bool enabled;                /* SET_VRING_ENABLE (matters with PROTOCOL_FEATURES) */
    bool running;                /* between queue_start and queue_stop */
    bool quiesced;               /* ops->queue_quiesce called, not stopped or resumed yet */
    int kick_fd;
    int call_fd;
    int err_fd;
};

struct vu_inflight {
    void *map;                   /* what to munmap */
    size_t map_size;
    uint8_t *area;               /* first queue region */
    uint16_t num_queues;
    uint16_t queue_size;
    int guard;                   /* guest-mem-guard handle */
};

/* One received message and the fds that came with it (-1 once taken). */
struct vu_msg {
    struct vhost_user_hdr hdr;
    union vhost_user_payload p;
    int fds[VHOST_USER_MAX_FDS];
    unsigned nfds;
};

struct vu_dev {
    int fd;
    char *name;
    const struct vu_dev_ops *ops;
    void *opaque;
    unsigned num_queues;
    unsigned max_mem_slots;
    uint64_t offered_features;
    uint64_t features;           /* acked by SET_FEATURES */
    uint64_t offered_protocol;
    uint64_t protocol;           /* acked by SET_PROTOCOL_FEATURES */
    int backend_fd;
    uint8_t status;
    struct guest_mem mem;
    struct vu_inflight inflight;
    unsigned timeout_ms;         /* for one whole message, or for a reply to be taken */
    int64_t deadline;            /* monotonic µs; 0 while no message is under way */
    struct vu_msg in;            /* the message being received */
    size_t in_got;               /* its bytes so far (header, then payload) */
    bool in_extra_fds;           /* it carried more fds than a message may */
    uint8_t out[sizeof(struct vhost_user_hdr) + sizeof(union vhost_user_payload)];
    size_t out_len, out_done;    /* a reply the peer has not taken yet */
    int out_fd;                  /* sent with its first byte, then closed */
    bool held;                   /* dev->in waits for quiesced queues (see "holding") */
    bool replaying;              /* dev->in is being handled after being held */
    bool closing;                /* vu_dev_quiesce_all: served no more */
    unsigned quiesce_pending;    /* quiesced queues with I/O still in flight */
    struct vu_queue q[];
};

/* A reply that a handler prepared; fd (if >= 0) is closed after sending. */
struct vu_reply {
    bool send;
    uint32_t size;
    union vhost_user_payload p;
    int fd;
};

static int take_fd(struct vu_msg *msg, unsigned i)
{
    int fd;

    if (i >= msg->nfds) {
        return -1;
    }
    fd = msg->fds[i];
    msg->fds[i] = -1;
    return fd;
}

static void close_msg_fds(struct vu_msg *msg)
{
    for (unsigned i = 0; i < msg->nfds; i++) {
        if (msg->fds[i] >= 0) {
            close(msg->fds[i]);
            msg->fds[i] = -1;
        }
    }
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static bool mem_lost(const struct vu_dev *dev);

/* ---- framing ---------------------------------------------------------- */

/*
 * The socket is non-blocking and a message is assembled across as many
 * wake-ups as its sender takes: the main loop serves every connection, so
 * a front-end that sends half a message, trickles bytes or never reads its
 * replies must cost only its own connection (the caller enforces the
 * deadline, see vu_dev_deadline).  Reads never go past the end of the
 * current message, so the fds that ride on the next message's bytes are
 * never taken with this one's.
 */
static int recv_some(struct vu_dev *dev, void *buf, size_t len)
{
    union {
        char buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = { .iov_base = buf, .iov_len = len };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control.buf, .msg_controllen = sizeof(control.buf),
    };
    struct vu_msg *msg = &dev->in;
    ssize_t n;

    do {
        n = recvmsg(dev->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        size_t nfd;
        int *fds;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        fds = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < nfd; i++) {
            int fd;

            memcpy(&fd, &fds[i], sizeof(fd));
            if (msg->nfds < VHOST_USER_MAX_FDS) {
                msg->fds[msg->nfds++] = fd;
            } else {
                close(fd);
                dev->in_extra_fds = true;
            }
        }
    }
    /* The kernel closed what did not fit our control buffer. */
    if (mh.msg_flags & MSG_CTRUNC) {
        dev->in_extra_fds = true;
    }
    return (int)n;
}

/*
 * Reads what has arrived of the current message.  Returns 1 when it is
 * complete (header checked, payload read), 0 when more must arrive,
 * -ECONNRESET at the end of the stream, another -errno otherwise (logged).
 */
static int receive(struct vu_dev *dev)
{
    struct vu_msg *msg = &dev->in;
    const size_t hlen = sizeof(msg->hdr);

    for (;;) {
        size_t want;
        void *at;
        int n;

        if (dev->in_got < hlen) {
            at = (uint8_t *)&msg->hdr + dev->in_got;
            want = hlen - dev->in_got;
        } else if (dev->in_got - hlen < msg->hdr.size) {
            at = (uint8_t *)&msg->p + (dev->in_got - hlen);
            want = msg->hdr.size - (dev->in_got - hlen);
        } else {
            return 1;
        }
        n = recv_some(dev, at, want);
        if (n == -EAGAIN) {
            return 0;
        }
        if (n <= 0) {
            if (mem_lost(dev)) {
                /* The SIGBUS guard shut the socket: say why, once, here. */
                g_warning("%s: the front-end truncated shared memory under us; connection "
                          "dropped", dev->name);
                return -ECONNRESET;
            }
            if (n == 0 && dev->in_got == 0) {
                g_message("%s: front-end closed the connection", dev->name);
                return -ECONNRESET;
            }
            g_warning("%s: cannot read a message: %s", dev->name,
                      n == 0 ? "connection closed mid-message" : g_strerror(-n));
            return n == 0 ? -ECONNRESET : n;
        }
        if (dev->in_got == 0) {
            /* The whole message, not each byte, has to arrive in time. */
            dev->deadline = g_get_monotonic_time() + (int64_t)dev->timeout_ms * 1000;
        }
        dev->in_got += (size_t)n;
        if (dev->in_got == hlen) {
            if ((msg->hdr.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION) {
                g_warning("%s: request %u (%s) has protocol version %u, not %u", dev->name,
                          msg->hdr.request, vhost_user_request_name(msg->hdr.request),
                          msg->hdr.flags & VHOST_USER_VERSION_MASK, VHOST_USER_VERSION);
                return -EPROTO;
            }
            if (msg->hdr.size > sizeof(msg->p)) {
                g_warning("%s: request %u (%s) with a %u-byte payload (at most %zu)",
                          dev->name, msg->hdr.request,
                          vhost_user_request_name(msg->hdr.request), msg->hdr.size,
                          sizeof(msg->p));
                return -EPROTO;
            }
        }
    }
}

/*
 * Sends what the socket takes of the pending reply.  0 when nothing is
 * left, -EAGAIN when the peer must read first, another -errno on error.
 */
static int flush_output(struct vu_dev *dev)
{
    while (dev->out_done < dev->out_len) {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec iov = {
            .iov_base = dev->out + dev->out_done, .iov_len = dev->out_len - dev->out_done,
        };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        /* The fd rides on the first byte only. */
        if (dev->out_fd >= 0 && dev->out_done == 0) {
            struct cmsghdr *c;

            memset(&control, 0, sizeof(control));
            mh.msg_control = control.buf;
            mh.msg_controllen = sizeof(control.buf);
            c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &dev->out_fd, sizeof(int));
        }
        n = sendmsg(dev->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            int err = errno;

            if (err == EINTR) {
                continue;
            }
            if (err == EAGAIN || err == EWOULDBLOCK) {
                return -EAGAIN;
            }
            g_warning("%s: cannot send a reply: %s", dev->name, g_strerror(err));
            return -err;
        }
        if (n > 0) {
            close_fd(&dev->out_fd);
        }
        dev->out_done += (size_t)n;
    }
    dev->out_len = dev->out_done = 0;
    close_fd(&dev->out_fd);
    return 0;
}

/* Queues a reply (taking fd, if >= 0) and sends what the socket takes now. */
static int send_reply(struct vu_dev *dev, uint32_t request, const void *payload,
                      uint32_t size, int fd)
{
    struct vhost_user_hdr hdr = {
        .request = request,
        .flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK,
        .size = size,
    };
    int r;

    g_assert(size <= sizeof(union vhost_user_payload) && dev->out_len == 0);
    memcpy(dev->out, &hdr, sizeof(hdr));
    memcpy(dev->out + sizeof(hdr), payload, size);
    dev->out_len = sizeof(hdr) + size;
    dev->out_done = 0;
    dev->out_fd = fd;
    r = flush_output(dev);
    return r == -EAGAIN ? 0 : r;
}

/*
 * The payload size each request must carry, or -1 when any size is
 * acceptable (requests we do not interpret).  SET_MEM_TABLE is checked
 * by its handler's caller since its size depends on nregions.
 */
static int expected_size(uint32_t request)
{
    switch (request) {
    case VHOST_USER_GET_FEATURES:
    case VHOST_USER_GET_PROTOCOL_FEATURES:
    case VHOST_USER_SET_OWNER:
    case VHOST_USER_RESET_OWNER:
    case VHOST_USER_GET_QUEUE_NUM:
    case VHOST_USER_GET_MAX_MEM_SLOTS:
    case VHOST_USER_SET_BACKEND_REQ_FD:
    case VHOST_USER_RESET_DEVICE:
    case VHOST_USER_GET_STATUS:
        return 0;
    case VHOST_USER_SET_FEATURES:
    case VHOST_USER_SET_PROTOCOL_FEATURES:
    case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL:
    case VHOST_USER_SET_VRING_ERR:
    case VHOST_USER_SET_STATUS:
        return sizeof(uint64_t);
    case VHOST_USER_SET_VRING_NUM:
    case VHOST_USER_SET_VRING_BASE:
    case VHOST_USER_GET_VRING_BASE:
    case VHOST_USER_SET_VRING_ENABLE:
        return sizeof(struct vhost_vring_state);
    case VHOST_USER_SET_VRING_ADDR:
        return sizeof(struct vhost_vring_addr);
    case VHOST_USER_ADD_MEM_REG:
    case VHOST_USER_REM_MEM_REG:
        return sizeof(struct vhost_user_mem_reg);
    case VHOST_USER_GET_INFLIGHT_FD:
    case VHOST_USER_SET_INFLIGHT_FD:
        return sizeof(struct vhost_user_inflight);
    default:
        return -1;
    }
}

static int check_size(struct vu_dev *dev, const struct vu_msg *msg)
{
    uint32_t req = msg->hdr.request, size = msg->hdr.size;
    int want = expected_size(req);

    if (req == VHOST_USER_SET_MEM_TABLE) {
        const size_t head = offsetof(struct vhost_user_memory, regions);

        if (size >= head && msg->p.memory.nregions <= VHOST_USER_MEM_REGIONS &&
            size >= head + msg->p.memory.nregions * sizeof(struct vhost_user_mem_region)) {
            return 0;
        }
        g_warning("%s: SET_MEM_TABLE with payload of %u bytes for %u regions", dev->name,
                  size, size >= head ? msg->p.memory.nregions : 0);
        return -EPROTO;
    }
    if (want >= 0 && size != (uint32_t)want) {
        g_warning("%s: %s with a %u-byte payload (expected %d)", dev->name,
                  vhost_user_request_name(req), size, want);
        return -EPROTO;
    }
    return 0;
}

/* ---- queue lifecycle ---------------------------------------------------- */

static bool queue_enabled(const struct vu_dev *dev, const struct vu_queue *q)
{
    /* Without PROTOCOL_FEATURES there is no SET_VRING_ENABLE: a kick enables. */
    return q->enabled || !(dev->features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES));
}

static bool queue_wanted(const struct vu_dev *dev, const struct vu_queue *q)
{
    return q->num && q->addr_set && q->started && queue_enabled(dev, q);
}

static size_t inflight_queue_bytes(unsigned queue_size)
{
    return sizeof(struct vhost_user_inflight_queue) +
           (size_t)queue_size * sizeof(struct vhost_user_inflight_desc);
}

static int queue_attach_inflight(struct vu_dev *dev, struct vu_queue *q, unsigned idx)
{
    struct vhost_user_inflight_queue *iq;
    bool restore;

    if (!dev->inflight.area || idx >= dev->inflight.num_queues) {
        return 0;
    }
    /*
     * Slices are sized for the device's maximum ring; a driver may choose
     * a smaller ring (its entries fit the slice), never a larger one.
     */
    if (q->num > dev->inflight.queue_size) {
        g_warning("%s: ring of %u entries does not fit the inflight area (%u per queue); "
                  "running without inflight tracking", q->name, q->num,
                  dev->inflight.queue_size);
        return 0;
    }
    iq = (void *)(dev->inflight.area + idx * inflight_queue_bytes(dev->inflight.queue_size));
    /* A zero version means nobody tracked this queue yet: nothing to resubmit. */
    restore = iq->version != 0;
    if (restore && iq->desc_num != q->num) {
        /* Tracking of a differently sized ring (before a guest reset) says nothing now. */
        g_warning("%s: inflight area tracked a %u-entry ring, the ring now has %u entries; "
                  "starting afresh", q->name, iq->desc_num, q->num);
        restore = false;
    }
    if (!restore) {
        iq->version = 1;
        iq->desc_num = q->num;
    }
    return vq_set_inflight(&q->vq, iq, restore);
}

static void queue_stop(struct vu_dev *dev, struct vu_queue *q)
{
    if (!q->running) {
        return;
    }
    if (dev->ops && dev->ops->queue_stop) {
        dev->ops->queue_stop(dev->opaque, q->vq.index, &q->vq);
    }
    q->base = q->vq.last_avail_idx;
    q->running = false;
    q->quiesced = false;
    g_debug("%s: stopped at avail index %u", q->name, q->base);
}

static void queue_try_start(struct vu_dev *dev, struct vu_queue *q, unsigned idx)
{
    uint64_t n = q->num;
    /* used_event/avail_event exist only with EVENT_IDX (SeaBIOS omits them). */
    uint64_t ev = dev->features & (1ull << VIRTIO_RING_F_EVENT_IDX) ? 2 : 0;
    void *desc, *avail, *used;
    int r;

    desc = guest_mem_uva_ptr(&dev->mem, q->addr.desc_user_addr, 16 * n);
    avail = guest_mem_uva_ptr(&dev->mem, q->addr.avail_user_addr, 4 + 2 * n + ev);
    used = guest_mem_uva_ptr(&dev->mem, q->addr.used_user_addr, 4 + 8 * n + ev);
    if (!desc || !avail || !used) {
        if (dev->mem.nregions == 0) {
            g_debug("%s: waiting for a memory table to translate the ring", q->name);
        } else {
            g_warning("%s: ring (desc 0x%llx avail 0x%llx used 0x%llx, %u entries) is not "
                      "inside the memory table; queue stays stopped", q->name,
                      (unsigned long long)q->addr.desc_user_addr,
                      (unsigned long long)q->addr.avail_user_addr,
                      (unsigned long long)q->addr.used_user_addr, q->num);
        }
        return;
    }
    /* vq_setup also drops what a previous run's inflight restore left behind. */
    r = vq_setup(&q->vq, &dev->mem, q->num, desc, avail, used, dev->features, q->base);
    if (r < 0) {
        g_warning("%s: cannot set up the ring: %s; queue stays stopped", q->name,
                  g_strerror(-r));
        return;
    }
    q->vq.kick_fd = q->kick_fd;
    q->vq.call_fd = q->call_fd;
    q->vq.err_fd = q->err_fd;
    r = queue_attach_inflight(dev, q, idx);
    if (r < 0) {
        g_warning("%s: cannot attach the inflight area: %s; queue stays stopped", q->name,
                  g_strerror(-r));
        return;
    }
    r = dev->ops && dev->ops->queue_start ?
        dev->ops->queue_start(dev->opaque, idx, &q->vq) : 0;
    if (r < 0) {
        g_warning("%s: device refused to start the queue: %s", q->name, g_strerror(-r));
        return;
    }
    q->running = true;
    g_debug("%s: started (%u entries, base %u, %s)", q->name, q->num, q->base,
            q->kick_fd >= 0 ? "kick fd" : "polling");
}

/* Brings the queue's running state in line with its configuration. */
static void queue_refresh(struct vu_dev *dev, unsigned idx)
{
    struct vu_queue *q = &dev->q[idx];

    if (q->running && !queue_wanted(dev, q)) {
        queue_stop(dev, q);
    } else if (!q->running && queue_wanted(dev, q)) {
        queue_try_start(dev, q, idx);
    }
}

static void stop_all(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        queue_stop(dev, &dev->q[i]);
    }
}

static void refresh_all(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        queue_refresh(dev, i);
    }
}

/* After a memory table change (queues stopped): tell the device, restart on the new table. */
static void memory_changed(struct vu_dev *dev)
{
    if (dev->ops && dev->ops->mem_changed) {
        dev->ops->mem_changed(dev->opaque);
    }
    refresh_all(dev);
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
static void hang_up_hostile(struct vu_dev *dev, const char *name, const char *what)
{
    g_warning("%s: the front-end's %s eventfd blocked (its O_NONBLOCK was cleared and the "
              "counter filled); dropping the connection", name, what);
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
        queue_stop(dev, q);
        close_fd(slot);
        *slot = fd;
        queue_refresh(dev, idx);
        return;
    }
    if (is_call) {
        int r = notify_fd_signal(*slot);

        if (r == -ETIMEDOUT) {
            hang_up_hostile(dev, q->name, "call");
        } else if (r < 0 && r != -EAGAIN) {
            g_warning("%s: cannot signal the new call fd: %s", q->name, g_strerror(-r));
        }
    }
}

static void queue_reset(struct vu_dev *dev, struct vu_queue *q)
{
    queue_stop(dev, q);
    vq_cleanup(&q->vq);
    close_fd(&q->kick_fd);
    close_fd(&q->call_fd);
    close_fd(&q->err_fd);
    q->num = 0;
    memset(&q->addr, 0, sizeof(q->addr));
    q->addr_set = false;
    q->base = 0;
    q->started = false;
    q->enabled = false;
}

static void reset_device(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        queue_reset(dev, &dev->q[i]);
    }
    /*
     * Nothing is in flight across a virtio reset: the next driver's rings
     * must not be "restored" from the previous driver's tracking.
     */
    for (unsigned i = 0; dev->inflight.area && i < dev->inflight.num_queues; i++) {
        struct vhost_user_inflight_queue *iq =
            (void *)(dev->inflight.area + i * inflight_queue_bytes(dev->inflight.queue_size));

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

/* ---- holding a message until its queues are quiet ----------------------- */

/*
 * Backend I/O cannot be recalled, so stopping a request queue means
 * waiting for what it has in flight, which a slow backend (an unreachable
 * iSCSI portal) can make last tens of seconds.  The main thread serves
 * every connection and must not wait: before handling a message that
 * will stop queues, the server quiesces them (they take no new request)
 * and, if any still has I/O in flight, holds the message — the connection
 * is not read meanwhile, which vhost-user's request/reply order allows
 * (the front-end waits for this message's reply before sending another)
 * — and handles it when the device reports the queues quiet, at which
 * point queue_stop no longer waits.  The message timeout does not run
 * while a message is held: the wait is ours, not the front-end's.
 *
 * Which queues a message stops is predicted here and must cover what the
 * handlers stop; a queue predicted but left running is resumed after the
 * handler, and one stopped without prediction (a dup3 failure while
 * swapping a call fd, say) falls back to a stop that waits.
 */
static void quiesce_done(void *arg)
{
    struct vu_dev *dev = arg;

    if (--dev->quiesce_pending == 0 && dev->ops->wake) {
        dev->ops->wake(dev->opaque);
    }
}

static void quiesce_queue(struct vu_dev *dev, unsigned idx)
{
    struct vu_queue *q;

    if (idx >= dev->num_queues || !dev->ops || !dev->ops->queue_quiesce) {
        return;
    }
    q = &dev->q[idx];
    if (!q->running || q->quiesced) {
        return;
    }
    q->quiesced = true;
    if (dev->ops->queue_quiesce(dev->opaque, idx, quiesce_done, dev) > 0) {
        dev->quiesce_pending++;
    }
}

static void quiesce_every_queue(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        quiesce_queue(dev, i);
    }
}

/* The queues msg's handler will stop (check_size has accepted msg). */
static void quiesce_for(struct vu_dev *dev, const struct vu_msg *msg)
{
    switch (msg->hdr.request) {
    case VHOST_USER_SET_FEATURES:
        if ((msg->p.u64 & dev->offered_features) != dev->features) {
            quiesce_every_queue(dev);
        }
        break;
    case VHOST_USER_SET_STATUS:
        if (msg->p.u64 == 0) {
            quiesce_every_queue(dev);
        }
        break;
    case VHOST_USER_RESET_OWNER:
    case VHOST_USER_RESET_DEVICE:
    case VHOST_USER_SET_MEM_TABLE:
    case VHOST_USER_ADD_MEM_REG:
    case VHOST_USER_REM_MEM_REG:
    case VHOST_USER_SET_INFLIGHT_FD:
        quiesce_every_queue(dev);
        break;
    case VHOST_USER_SET_VRING_NUM:
    case VHOST_USER_SET_VRING_BASE:
    case VHOST_USER_GET_VRING_BASE:
        quiesce_queue(dev, msg->p.state.index);
        break;
    case VHOST_USER_SET_VRING_ENABLE:
        if (msg->p.state.num == 0) {
            quiesce_queue(dev, msg->p.state.index);
        }
        break;
    case VHOST_USER_SET_VRING_ADDR:
        quiesce_queue(dev, msg->p.addr.index);
        break;
    case VHOST_USER_SET_VRING_KICK:
        quiesce_queue(dev, msg->p.u64 & VHOST_USER_VRING_IDX_MASK);
        break;
    case VHOST_USER_SET_VRING_CALL:
    case VHOST_USER_SET_VRING_ERR:
        /* A running queue's fd is swapped in place; only dropping it stops the queue. */
        if (msg->p.u64 & VHOST_USER_VRING_NOFD_MASK) {
            quiesce_queue(dev, msg->p.u64 & VHOST_USER_VRING_IDX_MASK);
        }
        break;
    default:
        break;
    }
}

/* After a message's handler: queues it quiesced but did not stop run again. */
static void resume_unstopped(struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->num_queues; i++) {
        struct vu_queue *q = &dev->q[i];

        if (q->quiesced) {
            q->quiesced = false;
            if (q->running) {
                dev->ops->queue_resume(dev->opaque, i);
            }
        }
    }
}

bool vu_dev_quiesce_all(struct vu_dev *dev)
{
    dev->closing = true;
    dev->deadline = 0;
    quiesce_every_queue(dev);
    return dev->quiesce_pending == 0;
}

/* ---- request handlers --------------------------------------------------- */

static void reply_u64(struct vu_reply *reply, uint64_t v)
{
    reply->send = true;
    reply->size = sizeof(uint64_t);
    reply->p.u64 = v;
}

static int check_queue_index(struct vu_dev *dev, const struct vu_msg *msg, uint64_t idx)
{
    if (idx >= dev->num_queues) {
        g_warning("%s: %s for queue %llu, but there are only %u queues", dev->name,
                  vhost_user_request_name(msg->hdr.request), (unsigned long long)idx,
                  dev->num_queues);
        return -EINVAL;
    }
    return 0;
}

static int handle_set_features(struct vu_dev *dev, struct vu_msg *msg)
{
    uint64_t f = msg->p.u64;
    uint64_t changed = f ^ dev->features;

    if (f & ~dev->offered_features) {
        /*
         * QEMU's vhost-user-scsi filters only the ring bits through the
         * back-end and acks its own device bits (e.g. VIRTIO_SCSI_F_CHANGE)
         * whatever we offered; like libvhost-user, accept and ignore them.
         */
        g_message("%s: SET_FEATURES 0x%llx: ignoring features we did not offer (0x%llx)",
                  dev->name, (unsigned long long)f,
                  (unsigned long long)(f & ~dev->offered_features));
        f &= dev->offered_features;
        changed = f ^ dev->features;
    }
    dev->features = f;
    /* Running rings were set up with the old ring features: restart them. */
    if (changed) {
        for (unsigned i = 0; i < dev->num_queues; i++) {
            queue_stop(dev, &dev->q[i]);
            queue_refresh(dev, i);
        }
    }
    return 0;
}

static int handle_set_protocol_features(struct vu_dev *dev, struct vu_msg *msg)
{
    uint64_t f = msg->p.u64;

    if (f & ~dev->offered_protocol) {
        g_warning("%s: SET_PROTOCOL_FEATURES 0x%llx acks protocol features we did not "
                  "offer (0x%llx)", dev->name, (unsigned long long)f,
                  (unsigned long long)(f & ~dev->offered_protocol));
        return -EINVAL;
    }
    dev->protocol = f;
    return 0;
}

/*
 * Mapping past the end of a file succeeds but the first access SIGBUSes:
 * refuse a region its (regular or memfd) file cannot back.
 */
static int check_region_fd(struct vu_dev *dev, int fd, const struct vhost_user_mem_region *r)
{
    struct stat st;

    if (fstat(fd, &st) < 0) {
        int err = errno;

        g_warning("%s: cannot stat the fd of region gpa 0x%llx: %s", dev->name,
                  (unsigned long long)r->guest_phys_addr, g_strerror(err));
        return -err;
    }
    if (S_ISREG(st.st_mode) &&
        (r->mmap_offset > (uint64_t)st.st_size ||
         r->memory_size > (uint64_t)st.st_size - r->mmap_offset)) {
        g_warning("%s: region gpa 0x%llx (0x%llx bytes at offset 0x%llx) lies beyond the "
                  "end of its %lld-byte file", dev->name,
                  (unsigned long long)r->guest_phys_addr, (unsigned long long)r->memory_size,
                  (unsigned long long)r->mmap_offset, (long long)st.st_size);
        return -EINVAL;
    }
    return 0;
}

static int handle_set_mem_table(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_memory *m = &msg->p.memory;
    struct guest_mem *table;

    if (msg->nfds < m->nregions) {
        g_warning("%s: SET_MEM_TABLE with %u regions carries only %u fds", dev->name,
                  m->nregions, msg->nfds);
        return -EINVAL;
    }
    /* Map everything first, so a bad table leaves the old one in place. */
    table = g_new(struct guest_mem, 1);
    guest_mem_init(table);
    table->owner_fd = dev->fd;
    for (unsigned i = 0; i < m->nregions; i++) {
        const struct vhost_user_mem_region *r = &m->regions[i];
        int ret = check_region_fd(dev, msg->fds[i], r);

        if (ret == 0) {
            ret = guest_mem_map_fd(table, take_fd(msg, i), r->guest_phys_addr,
                                   r->memory_size, r->userspace_addr, r->mmap_offset);
        }
        if (ret < 0) {
            g_warning("%s: SET_MEM_TABLE region %u (gpa 0x%llx size 0x%llx) rejected: %s",
                      dev->name, i, (unsigned long long)r->guest_phys_addr,
                      (unsigned long long)r->memory_size, g_strerror(-ret));
            guest_mem_clear(table);
            g_free(table);
            return ret;
        }
    }
    stop_all(dev);
    guest_mem_clear(&dev->mem);
    dev->mem = *table;
    g_free(table);
    memory_changed(dev);
    return 0;
}

static int handle_add_mem_reg(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_mem_region *r = &msg->p.mem_reg.region;
    int fd = take_fd(msg, 0);
    int ret;

    if (fd < 0) {
        g_warning("%s: ADD_MEM_REG without an fd", dev->name);
        return -EINVAL;
    }
    ret = check_region_fd(dev, fd, r);
    if (ret < 0) {
        close(fd);
        return ret;
    }
    /*
     * A device re-created on the same connection (hot-unplug then plug
     * with one chardev) starts from an empty table on QEMU's side and adds
     * every region again: an identical region replaces the old mapping.
     */
    bool replaces = false;
    for (unsigned i = 0; i < dev->mem.nregions; i++) {
        const struct guest_mem_region *old = &dev->mem.r[i];

        if (old->gpa == r->guest_phys_addr && old->size == r->memory_size &&
            old->uva == r->userspace_addr) {
            replaces = true;
        }
    }
    if (!replaces && dev->mem.nregions >= dev->max_mem_slots) {
        g_warning("%s: ADD_MEM_REG beyond the %u memory slots we announced", dev->name,
                  dev->max_mem_slots);
        close(fd);
        return -ENOSPC;
    }
    /* Running queues read the table from their threads: change it while they are stopped. */
    stop_all(dev);
    if (replaces) {
        g_message("%s: ADD_MEM_REG replaces the identical region at gpa 0x%llx", dev->name,
                  (unsigned long long)r->guest_phys_addr);
        guest_mem_remove(&dev->mem, r->guest_phys_addr, r->memory_size);
    }
    ret = guest_mem_map_fd(&dev->mem, fd, r->guest_phys_addr, r->memory_size,
                           r->userspace_addr, r->mmap_offset);
    if (ret < 0) {
        g_warning("%s: ADD_MEM_REG (gpa 0x%llx size 0x%llx) rejected: %s", dev->name,
                  (unsigned long long)r->guest_phys_addr,
                  (unsigned long long)r->memory_size, g_strerror(-ret));
    }
    memory_changed(dev);
    return ret;
}

static int handle_rem_mem_reg(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_mem_region *r = &msg->p.mem_reg.region;
    bool found = false;

    /* The spec identifies the region by gpa, size and uva; an fd, if any, is just closed. */
    for (unsigned i = 0; i < dev->mem.nregions; i++) {
        const struct guest_mem_region *g = &dev->mem.r[i];

        if (g->gpa == r->guest_phys_addr && g->size == r->memory_size &&
            g->uva == r->userspace_addr) {
            found = true;
            break;
        }
    }
    if (!found) {
        g_warning("%s: REM_MEM_REG for an unknown region (gpa 0x%llx size 0x%llx uva 0x%llx)",
                  dev->name, (unsigned long long)r->guest_phys_addr,
                  (unsigned long long)r->memory_size, (unsigned long long)r->userspace_addr);
        return -ENOENT;
    }
    stop_all(dev);
    guest_mem_remove(&dev->mem, r->guest_phys_addr, r->memory_size);
    memory_changed(dev);
    return 0;
}

static int handle_set_vring_num(struct vu_dev *dev, struct vu_msg *msg)
{
    unsigned idx = msg->p.state.index, num = msg->p.state.num;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    if (num == 0 || num > VU_MAX_RING_SIZE || (num & (num - 1))) {
        g_warning("%s: ring size %u is not a power of two in [1, %u]", dev->q[idx].name,
                  num, VU_MAX_RING_SIZE);
        return -EINVAL;
    }
    queue_stop(dev, &dev->q[idx]);
    dev->q[idx].num = num;
    queue_refresh(dev, idx);
    return 0;
}

static int handle_set_vring_addr(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_vring_addr *a = &msg->p.addr;
    int r = check_queue_index(dev, msg, a->index);

    if (r < 0) {
        return r;
    }
    /* Translation waits for the start: the memory table may come later. */
    queue_stop(dev, &dev->q[a->index]);
    dev->q[a->index].addr = *a;
    dev->q[a->index].addr_set = true;
    queue_refresh(dev, a->index);
    return 0;
}

static int handle_set_vring_base(struct vu_dev *dev, struct vu_msg *msg)
{
    unsigned idx = msg->p.state.index;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    if (msg->p.state.num > UINT16_MAX) {
        g_warning("%s: ring base %u does not fit a split ring index", dev->q[idx].name,
                  msg->p.state.num);
        return -EINVAL;
    }
    queue_stop(dev, &dev->q[idx]);
    dev->q[idx].base = msg->p.state.num;
    queue_refresh(dev, idx);
    return 0;
}

static int handle_get_vring_base(struct vu_dev *dev, struct vu_msg *msg,
                                 struct vu_reply *reply)
{
    unsigned idx = msg->p.state.index;
    struct vu_queue *q;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    q = &dev->q[idx];
    queue_stop(dev, q);
    /* The ring stays stopped until the front-end gives a kick fd again. */
    q->started = false;
    close_fd(&q->kick_fd);
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

static int check_notify_fd(const char *name, const char *what, int fd)
{
    g_autoptr(GError) err = NULL;

    if (!fd_is_eventfd(fd)) {
        g_warning("%s: %s fd is not an eventfd; refused", name, what);
        return -EINVAL;
    }
    if (!g_unix_set_fd_nonblocking(fd, TRUE, &err)) {
        g_warning("%s: cannot make the %s eventfd non-blocking: %s", name, what, err->message);
        return -EINVAL;
    }
    return 0;
}

static int handle_vring_fd(struct vu_dev *dev, struct vu_msg *msg)
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
    fd = nofd ? -1 : take_fd(msg, 0);
    if (!nofd && fd < 0) {
        g_warning("%s: %s without an fd and without the no-fd flag", q->name,
                  vhost_user_request_name(msg->hdr.request));
        return -EINVAL;
    }
    if (fd >= 0) {
        static const char *const what[] = {
            [VHOST_USER_SET_VRING_KICK] = "kick", [VHOST_USER_SET_VRING_CALL] = "call",
            [VHOST_USER_SET_VRING_ERR] = "err",
        };

        r = check_notify_fd(q->name, what[msg->hdr.request], fd);
        if (r < 0) {
            close(fd);
            return r;
        }
    }
    switch (msg->hdr.request) {
    case VHOST_USER_SET_VRING_KICK:
        /* The device watches the kick fd from its thread: never swap it under it. */
        queue_stop(dev, q);
        close_fd(&q->kick_fd);
        q->kick_fd = fd;
        q->started = true;
        queue_refresh(dev, idx);
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

static int handle_set_vring_enable(struct vu_dev *dev, struct vu_msg *msg)
{
    unsigned idx = msg->p.state.index;
    int r = check_queue_index(dev, msg, msg->p.state.index);

    if (r < 0) {
        return r;
    }
    if (msg->p.state.num > 1) {
        g_warning("%s: SET_VRING_ENABLE with %u (not 0 or 1)", dev->q[idx].name,
                  msg->p.state.num);
        return -EINVAL;
    }
    dev->q[idx].enabled = msg->p.state.num;
    queue_refresh(dev, idx);
    return 0;
}

static int handle_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *msg)
{
    int fd = take_fd(msg, 0);

    int type = 0, domain = 0;
    socklen_t len = sizeof(int);

    if (fd < 0) {
        g_warning("%s: SET_BACKEND_REQ_FD without an fd", dev->name);
        return -EINVAL;
    }
    /* A request channel is a socket we write to: it must not be able to block us. */
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM ||
        (len = sizeof(int), getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len)) < 0 ||
        domain != AF_UNIX || !g_unix_set_fd_nonblocking(fd, TRUE, NULL)) {
        g_warning("%s: SET_BACKEND_REQ_FD fd is not a UNIX stream socket; refused", dev->name);
        close(fd);
        return -EINVAL;
    }
    close_fd(&dev->backend_fd);
    dev->backend_fd = fd;
    return 0;
}

/* True if a mapping of this connection lost its file (see guest-mem-guard.c). */
static bool mem_lost(const struct vu_dev *dev)
{
    for (unsigned i = 0; i < dev->mem.nregions; i++) {
        if (guest_mem_guard_tripped(dev->mem.r[i].guard)) {
            return true;
        }
    }
    return guest_mem_guard_tripped(dev->inflight.guard);
}

static void inflight_unmap(struct vu_inflight *inf)
{
    guest_mem_guard_remove(inf->guard);
    if (inf->map) {
        munmap(inf->map, inf->map_size);
    }
    memset(inf, 0, sizeof(*inf));
}

static int inflight_check_geometry(struct vu_dev *dev, const struct vhost_user_inflight *in)
{
    unsigned qs = in->queue_size;

    if (in->num_queues == 0 || in->num_queues > dev->num_queues || qs == 0 ||
        qs > VU_MAX_RING_SIZE || (qs & (qs - 1))) {
        g_warning("%s: %s for %u queues of %u entries (we have %u queues)", dev->name,
                  "inflight area", in->num_queues, qs, dev->num_queues);
        return -EINVAL;
    }
    if (qs > VU_INFLIGHT_MAX_QUEUE_SIZE) {
        g_warning("%s: inflight area for %u-entry rings: more than the %u entries we track",
                  dev->name, qs, VU_INFLIGHT_MAX_QUEUE_SIZE);
        return -E2BIG;
    }
    return 0;
}

static void inflight_install(struct vu_dev *dev, void *map, size_t map_size, uint8_t *area,
                             const struct vhost_user_inflight *in, int guard)
{
    stop_all(dev);
    inflight_unmap(&dev->inflight);
    dev->inflight.map = map;
    dev->inflight.map_size = map_size;
    dev->inflight.guard = guard;
    dev->inflight.area = area;
    dev->inflight.num_queues = in->num_queues;
    dev->inflight.queue_size = in->queue_size;
    refresh_all(dev);
}

static int handle_get_inflight_fd(struct vu_dev *dev, struct vu_msg *msg,
                                  struct vu_reply *reply)
{
    const struct vhost_user_inflight *in = &msg->p.inflight;
    size_t size;
    void *map;
    int fd, r;

    /* mmap_size 0 tells the front-end "no inflight tracking", which it tolerates. */
    reply->send = true;
    reply->size = sizeof(struct vhost_user_inflight);
    memset(&reply->p.inflight, 0, sizeof(reply->p.inflight));
    r = inflight_check_geometry(dev, in);
    if (r == -E2BIG) {
        return 0;          /* answered with "no tracking" */
    }
    if (r < 0) {
        return r;
    }
    size = in->num_queues * inflight_queue_bytes(in->queue_size);
    fd = memfd_create("vhost-user-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        r = -errno;
        g_warning("%s: cannot create the inflight area: %s", dev->name, g_strerror(-r));
        return r;
    }
    /* Sealed, so the front-end cannot shrink it under our mapping (SIGBUS). */
    if (ftruncate(fd, size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        r = -errno;
        g_warning("%s: cannot size the inflight area: %s", dev->name, g_strerror(-r));
        close(fd);
        return r;
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        r = -errno;
        g_warning("%s: cannot map the inflight area: %s", dev->name, g_strerror(-r));
        close(fd);
        return r;
    }
    /* Our own memfd, sealed: nobody can shrink it, nothing to guard. */
    inflight_install(dev, map, size, map, in, 0);
    reply->p.inflight = *in;
    reply->p.inflight.mmap_size = size;
    reply->p.inflight.mmap_offset = 0;
    reply->fd = fd;
    return 0;
}

static int handle_set_inflight_fd(struct vu_dev *dev, struct vu_msg *msg)
{
    const struct vhost_user_inflight *in = &msg->p.inflight;
    uint64_t need, page = (uint64_t)sysconf(_SC_PAGESIZE), delta;
    struct stat st;
    void *map;
    int fd = take_fd(msg, 0);
    int r, guard;

    if (fd < 0) {
        g_warning("%s: SET_INFLIGHT_FD without an fd", dev->name);
        return -EINVAL;
    }
    r = inflight_check_geometry(dev, in);
    if (r < 0) {
        goto out;
    }
    need = in->num_queues * inflight_queue_bytes(in->queue_size);
    delta = in->mmap_offset % page;
    /* A short file would SIGBUS us on first access; check before mapping. */
    if (in->mmap_size < need || in->mmap_size > SIZE_MAX - delta ||
        in->mmap_offset > UINT64_MAX - in->mmap_size || fstat(fd, &st) < 0 ||
        (uint64_t)st.st_size < in->mmap_offset + in->mmap_size) {
        g_warning("%s: SET_INFLIGHT_FD area (size 0x%llx at offset 0x%llx) is too small "
                  "for %u queues of %u entries or beyond the end of its file", dev->name,
                  (unsigned long long)in->mmap_size, (unsigned long long)in->mmap_offset,
                  in->num_queues, in->queue_size);
        r = -EINVAL;
        goto out;
    }
    map = mmap(NULL, delta + in->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
               in->mmap_offset - delta);
    if (map == MAP_FAILED) {
        r = -errno;
        g_warning("%s: cannot map the inflight area: %s", dev->name, g_strerror(-r));
        goto out;
    }
    /* The front-end's own file may shrink under us: guard it, or do without it. */
    guard = guest_mem_guard_fd_mapping(fd, map, delta + in->mmap_size, dev->fd);
    if (guard < 0) {
        munmap(map, delta + in->mmap_size);
        r = guard;
        goto out;
    }
    inflight_install(dev, map, delta + in->mmap_size, (uint8_t *)map + delta, in, guard);
    r = 0;
out:
    close(fd);
    return r;
}

/* Requests whose sender always waits for a reply, even without NEED_REPLY. */
static bool always_replied(uint32_t req)
{
    switch (req) {
    case VHOST_USER_IOTLB_MSG:
    case VHOST_USER_GET_CONFIG:
    case VHOST_USER_CREATE_CRYPTO_SESSION:
    case VHOST_USER_POSTCOPY_ADVISE:
    case VHOST_USER_POSTCOPY_END:
    case VHOST_USER_GET_SHARED_OBJECT:
    case VHOST_USER_SET_DEVICE_STATE_FD:
    case VHOST_USER_CHECK_DEVICE_STATE:
        return true;
    default:
        return false;
    }
}

static int handle_unsupported(struct vu_dev *dev, struct vu_msg *msg, struct vu_reply *reply)
{
    uint32_t req = msg->hdr.request;

    g_warning("%s: unsupported request %u (%s)", dev->name, req,
              vhost_user_request_name(req));
    if (req == VHOST_USER_GET_CONFIG) {
        /* vhost-user.rst: an empty GET_CONFIG reply signals an error. */
        reply->send = true;
        reply->size = 0;
    } else if (always_replied(req)) {
        reply_u64(reply, ENOSYS);
    }
    /*
     * Dirty logging we cannot do must not be ignored silently (a
     * migration would copy stale pages); anything else unknown is.
     */
    if (req == VHOST_USER_SET_LOG_BASE || req == VHOST_USER_SET_LOG_FD) {
        return -ENOTSUP;
    }
    return reply->send || (msg->hdr.flags & VHOST_USER_NEED_REPLY) ? -ENOSYS : 0;
}

static int handle(struct vu_dev *dev, struct vu_msg *msg, struct vu_reply *reply)
{
    switch (msg->hdr.request) {
    case VHOST_USER_GET_FEATURES:
        reply_u64(reply, dev->offered_features);
        return 0;
    case VHOST_USER_SET_FEATURES:
        return handle_set_features(dev, msg);
    case VHOST_USER_GET_PROTOCOL_FEATURES:
        reply_u64(reply, dev->offered_protocol);
        return 0;
    case VHOST_USER_SET_PROTOCOL_FEATURES:
        return handle_set_protocol_features(dev, msg);
    case VHOST_USER_GET_QUEUE_NUM:
        reply_u64(reply, dev->num_queues);
        return 0;
    case VHOST_USER_GET_MAX_MEM_SLOTS:
        reply_u64(reply, dev->max_mem_slots);
        return 0;
    case VHOST_USER_SET_OWNER:
        return 0;
    case VHOST_USER_RESET_OWNER:
    case VHOST_USER_RESET_DEVICE:
        reset_device(dev);
        return 0;
    case VHOST_USER_SET_MEM_TABLE:
        return handle_set_mem_table(dev, msg);
    case VHOST_USER_ADD_MEM_REG:
        return handle_add_mem_reg(dev, msg);
    case VHOST_USER_REM_MEM_REG:
        return handle_rem_mem_reg(dev, msg);
    case VHOST_USER_SET_VRING_NUM:
        return handle_set_vring_num(dev, msg);
    case VHOST_USER_SET_VRING_ADDR:
        return handle_set_vring_addr(dev, msg);
    case VHOST_USER_SET_VRING_BASE:
        return handle_set_vring_base(dev, msg);
    case VHOST_USER_GET_VRING_BASE:
        return handle_get_vring_base(dev, msg, reply);
    case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL:
    case VHOST_USER_SET_VRING_ERR:
        return handle_vring_fd(dev, msg);
    case VHOST_USER_SET_VRING_ENABLE:
        return handle_set_vring_enable(dev, msg);
    case VHOST_USER_SET_BACKEND_REQ_FD:
        return handle_set_backend_req_fd(dev, msg);
    case VHOST_USER_GET_INFLIGHT_FD:
        return handle_get_inflight_fd(dev, msg, reply);
    case VHOST_USER_SET_INFLIGHT_FD:
        return handle_set_inflight_fd(dev, msg);
    case VHOST_USER_SET_STATUS:
        if (msg->p.u64 > UINT8_MAX) {
            g_warning("%s: SET_STATUS 0x%llx is not a status byte", dev->name,
                      (unsigned long long)msg->p.u64);
            return -EINVAL;
        }
        /* Status 0 is a virtio reset. */
        if (msg->p.u64 == 0) {
            reset_device(dev);
        }
        dev->status = msg->p.u64;
        return 0;
    case VHOST_USER_GET_STATUS:
        reply_u64(reply, dev->status);
        return 0;
    default:
        return handle_unsupported(dev, msg, reply);
    }
}

/* Handles the complete message in dev->in and queues its reply, if any. */
static int process(struct vu_dev *dev)
{
    struct vu_msg *msg = &dev->in;
    struct vu_reply reply = { .fd = -1 };
    int r;

    if (dev->in_extra_fds) {
        /* A front-end that sends fds we never asked for is not one to guess about. */
        g_warning("%s: %s carried more than %d fds; refused", dev->name,
                  vhost_user_request_name(msg->hdr.request), VHOST_USER_MAX_FDS);
        r = -EINVAL;
    } else {
        r = check_size(dev, msg);
        if (r < 0) {
            return r;
        }
        if (!dev->replaying) {
            quiesce_for(dev, msg);
            if (dev->quiesce_pending) {
                return VU_HELD;
            }
        }
        if (msg->hdr.size == sizeof(uint64_t)) {
            /* u64 or {index, num}: enough to follow a session in the log. */
            g_debug("%s: %s 0x%llx", dev->name, vhost_user_request_name(msg->hdr.request),
                    (unsigned long long)msg->p.u64);
        } else {
            g_debug("%s: %s", dev->name, vhost_user_request_name(msg->hdr.request));
        }
        r = handle(dev, msg, &reply);
    }
    if (reply.send) {
        int s = send_reply(dev, msg->hdr.request, &reply.p, reply.size, reply.fd);

        reply.fd = -1;
        r = s < 0 ? s : 0;
    } else if (msg->hdr.flags & VHOST_USER_NEED_REPLY) {
        /* REPLY_ACK: 0 for success, the positive errno otherwise. */
        uint64_t status = r < 0 ? (uint64_t)-r : 0;

        r = send_reply(dev, msg->hdr.request, &status, sizeof(status), -1);
    }
    if (reply.fd >= 0) {
        close(reply.fd);
    }
    return r;
}

static void next_message(struct vu_dev *dev)
{
    close_msg_fds(&dev->in);
    memset(&dev->in, 0, sizeof(dev->in));
    dev->in_got = 0;
    dev->in_extra_fds = false;
    /* A reply still waiting for the peer gets its own time. */
    dev->deadline = dev->out_len ?
        g_get_monotonic_time() + (int64_t)dev->timeout_ms * 1000 : 0;
}

/* Handles the held message once its queues are quiet. */
static int release_held(struct vu_dev *dev)
{
    int r;

    dev->held = false;
    dev->replaying = true;
    r = process(dev);
    dev->replaying = false;
    resume_unstopped(dev);
    next_message(dev);
    return r;
}

int vu_dev_dispatch(struct vu_dev *dev)
{
    if (dev->closing) {
        return 0;
    }
    if (dev->held) {
        int r;

        if (dev->quiesce_pending) {
            return 0;
        }
        r = release_held(dev);
        if (r < 0) {
            return r;
        }
    }
    for (unsigned n = 0; n < VU_DISPATCH_BUDGET; n++) {
        int r = flush_output(dev);

        if (r == -EAGAIN) {
            return 0;          /* no new request until the peer takes our reply */
        }
        if (r < 0) {
            return r;
        }
        if (dev->deadline && !dev->in_got) {
            dev->deadline = 0;  /* the pending reply is gone */
        }
        r = receive(dev);
        if (r <= 0) {
            return r;
        }
        r = process(dev);
        if (r == VU_HELD) {
            /* Rare (a stop with I/O in flight) and worth a line when a backend hangs. */
            g_message("%s: %s waits for the requests in flight on %u queue%s", dev->name,
                      vhost_user_request_name(dev->in.hdr.request), dev->quiesce_pending,
                      dev->quiesce_pending == 1 ? "" : "s");
            dev->held = true;
            dev->deadline = 0;
            return 0;
        }
        if (dev->ops && dev->ops->queue_resume) {
            resume_unstopped(dev);
        }
        next_message(dev);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

uint32_t vu_dev_poll_events(const struct vu_dev *dev)
{
    if (dev->held || dev->closing) {
        return 0;
    }
    return dev->out_len ? POLLOUT : POLLIN;
}

int64_t vu_dev_deadline(const struct vu_dev *dev)
{
    return dev->deadline;
}

bool vu_dev_expired(struct vu_dev *dev, int64_t now)
{
    if (!dev->deadline || now < dev->deadline) {
        return false;
    }
    g_warning("%s: %s within %u ms; dropping the connection", dev->name,
              dev->out_len ? "the front-end did not take its reply" :
                             "a message from the front-end did not arrive whole",
              dev->timeout_ms);
    return true;
}

/* ---- lifetime and accessors --------------------------------------------- */

struct vu_dev *vu_dev_new(int fd, const struct vu_dev_config *cfg)
{
    unsigned nq = cfg->num_queues;
    struct vu_dev *dev;

    if (nq > VU_MAX_QUEUES) {
        g_warning("%s: %u queues requested, limiting to %u", cfg->name ? cfg->name : "vhost-user",
                  nq, VU_MAX_QUEUES);
        nq = VU_MAX_QUEUES;
    }
    dev = g_try_malloc0(sizeof(*dev) + nq * sizeof(dev->q[0]));
    if (!dev) {
        return NULL;
    }
    dev->fd = fd;
    dev->name = g_strdup(cfg->name ? cfg->name : "vhost-user");
    dev->ops = cfg->ops;
    dev->opaque = cfg->opaque;
    dev->num_queues = nq;
    dev->max_mem_slots = cfg->max_mem_slots && cfg->max_mem_slots < GUEST_MEM_MAX_REGIONS ?
                         cfg->max_mem_slots : GUEST_MEM_MAX_REGIONS;
    dev->offered_features = cfg->features | VU_RING_FEATURES;
    dev->offered_protocol = (cfg->protocol_features ? cfg->protocol_features :
                             VU_PROTOCOL_DEFAULT) & VU_PROTOCOL_SUPPORTED;
    dev->backend_fd = -1;
    dev->out_fd = -1;
    dev->timeout_ms = cfg->message_timeout_ms ? cfg->message_timeout_ms : VU_DEFAULT_TIMEOUT_MS;
    /* Never wait on the peer: see "framing". */
    if (!g_unix_set_fd_nonblocking(fd, TRUE, NULL)) {
        g_warning("%s: cannot make the socket non-blocking: %s", dev->name, g_strerror(errno));
    }
    guest_mem_init(&dev->mem);
    dev->mem.owner_fd = fd;
    for (unsigned i = 0; i < nq; i++) {
        struct vu_queue *q = &dev->q[i];

        g_snprintf(q->name, sizeof(q->name), "%s vq%u", dev->name, i);
        vq_init(&q->vq, i, q->name);
        q->kick_fd = q->call_fd = q->err_fd = -1;
    }
    return dev;
}

void vu_dev_free(struct vu_dev *dev)
{
    if (!dev) {
        return;
    }
    for (unsigned i = 0; i < dev->num_queues; i++) {
        struct vu_queue *q = &dev->q[i];

        queue_stop(dev, q);
        vq_cleanup(&q->vq);
        close_fd(&q->kick_fd);
        close_fd(&q->call_fd);
        close_fd(&q->err_fd);
    }
    /* Unguard and unmap before the socket's fd number can be reused. */
    guest_mem_clear(&dev->mem);
    inflight_unmap(&dev->inflight);
    close_fd(&dev->backend_fd);
    close_msg_fds(&dev->in);
    close_fd(&dev->out_fd);
    close_fd(&dev->fd);
    g_free(dev->name);
    g_free(dev);
}

int vu_dev_fd(const struct vu_dev *dev)
{
    return dev->fd;
}

const struct guest_mem *vu_dev_mem(const struct vu_dev *dev)
{
    return &dev->mem;
}

struct virtqueue *vu_dev_queue(struct vu_dev *dev, unsigned idx)
{
    return idx < dev->num_queues ? &dev->q[idx].vq : NULL;
}

uint64_t vu_dev_features(const struct vu_dev *dev)
{
    return dev->features;
}

bool vu_dev_queue_running(const struct vu_dev *dev, unsigned idx)
{
    return idx < dev->num_queues && dev->q[idx].running;
}

void vu_dev_queue_error(struct vu_dev *dev, unsigned idx)
{
    struct vu_queue *q;
    int fd;

    if (idx >= dev->num_queues) {
        return;
    }
    q = &dev->q[idx];
    /* The device's thread calls this: read the slot the main thread publishes to. */
    fd = q->running ? __atomic_load_n(&q->vq.err_fd, __ATOMIC_ACQUIRE) : q->err_fd;
    g_warning("%s: ring is broken; telling the front-end", q->name);
    if (fd >= 0) {
        int r = notify_fd_signal(fd);

        if (r == -ETIMEDOUT) {
            hang_up_hostile(dev, q->name, "err");
        } else if (r < 0) {
            g_warning("%s: cannot signal the error fd: %s", q->name, g_strerror(-r));
        }
    }
}
