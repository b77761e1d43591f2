/*
 * See raw-vu.h.  Everything here is plain socket and memfd work; the
 * only waits are poll(2) with a bound.
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
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>
#include <linux/virtio_config.h>
#include <linux/virtio_scsi.h>

#include "raw-vu.h"

int rv_connect(const char *path, int timeout_ms)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    /* A UNIX stream connect waits for backlog room up to the send timeout. */
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000 };
    struct timeval none = { 0 };
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int r;

    if (s < 0) {
        return -errno;
    }
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    do {
        r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        int err = errno == EINPROGRESS ? EAGAIN : errno;

        close(s);
        return -err;
    }
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
    return s;
}

size_t rv_build(void *out, uint32_t request, uint32_t flags, const void *payload, uint32_t size)
{
    struct vhost_user_hdr hdr = {
        .request = request, .flags = VHOST_USER_VERSION | flags, .size = size,
    };

    g_assert(size <= sizeof(union vhost_user_payload));
    memcpy(out, &hdr, sizeof(hdr));
    if (size) {
        memcpy((uint8_t *)out + sizeof(hdr), payload, size);
    }
    return sizeof(hdr) + size;
}

static int send_with_fds(int sock, const void *bytes, size_t n, const int *fds, unsigned nfds)
{
    ssize_t r;

    g_assert(nfds <= VHOST_USER_SENDMSG_MAX_FDS);
    r = vhost_user_sendmsg(sock, bytes, n, fds, nfds, 0);
    if (r < 0) {
        return r == -EPIPE ? -ECONNRESET : (int)r;
    }
    /* A short send of a message this small only happens on a full socket. */
    return (size_t)r == n ? 0 : -EAGAIN;
}

int rv_send(int sock, uint32_t request, uint32_t flags, const void *payload, uint32_t size,
            const int *fds, unsigned nfds)
{
    uint8_t buf[sizeof(struct vhost_user_msg)];
    size_t n = rv_build(buf, request, flags, payload, size);

    return send_with_fds(sock, buf, n, fds, nfds);
}

int rv_send_bytes(int sock, const void *bytes, size_t n)
{
    return send_with_fds(sock, bytes, n, NULL, 0);
}

/* Reads exactly len bytes before the deadline, keeping the first fd that comes along. */
static int recv_exact(int sock, void *buf, size_t len, int *fd, int64_t deadline)
{
    size_t got = 0;

    while (got < len) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        int64_t left = (deadline - g_get_monotonic_time()) / 1000;
        /* The first fd is kept (if asked for and none came yet), the rest closed. */
        unsigned nfds = fd && *fd >= 0 ? 1 : 0;
        int got_fd = -1;
        bool lost = false;
        ssize_t n;

        if (left <= 0) {
            return -ETIMEDOUT;
        }
        if (poll(&p, 1, (int)left) == 0) {
            return -ETIMEDOUT;
        }
        n = vhost_user_recvmsg(sock, (uint8_t *)buf + got, len - got, &got_fd, fd ? 1 : 0,
                               &nfds, &lost, MSG_DONTWAIT);
        if (got_fd >= 0) {
            *fd = got_fd;
        }
        if (n == -EAGAIN) {
            continue;
        }
        if (n < 0) {
            return (int)n;
        }
        if (n == 0) {
            return -ECONNRESET;
        }
        got += (size_t)n;
    }
    return 0;
}

int rv_recv(int sock, struct vhost_user_msg *msg, int *fd, int timeout_ms)
{
    int64_t deadline = g_get_monotonic_time() + (int64_t)timeout_ms * 1000;
    int r;

    if (fd) {
        *fd = -1;
    }
    memset(msg, 0, sizeof(*msg));
    r = recv_exact(sock, &msg->hdr, sizeof(msg->hdr), fd, deadline);
    if (r < 0) {
        return r;
    }
    if (msg->hdr.size > sizeof(msg->payload)) {
        return -EPROTO;
    }
    return recv_exact(sock, &msg->payload, msg->hdr.size, fd, deadline);
}

/* Sends one message and reads its u64 reply (a value, or a REPLY_ACK status). */
static int exchange_u64(int sock, uint32_t request, uint32_t flags, const void *payload,
                        uint32_t size, const int *fds, unsigned nfds, int timeout_ms,
                        uint64_t *out)
{
    struct vhost_user_msg rep;
    int r = rv_send(sock, request, flags, payload, size, fds, nfds);

    if (r == 0) {
        r = rv_recv(sock, &rep, NULL, timeout_ms);
    }
    if (r < 0) {
        return r;
    }
    if (rep.hdr.request != request || rep.hdr.size != sizeof(uint64_t)) {
        return -EPROTO;
    }
    *out = rep.payload.u64;
    return 0;
}

int rv_call(int sock, uint32_t request, const void *payload, uint32_t size, const int *fds,
            unsigned nfds, int timeout_ms, uint64_t *status)
{
    uint64_t v;
    int r = exchange_u64(sock, request, VHOST_USER_NEED_REPLY, payload, size, fds, nfds,
                         timeout_ms, &v);

    if (r < 0) {
        return r;
    }
    if (status) {
        *status = v;
    }
    return v ? -EIO : 0;
}

int rv_get_u64(int sock, uint32_t request, int timeout_ms, uint64_t *out)
{
    return exchange_u64(sock, request, 0, NULL, 0, NULL, 0, timeout_ms, out);
}

int rv_set_u64(int sock, uint32_t request, uint64_t v, int fd, int timeout_ms, uint64_t *status)
{
    return rv_call(sock, request, &v, sizeof(v), &fd, fd >= 0, timeout_ms, status);
}

int rv_set_state(int sock, uint32_t request, unsigned index, unsigned num, int timeout_ms)
{
    struct vhost_vring_state st = { .index = index, .num = num };

    return rv_call(sock, request, &st, sizeof(st), NULL, 0, timeout_ms, NULL);
}

bool rv_peer_open(int sock)
{
    struct pollfd p = { .fd = sock, .events = POLLRDHUP };

    return poll(&p, 1, 0) == 0 || !(p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

int rv_wait_hangup(int sock, int timeout_ms)
{
    struct pollfd p = { .fd = sock, .events = POLLRDHUP };
    int64_t deadline = g_get_monotonic_time() + (int64_t)timeout_ms * 1000;

    /* Whatever the daemon still had queued for us does not hide its hang-up. */
    for (;;) {
        int64_t left = (deadline - g_get_monotonic_time()) / 1000;

        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            return -ETIMEDOUT;
        }
        if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) {
            return 0;
        }
    }
}

/* ---- a front-end of raw messages ----------------------------------------- */

int rv_fe_open(struct rv_fe *f, const char *path, uint64_t extra_protocol, int timeout_ms)
{
    uint64_t feat, prot;
    int r;

    memset(f, 0, sizeof(*f));
    f->mem_fd = -1;
    f->timeout_ms = timeout_ms;
    for (unsigned i = 0; i < RV_MAX_VQS; i++) {
        f->ring[i].kick_fd = -1;
    }
    f->sock = rv_connect(path, timeout_ms);
    if (f->sock < 0) {
        return f->sock;
    }
    r = rv_get_u64(f->sock, VHOST_USER_GET_FEATURES, timeout_ms, &feat);
    if (r < 0) {
        return r;
    }
    f->features = feat & ((1ull << VIRTIO_F_VERSION_1) | (1ull << VHOST_USER_F_PROTOCOL_FEATURES));
    r = rv_get_u64(f->sock, VHOST_USER_GET_PROTOCOL_FEATURES, timeout_ms, &prot);
    if (r < 0) {
        return r;
    }
    f->protocol = prot & ((1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                          (1ull << VHOST_USER_PROTOCOL_F_MQ) | extra_protocol);
    r = rv_set_u64(f->sock, VHOST_USER_SET_PROTOCOL_FEATURES, f->protocol, -1, timeout_ms, NULL);
    if (r == 0) {
        r = rv_call(f->sock, VHOST_USER_SET_OWNER, NULL, 0, NULL, 0, timeout_ms, NULL);
    }
    if (r == 0) {
        r = rv_set_u64(f->sock, VHOST_USER_SET_FEATURES, f->features, -1, timeout_ms, NULL);
    }
    return r;
}

int rv_fe_set_mem(struct rv_fe *f)
{
    struct vhost_user_memory m = { .nregions = 1 };

    f->mem_size = RV_MAX_VQS * RV_VQ_SPAN;
    f->mem_fd = memfd_create("rv-guest-ram", MFD_CLOEXEC);
    g_assert_cmpint(f->mem_fd, >=, 0);
    g_assert_cmpint(ftruncate(f->mem_fd, (off_t)f->mem_size), ==, 0);
    f->mem = mmap(NULL, f->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, f->mem_fd, 0);
    g_assert_true(f->mem != MAP_FAILED);
    m.regions[0] = (struct vhost_user_mem_region){
        .guest_phys_addr = 0, .memory_size = f->mem_size,
        .userspace_addr = (uint64_t)(uintptr_t)f->mem, .mmap_offset = 0,
    };
    return rv_call(f->sock, VHOST_USER_SET_MEM_TABLE, &m,
                   offsetof(struct vhost_user_memory, regions) + sizeof(m.regions[0]),
                   &f->mem_fd, 1, f->timeout_ms, NULL);
}

int rv_fe_ring(struct rv_fe *f, unsigned vq, unsigned num, int call_fd, int err_fd)
{
    struct rv_ring *q = &f->ring[vq];
    uint8_t *base = f->mem + vq * RV_VQ_SPAN;
    struct vhost_vring_addr a = { .index = vq };
    uint64_t nofd = VHOST_USER_VRING_NOFD_MASK;
    int r;

    g_assert_cmpuint(vq, <, RV_MAX_VQS);
    g_assert_nonnull(f->mem);
    g_assert_cmpuint(num, <=, 64);
    q->num = num;
    q->desc = (struct vring_desc *)base;
    q->avail = (struct vring_avail *)(base + 4096);
    q->used = (struct vring_used *)(base + 8192);
    q->buf = base + 12288;
    a.desc_user_addr = (uint64_t)(uintptr_t)q->desc;
    a.avail_user_addr = (uint64_t)(uintptr_t)q->avail;
    a.used_user_addr = (uint64_t)(uintptr_t)q->used;
    r = rv_set_state(f->sock, VHOST_USER_SET_VRING_NUM, vq, num, f->timeout_ms);
    if (r == 0) {
        r = rv_set_state(f->sock, VHOST_USER_SET_VRING_BASE, vq, 0, f->timeout_ms);
    }
    if (r == 0) {
        r = rv_call(f->sock, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a), NULL, 0, f->timeout_ms,
                    NULL);
    }
    if (r == 0) {
        r = rv_set_u64(f->sock, VHOST_USER_SET_VRING_CALL, vq | (call_fd < 0 ? nofd : 0),
                       call_fd, f->timeout_ms, NULL);
    }
    if (r == 0) {
        r = rv_set_u64(f->sock, VHOST_USER_SET_VRING_ERR, vq | (err_fd < 0 ? nofd : 0),
                       err_fd, f->timeout_ms, NULL);
    }
    if (r == 0) {
        r = rv_set_state(f->sock, VHOST_USER_SET_VRING_ENABLE, vq, 1, f->timeout_ms);
    }
    return r;
}

int rv_fe_kick(struct rv_fe *f, unsigned vq, int fd, uint64_t *status)
{
    struct rv_ring *q = &f->ring[vq];

    if (fd < 0) {
        if (q->kick_fd < 0) {
            q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
            g_assert_cmpint(q->kick_fd, >=, 0);
        }
        fd = q->kick_fd;
    }
    return rv_set_u64(f->sock, VHOST_USER_SET_VRING_KICK, vq, fd, f->timeout_ms, status);
}

void rv_fe_post_tur(struct rv_fe *f, unsigned vq, unsigned target, unsigned lun)
{
    struct rv_ring *q = &f->ring[vq];
    struct virtio_scsi_cmd_req *req = (void *)q->buf;
    struct virtio_scsi_cmd_resp *resp = (void *)(q->buf + 256);
    uint16_t idx = q->avail->idx;
    uint64_t one = 1;

    g_assert_cmpuint(q->num, >=, 2);
    g_assert_cmpint(q->kick_fd, >=, 0);
    memset(req, 0, sizeof(*req));
    req->lun[0] = 1;
    req->lun[1] = target;
    req->lun[2] = 0x40 | ((lun >> 8) & 0x3f);
    req->lun[3] = lun & 0xff;
    req->tag = idx + 1;
    req->task_attr = VIRTIO_SCSI_S_SIMPLE;
    memset(resp, 0, sizeof(*resp));
    /* descriptors 0 and 1, reused: one request in flight at a time */
    q->desc[0] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)req - f->mem),
                                      .len = sizeof(*req), .flags = VRING_DESC_F_NEXT,
                                      .next = 1 };
    q->desc[1] = (struct vring_desc){ .addr = (uint64_t)((uint8_t *)resp - f->mem),
                                      .len = sizeof(*resp), .flags = VRING_DESC_F_WRITE };
    q->avail->ring[idx % q->num] = 0;
    __atomic_store_n(&q->avail->idx, (uint16_t)(idx + 1), __ATOMIC_RELEASE);
    g_assert_cmpint(write(q->kick_fd, &one, sizeof(one)), ==, sizeof(one));
}

uint16_t rv_fe_used_idx(const struct rv_fe *f, unsigned vq)
{
    return __atomic_load_n(&f->ring[vq].used->idx, __ATOMIC_ACQUIRE);
}

void rv_fe_close(struct rv_fe *f)
{
    if (f->sock >= 0) {
        close(f->sock);
        f->sock = -1;
    }
    for (unsigned i = 0; i < RV_MAX_VQS; i++) {
        if (f->ring[i].kick_fd >= 0) {
            close(f->ring[i].kick_fd);
            f->ring[i].kick_fd = -1;
        }
    }
    if (f->mem) {
        munmap(f->mem, f->mem_size);
        f->mem = NULL;
    }
    if (f->mem_fd >= 0) {
        close(f->mem_fd);
        f->mem_fd = -1;
    }
}
