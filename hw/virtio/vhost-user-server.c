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
 * This file holds the connection: framing, dispatch, holding a message
 * for quiet queues, and the requests about the device as a whole; the
 * vrings are vhost-user-rings.c's, the memory table and inflight area
 * vhost-user-mem.c's.
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

static void close_msg_fds(struct vu_msg *msg)
{
    for (unsigned i = 0; i < msg->nfds; i++) {
        if (msg->fds[i] >= 0) {
            close(msg->fds[i]);
            msg->fds[i] = -1;
        }
    }
}

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
    struct vu_msg *msg = &dev->in;
    unsigned nfds = msg->nfds;
    bool lost = false;
    ssize_t n = vhost_user_recvmsg(dev->fd, buf, len, msg->fds, VHOST_USER_MAX_FDS, &nfds,
                                   &lost, MSG_DONTWAIT);

    msg->nfds = nfds;
    if (lost) {
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
            if (vu_mem_lost(dev)) {
                /* The SIGBUS guard shut the socket: say why, once, here. */
                log_limit_warning(&dev->log_limit,
                                  "%s: the front-end truncated shared memory under us; "
                                  "connection dropped", dev->name);
                return -ECONNRESET;
            }
            if (n == 0 && dev->in_got == 0) {
                log_limit_message(&dev->log_limit, "%s: front-end closed the connection",
                                  dev->name);
                return -ECONNRESET;
            }
            log_limit_warning(&dev->log_limit, "%s: cannot read a message: %s", dev->name,
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
                log_limit_warning(&dev->log_limit,
                                  "%s: request %u (%s) has protocol version %u, not %u", dev->name,
                                  msg->hdr.request, vhost_user_request_name(msg->hdr.request),
                                  msg->hdr.flags & VHOST_USER_VERSION_MASK, VHOST_USER_VERSION);
                return -EPROTO;
            }
            if (msg->hdr.size > sizeof(msg->p)) {
                log_limit_warning(&dev->log_limit,
                                  "%s: request %u (%s) with a %u-byte payload (at most %zu)",
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
        /* The fd rides on the first byte only. */
        bool with_fd = dev->out_fd >= 0 && dev->out_done == 0;
        ssize_t n = vhost_user_sendmsg(dev->fd, dev->out + dev->out_done,
                                       dev->out_len - dev->out_done, &dev->out_fd,
                                       with_fd ? 1 : 0, MSG_DONTWAIT);

        if (n < 0) {
            int err = (int)-n;

            if (err == EAGAIN || err == EWOULDBLOCK) {
                return -EAGAIN;
            }
            log_limit_warning(&dev->log_limit, "%s: cannot send a reply: %s", dev->name,
                              g_strerror(err));
            return -err;
        }
        if (n > 0) {
            vu_close_fd(&dev->out_fd);
        }
        dev->out_done += (size_t)n;
    }
    dev->out_len = dev->out_done = 0;
    vu_close_fd(&dev->out_fd);
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

static int check_size(struct vu_dev *dev, const struct vu_msg *msg)
{
    uint32_t req = msg->hdr.request, size = msg->hdr.size;
    int want = vhost_user_request_size(req);

    if (req == VHOST_USER_SET_MEM_TABLE) {
        const size_t head = offsetof(struct vhost_user_memory, regions);

        if (size >= head && msg->p.memory.nregions <= VHOST_USER_MEM_REGIONS &&
            size >= head + msg->p.memory.nregions * sizeof(struct vhost_user_mem_region)) {
            return 0;
        }
        log_limit_warning(&dev->log_limit,
                          "%s: SET_MEM_TABLE with payload of %u bytes for %u regions", dev->name,
                          size, size >= head ? msg->p.memory.nregions : 0);
        return -EPROTO;
    }
    if (want >= 0 && size != (uint32_t)want) {
        log_limit_warning(&dev->log_limit, "%s: %s with a %u-byte payload (expected %d)", dev->name,
                                           vhost_user_request_name(req), size, want);
        return -EPROTO;
    }
    return 0;
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
    case VHOST_USER_SET_LOG_BASE:
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
        log_limit_message(&dev->log_limit,
                          "%s: SET_FEATURES 0x%llx: ignoring features we did not offer (0x%llx)",
                          dev->name, (unsigned long long)f,
                          (unsigned long long)(f & ~dev->offered_features));
        f &= dev->offered_features;
        changed = f ^ dev->features;
    }
    dev->features = f;
    /* Running rings were set up with the old ring features: restart them. */
    if (changed) {
        for (unsigned i = 0; i < dev->num_queues; i++) {
            vu_queue_stop(dev, &dev->q[i]);
            vu_queue_refresh(dev, i);
        }
    }
    return 0;
}

static int handle_set_protocol_features(struct vu_dev *dev, struct vu_msg *msg)
{
    uint64_t f = msg->p.u64;

    if (f & ~dev->offered_protocol) {
        log_limit_warning(&dev->log_limit,
                          "%s: SET_PROTOCOL_FEATURES 0x%llx acks protocol features we did not "
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
static int handle_set_backend_req_fd(struct vu_dev *dev, struct vu_msg *msg)
{
    int fd = vu_take_fd(msg, 0);

    int type = 0, domain = 0;
    socklen_t len = sizeof(int);

    if (fd < 0) {
        log_limit_warning(&dev->log_limit, "%s: SET_BACKEND_REQ_FD without an fd", dev->name);
        return -EINVAL;
    }
    /* A request channel is a socket we write to: it must not be able to block us. */
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM ||
        (len = sizeof(int), getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len)) < 0 ||
        domain != AF_UNIX || !g_unix_set_fd_nonblocking(fd, TRUE, NULL)) {
        log_limit_warning(&dev->log_limit,
                          "%s: SET_BACKEND_REQ_FD fd is not a UNIX stream socket; refused",
                          dev->name);
        close(fd);
        return -EINVAL;
    }
    vu_close_fd(&dev->backend_fd);
    dev->backend_fd = fd;
    return 0;
}

static int handle_unsupported(struct vu_dev *dev, struct vu_msg *msg, struct vu_reply *reply)
{
    uint32_t req = msg->hdr.request;

    log_limit_warning(&dev->log_limit, "%s: unsupported request %u (%s)", dev->name, req,
                                       vhost_user_request_name(req));
    if (req == VHOST_USER_GET_CONFIG) {
        /* vhost-user.rst: an empty GET_CONFIG reply signals an error. */
        reply->send = true;
        reply->size = 0;
    } else if (vhost_user_request_replies(req)) {
        reply_u64(reply, ENOSYS);
    }
    /*
     * A log fd we would not signal must not be taken silently (the
     * front-end would wait for news that never come); anything else
     * unknown is.  QEMU never sends it: it reads the shared log itself.
     */
    if (req == VHOST_USER_SET_LOG_FD) {
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
        vu_reset_device(dev);
        return 0;
    case VHOST_USER_SET_MEM_TABLE:
        return vu_handle_set_mem_table(dev, msg);
    case VHOST_USER_ADD_MEM_REG:
        return vu_handle_add_mem_reg(dev, msg);
    case VHOST_USER_REM_MEM_REG:
        return vu_handle_rem_mem_reg(dev, msg);
    case VHOST_USER_SET_VRING_NUM:
        return vu_handle_set_vring_num(dev, msg);
    case VHOST_USER_SET_VRING_ADDR:
        return vu_handle_set_vring_addr(dev, msg);
    case VHOST_USER_SET_VRING_BASE:
        return vu_handle_set_vring_base(dev, msg);
    case VHOST_USER_GET_VRING_BASE:
        return vu_handle_get_vring_base(dev, msg, reply);
    case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL:
    case VHOST_USER_SET_VRING_ERR:
        return vu_handle_vring_fd(dev, msg);
    case VHOST_USER_SET_VRING_ENABLE:
        return vu_handle_set_vring_enable(dev, msg);
    case VHOST_USER_SET_BACKEND_REQ_FD:
        return handle_set_backend_req_fd(dev, msg);
    case VHOST_USER_SET_LOG_BASE:
        return vu_handle_set_log_base(dev, msg, reply);
    case VHOST_USER_GET_INFLIGHT_FD:
        return vu_handle_get_inflight_fd(dev, msg, reply);
    case VHOST_USER_SET_INFLIGHT_FD:
        return vu_handle_set_inflight_fd(dev, msg);
    case VHOST_USER_SET_STATUS:
        if (msg->p.u64 > UINT8_MAX) {
            log_limit_warning(&dev->log_limit, "%s: SET_STATUS 0x%llx is not a status byte",
                              dev->name, (unsigned long long)msg->p.u64);
            return -EINVAL;
        }
        /* Status 0 is a virtio reset. */
        if (msg->p.u64 == 0) {
            vu_reset_device(dev);
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
        log_limit_warning(&dev->log_limit, "%s: %s carried more than %d fds; refused", dev->name,
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
            log_limit_message(&dev->log_limit,
                              "%s: %s waits for the requests in flight on %u queue%s", dev->name,
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
    log_limit_warning(&dev->log_limit, "%s: %s within %u ms; dropping the connection", dev->name,
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
    log_limit_init(&dev->log_limit, dev->name, LOG_LIMIT_BURST, LOG_LIMIT_PER_SEC);
    dev->ops = cfg->ops;
    dev->opaque = cfg->opaque;
    dev->num_queues = nq;
    dev->max_mem_slots = cfg->max_mem_slots && cfg->max_mem_slots < GUEST_MEM_MAX_REGIONS ?
                         cfg->max_mem_slots : GUEST_MEM_MAX_REGIONS;
    dev->offered_features = cfg->features | VU_RING_FEATURES;
    dev->offered_protocol = (cfg->protocol_features ? cfg->protocol_features :
                             VU_PROTOCOL_DEFAULT) & VU_PROTOCOL_SUPPORTED;
    /* Dirty logging needs the log as shared memory: no LOG_SHMFD, no LOG_ALL. */
    if (!(dev->offered_protocol & (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD))) {
        dev->offered_features &= ~(1ull << VHOST_F_LOG_ALL);
    }
    dev->backend_fd = -1;
    dev->out_fd = -1;
    dev->log_skip_data_in = cfg->test_log_skip_data_in;
    dev->timeout_ms = cfg->message_timeout_ms ? cfg->message_timeout_ms : VU_DEFAULT_TIMEOUT_MS;
    /* Never wait on the peer: see "framing". */
    if (!g_unix_set_fd_nonblocking(fd, TRUE, NULL)) {
        g_warning("%s: cannot make the socket non-blocking: %s", dev->name, g_strerror(errno));
    }
    guest_mem_init(&dev->mem);
    dev->mem.owner_fd = fd;
    dev->mem.log_limit = &dev->log_limit;
    for (unsigned i = 0; i < nq; i++) {
        struct vu_queue *q = &dev->q[i];

        g_snprintf(q->name, sizeof(q->name), "%s vq%u", dev->name, i);
        vq_init(&q->vq, i, q->name);
        q->vq.log_limit = &dev->log_limit;
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

        vu_queue_stop(dev, q);
        vq_cleanup(&q->vq);
        vu_close_fd(&q->kick_fd);
        vu_close_fd(&q->call_fd);
        vu_close_fd(&q->err_fd);
    }
    /* Unguard and unmap before the socket's fd number can be reused. */
    guest_mem_clear(&dev->mem);
    vu_inflight_unmap(&dev->inflight);
    vu_log_unmap(&dev->log);
    vu_close_fd(&dev->backend_fd);
    close_msg_fds(&dev->in);
    vu_close_fd(&dev->out_fd);
    vu_close_fd(&dev->fd);
    log_limit_end(&dev->log_limit);
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
    log_limit_warning(q->vq.log_limit, "%s: ring is broken; telling the front-end", q->name);
    if (fd >= 0) {
        int r = notify_fd_signal(fd);

        if (r == -ETIMEDOUT) {
            vu_hang_up_hostile(dev, q->name, "err");
        } else if (r < 0) {
            log_limit_warning(q->vq.log_limit, "%s: cannot signal the error fd: %s", q->name,
                              g_strerror(-r));
        }
    }
}
