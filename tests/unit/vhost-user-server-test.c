/*
 * Specification of the vhost-user back-end protocol server's connection
 * (hw/virtio/vhost-user-server.c): framing, dispatch and the requests
 * about the device as a whole.  Each test plays the front-end on one end
 * of a socketpair, sends hand-built messages (with memfd regions and
 * eventfds as ancillary data) and checks the replies and what a fake
 * device records: feature negotiation, what QEMU sends while realizing
 * vhost-user-scsi, and that malformed, unknown or out-of-range messages,
 * too many fds, a message in pieces and replies never read get a clear
 * answer or end the connection, never hang or leak.  The vrings are
 * specified in vhost-user-rings-test.c, the memory table and inflight
 * area in vhost-user-mem-test.c; the front-end they share is
 * vhost-user-server-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_scsi.h>

#include <glib.h>

#include "vhost-user-server.h"
#include "vhost-user-server-fixture.h"

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
    /* Dirty logging, so QEMU lets the VM migrate. */
    g_assert_cmphex(f & (1ull << VHOST_F_LOG_ALL), ==, 1ull << VHOST_F_LOG_ALL);

    proto = get_u64(&fx, VHOST_USER_GET_PROTOCOL_FEATURES);
    for (unsigned bit = 0; bit < 64; bit++) {
        bool want = bit == VHOST_USER_PROTOCOL_F_MQ ||
                    bit == VHOST_USER_PROTOCOL_F_REPLY_ACK ||
                    bit == VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS ||
                    bit == VHOST_USER_PROTOCOL_F_BACKEND_REQ ||
                    bit == VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD ||
                    bit == VHOST_USER_PROTOCOL_F_LOG_SHMFD ||
                    bit == VHOST_USER_PROTOCOL_F_RESET_DEVICE;

        if (want) {
            g_assert_true(proto & (1ull << bit));
        }
    }
    /* QEMU builds the SCSI config space itself and warns about CONFIG. */
    g_assert_false(proto & (1ull << VHOST_USER_PROTOCOL_F_CONFIG));

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
    bad = ring_features | (1ull << VIRTIO_F_IN_ORDER);
    request(&fx, VHOST_USER_SET_FEATURES, &bad, sizeof(bad), NULL, 0);
    g_assert_cmphex(vu_dev_features(fx.dev), ==, ring_features);
    /* Packed rings are offered (QEMU's packed=on), and taken when acked. */
    g_assert_cmphex(f & (1ull << VIRTIO_F_RING_PACKED), ==, 1ull << VIRTIO_F_RING_PACKED);
    bad = ring_features | (1ull << VIRTIO_F_RING_PACKED);
    request(&fx, VHOST_USER_SET_FEATURES, &bad, sizeof(bad), NULL, 0);
    g_assert_cmphex(vu_dev_features(fx.dev), ==, bad);

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

    /*
     * A log without its fd cannot be reached, and a log fd we would never
     * signal: refused, never silently ignored.
     */
    {
        struct vhost_user_log log = { .mmap_size = 4096 };

        g_assert_cmpuint(request_ack(&fx, VHOST_USER_SET_LOG_BASE, &log, sizeof(log), NULL, 0),
                         ==, EINVAL);
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
    g_test_add_func("/vhost-user-server/malformed-messages", test_malformed_messages);
    g_test_add_func("/vhost-user-server/bad-queue-index", test_bad_queue_index);
    g_test_add_func("/vhost-user-server/unknown-requests", test_unknown_requests);
    g_test_add_func("/vhost-user-server/too-many-fds-refused", test_too_many_fds_refused);
    g_test_add_func("/vhost-user-server/backend-req-fd-must-be-a-socket",
                    test_backend_req_fd_must_be_a_socket);
    g_test_add_func("/vhost-user-server/message-in-pieces", test_message_in_pieces);
    g_test_add_func("/vhost-user-server/replies-not-taken", test_replies_not_taken);
    g_test_add_func("/vhost-user-server/random-messages", test_random_messages);
    return g_test_run();
}
