/*
 * The vhost-user transport of the front-end library: the same setup steps
 * QEMU's vhost-user-scsi device performs, as messages on a UNIX socket
 * (docs/interop/vhost-user.rst).  When REPLY_ACK is negotiated every
 * message without an explicit reply asks for one, so a back-end that
 * rejects a step is caught at that step; every reply is awaited with a
 * timeout so a silent back-end is an error, not a hang.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <glib.h>
#include <linux/virtio_config.h>

#include "vhost-frontend-int.h"
#include "vhost-user-proto.h"

#define VFE_USER_PROTOCOL_WANTED                          \
    ((1ull << VHOST_USER_PROTOCOL_F_MQ) |                 \
     (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |          \
     (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS) | \
     (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD) |         \
     (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD))

static int send_msg(struct vfe *fe, struct vhost_user_msg *msg, const int *fds, unsigned nfds)
{
    size_t len = sizeof(msg->hdr) + msg->hdr.size;

    g_assert(nfds <= VHOST_USER_MAX_FDS);
    ssize_t n = vhost_user_sendmsg(fe->fd, msg, len, fds, nfds, 0);
    if (n != (ssize_t)len) {
        int err = n < 0 ? (int)n : -EIO;
        fe->dead = true;
        g_warning("vhost front-end: %s: sending %s: %s", fe->path,
                  vhost_user_request_name(msg->hdr.request), g_strerror(-err));
        return err;
    }
    return 0;
}

/* *fd_out (if not NULL, initially -1) takes the one fd a reply may carry. */
static int read_full(struct vfe *fe, void *buf, size_t len, const char *what, int *fd_out)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd p = { .fd = fe->fd, .events = POLLIN };
        int r = poll(&p, 1, (int)fe->cfg.timeout_ms);
        if (r == 0) {
            g_warning("vhost front-end: %s: no reply to %s within %u ms", fe->path, what,
                      fe->cfg.timeout_ms);
            return -ETIMEDOUT;
        }
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        /*
         * Only GET_INFLIGHT_FD's reply carries an fd; any other that comes
         * (or a second) is closed by vhost_user_recvmsg.
         */
        int fd = -1;
        unsigned nfds = 0;
        bool lost = false;
        bool want_fd = fd_out && *fd_out < 0;
        ssize_t n = vhost_user_recvmsg(fe->fd, (uint8_t *)buf + got, len - got,
                                       want_fd ? &fd : NULL, want_fd ? 1 : 0, &nfds, &lost, 0);
        if (nfds) {
            *fd_out = fd;
        }
        if (n == 0) {
            g_warning("vhost front-end: %s: back-end closed the socket awaiting %s",
                      fe->path, what);
            return -ECONNRESET;
        }
        if (n < 0) {
            if (n == -EAGAIN) {
                continue;
            }
            g_warning("vhost front-end: %s: reading reply to %s: %s", fe->path, what,
                      g_strerror((int)-n));
            return (int)n;
        }
        got += n;
    }
    return 0;
}

static int recv_reply(struct vfe *fe, uint32_t request, struct vhost_user_msg *reply, int *fd)
{
    const char *what = vhost_user_request_name(request);
    int r = read_full(fe, &reply->hdr, sizeof(reply->hdr), what, fd);
    if (r < 0) {
        return r;
    }
    if (reply->hdr.request != request || !(reply->hdr.flags & VHOST_USER_REPLY_MASK) ||
        (reply->hdr.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION ||
        reply->hdr.size > sizeof(reply->payload)) {
        g_warning("vhost front-end: %s: bad reply to %s (request %u flags 0x%x size %u)",
                  fe->path, what, reply->hdr.request, reply->hdr.flags, reply->hdr.size);
        return -EPROTO;
    }
    return read_full(fe, &reply->payload, reply->hdr.size, what, fd);
}

/*
 * Sends msg and waits for its explicit reply (into *reply, and the fd it
 * carries into *reply_fd if not NULL: the caller closes it) or, with
 * REPLY_ACK, for the acknowledgement.
 */
static int transact_fd(struct vfe *fe, struct vhost_user_msg *msg, const int *fds,
                       unsigned nfds, struct vhost_user_msg *reply, int *reply_fd)
{
    if (fe->dead) {
        return -ENOTCONN;
    }
    bool explicit = vhost_user_request_replies(msg->hdr.request);
    bool ack = !explicit && fe->reply_ack;
    msg->hdr.flags = VHOST_USER_VERSION | (ack ? VHOST_USER_NEED_REPLY : 0);
    int r = send_msg(fe, msg, fds, nfds);
    if (r < 0 || (!explicit && !ack)) {
        return r;
    }
    struct vhost_user_msg tmp;
    struct vhost_user_msg *rep = reply ? reply : &tmp;
    r = recv_reply(fe, msg->hdr.request, rep, reply_fd);
    if (r < 0) {
        /* the stream is out of step or gone: nothing later can be trusted */
        fe->dead = true;
        return r;
    }
    if (ack) {
        if (rep->hdr.size != sizeof(uint64_t)) {
            g_warning("vhost front-end: %s: REPLY_ACK to %s has %u bytes", fe->path,
                      vhost_user_request_name(msg->hdr.request), rep->hdr.size);
            return -EPROTO;
        }
        if (rep->payload.u64 != 0) {
            g_warning("vhost front-end: %s: back-end rejected %s (status %" G_GUINT64_FORMAT ")",
                      fe->path, vhost_user_request_name(msg->hdr.request), rep->payload.u64);
            return -EIO;
        }
    }
    return 0;
}

static int transact(struct vfe *fe, struct vhost_user_msg *msg, const int *fds, unsigned nfds,
                    struct vhost_user_msg *reply)
{
    return transact_fd(fe, msg, fds, nfds, reply, NULL);
}

static int get_u64(struct vfe *fe, uint32_t request, uint64_t *out)
{
    struct vhost_user_msg msg = { .hdr = { .request = request } };
    struct vhost_user_msg rep;
    int r = transact(fe, &msg, NULL, 0, &rep);
    if (r < 0) {
        return r;
    }
    if (rep.hdr.size != sizeof(uint64_t)) {
        g_warning("vhost front-end: %s: %s reply has %u bytes", fe->path,
                  vhost_user_request_name(request), rep.hdr.size);
        return -EPROTO;
    }
    *out = rep.payload.u64;
    return 0;
}

static int set_u64(struct vfe *fe, uint32_t request, uint64_t v, const int *fds, unsigned nfds)
{
    struct vhost_user_msg msg = {
        .hdr = { .request = request, .size = sizeof(uint64_t) },
        .payload.u64 = v,
    };
    return transact(fe, &msg, fds, nfds, NULL);
}

static int set_state(struct vfe *fe, uint32_t request, unsigned index, unsigned num)
{
    struct vhost_user_msg msg = {
        .hdr = { .request = request, .size = sizeof(struct vhost_vring_state) },
        .payload.state = { .index = index, .num = num },
    };
    return transact(fe, &msg, NULL, 0, NULL);
}

/* Our view of the area: read by tests, never written (it is the back-end's). */
static int inflight_map(struct vfe *fe, int fd, const struct vhost_user_inflight *in)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t delta = in->mmap_offset % page;
    void *map;

    struct stat st;

    /* A file shorter than the area would SIGBUS whoever reads the view. */
    if (in->mmap_size > SIZE_MAX - delta || in->mmap_offset > UINT64_MAX - in->mmap_size ||
        fstat(fd, &st) < 0 || (uint64_t)st.st_size < in->mmap_offset + in->mmap_size) {
        g_warning("vhost front-end: %s: inflight area of 0x%llx bytes at 0x%llx is beyond "
                  "the end of its file", fe->path, (unsigned long long)in->mmap_size,
                  (unsigned long long)in->mmap_offset);
        return -EPROTO;
    }
    map = mmap(NULL, delta + in->mmap_size, PROT_READ, MAP_SHARED, fd, in->mmap_offset - delta);
    if (map == MAP_FAILED) {
        int r = -errno;
        g_warning("vhost front-end: %s: cannot map the inflight area: %s", fe->path,
                  g_strerror(errno));
        return r;
    }
    fe->inflight_map = map;
    fe->inflight_map_size = delta + in->mmap_size;
    fe->inflight_area = (uint8_t *)map + delta;
    fe->inflight_size = in->mmap_size;
    return 0;
}

/*
 * The inflight-tracking area, set up as QEMU 8.2+'s vhost-user-scsi does
 * it before the rings start: the back-end makes it (GET_INFLIGHT_FD) and
 * we hand it straight back (SET_INFLIGHT_FD), as a front-end reconnecting
 * to a restarted back-end would; the back-end then writes what it pops
 * and completes there, which is the cost a QEMU guest's I/O pays and what
 * vfe_inflight_area lets a test read.  A back-end that answers size 0
 * tracks nothing, which QEMU tolerates and so do we.
 */
static int user_setup_inflight(struct vfe *fe)
{
    struct vhost_user_msg msg = {
        .hdr = { .request = VHOST_USER_GET_INFLIGHT_FD, .size = sizeof(struct vhost_user_inflight) },
        .payload.inflight = { .num_queues = (uint16_t)fe->num_queues,
                              .queue_size = (uint16_t)fe->cfg.queue_size },
    };
    struct vhost_user_msg rep;
    int fd = -1, r;

    if (!(fe->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD))) {
        return 0;
    }
    r = transact_fd(fe, &msg, NULL, 0, &rep, &fd);
    if (r < 0) {
        goto out;
    }
    if (rep.hdr.size != sizeof(struct vhost_user_inflight)) {
        g_warning("vhost front-end: %s: GET_INFLIGHT_FD reply has %u bytes", fe->path,
                  rep.hdr.size);
        r = -EPROTO;
        goto out;
    }
    if (rep.payload.inflight.mmap_size == 0) {
        goto out;   /* r == 0: the back-end tracks nothing */
    }
    if (fd < 0) {
        g_warning("vhost front-end: %s: GET_INFLIGHT_FD reply without an fd", fe->path);
        r = -EPROTO;
        goto out;
    }
    struct vhost_user_inflight area = rep.payload.inflight;
    r = inflight_map(fe, fd, &area);
    if (r < 0) {
        goto out;
    }
    msg.hdr.request = VHOST_USER_SET_INFLIGHT_FD;
    msg.payload.inflight = area;
    r = transact(fe, &msg, &fd, 1, NULL);
out:
    if (fd >= 0) {
        close(fd);
    }
    return r;
}

static int user_connect(struct vfe *fe)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(fe->path) >= sizeof(sa.sun_path)) {
        g_warning("vhost front-end: socket path %s is too long", fe->path);
        return -ENAMETOOLONG;
    }
    strcpy(sa.sun_path, fe->path);
    fe->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fe->fd < 0) {
        return -errno;
    }
    if (connect(fe->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = -errno;
        g_warning("vhost front-end: connect to %s: %s", fe->path, g_strerror(errno));
        return err;
    }

    uint64_t dev_features;
    int r = get_u64(fe, VHOST_USER_GET_FEATURES, &dev_features);
    if (r < 0) {
        return r;
    }
    if (dev_features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES)) {
        uint64_t pf;
        r = get_u64(fe, VHOST_USER_GET_PROTOCOL_FEATURES, &pf);
        if (r < 0) {
            return r;
        }
        fe->protocol_features = pf & VFE_USER_PROTOCOL_WANTED;
        if (!fe->cfg.dirty_log) {
            fe->protocol_features &= ~(1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD);
        }
        if (!fe->cfg.inflight) {
            fe->protocol_features &= ~(1ull << VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD);
        }
        r = set_u64(fe, VHOST_USER_SET_PROTOCOL_FEATURES, fe->protocol_features, NULL, 0);
        if (r < 0) {
            return r;
        }
        fe->reply_ack = fe->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK);
    }
    if (fe->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_MQ)) {
        uint64_t nq;
        r = get_u64(fe, VHOST_USER_GET_QUEUE_NUM, &nq);
        if (r < 0) {
            return r;
        }
        if (nq < fe->num_queues) {
            g_warning("vhost front-end: %s serves %" G_GUINT64_FORMAT
                      " queues, we need %u (control, event, %u request)",
                      fe->path, nq, fe->num_queues, fe->cfg.num_request_queues);
            return -ERANGE;
        }
    } else if (fe->num_queues > 3) {
        g_warning("vhost front-end: %s has no MQ: one request queue only", fe->path);
        return -ERANGE;
    }
    if (fe->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS)) {
        uint64_t slots;
        r = get_u64(fe, VHOST_USER_GET_MAX_MEM_SLOTS, &slots);
        if (r < 0) {
            return r;
        }
        if (slots < 1) {
            g_warning("vhost front-end: %s offers no memory slots", fe->path);
            return -ERANGE;
        }
    }
    struct vhost_user_msg owner = { .hdr = { .request = VHOST_USER_SET_OWNER } };
    r = transact(fe, &owner, NULL, 0, NULL);
    if (r < 0) {
        return r;
    }
    /* Where QEMU's vhost-user-scsi asks for it: before the features and the rings. */
    r = user_setup_inflight(fe);
    if (r < 0) {
        return r;
    }
    uint64_t want = (1ull << VIRTIO_F_VERSION_1) |
                    (fe->cfg.event_idx ? 1ull << VIRTIO_RING_F_EVENT_IDX : 0) |
                    (fe->cfg.indirect ? 1ull << VIRTIO_RING_F_INDIRECT_DESC : 0) |
                    (fe->cfg.packed ? 1ull << VIRTIO_F_RING_PACKED : 0) |
                    (1ull << VHOST_USER_F_PROTOCOL_FEATURES);
    fe->features = dev_features & want;
    if (!(fe->features & (1ull << VIRTIO_F_VERSION_1))) {
        g_warning("vhost front-end: %s does not offer VIRTIO_F_VERSION_1", fe->path);
        return -ENOTSUP;
    }
    /* the rings are laid out for one format: no falling back to split behind the caller */
    if (fe->cfg.packed && !(fe->features & (1ull << VIRTIO_F_RING_PACKED))) {
        g_warning("vhost front-end: %s does not offer VIRTIO_F_RING_PACKED (packed rings)",
                  fe->path);
        return -ENOTSUP;
    }
    return set_u64(fe, VHOST_USER_SET_FEATURES, fe->features, NULL, 0);
}

static int user_set_mem(struct vfe *fe)
{
    struct vhost_user_mem_region region = {
        .guest_phys_addr = VFE_GPA_BASE,
        .memory_size = fe->mem_size,
        .userspace_addr = (uint64_t)(uintptr_t)fe->mem,
        .mmap_offset = 0,
    };
    bool slots = fe->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS);
    struct vhost_user_msg msg = { 0 };

    if (fe->cfg.add_mem_reg && slots) {
        if (fe->mem_added) {
            return 0;   /* the region outlives a stop/start cycle */
        }
        fe->mem_added = true;
        msg.hdr.request = VHOST_USER_ADD_MEM_REG;
        msg.hdr.size = sizeof(msg.payload.mem_reg);
        msg.payload.mem_reg.region = region;
    } else {
        msg.hdr.request = VHOST_USER_SET_MEM_TABLE;
        msg.hdr.size = offsetof(struct vhost_user_memory, regions) + sizeof(region);
        msg.payload.memory.nregions = 1;
        msg.payload.memory.regions[0] = region;
    }
    return transact(fe, &msg, &fe->mem_fd, 1, NULL);
}

static int user_start_queue(struct vfe *fe, struct vfe_queue *q)
{
    int r = set_state(fe, VHOST_USER_SET_VRING_NUM, q->index, q->num);
    if (r == 0) {
        r = set_state(fe, VHOST_USER_SET_VRING_BASE, q->index, q->base);
    }
    if (r == 0) {
        struct vhost_user_msg msg = {
            .hdr = { .request = VHOST_USER_SET_VRING_ADDR,
                     .size = sizeof(struct vhost_vring_addr) },
            .payload.addr = {
                .index = q->index,
                .desc_user_addr = (uint64_t)(uintptr_t)q->desc,
                .avail_user_addr = (uint64_t)(uintptr_t)q->avail,
                .used_user_addr = (uint64_t)(uintptr_t)q->used,
            },
        };
        r = transact(fe, &msg, NULL, 0, NULL);
    }
    /* call before kick: the back-end may start the ring as soon as it has the kick fd */
    if (r == 0) {
        r = set_u64(fe, VHOST_USER_SET_VRING_CALL, q->index, &q->call_fd, 1);
    }
    if (r == 0) {
        r = set_u64(fe, VHOST_USER_SET_VRING_KICK, q->index, &q->kick_fd, 1);
    }
    if (r == 0 && (fe->features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES))) {
        r = set_state(fe, VHOST_USER_SET_VRING_ENABLE, q->index, 1);
    }
    return r;
}

static int user_get_base(struct vfe *fe, struct vfe_queue *q, uint32_t *base)
{
    struct vhost_user_msg msg = {
        .hdr = { .request = VHOST_USER_GET_VRING_BASE, .size = sizeof(struct vhost_vring_state) },
        .payload.state = { .index = q->index },
    };
    struct vhost_user_msg rep;
    int r = transact(fe, &msg, NULL, 0, &rep);
    if (r < 0) {
        return r;
    }
    if (rep.hdr.size != sizeof(struct vhost_vring_state) || rep.payload.state.index != q->index) {
        g_warning("vhost front-end: %s: bad GET_VRING_BASE reply for %s", fe->path, q->name);
        return -EPROTO;
    }
    *base = rep.payload.state.num;
    return 0;
}

static void user_disconnect(struct vfe *fe)
{
    if (fe->fd >= 0) {
        close(fe->fd);
        fe->fd = -1;
    }
    if (fe->inflight_map) {
        munmap(fe->inflight_map, fe->inflight_map_size);
        fe->inflight_map = NULL;
        fe->inflight_area = NULL;
        fe->inflight_size = 0;
    }
}

static int user_watch_fd(struct vfe *fe)
{
    return fe->fd;
}

static int user_set_log(struct vfe *fe, int fd, uint64_t size)
{
    struct vhost_user_msg msg = {
        .hdr = { .request = VHOST_USER_SET_LOG_BASE, .size = sizeof(struct vhost_user_log) },
        .payload.log = { .mmap_size = size, .mmap_offset = 0 },
    };
    struct vhost_user_msg rep;

    if (!(fe->protocol_features & (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD))) {
        return -ENOTSUP;
    }
    /* Answered with an empty reply, as QEMU expects. */
    return transact(fe, &msg, &fd, 1, &rep);
}

static int user_set_features(struct vfe *fe, uint64_t features)
{
    return set_u64(fe, VHOST_USER_SET_FEATURES, features, NULL, 0);
}

const struct vfe_transport_ops vfe_user_ops = {
    .name = "vhost-user",
    .connect = user_connect,
    .set_mem = user_set_mem,
    .start_queue = user_start_queue,
    .get_base = user_get_base,
    .disconnect = user_disconnect,
    .watch_fd = user_watch_fd,
    .set_log = user_set_log,
    .set_features = user_set_features,
};
