/*
 * Specification of the vhost-user back-end protocol server
 * (lib/vhost/vhost-user-server.c).  Each test plays the front-end on one
 * end of a socketpair, sends hand-built messages (with memfd regions and
 * eventfds as ancillary data) and checks the replies and the start/stop
 * calls a fake device records: feature negotiation, what QEMU sends while
 * realizing vhost-user-scsi, the queue lifecycle, and that malformed or
 * unknown messages get a clear answer or end the connection, never hang.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_scsi.h>

#include <glib.h>

#include "vhost-user-server.h"

#define NUM_QUEUES 3
#define RING_SIZE 256u
#define MEM_SIZE (1u << 20)
#define MEM_GPA 0x100000ull
#define MEM_UVA 0x7f1200000000ull
/* Where the test puts queue i's ring inside guest memory. */
#define RING_OFF(i) (0x10000ull * ((i) + 1))
#define DESC_OFF(i) RING_OFF(i)
#define AVAIL_OFF(i) (RING_OFF(i) + 0x1000)
#define USED_OFF(i) (RING_OFF(i) + 0x2000)

#define REPLY_TIMEOUT_MS 2000

/* ---- a fake device that records what the server asks of it ------------ */

struct fake_dev {
    unsigned starts[VU_MAX_QUEUES];
    unsigned stops[VU_MAX_QUEUES];
    uint16_t start_base[VU_MAX_QUEUES];
    int start_kick_fd[VU_MAX_QUEUES];
    struct virtqueue *started_vq[VU_MAX_QUEUES];
    bool inflight_at_start[VU_MAX_QUEUES];
    unsigned resets;
    unsigned mem_changes;
    int start_result;
    /* Serving: on start, pop up to `pop` chains and complete the first `complete`. */
    unsigned pop, complete;
    unsigned popped;
    uint16_t heads[8];
    char first_bytes[8][16];     /* start of each chain's first buffer */
    unsigned resubmit_at_start;
};

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
    f->inflight_at_start[idx] = vq->inflight_region != NULL;
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
            vq_push(vq, elem.head, 0);
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

struct fixture {
    struct fake_dev fake;
    struct vu_dev *dev;
    int sock;            /* our end */
    int memfd;           /* guest RAM */
    uint8_t *ram;        /* our mapping of it */
    int eventfds[64];    /* the front-end's kick/call fds, closed at the end */
    unsigned neventfds;
};

static void fixture_init(struct fixture *fx, uint64_t device_features)
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

static void fixture_fini(struct fixture *fx)
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

/*
 * A new back-end instance serves the same front-end: a new connection on
 * the same guest memory.  The fake device's stop completes nothing, so
 * whatever was in flight stays marked, as after a crash.
 */
static void fixture_reconnect(struct fixture *fx)
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

static void send_msg_fds(int sock, uint32_t req, uint32_t flags, const void *payload,
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

static void send_msg(int sock, uint32_t req, uint32_t flags, const void *payload,
                     uint32_t size)
{
    send_msg_fds(sock, req, flags, payload, size, NULL, 0);
}

/* A reply as the front-end sees it. */
struct reply {
    struct vhost_user_hdr hdr;
    union vhost_user_payload p;
    int fd;
};

static struct reply recv_reply(int sock)
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

static void assert_no_reply(int sock)
{
    struct pollfd pfd = { .fd = sock, .events = POLLIN };

    /* dispatch has returned, so any reply is already in the socket. */
    g_assert_cmpint(poll(&pfd, 1, 0), ==, 0);
}

/* Sends a request without NEED_REPLY that has no reply; the server accepts it. */
static void request(struct fixture *fx, uint32_t req, const void *payload, uint32_t size,
                    const int *fds, unsigned nfds)
{
    send_msg_fds(fx->sock, req, VHOST_USER_VERSION, payload, size, fds, nfds);
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    assert_no_reply(fx->sock);
}

/* Sends a request with NEED_REPLY and returns the REPLY_ACK status. */
static uint64_t request_ack(struct fixture *fx, uint32_t req, const void *payload,
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

static uint64_t get_u64(struct fixture *fx, uint32_t req)
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

static void set_u64(struct fixture *fx, uint32_t req, uint64_t v)
{
    g_assert_cmpuint(request_ack(fx, req, &v, sizeof(v), NULL, 0), ==, 0);
}

static void set_state(struct fixture *fx, uint32_t req, unsigned idx, unsigned num)
{
    struct vhost_vring_state s = { .index = idx, .num = num };

    g_assert_cmpuint(request_ack(fx, req, &s, sizeof(s), NULL, 0), ==, 0);
}

static void set_vring_fd(struct fixture *fx, uint32_t req, unsigned idx, int fd)
{
    uint64_t v = idx | (fd < 0 ? VHOST_USER_VRING_NOFD_MASK : 0);

    g_assert_cmpuint(request_ack(fx, req, &v, sizeof(v), &fd, fd < 0 ? 0 : 1), ==, 0);
}

static void set_vring_addr(struct fixture *fx, unsigned idx, uint64_t uva_base)
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

static void set_mem_table(struct fixture *fx, int memfd, uint64_t gpa, uint64_t uva)
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

static struct vhost_vring_state get_vring_base(struct fixture *fx, unsigned idx)
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

/* Sends a message the server must refuse by ending the connection. */
static int request_fatal(struct fixture *fx, uint32_t req, uint32_t flags, const void *payload,
                         uint32_t size)
{
    int r;

    send_msg(fx->sock, req, flags, payload, size);
    r = vu_dev_dispatch(fx->dev);
    assert_no_reply(fx->sock);
    return r;
}

static unsigned count_open_fds(void)
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

static int new_eventfd(void)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

/* An eventfd the fixture closes at the end. */
static int fx_eventfd(struct fixture *fx)
{
    int fd = new_eventfd();

    g_assert_cmpuint(fx->neventfds, <, G_N_ELEMENTS(fx->eventfds));
    fx->eventfds[fx->neventfds++] = fd;
    return fd;
}

static uint64_t eventfd_count(int fd)
{
    eventfd_t v = 0;

    if (eventfd_read(fd, &v) < 0) {
        g_assert_cmpint(errno, ==, EAGAIN);
        return 0;
    }
    return v;
}

static const uint64_t ring_features = (1ull << VIRTIO_F_VERSION_1) |
                                      (1ull << VIRTIO_RING_F_INDIRECT_DESC) |
                                      (1ull << VIRTIO_RING_F_EVENT_IDX) |
                                      (1ull << VIRTIO_F_NOTIFY_ON_EMPTY);
static const uint64_t proto_bit = 1ull << VHOST_USER_F_PROTOCOL_FEATURES;

/*
 * What QEMU's vhost_dev_start sends for queue idx (after SET_FEATURES and
 * the memory table), minus the final SET_VRING_ENABLE.
 */
static void configure_queue(struct fixture *fx, unsigned idx, uint16_t base, int kick,
                            int call)
{
    set_state(fx, VHOST_USER_SET_VRING_NUM, idx, RING_SIZE);
    set_state(fx, VHOST_USER_SET_VRING_BASE, idx, base);
    set_vring_addr(fx, idx, MEM_UVA);
    set_vring_fd(fx, VHOST_USER_SET_VRING_KICK, idx, kick);
    set_vring_fd(fx, VHOST_USER_SET_VRING_CALL, idx, call);
}

/* Protocol features, SET_FEATURES with bit 30 and a one-region memory table. */
static void negotiate(struct fixture *fx, uint64_t extra_features)
{
    uint64_t proto = get_u64(fx, VHOST_USER_GET_PROTOCOL_FEATURES);

    set_u64(fx, VHOST_USER_SET_PROTOCOL_FEATURES, proto);
    set_u64(fx, VHOST_USER_SET_FEATURES, ring_features | proto_bit | extra_features);
    set_mem_table(fx, fx->memfd, MEM_GPA, MEM_UVA);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_feature_negotiation(void)
{
    struct fixture fx;
    uint64_t dev_features = 1ull << VIRTIO_SCSI_F_HOTPLUG;
    uint64_t f, proto, bad;

    fixture_init(&fx, dev_features);

    f = get_u64(&fx, VHOST_USER_GET_FEATURES);
    g_assert_cmphex(f & dev_features, ==, dev_features);
    g_assert_cmphex(f & ring_features, ==, ring_features);
    g_assert_cmphex(f & proto_bit, ==, proto_bit);
    /* No dirty logging, so no migration support to advertise. */
    g_assert_cmphex(f & (1ull << VHOST_F_LOG_ALL), ==, 0);

    proto = get_u64(&fx, VHOST_USER_GET_PROTOCOL_FEATURES);
    for (unsigned bit = 0; bit < 64; bit++) {
        bool want = bit == VHOST_USER_PROTOCOL_F_MQ ||
                    bit == VHOST_USER_PROTOCOL_F_REPLY_ACK ||
                    bit == VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS ||
                    bit == VHOST_USER_PROTOCOL_F_BACKEND_REQ ||
                    bit == VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD ||
                    bit == VHOST_USER_PROTOCOL_F_RESET_DEVICE;

        if (want) {
            g_assert_true(proto & (1ull << bit));
        }
    }
    /* QEMU builds the SCSI config space itself and warns about CONFIG. */
    g_assert_false(proto & (1ull << VHOST_USER_PROTOCOL_F_CONFIG));
    g_assert_false(proto & (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD));

    set_u64(&fx, VHOST_USER_SET_PROTOCOL_FEATURES, proto);
    set_u64(&fx, VHOST_USER_SET_FEATURES, f);
    g_assert_cmphex(vu_dev_features(fx.dev), ==, f);

    /*
     * QEMU acks device bits of its own (e.g. VIRTIO_SCSI_F_CHANGE) whatever
     * we offered: virtio features we did not offer are dropped, not fatal.
     */
    bad = f | (1ull << VIRTIO_SCSI_F_CHANGE);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_FEATURES, &bad, sizeof(bad), NULL, 0),
                     ==, 0);
    g_assert_cmphex(vu_dev_features(fx.dev), ==, f);
    bad = ring_features | (1ull << VHOST_F_LOG_ALL);
    request(&fx, VHOST_USER_SET_FEATURES, &bad, sizeof(bad), NULL, 0);
    g_assert_cmphex(vu_dev_features(fx.dev), ==, ring_features);

    /* A protocol feature we did not offer is refused... */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    bad = proto | (1ull << VHOST_USER_PROTOCOL_F_CONFIG);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_PROTOCOL_FEATURES, &bad, sizeof(bad),
                                 NULL, 0), ==, EINVAL);
    /* ... and without REPLY_ACK the front-end cannot be told: disconnect. */
    g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_PROTOCOL_FEATURES, VHOST_USER_VERSION,
                                  &bad, sizeof(bad)), <, 0);
    fixture_fini(&fx);
}

/*
 * The exact sequence QEMU 7.2 sends while realizing vhost-user-scsi-pci
 * (/work/shared/README.md): every request that expects an answer gets one,
 * nothing else is answered, no queue starts.
 */
static void test_qemu_realize_sequence(void)
{
    struct fixture fx;
    uint64_t f, proto, acked;
    int sv[2], call[NUM_QUEUES], err[NUM_QUEUES];
    unsigned baseline;

    fixture_init(&fx, 1ull << VIRTIO_SCSI_F_HOTPLUG);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);

    f = get_u64(&fx, VHOST_USER_GET_FEATURES);
    g_assert_true(f & proto_bit);
    proto = get_u64(&fx, VHOST_USER_GET_PROTOCOL_FEATURES);
    /* QEMU acks the intersection with what it knows (here: all but STATUS). */
    acked = proto & ~(1ull << VHOST_USER_PROTOCOL_F_STATUS);
    request(&fx, VHOST_USER_SET_PROTOCOL_FEATURES, &acked, sizeof(acked), NULL, 0);
    g_assert_cmpuint(get_u64(&fx, VHOST_USER_GET_QUEUE_NUM), ==, NUM_QUEUES);
    g_assert_cmpuint(get_u64(&fx, VHOST_USER_GET_MAX_MEM_SLOTS), >=, 8);
    g_assert_cmpuint(get_u64(&fx, VHOST_USER_GET_MAX_MEM_SLOTS), <=, GUEST_MEM_MAX_REGIONS);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, &sv[1], 1),
                     ==, 0);
    request(&fx, VHOST_USER_SET_OWNER, NULL, 0, NULL, 0);
    g_assert_cmphex(get_u64(&fx, VHOST_USER_GET_FEATURES), ==, f);
    for (unsigned i = 0; i < NUM_QUEUES; i++) {
        uint64_t v = i;

        call[i] = new_eventfd();
        err[i] = new_eventfd();
        request(&fx, VHOST_USER_SET_VRING_CALL, &v, sizeof(v), &call[i], 1);
        request(&fx, VHOST_USER_SET_VRING_ERR, &v, sizeof(v), &err[i], 1);
    }
    for (unsigned i = 0; i < NUM_QUEUES; i++) {
        g_assert_false(vu_dev_queue_running(fx.dev, i));
        g_assert_cmpuint(fx.fake.starts[i], ==, 0);
    }

    /* The server keeps its own copies of the fds: ours can go. */
    baseline = count_open_fds();
    for (unsigned i = 0; i < NUM_QUEUES; i++) {
        close(call[i]);
        close(err[i]);
    }
    close(sv[1]);
    g_assert_cmpuint(count_open_fds(), ==, baseline - 2 * NUM_QUEUES - 1);
    /* Freeing the connection closes the server's copies too. */
    vu_dev_free(fx.dev);
    fx.dev = NULL;
    g_assert_cmpuint(count_open_fds(), ==, baseline - 4 * NUM_QUEUES - 3);
    close(sv[0]);
    fixture_fini(&fx);
}

/*
 * A queue runs once it has size, addresses, a kick fd and (with
 * PROTOCOL_FEATURES) SET_VRING_ENABLE 1; GET_VRING_BASE stops it and
 * reports where the device stopped; only a new kick fd restarts it.
 */
static void test_queue_lifecycle(void)
{
    struct fixture fx;
    struct vhost_vring_state s;
    struct virtqueue *vq;
    int kick, call;
    const unsigned q = 2;

    fixture_init(&fx, 0);
    kick = fx_eventfd(&fx);
    call = fx_eventfd(&fx);
    negotiate(&fx, 0);
    configure_queue(&fx, q, 17, kick, call);
    /* PROTOCOL_FEATURES was acked: rings start disabled. */
    g_assert_false(vu_dev_queue_running(fx.dev, q));
    g_assert_cmpuint(fx.fake.starts[q], ==, 0);

    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, q, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, q));
    g_assert_cmpuint(fx.fake.starts[q], ==, 1);
    g_assert_cmpuint(fx.fake.start_base[q], ==, 17);
    g_assert_cmpint(fx.fake.start_kick_fd[q], >=, 0);
    vq = vu_dev_queue(fx.dev, q);
    g_assert_true(fx.fake.started_vq[q] == vq);
    g_assert_cmpuint(vq->num, ==, RING_SIZE);
    /* The ring pointers are the front-end's UVAs translated into our mapping. */
    g_assert_true((uint8_t *)vq->desc - (uint8_t *)vu_dev_mem(fx.dev)->r[0].host ==
                  (ptrdiff_t)DESC_OFF(q));
    g_assert_true((uint8_t *)vq->used - (uint8_t *)vu_dev_mem(fx.dev)->r[0].host ==
                  (ptrdiff_t)USED_OFF(q));
    g_assert_true(vq->event_idx);
    /* Only this queue was configured. */
    g_assert_false(vu_dev_queue_running(fx.dev, 0));
    g_assert_null(vu_dev_queue(fx.dev, NUM_QUEUES));

    /* Repeating ENABLE does not start it twice. */
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, q, 1);
    g_assert_cmpuint(fx.fake.starts[q], ==, 1);

    /* The device consumed three requests; GET_VRING_BASE reports that. */
    vq->last_avail_idx += 3;
    s = get_vring_base(&fx, q);
    g_assert_cmpuint(s.index, ==, q);
    g_assert_cmpuint(s.num, ==, 20);
    g_assert_cmpuint(fx.fake.stops[q], ==, 1);
    g_assert_false(vu_dev_queue_running(fx.dev, q));

    /* Stopped until a new kick, even if re-enabled. */
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, q, 0);
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, q, 1);
    g_assert_false(vu_dev_queue_running(fx.dev, q));
    kick = fx_eventfd(&fx);
    set_vring_fd(&fx, VHOST_USER_SET_VRING_KICK, q, kick);
    g_assert_true(vu_dev_queue_running(fx.dev, q));
    g_assert_cmpuint(fx.fake.starts[q], ==, 2);
    g_assert_cmpuint(fx.fake.start_base[q], ==, 20);

    /* Disabling stops it; GET_VRING_BASE of a stopped queue still answers. */
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, q, 0);
    g_assert_cmpuint(fx.fake.stops[q], ==, 2);
    s = get_vring_base(&fx, q);
    g_assert_cmpuint(s.num, ==, 20);
    g_assert_cmpuint(fx.fake.stops[q], ==, 2);

    /* Freeing a connection with a running queue stops it. */
    set_vring_fd(&fx, VHOST_USER_SET_VRING_KICK, q, fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, q, 1);
    g_assert_cmpuint(fx.fake.starts[q], ==, 3);
    vu_dev_free(fx.dev);
    fx.dev = NULL;
    g_assert_cmpuint(fx.fake.stops[q], ==, 3);
    fixture_fini(&fx);
}

/* Without PROTOCOL_FEATURES there is no SET_VRING_ENABLE: the kick starts the ring. */
static void test_start_without_protocol_features(void)
{
    struct fixture fx;

    fixture_init(&fx, 0);
    set_u64(&fx, VHOST_USER_SET_FEATURES, ring_features);
    set_mem_table(&fx, fx.memfd, MEM_GPA, MEM_UVA);
    configure_queue(&fx, 0, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    g_assert_true(vu_dev_queue_running(fx.dev, 0));
    g_assert_cmpuint(fx.fake.starts[0], ==, 1);
    g_assert_cmphex(vu_dev_features(fx.dev) & proto_bit, ==, 0);
    fixture_fini(&fx);
}

/* NOFD on SET_VRING_KICK means "poll": the queue runs with no kick fd. */
static void test_polling_queue(void)
{
    struct fixture fx;

    fixture_init(&fx, 0);
    negotiate(&fx, 0);
    configure_queue(&fx, 1, 0, -1, -1);
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 1, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    g_assert_cmpint(fx.fake.start_kick_fd[1], ==, -1);
    g_assert_cmpint(vu_dev_queue(fx.dev, 1)->call_fd, ==, -1);
    fixture_fini(&fx);
}

/*
 * Ring addresses may come before the memory table; the queue starts when
 * they become translatable.  A new table stops and restarts running queues
 * on the new mapping; one that no longer holds the ring leaves it stopped.
 */
static void test_memory_table_changes(void)
{
    struct fixture fx;
    struct virtqueue *vq;
    int memfd2;
    void *old_desc;

    fixture_init(&fx, 0);
    set_u64(&fx, VHOST_USER_SET_FEATURES, ring_features | proto_bit);
    configure_queue(&fx, 0, 5, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    g_assert_false(vu_dev_queue_running(fx.dev, 0));

    set_mem_table(&fx, fx.memfd, MEM_GPA, MEM_UVA);
    g_assert_true(vu_dev_queue_running(fx.dev, 0));
    g_assert_cmpuint(fx.fake.starts[0], ==, 1);
    g_assert_cmpuint(fx.fake.mem_changes, ==, 1);
    vq = vu_dev_queue(fx.dev, 0);
    old_desc = vq->desc;

    /* Same layout, new backing file: the ring is re-translated. */
    memfd2 = memfd_create("guest-ram-2", MFD_CLOEXEC);
    g_assert_cmpint(ftruncate(memfd2, MEM_SIZE), ==, 0);
    vq->last_avail_idx = 9;
    set_mem_table(&fx, memfd2, MEM_GPA, MEM_UVA);
    g_assert_cmpuint(fx.fake.stops[0], ==, 1);
    g_assert_cmpuint(fx.fake.starts[0], ==, 2);
    g_assert_cmpuint(fx.fake.start_base[0], ==, 9);
    g_assert_true((void *)vq->desc != old_desc);
    g_assert_true((void *)vq->desc ==
                  (void *)((uint8_t *)vu_dev_mem(fx.dev)->r[0].host + DESC_OFF(0)));
    g_assert_cmpuint(vu_dev_mem(fx.dev)->nregions, ==, 1);

    /* A table at other UVAs no longer holds the ring: stopped, and logged. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    set_mem_table(&fx, memfd2, MEM_GPA, MEM_UVA + 0x40000000);
    g_assert_cmpuint(fx.fake.stops[0], ==, 2);
    g_assert_cmpuint(fx.fake.starts[0], ==, 2);
    g_assert_false(vu_dev_queue_running(fx.dev, 0));

    /* A table with a region but no fd for it is refused; the old one stays. */
    {
        struct vhost_user_memory m = { .nregions = 2 };

        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_MEM_TABLE, &m,
                                     offsetof(struct vhost_user_memory, regions[2]),
                                     &memfd2, 1), !=, 0);
        g_assert_cmpuint(vu_dev_mem(fx.dev)->nregions, ==, 1);
    }
    close(memfd2);
    fixture_fini(&fx);
}

/* A payload shorter or longer than the request's, or a bad header: disconnect. */
static void test_malformed_messages(void)
{
    struct fixture fx;
    struct vhost_vring_state s = { .index = 0, .num = RING_SIZE };
    uint8_t big[300] = { 0 };

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);

    /* Truncated: SET_VRING_NUM carries 8 bytes, not 4. */
    g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_VRING_NUM, VHOST_USER_VERSION, &s, 4),
                    ==, -EPROTO);
    /* Oversized for its request. */
    g_assert_cmpint(request_fatal(&fx, VHOST_USER_GET_FEATURES, VHOST_USER_VERSION, big, 8),
                    ==, -EPROTO);
    /* SET_MEM_TABLE claiming more regions than its payload holds. */
    {
        struct vhost_user_memory m = { .nregions = 3 };

        g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_MEM_TABLE, VHOST_USER_VERSION, &m,
                                      offsetof(struct vhost_user_memory, regions[2])),
                        ==, -EPROTO);
        m.nregions = 9;
        g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_MEM_TABLE, VHOST_USER_VERSION, &m,
                                      offsetof(struct vhost_user_memory, regions[8])),
                        ==, -EPROTO);
    }
    /* Wrong protocol version. */
    g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_OWNER, 0x2, NULL, 0), ==, -EPROTO);
    fixture_fini(&fx);

    /* A payload larger than any request's: refused before reading it. */
    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_assert_cmpint(request_fatal(&fx, 99, VHOST_USER_VERSION, big, sizeof(big)), ==,
                    -EPROTO);
    fixture_fini(&fx);

    /* The peer dies in the middle of a message. */
    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    {
        struct vhost_user_hdr h = { VHOST_USER_SET_VRING_NUM, VHOST_USER_VERSION, 8 };
        uint8_t buf[sizeof(h) + 4];

        memcpy(buf, &h, sizeof(h));
        memset(buf + sizeof(h), 0, 4);
        g_assert_cmpint(send(fx.sock, buf, sizeof(buf), 0), ==, sizeof(buf));
        shutdown(fx.sock, SHUT_WR);
        g_assert_cmpint(vu_dev_dispatch(fx.dev), <, 0);
    }
    fixture_fini(&fx);

    /* A clean close reads as ECONNRESET. */
    fixture_init(&fx, 0);
    shutdown(fx.sock, SHUT_WR);
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, -ECONNRESET);
    fixture_fini(&fx);
}

/* Queue indexes are checked against the number of queues. */
static void test_bad_queue_index(void)
{
    struct fixture fx;
    struct vhost_vring_state s = { .index = NUM_QUEUES, .num = RING_SIZE };
    uint64_t v;
    int efd = new_eventfd();

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    /* With NEED_REPLY the front-end is told... */
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_VRING_NUM, &s, sizeof(s), NULL, 0), ==,
                     EINVAL);
    v = 200;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_VRING_CALL, &v, sizeof(v), &efd, 1),
                     ==, EINVAL);
    /* ... and the connection goes on. */
    g_assert_cmpuint(get_u64(&fx, VHOST_USER_GET_QUEUE_NUM), ==, NUM_QUEUES);
    /* Without it, the violation ends the connection. */
    g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_VRING_ENABLE, VHOST_USER_VERSION, &s,
                                  sizeof(s)), ==, -EINVAL);
    s.index = 0xffffffff;
    g_assert_cmpint(request_fatal(&fx, VHOST_USER_GET_VRING_BASE, VHOST_USER_VERSION, &s,
                                  sizeof(s)), ==, -EINVAL);
    /* A ring size that is not a power of two. */
    s.index = 0;
    s.num = 100;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_VRING_NUM, &s, sizeof(s), NULL, 0), !=,
                     0);
    close(efd);
    fixture_fini(&fx);
}

/* Requests we do not implement: answered when an answer is awaited, else ignored. */
static void test_unknown_requests(void)
{
    struct fixture fx;
    uint64_t v = 1500;
    struct vhost_user_config cfg = { .offset = 0, .size = 36 };
    struct reply r;

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);

    g_assert_cmpuint(request_ack(&fx, 99, &v, sizeof(v), NULL, 0), !=, 0);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_NET_SET_MTU, &v, sizeof(v), NULL, 0), !=, 0);
    request(&fx, 0x12345, &v, sizeof(v), NULL, 0);
    request(&fx, VHOST_USER_SEND_RARP, &v, sizeof(v), NULL, 0);

    /* GET_CONFIG always expects a reply: an empty one means "error". */
    send_msg(fx.sock, VHOST_USER_GET_CONFIG, VHOST_USER_VERSION, &cfg, 12 + cfg.size);
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.hdr.request, ==, VHOST_USER_GET_CONFIG);
    g_assert_cmpuint(r.hdr.size, ==, 0);
    assert_no_reply(fx.sock);

    /* Dirty logging cannot be honoured: refused, never silently ignored. */
    {
        struct vhost_user_log log = { .mmap_size = 4096 };

        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_LOG_BASE, &log, sizeof(log), NULL, 0),
                         !=, 0);
        g_assert_cmpint(request_fatal(&fx, VHOST_USER_SET_LOG_FD, VHOST_USER_VERSION, NULL, 0),
                        <, 0);
    }
    /* The connection still works after the ignored ones. */
    g_assert_cmpuint(get_u64(&fx, VHOST_USER_GET_QUEUE_NUM), ==, NUM_QUEUES);
    fixture_fini(&fx);
}

/*
 * A message carrying more fds than the 8 a message may is refused (and
 * every fd closed); fds a request does not use are closed.
 */
static void test_too_many_fds_refused(void)
{
    struct fixture fx;
    int fds[12];
    uint64_t v = 0 | VHOST_USER_VRING_NOFD_MASK;
    unsigned baseline;

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    baseline = count_open_fds();
    for (unsigned i = 0; i < G_N_ELEMENTS(fds); i++) {
        fds[i] = new_eventfd();
    }
    /* With NEED_REPLY the front-end is told, whatever the request. */
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_VRING_CALL, &v, sizeof(v), fds,
                                 G_N_ELEMENTS(fds)), ==, EINVAL);
    {
        struct vhost_user_memory m = { .nregions = 1 };

        m.regions[0] = (struct vhost_user_mem_region){
            .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE, .userspace_addr = MEM_UVA,
        };
        close(fds[0]);
        fds[0] = fx.memfd;
        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_MEM_TABLE, &m,
                                     offsetof(struct vhost_user_memory, regions[1]), fds,
                                     VHOST_USER_MAX_FDS + 1), ==, EINVAL);
        g_assert_cmpuint(vu_dev_mem(fx.dev)->nregions, ==, 0);
        fds[0] = new_eventfd();
    }
    /* Fds a request does not use are closed; the first of SET_VRING_ERR's is kept. */
    request(&fx, VHOST_USER_SET_OWNER, NULL, 0, fds, 1);
    v = 1;
    request(&fx, VHOST_USER_SET_VRING_ERR, &v, sizeof(v), fds, 3);
    vu_dev_queue_error(fx.dev, 1);
    g_assert_cmpuint(eventfd_count(fds[0]), ==, 1);
    for (unsigned i = 1; i < G_N_ELEMENTS(fds); i++) {
        g_assert_cmpuint(eventfd_count(fds[i]), ==, 0);
    }
    for (unsigned i = 0; i < G_N_ELEMENTS(fds); i++) {
        close(fds[i]);
    }
    /* Only the err fd is still held. */
    g_assert_cmpuint(count_open_fds(), ==, baseline + 1);
    /* Without NEED_REPLY, the violation ends the connection. */
    for (unsigned i = 0; i < G_N_ELEMENTS(fds); i++) {
        fds[i] = new_eventfd();
    }
    v = 0 | VHOST_USER_VRING_NOFD_MASK;
    send_msg_fds(fx.sock, VHOST_USER_SET_VRING_CALL, VHOST_USER_VERSION, &v, sizeof(v), fds,
                 G_N_ELEMENTS(fds));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, -EINVAL);
    for (unsigned i = 0; i < G_N_ELEMENTS(fds); i++) {
        close(fds[i]);
    }
    g_assert_cmpuint(count_open_fds(), ==, baseline + 1);
    fixture_fini(&fx);
}

/*
 * Kick, call and err fds must be eventfds, which the server makes
 * non-blocking: a front-end that fills a counter cannot block a thread.
 */
static void test_notify_fds_must_be_eventfds(void)
{
    struct fixture fx;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC), pipefd[2], efd, fl;
    uint64_t v;

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_assert_cmpint(null, >=, 0);
    g_assert_cmpint(pipe2(pipefd, O_CLOEXEC), ==, 0);
    negotiate(&fx, 0);
    /* An unwatchable kick fd, named with connection and queue in the log. */
    v = 2;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          "test-conn vq2: kick fd is not an eventfd; refused");
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_VRING_KICK, &v, sizeof(v), &null, 1),
                     ==, EINVAL);
    g_test_assert_expected_messages();
    /* A pipe (whose writer may close and leave it readable forever), for each kind. */
    for (uint32_t req = VHOST_USER_SET_VRING_KICK; req <= VHOST_USER_SET_VRING_ERR; req++) {
        g_assert_cmpuint(request_ack(&fx, req, &v, sizeof(v), &pipefd[0], 1), ==, EINVAL);
    }
    /* A blocking eventfd at its maximum is accepted and can no longer block. */
    efd = eventfd(0, EFD_CLOEXEC);
    g_assert_cmpint(efd, >=, 0);
    g_assert_cmpint(eventfd_write(efd, 0xfffffffffffffffeull), ==, 0);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_VRING_ERR, &v, sizeof(v), &efd, 1),
                     ==, 0);
    fl = fcntl(efd, F_GETFL);
    g_assert_cmpint(fl & O_NONBLOCK, ==, O_NONBLOCK);
    vu_dev_queue_error(fx.dev, 2);     /* returns: the write fails with EAGAIN */
    g_assert_cmpuint(eventfd_count(efd), ==, 0xfffffffffffffffeull);
    /* The same for a running queue's call fd, which the server signals once. */
    configure_queue(&fx, 2, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 2));
    g_assert_cmpint(eventfd_write(efd, 0xfffffffffffffffeull), ==, 0);
    fl = fcntl(efd, F_GETFL);
    g_assert_cmpint(fcntl(efd, F_SETFL, fl & ~O_NONBLOCK), ==, 0);
    set_vring_fd(&fx, VHOST_USER_SET_VRING_CALL, 2, efd);
    g_assert_true(vu_dev_queue_running(fx.dev, 2));
    close(efd);
    close(pipefd[0]);
    close(pipefd[1]);
    close(null);
    fixture_fini(&fx);
}

/* The backend request channel must be a UNIX stream socket. */
static void test_backend_req_fd_must_be_a_socket(void)
{
    struct fixture fx;
    int efd = new_eventfd(), sv[2];

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, &efd, 1), ==,
                     EINVAL);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, &sv[0], 1), ==,
                     EINVAL);
    close(sv[0]);
    close(sv[1]);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, &sv[0], 1), ==,
                     0);
    g_assert_cmpint(fcntl(sv[0], F_GETFL) & O_NONBLOCK, ==, O_NONBLOCK);
    close(sv[0]);
    close(sv[1]);
    close(efd);
    fixture_fini(&fx);
}

/*
 * A message may arrive in pieces over several wake-ups: each dispatch
 * takes what is there and returns, and the whole message has one
 * deadline from its first byte, not one per byte.
 */
static void test_message_in_pieces(void)
{
    struct fixture fx;
    struct vhost_user_hdr h = { VHOST_USER_GET_QUEUE_NUM, VHOST_USER_VERSION, 0 };
    const uint8_t *b = (const uint8_t *)&h;
    int64_t deadline;
    struct reply r;

    fixture_init(&fx, 0);
    g_assert_cmpint(vu_dev_deadline(fx.dev), ==, 0);
    g_assert_cmpuint(vu_dev_poll_events(fx.dev), ==, POLLIN);
    g_assert_cmpint(send(fx.sock, b, 5, 0), ==, 5);
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    assert_no_reply(fx.sock);
    deadline = vu_dev_deadline(fx.dev);
    g_assert_cmpint(deadline, >, 0);
    g_assert_false(vu_dev_expired(fx.dev, deadline - 1));
    g_assert_cmpint(send(fx.sock, b + 5, 4, 0), ==, 4);
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    assert_no_reply(fx.sock);
    /* More bytes do not push the deadline back. */
    g_assert_cmpint(vu_dev_deadline(fx.dev), ==, deadline);
    g_assert_cmpint(send(fx.sock, b + 9, sizeof(h) - 9, 0), ==, (ssize_t)sizeof(h) - 9);
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.p.u64, ==, NUM_QUEUES);
    g_assert_cmpint(vu_dev_deadline(fx.dev), ==, 0);

    /* A message that stops half-way is past its deadline after the timeout. */
    g_assert_cmpint(send(fx.sock, b, 3, 0), ==, 3);
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    deadline = vu_dev_deadline(fx.dev);
    g_assert_cmpint(deadline, >, 0);
    g_assert_cmpint(deadline - g_get_monotonic_time(), <=, 5000 * 1000);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          "test-conn: a message from the front-end did not arrive whole "
                          "within 5000 ms; dropping the connection");
    g_assert_true(vu_dev_expired(fx.dev, deadline));
    g_test_assert_expected_messages();
    fixture_fini(&fx);
}

/*
 * A front-end that sends requests and never reads the replies: once the
 * socket is full the server stops reading, waits for POLLOUT, and the
 * reply it holds has a deadline; nothing blocks.
 */
static void test_replies_not_taken(void)
{
    struct fixture fx;
    struct vhost_user_hdr h = { VHOST_USER_GET_FEATURES, VHOST_USER_VERSION, 0 };
    int small = 4096, fl;
    unsigned sent = 0, got = 0;

    fixture_init(&fx, 0);
    g_assert_cmpint(setsockopt(vu_dev_fd(fx.dev), SOL_SOCKET, SO_SNDBUF, &small,
                               sizeof(small)), ==, 0);
    fl = fcntl(fx.sock, F_GETFL);
    g_assert_cmpint(fcntl(fx.sock, F_SETFL, fl | O_NONBLOCK), ==, 0);
    for (unsigned i = 0; i < 100000 && vu_dev_poll_events(fx.dev) == POLLIN; i++) {
        if (send(fx.sock, &h, sizeof(h), 0) == sizeof(h)) {
            sent++;
        }
        g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    }
    g_assert_cmpuint(vu_dev_poll_events(fx.dev), ==, POLLOUT);
    g_assert_cmpint(vu_dev_deadline(fx.dev), >, 0);
    /* Taking the replies lets it go on and answer every request. */
    g_assert_cmpint(fcntl(fx.sock, F_SETFL, fl), ==, 0);
    while (got < sent) {
        struct pollfd pfd = { .fd = fx.sock, .events = POLLIN };
        struct reply r;

        /* Replies still due come once dispatch runs again (POLLOUT in a real loop). */
        if (poll(&pfd, 1, 0) == 0) {
            g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
        }
        r = recv_reply(fx.sock);
        g_assert_cmpuint(r.hdr.request, ==, VHOST_USER_GET_FEATURES);
        got++;
    }
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    g_assert_cmpuint(vu_dev_poll_events(fx.dev), ==, POLLIN);
    g_assert_cmpint(vu_dev_deadline(fx.dev), ==, 0);
    fixture_fini(&fx);
}

/* CONFIGURE_MEM_SLOTS: regions come and go one at a time. */
static void test_add_remove_regions(void)
{
    struct fixture fx;
    struct vhost_user_mem_reg reg = {
        .region = { .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE,
                    .userspace_addr = MEM_UVA },
    };
    int memfd2 = memfd_create("guest-ram-high", MFD_CLOEXEC);
    const struct guest_mem *mem;
    unsigned baseline;
    uint8_t *p;

    fixture_init(&fx, 0);
    g_assert_cmpint(ftruncate(memfd2, 2 * MEM_SIZE), ==, 0);
    baseline = count_open_fds();

    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &fx.memfd,
                                 1), ==, 0);
    /* The second region starts MEM_SIZE into its file (mmap_offset). */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = 0x100000000ull, .memory_size = MEM_SIZE,
        .userspace_addr = MEM_UVA + 0x10000000, .mmap_offset = MEM_SIZE,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &memfd2, 1),
                     ==, 0);
    mem = vu_dev_mem(fx.dev);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* What the guest writes is what we read, at the right offsets. */
    fx.ram[0x1234] = 0xab;
    p = guest_mem_gpa_ptr(mem, MEM_GPA + 0x1234, 1);
    g_assert_nonnull(p);
    g_assert_cmpuint(*p, ==, 0xab);
    g_assert_nonnull(guest_mem_gpa_ptr(mem, 0x100000000ull + MEM_SIZE - 1, 1));
    g_assert_null(guest_mem_gpa_ptr(mem, 0x100000000ull + MEM_SIZE, 1));

    /*
     * QEMU re-adds every region when a device is re-created on the same
     * connection: an identical region replaces the old mapping.
     */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE, .userspace_addr = MEM_UVA,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &fx.memfd,
                                 1), ==, 0);
    g_assert_cmpuint(mem->nregions, ==, 2);
    p = guest_mem_gpa_ptr(mem, MEM_GPA + 0x1234, 1);
    g_assert_nonnull(p);
    g_assert_cmpuint(*p, ==, 0xab);

    /* Overlapping an existing region is refused. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    reg.region.guest_phys_addr = MEM_GPA + 0x1000;
    reg.region.userspace_addr = MEM_UVA + 0x20000000;
    reg.region.mmap_offset = 0;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &memfd2, 1),
                     !=, 0);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* A region its file cannot back (we would SIGBUS on access) is refused. */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = 0x200000000ull, .memory_size = MEM_SIZE,
        .userspace_addr = MEM_UVA + 0x30000000, .mmap_offset = MEM_SIZE + 4096,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), &memfd2, 1),
                     ==, EINVAL);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* ADD_MEM_REG needs its fd. */
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg), NULL, 0),
                     !=, 0);

    /* REM_MEM_REG matches gpa, size and uva. */
    reg.region = (struct vhost_user_mem_region){
        .guest_phys_addr = MEM_GPA, .memory_size = MEM_SIZE, .userspace_addr = MEM_UVA + 1,
    };
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_REM_MEM_REG, &reg, sizeof(reg), NULL, 0), ==,
                     ENOENT);
    g_assert_cmpuint(mem->nregions, ==, 2);
    /* QEMU may pass the region's fd along: it is closed, the region removed. */
    reg.region.userspace_addr = MEM_UVA;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_REM_MEM_REG, &reg, sizeof(reg), &fx.memfd,
                                 1), ==, 0);
    g_assert_cmpuint(mem->nregions, ==, 1);
    g_assert_null(guest_mem_gpa_ptr(mem, MEM_GPA, 1));
    g_assert_cmpuint(mem->r[0].gpa, ==, 0x100000000ull);
    g_assert_cmpuint(count_open_fds(), ==, baseline);
    close(memfd2);
    fixture_fini(&fx);
}

/*
 * GET_INFLIGHT_FD hands out a zeroed, sealed area sized for the queues;
 * after SET_INFLIGHT_FD each starting queue tracks its requests there.
 */
static void test_inflight_area(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    const size_t qbytes = sizeof(struct vhost_user_inflight_queue) +
                          RING_SIZE * sizeof(struct vhost_user_inflight_desc);
    struct vhost_user_inflight_queue *iq;
    struct reply r;
    struct stat st;
    uint8_t *area;

    fixture_init(&fx, 0);
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.hdr.request, ==, VHOST_USER_GET_INFLIGHT_FD);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(in));
    g_assert_cmpuint(r.p.inflight.mmap_size, ==, NUM_QUEUES * qbytes);
    g_assert_cmpuint(r.p.inflight.mmap_offset, ==, 0);
    g_assert_cmpuint(r.p.inflight.num_queues, ==, NUM_QUEUES);
    g_assert_cmpuint(r.p.inflight.queue_size, ==, RING_SIZE);
    g_assert_cmpint(r.fd, >=, 0);
    g_assert_cmpint(fstat(r.fd, &st), ==, 0);
    g_assert_cmpuint(st.st_size, ==, NUM_QUEUES * qbytes);
    /* We cannot shrink it under the back-end. */
    g_assert_cmpint(ftruncate(r.fd, 16), <, 0);
    area = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    g_assert_true(area != MAP_FAILED);
    for (off_t i = 0; i < st.st_size; i++) {
        g_assert_cmpuint(area[i], ==, 0);
    }

    /* QEMU sends it back (SET_INFLIGHT_FD), then starts the rings. */
    in = r.p.inflight;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &r.fd, 1),
                     ==, 0);
    negotiate(&fx, 0);
    configure_queue(&fx, 1, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 1, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    g_assert_true(fx.fake.inflight_at_start[1]);
    /* Queue 1 tracks in its own slice, now marked as initialized. */
    iq = (struct vhost_user_inflight_queue *)(area + qbytes);
    g_assert_cmpuint(iq->version, ==, 1);
    g_assert_cmpuint(iq->desc_num, ==, RING_SIZE);
    iq->desc[7].counter = 0x5a5a;
    g_assert_cmpuint(vu_dev_queue(fx.dev, 1)->inflight_region->desc[7].counter, ==, 0x5a5a);
    g_assert_cmpuint(((struct vhost_user_inflight_queue *)area)->version, ==, 0);
    /*
     * A virtio reset voids all tracking: the next driver starts afresh.
     * Only the slices' versions are cleared (the entries are, when a
     * queue next starts), so a reset commits none of the area's pages.
     */
    iq->desc[7].inflight = 1;
    request(&fx, VHOST_USER_RESET_DEVICE, NULL, 0, NULL, 0);
    g_assert_cmpuint(iq->version, ==, 0);
    configure_queue(&fx, 1, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 1, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    g_assert_cmpuint(iq->version, ==, 1);
    g_assert_cmpuint(iq->desc[7].inflight, ==, 0);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 0);

    close(r.fd);

    /* Geometry we cannot serve: an empty area (the front-end goes on without one). */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    in = (struct vhost_user_inflight){ .num_queues = NUM_QUEUES + 1, .queue_size = RING_SIZE };
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.hdr.size, ==, sizeof(in));
    g_assert_cmpuint(r.p.inflight.mmap_size, ==, 0);
    g_assert_cmpint(r.fd, ==, -1);
    /*
     * Rings larger than QEMU's largest (1024) are not tracked: 66 queues
     * of 32768 entries would be 33 MiB per connection.
     */
    in = (struct vhost_user_inflight){ .num_queues = NUM_QUEUES, .queue_size = 2048 };
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpuint(r.p.inflight.mmap_size, ==, 0);
    g_assert_cmpint(r.fd, ==, -1);
    /* SET_INFLIGHT_FD whose file is smaller than it claims is refused. */
    {
        int small = memfd_create("small", MFD_CLOEXEC);

        g_assert_cmpint(ftruncate(small, 4096), ==, 0);
        in = (struct vhost_user_inflight){
            .mmap_size = NUM_QUEUES * qbytes, .num_queues = NUM_QUEUES, .queue_size = RING_SIZE,
        };
        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &small,
                                     1), !=, 0);
        close(small);
    }
    /* The running queue kept its area. */
    g_assert_true(vu_dev_queue_running(fx.dev, 1));
    munmap(area, st.st_size);
    fixture_fini(&fx);
}

/* RESET_DEVICE stops every queue, forgets the rings and resets the device. */
static void test_reset_device(void)
{
    struct fixture fx;

    fixture_init(&fx, 0);
    negotiate(&fx, 0);
    for (unsigned i = 0; i < NUM_QUEUES; i++) {
        configure_queue(&fx, i, 0, fx_eventfd(&fx), fx_eventfd(&fx));
        set_state(&fx, VHOST_USER_SET_VRING_ENABLE, i, 1);
        g_assert_true(vu_dev_queue_running(fx.dev, i));
    }
    request(&fx, VHOST_USER_RESET_DEVICE, NULL, 0, NULL, 0);
    g_assert_cmpuint(fx.fake.resets, ==, 1);
    for (unsigned i = 0; i < NUM_QUEUES; i++) {
        g_assert_false(vu_dev_queue_running(fx.dev, i));
        g_assert_cmpuint(fx.fake.stops[i], ==, 1);
    }
    /* The rings must be configured again before they run. */
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    set_vring_fd(&fx, VHOST_USER_SET_VRING_KICK, 0, fx_eventfd(&fx));
    g_assert_false(vu_dev_queue_running(fx.dev, 0));
    configure_queue(&fx, 0, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    g_assert_true(vu_dev_queue_running(fx.dev, 0));
    /* The memory table survives: QEMU does not resend regions it thinks we have. */
    g_assert_cmpuint(vu_dev_mem(fx.dev)->nregions, ==, 1);
    fixture_fini(&fx);
}

/*
 * QEMU changes the call fd of running queues (MSI-X masking): the device
 * keeps running and its notifications reach the new eventfd.
 */
static void test_call_fd_swap_while_running(void)
{
    struct fixture fx;
    int call1, call2;
    int dev_call;
    struct virtqueue *vq;

    fixture_init(&fx, 0);
    call1 = fx_eventfd(&fx);
    call2 = fx_eventfd(&fx);
    negotiate(&fx, 0);
    configure_queue(&fx, 0, 0, fx_eventfd(&fx), call1);
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    vq = vu_dev_queue(fx.dev, 0);
    dev_call = vq->call_fd;
    g_assert_cmpint(dev_call, >=, 0);
    g_assert_cmpint(eventfd_write(dev_call, 1), ==, 0);
    g_assert_cmpuint(eventfd_count(call1), ==, 1);

    set_vring_fd(&fx, VHOST_USER_SET_VRING_CALL, 0, call2);
    g_assert_cmpuint(fx.fake.stops[0], ==, 0);
    g_assert_cmpint(vq->call_fd, ==, dev_call);
    /*
     * A completion may have gone to the old fd just before the swap (QEMU
     * unmasks without checking): the new one is signalled once.
     */
    g_assert_cmpuint(eventfd_count(call2), ==, 1);
    g_assert_cmpint(eventfd_write(vq->call_fd, 1), ==, 0);
    g_assert_cmpuint(eventfd_count(call2), ==, 1);
    g_assert_cmpuint(eventfd_count(call1), ==, 0);

    /* Dropping the call fd (NOFD) restarts the queue without one. */
    set_vring_fd(&fx, VHOST_USER_SET_VRING_CALL, 0, -1);
    g_assert_cmpuint(fx.fake.stops[0], ==, 1);
    g_assert_cmpuint(fx.fake.starts[0], ==, 2);
    g_assert_cmpint(vq->call_fd, ==, -1);
    /* A first call fd for a running queue is published (and signalled) in place. */
    set_vring_fd(&fx, VHOST_USER_SET_VRING_CALL, 0, call1);
    g_assert_cmpuint(fx.fake.stops[0], ==, 1);
    g_assert_cmpint(vq->call_fd, >=, 0);
    g_assert_cmpuint(eventfd_count(call1), ==, 1);
    g_assert_cmpint(eventfd_write(vq->call_fd, 1), ==, 0);
    g_assert_cmpuint(eventfd_count(call1), ==, 1);

    /* An err fd given to a running queue is what a broken ring signals. */
    {
        int err = fx_eventfd(&fx);

        set_vring_fd(&fx, VHOST_USER_SET_VRING_ERR, 0, err);
        g_assert_cmpuint(fx.fake.stops[0], ==, 1);
        g_assert_cmpuint(eventfd_count(err), ==, 0);
        g_log_set_always_fatal(G_LOG_FATAL_MASK);
        vu_dev_queue_error(fx.dev, 0);
        g_assert_cmpuint(eventfd_count(err), ==, 1);
    }
    fixture_fini(&fx);
}

/* A device that fails to start a queue leaves it stopped, and no stop is sent. */
static void test_device_refuses_start(void)
{
    struct fixture fx;
    struct vhost_vring_state s;

    fixture_init(&fx, 0);
    negotiate(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    fx.fake.start_result = -ENOMEM;
    configure_queue(&fx, 0, 4, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    g_assert_false(vu_dev_queue_running(fx.dev, 0));
    s = get_vring_base(&fx, 0);
    g_assert_cmpuint(s.num, ==, 4);
    g_assert_cmpuint(fx.fake.stops[0], ==, 0);
    fixture_fini(&fx);
}

/* Lays out chain heads 0..n-1 (one 16-byte readable buffer each) in queue idx's ring. */
static void guest_post_requests(struct fixture *fx, unsigned idx, unsigned n)
{
    struct vring_desc *desc = (void *)(fx->ram + DESC_OFF(idx));
    struct vring_avail *avail = (void *)(fx->ram + AVAIL_OFF(idx));

    for (unsigned i = 0; i < n; i++) {
        uint64_t buf = 0x80000 + 0x100 * i;

        desc[i] = (struct vring_desc){ .addr = MEM_GPA + buf, .len = 16 };
        g_snprintf((char *)fx->ram + buf, 16, "request %u", i);
        avail->ring[(avail->idx + i) % RING_SIZE] = i;
    }
    __atomic_store_n(&avail->idx, avail->idx + n, __ATOMIC_RELEASE);
}

static uint16_t guest_used_idx(struct fixture *fx, unsigned idx)
{
    struct vring_used *used = (void *)(fx->ram + USED_OFF(idx));

    return __atomic_load_n(&used->idx, __ATOMIC_ACQUIRE);
}

/*
 * End to end: the device pops what the guest posted through the
 * translated ring, its completion lands in the guest's used ring, and
 * GET_VRING_BASE reports what the device consumed.
 */
static void test_device_serves_guest_ring(void)
{
    struct fixture fx;
    struct vhost_vring_state s;

    fixture_init(&fx, 0);
    negotiate(&fx, 0);
    guest_post_requests(&fx, 2, 2);
    fx.fake.pop = 2;
    fx.fake.complete = 2;
    configure_queue(&fx, 2, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.popped, ==, 2);
    g_assert_cmpuint(fx.fake.heads[0], ==, 0);
    g_assert_cmpstr(fx.fake.first_bytes[0], ==, "request 0");
    g_assert_cmpstr(fx.fake.first_bytes[1], ==, "request 1");
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 2);
    s = get_vring_base(&fx, 2);
    g_assert_cmpuint(s.num, ==, 2);
    fixture_fini(&fx);
}

/*
 * INFLIGHT_SHMFD across a back-end restart: the new instance gets the old
 * area back (SET_INFLIGHT_FD) and resubmits the request the old one had
 * popped but not completed.
 */
static void test_inflight_resubmit_after_restart(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = RING_SIZE };
    struct reply r;
    int area_fd;

    fixture_init(&fx, 0);
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    area_fd = r.fd;
    in = r.p.inflight;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &area_fd,
                                 1), ==, 0);
    negotiate(&fx, 0);
    guest_post_requests(&fx, 2, 2);
    fx.fake.pop = 2;
    fx.fake.complete = 1;
    configure_queue(&fx, 2, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.popped, ==, 2);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 0);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 1);

    /* Restart: QEMU hands the area back and resumes at the used index. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    fixture_reconnect(&fx);
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &area_fd,
                                 1), ==, 0);
    negotiate(&fx, 0);
    fx.fake.pop = 1;
    fx.fake.complete = 1;
    configure_queue(&fx, 2, guest_used_idx(&fx, 2), fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.resubmit_at_start, ==, 1);
    g_assert_cmpuint(fx.fake.popped, ==, 1);
    g_assert_cmpuint(fx.fake.heads[0], ==, 1);
    g_assert_cmpstr(fx.fake.first_bytes[0], ==, "request 1");
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 2);
    close(area_fd);
    fixture_fini(&fx);
}

/* A driver may pick a ring smaller than the inflight area's queue size. */
static void test_inflight_smaller_ring(void)
{
    struct fixture fx;
    struct vhost_user_inflight in = { .num_queues = NUM_QUEUES, .queue_size = 1024 };
    struct reply r;

    fixture_init(&fx, 0);
    send_msg(fx.sock, VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_VERSION, &in, sizeof(in));
    g_assert_cmpint(vu_dev_dispatch(fx.dev), ==, 0);
    r = recv_reply(fx.sock);
    g_assert_cmpint(r.fd, >=, 0);
    in = r.p.inflight;
    g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_INFLIGHT_FD, &in, sizeof(in), &r.fd, 1),
                     ==, 0);
    close(r.fd);
    negotiate(&fx, 0);
    configure_queue(&fx, 0, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 0, 1);
    g_assert_true(vu_dev_queue_running(fx.dev, 0));
    g_assert_true(fx.fake.inflight_at_start[0]);
    g_assert_cmpuint(vu_dev_queue(fx.dev, 0)->inflight_region->desc_num, ==, RING_SIZE);
    fixture_fini(&fx);
}

/* Reads every reply waiting on the socket; each must be well formed and answer req. */
static unsigned drain_replies(int sock, uint32_t req)
{
    struct pollfd pfd = { .fd = sock, .events = POLLIN };
    unsigned n = 0;

    while (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
        struct reply r = recv_reply(sock);

        g_assert_cmpuint(r.hdr.request, ==, req);
        if (r.fd >= 0) {
            close(r.fd);
        }
        n++;
    }
    return n;
}

/*
 * Whatever well-framed messages a front-end sends, the server answers at
 * most once each, or ends the connection; it never crashes or leaks fds.
 */
static void test_random_messages(void)
{
    struct fixture fx;
    GRand *rand = g_rand_new_with_seed(0x5c51);
    unsigned baseline, connections = 1;

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    baseline = count_open_fds();
    for (unsigned iter = 0; iter < 3000; iter++) {
        union vhost_user_payload p;
        uint32_t req = g_rand_int_range(rand, 0, VHOST_USER_MAX + 2);
        uint32_t flags = VHOST_USER_VERSION |
                         (g_rand_boolean(rand) ? VHOST_USER_NEED_REPLY : 0);
        uint32_t size = g_rand_int_range(rand, 0, 6) * 8;
        int fds[2] = { fx.memfd, -1 };
        unsigned nfds = g_rand_int_range(rand, 0, 3);
        int r;

        for (unsigned i = 0; i < sizeof(p); i++) {
            ((uint8_t *)&p)[i] = g_rand_int(rand);
        }
        /* Small indexes and counts reach further than uniformly random ones. */
        if (g_rand_boolean(rand)) {
            p.state.index = g_rand_int_range(rand, 0, NUM_QUEUES + 1);
            p.state.num = 1u << g_rand_int_range(rand, 0, 16);
            p.memory.regions[0].memory_size = 4096 * g_rand_int_range(rand, 1, 8);
            p.memory.regions[0].mmap_offset = 4096 * g_rand_int_range(rand, 0, 4);
        }
        if (nfds == 2) {
            fds[1] = new_eventfd();
        }
        send_msg_fds(fx.sock, req, flags, &p, size, fds, nfds);
        if (fds[1] >= 0) {
            close(fds[1]);
        }
        r = vu_dev_dispatch(fx.dev);
        g_assert_cmpuint(drain_replies(fx.sock, req), <=, 1);
        if (r < 0) {
            fixture_fini(&fx);
            g_assert_cmpuint(count_open_fds(), ==, baseline - 3);
            fixture_init(&fx, 0);
            g_log_set_always_fatal(G_LOG_FATAL_MASK);
            g_assert_cmpuint(count_open_fds(), ==, baseline);
            connections++;
        }
    }
    g_test_message("%u connections for 3000 messages", connections);
    /* Some messages must have been refused, and some accepted. */
    g_assert_cmpuint(connections, >, 1);
    g_assert_cmpuint(connections, <, 3000);
    g_rand_free(rand);
    fixture_fini(&fx);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-user-server/feature-negotiation", test_feature_negotiation);
    g_test_add_func("/vhost-user-server/qemu-realize-sequence", test_qemu_realize_sequence);
    g_test_add_func("/vhost-user-server/queue-lifecycle", test_queue_lifecycle);
    g_test_add_func("/vhost-user-server/start-without-protocol-features",
                    test_start_without_protocol_features);
    g_test_add_func("/vhost-user-server/polling-queue", test_polling_queue);
    g_test_add_func("/vhost-user-server/call-fd-swap-while-running",
                    test_call_fd_swap_while_running);
    g_test_add_func("/vhost-user-server/add-remove-regions", test_add_remove_regions);
    g_test_add_func("/vhost-user-server/inflight-area", test_inflight_area);
    g_test_add_func("/vhost-user-server/reset-device", test_reset_device);
    g_test_add_func("/vhost-user-server/device-serves-guest-ring",
                    test_device_serves_guest_ring);
    g_test_add_func("/vhost-user-server/inflight-smaller-ring", test_inflight_smaller_ring);
    g_test_add_func("/vhost-user-server/inflight-resubmit-after-restart",
                    test_inflight_resubmit_after_restart);
    /* These feed bad input and turn warnings non-fatal for the rest of the run. */
    g_test_add_func("/vhost-user-server/memory-table-changes", test_memory_table_changes);
    g_test_add_func("/vhost-user-server/malformed-messages", test_malformed_messages);
    g_test_add_func("/vhost-user-server/bad-queue-index", test_bad_queue_index);
    g_test_add_func("/vhost-user-server/unknown-requests", test_unknown_requests);
    g_test_add_func("/vhost-user-server/too-many-fds-refused", test_too_many_fds_refused);
    g_test_add_func("/vhost-user-server/notify-fds-must-be-eventfds",
                    test_notify_fds_must_be_eventfds);
    g_test_add_func("/vhost-user-server/backend-req-fd-must-be-a-socket",
                    test_backend_req_fd_must_be_a_socket);
    g_test_add_func("/vhost-user-server/message-in-pieces", test_message_in_pieces);
    g_test_add_func("/vhost-user-server/replies-not-taken", test_replies_not_taken);
    g_test_add_func("/vhost-user-server/device-refuses-start", test_device_refuses_start);
    g_test_add_func("/vhost-user-server/random-messages", test_random_messages);
    return g_test_run();
}
