/*
 * The vhost-user server tests' front-end (vhost-user-server-fixture.h):
 * the fake device, the connection and guest RAM, messages and replies.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include <glib.h>

#include "vhost-user-server.h"
#include "vhost-user-server-fixture.h"

#define REPLY_TIMEOUT_MS 2000

/* ---- the fake device ---------------------------------------------------- */

static int fake_queue_start(void *opaque, unsigned idx, struct virtqueue *vq)
{
    struct fake_dev *f = opaque;

    g_assert_cmpuint(idx, <, VU_MAX_QUEUES);
    if (f->start_result < 0) {
        return f->start_result;
    }
    f->starts[idx]++;
    f->start_base[idx] = vq->last_avail_idx;
    f->start_kick_fd[idx] = vq->kick_fd;
    f->started_vq[idx] = vq;
    f->inflight_at_start[idx] = vq->inflight_region != NULL || vq->inflight_packed != NULL;
    f->resubmit_at_start = vq->resubmit_num;
    for (unsigned i = 0; i < f->pop && f->popped < G_N_ELEMENTS(f->heads); i++) {
        struct iovec iov[4];
        struct vq_elem elem;

        if (vq_pop(vq, &elem, iov, G_N_ELEMENTS(iov)) != 1) {
            break;
        }
        g_assert_cmpuint(elem.out_num, >=, 1);
        memcpy(f->first_bytes[f->popped], elem.out_sg[0].iov_base,
               MIN(elem.out_sg[0].iov_len, sizeof(f->first_bytes[0])));
        f->heads[f->popped++] = elem.head;
        if (i < f->complete) {
            vq_push(vq, &elem, 0);
        }
    }
    return 0;
}

static void fake_queue_stop(void *opaque, unsigned idx, struct virtqueue *vq)
{
    struct fake_dev *f = opaque;

    g_assert_cmpuint(idx, <, VU_MAX_QUEUES);
    /* The server must only stop what it started. */
    g_assert_cmpuint(f->stops[idx], <, f->starts[idx]);
    g_assert_true(f->started_vq[idx] == vq);
    f->stops[idx]++;
}

static void fake_mem_changed(void *opaque)
{
    ((struct fake_dev *)opaque)->mem_changes++;
}

static void fake_reset(void *opaque)
{
    ((struct fake_dev *)opaque)->resets++;
}

static const struct vu_dev_ops fake_ops = {
    .queue_start = fake_queue_start,
    .queue_stop = fake_queue_stop,
    .mem_changed = fake_mem_changed,
    .reset = fake_reset,
};

/* ---- the test's front-end ------------------------------------------------ */

void fixture_init(struct fixture *fx, uint64_t device_features)
{
    struct vu_dev_config cfg = {
        .name = "test-conn",
        .num_queues = NUM_QUEUES,
        .features = device_features,
        .ops = &fake_ops,
    };
    int sv[2];

    memset(fx, 0, sizeof(*fx));
    /* Tests that feed bad input relax this themselves. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
    cfg.opaque = &fx->fake;
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    fx->dev = vu_dev_new(sv[0], &cfg);
    g_assert_nonnull(fx->dev);
    g_assert_cmpint(vu_dev_fd(fx->dev), ==, sv[0]);
    fx->sock = sv[1];
    fx->memfd = memfd_create("guest-ram", MFD_CLOEXEC);
    g_assert_cmpint(fx->memfd, >=, 0);
    g_assert_cmpint(ftruncate(fx->memfd, MEM_SIZE), ==, 0);
    fx->ram = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fx->memfd, 0);
    g_assert_true(fx->ram != MAP_FAILED);
}

void fixture_fini(struct fixture *fx)
{
    if (fx->dev) {
        vu_dev_free(fx->dev);
    }
    close(fx->sock);
    for (unsigned i = 0; i < fx->neventfds; i++) {
        close(fx->eventfds[i]);
    }
    munmap(fx->ram, MEM_SIZE);
    close(fx->memfd);
}

void fixture_reconnect(struct fixture *fx)
{
    struct vu_dev_config cfg = {
        .name = "test-conn-2", .num_queues = NUM_QUEUES, .ops = &fake_ops,
        .opaque = &fx->fake,
    };
    int sv[2];

    vu_dev_free(fx->dev);
    close(fx->sock);
    memset(&fx->fake, 0, sizeof(fx->fake));
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    fx->dev = vu_dev_new(sv[0], &cfg);
    fx->sock = sv[1];
}

void send_msg_fds(int sock, uint32_t req, uint32_t flags, const void *payload,
                  uint32_t size, const int *fds, unsigned nfds)
{
    struct vhost_user_hdr hdr = { .request = req, .flags = flags, .size = size };
    union {
        char buf[CMSG_SPACE(32 * sizeof(int))];
        struct cmsghdr align;
    } control;
    /* One sendmsg, as QEMU does: the fds ride on the header's first byte. */
    struct iovec iov[2] = {
        { .iov_base = &hdr, .iov_len = sizeof(hdr) },
        { .iov_base = (void *)payload, .iov_len = size },
    };
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = size ? 2 : 1 };

    g_assert_cmpuint(nfds, <=, 32);
    if (nfds) {
        struct cmsghdr *c;

        memset(&control, 0, sizeof(control));
        mh.msg_control = control.buf;
        mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    g_assert_cmpint(sendmsg(sock, &mh, MSG_NOSIGNAL), ==, (ssize_t)(sizeof(hdr) + size));
}

void send_msg(int sock, uint32_t req, uint32_t flags, const void *payload,
              uint32_t size)
{
    send_msg_fds(sock, req, flags, payload, size, NULL, 0);
}

struct reply recv_reply(int sock)
{
    struct reply r = { .fd = -1 };
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = { .iov_base = &r.hdr, .iov_len = sizeof(r.hdr) };
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control.buf, .msg_controllen = sizeof(control.buf),
    };
    struct pollfd pfd = { .fd = sock, .events = POLLIN };
    struct cmsghdr *c;

    g_assert_cmpint(poll(&pfd, 1, REPLY_TIMEOUT_MS), ==, 1);
    g_assert_cmpint(recvmsg(sock, &mh, MSG_CMSG_CLOEXEC), ==, sizeof(r.hdr));
    c = CMSG_FIRSTHDR(&mh);
    if (c && c->cmsg_type == SCM_RIGHTS) {
        memcpy(&r.fd, CMSG_DATA(c), sizeof(int));
    }
    g_assert_cmpuint(r.hdr.flags, ==, VHOST_USER_VERSION | VHOST_USER_REPLY_MASK);
    g_assert_cmpuint(r.hdr.size, <=, sizeof(r.p));
    if (r.hdr.size) {
        g_assert_cmpint(recv(sock, &r.p, r.hdr.size, MSG_WAITALL), ==, r.hdr.size);
    }
    return r;
}

void assert_no_reply(int sock)
{
    struct pollfd pfd = { .fd = sock, .events = POLLIN };

    /* dispatch has returned, so any reply is already in the socket. */
    g_assert_cmpint(poll(&pfd, 1, 0), ==, 0);
}

void request(struct fixture *fx, uint32_t req, const void *payload, uint32_t size,
             const int *fds, unsigned nfds)
{
    send_msg_fds(fx->sock, req, VHOST_USER_VERSION, payload, size, fds, nfds);
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    assert_no_reply(fx->sock);
}

uint64_t request_ack(struct fixture *fx, uint32_t req, const void *payload,
                     uint32_t size, const int *fds, unsigned nfds)
{
    struct reply r;

    send_msg_fds(fx->sock, req, VHOST_USER_VERSION | VHOST_USER_NEED_REPLY, payload, size,
                 fds, nfds);
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    r = recv_reply(fx->sock);
    g_assert_cmpuint(r.hdr.request, ==, req);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(uint64_t));
    g_assert_cmpint(r.fd, ==, -1);
    assert_no_reply(fx->sock);
    return r.p.u64;
}

uint64_t get_u64(struct fixture *fx, uint32_t req)
{
    struct reply r;

    send_msg(fx->sock, req, VHOST_USER_VERSION, NULL, 0);
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    r = recv_reply(fx->sock);
    g_assert_cmpuint(r.hdr.request, ==, req);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(uint64_t));
    assert_no_reply(fx->sock);
    return r.p.u64;
}

void set_u64(struct fixture *fx, uint32_t req, uint64_t v)
{
    g_assert_cmpuint(request_ack(fx, req, &v, sizeof(v), NULL, 0), ==, 0);
}

void set_state(struct fixture *fx, uint32_t req, unsigned idx, unsigned num)
{
    struct vhost_vring_state s = { .index = idx, .num = num };

    g_assert_cmpuint(request_ack(fx, req, &s, sizeof(s), NULL, 0), ==, 0);
}

void set_vring_fd(struct fixture *fx, uint32_t req, unsigned idx, int fd)
{
    uint64_t v = idx | (fd < 0 ? VHOST_USER_VRING_NOFD_MASK : 0);

    g_assert_cmpuint(request_ack(fx, req, &v, sizeof(v), &fd, fd < 0 ? 0 : 1), ==, 0);
}

void set_vring_addr(struct fixture *fx, unsigned idx, uint64_t uva_base)
{
    struct vhost_vring_addr a = {
        .index = idx,
        .desc_user_addr = uva_base + DESC_OFF(idx),
        .avail_user_addr = uva_base + AVAIL_OFF(idx),
        .used_user_addr = uva_base + USED_OFF(idx),
    };

    g_assert_cmpuint(request_ack(fx, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a), NULL, 0),
                     ==, 0);
}

void set_mem_table(struct fixture *fx, int memfd, uint64_t gpa, uint64_t uva)
{
    struct vhost_user_memory m = {
        .nregions = 1,
        .regions[0] = {
            .guest_phys_addr = gpa, .memory_size = MEM_SIZE, .userspace_addr = uva,
        },
    };

    g_assert_cmpuint(request_ack(fx, VHOST_USER_SET_MEM_TABLE, &m,
                                 offsetof(struct vhost_user_memory, regions[1]), &memfd, 1),
                     ==, 0);
}

struct vhost_vring_state get_vring_base(struct fixture *fx, unsigned idx)
{
    struct vhost_vring_state s = { .index = idx };
    struct reply r;

    send_msg(fx->sock, VHOST_USER_GET_VRING_BASE, VHOST_USER_VERSION, &s, sizeof(s));
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    r = recv_reply(fx->sock);
    g_assert_cmpuint(r.hdr.request, ==, VHOST_USER_GET_VRING_BASE);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(s));
    return r.p.state;
}

int request_fatal(struct fixture *fx, uint32_t req, uint32_t flags, const void *payload,
                  uint32_t size)
{
    int r;

    send_msg(fx->sock, req, flags, payload, size);
    r = vu_dev_dispatch(fx->dev);
    assert_no_reply(fx->sock);
    return r;
}

unsigned count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    unsigned n = 0;

    g_assert_nonnull(d);
    while (readdir(d)) {
        n++;
    }
    closedir(d);
    return n;
}

int new_eventfd(void)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

int fx_eventfd(struct fixture *fx)
{
    int fd = new_eventfd();

    g_assert_cmpuint(fx->neventfds, <, G_N_ELEMENTS(fx->eventfds));
    fx->eventfds[fx->neventfds++] = fd;
    return fd;
}

uint64_t eventfd_count(int fd)
{
    eventfd_t v = 0;

    if (eventfd_read(fd, &v) < 0) {
        g_assert_cmpint(errno, ==, EAGAIN);
        return 0;
    }
    return v;
}

const uint64_t ring_features = (1ull << VIRTIO_F_VERSION_1) |
                               (1ull << VIRTIO_RING_F_INDIRECT_DESC) |
                               (1ull << VIRTIO_RING_F_EVENT_IDX) |
                               (1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
const uint64_t proto_bit = 1ull << VHOST_USER_F_PROTOCOL_FEATURES;

void configure_queue(struct fixture *fx, unsigned idx, uint32_t base, int kick,
                     int call)
{
    set_state(fx, VHOST_USER_SET_VRING_NUM, idx, RING_SIZE);
    set_state(fx, VHOST_USER_SET_VRING_BASE, idx, base);
    set_vring_addr(fx, idx, MEM_UVA);
    set_vring_fd(fx, VHOST_USER_SET_VRING_KICK, idx, kick);
    set_vring_fd(fx, VHOST_USER_SET_VRING_CALL, idx, call);
}

void negotiate(struct fixture *fx, uint64_t extra_features)
{
    uint64_t proto = get_u64(fx, VHOST_USER_GET_PROTOCOL_FEATURES);

    set_u64(fx, VHOST_USER_SET_PROTOCOL_FEATURES, proto);
    set_u64(fx, VHOST_USER_SET_FEATURES, ring_features | proto_bit | extra_features);
    set_mem_table(fx, fx->memfd, MEM_GPA, MEM_UVA);
}

/* Request i's 16-byte buffer, saying "request i": its guest address. */
static uint64_t guest_request_buf(struct fixture *fx, unsigned i)
{
    uint64_t buf = 0x80000 + 0x100 * i;

    g_snprintf((char *)fx->ram + buf, 16, "request %u", i);
    return MEM_GPA + buf;
}

void guest_post_requests(struct fixture *fx, unsigned idx, unsigned n)
{
    struct vring_desc *desc = (void *)(fx->ram + DESC_OFF(idx));
    struct vring_avail *avail = (void *)(fx->ram + AVAIL_OFF(idx));

    for (unsigned i = 0; i < n; i++) {
        desc[i] = (struct vring_desc){ .addr = guest_request_buf(fx, i), .len = 16 };
        avail->ring[(avail->idx + i) % RING_SIZE] = i;
    }
    __atomic_store_n(&avail->idx, avail->idx + n, __ATOMIC_RELEASE);
}

void guest_post_packed_requests(struct fixture *fx, unsigned idx, unsigned first, unsigned n)
{
    struct vring_packed_desc *ring = (void *)(fx->ram + DESC_OFF(idx));

    for (unsigned i = first; i < first + n; i++) {
        ring[i] = (struct vring_packed_desc){ .addr = guest_request_buf(fx, i), .len = 16,
                                             .id = (uint16_t)i };
        __atomic_store_n(&ring[i].flags, 1u << VRING_PACKED_DESC_F_AVAIL, __ATOMIC_RELEASE);
    }
}

int guest_packed_used_id(struct fixture *fx, unsigned idx, unsigned slot)
{
    const struct vring_packed_desc *d = (void *)(fx->ram + DESC_OFF(idx) + 16 * slot);
    uint16_t used = 1u << VRING_PACKED_DESC_F_AVAIL | 1u << VRING_PACKED_DESC_F_USED;

    if ((__atomic_load_n(&d->flags, __ATOMIC_ACQUIRE) & used) != used) {
        return -1;
    }
    return d->id;
}

uint16_t guest_used_idx(struct fixture *fx, unsigned idx)
{
    struct vring_used *used = (void *)(fx->ram + USED_OFF(idx));

    return __atomic_load_n(&used->idx, __ATOMIC_ACQUIRE);
}
