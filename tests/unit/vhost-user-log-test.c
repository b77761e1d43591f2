/*
 * Specification of a vhost-user connection's dirty log
 * (hw/virtio/vhost-user-log.c), played as QEMU plays it during a live
 * migration: the back-end offers VHOST_F_LOG_ALL with LOG_SHMFD;
 * SET_LOG_BASE maps a bitmap and is answered with an empty reply; with
 * LOG_ALL negotiated a queue runs only while a log covering guest memory
 * is mapped, so what it completes is always marked; a log that is too
 * small, or lies beyond its file, is refused and never written.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <linux/vhost_types.h>
#include <linux/virtio_ring.h>

#include "vhost-user-server-fixture.h"

#define LOG_ALL (1ull << VHOST_F_LOG_ALL)
/* Guest memory ends at MEM_GPA + MEM_SIZE: this many bitmap bytes cover it. */
#define LOG_NEED ((MEM_GPA + MEM_SIZE) / 4096 / 8)
#define DATA_OFF 0xc0000ull

struct shm_log {
    int fd;
    uint8_t *bits;
    size_t size;
};

/* A log as QEMU makes one: a memfd the front-end maps too. */
static struct shm_log log_new(size_t size)
{
    struct shm_log l = { .size = size };

    l.fd = memfd_create("vhost-log", MFD_CLOEXEC);
    g_assert_cmpint(l.fd, >=, 0);
    g_assert_cmpint(ftruncate(l.fd, (off_t)size), ==, 0);
    l.bits = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, l.fd, 0);
    g_assert_true(l.bits != MAP_FAILED);
    return l;
}

static void log_free(struct shm_log *l)
{
    munmap(l->bits, l->size);
    close(l->fd);
}

static bool logged(const struct shm_log *l, uint64_t off)
{
    uint64_t p = (MEM_GPA + off) / 4096;

    return l->bits[p / 8] & (1u << (p % 8));
}

static unsigned count_logged(const struct shm_log *l)
{
    unsigned n = 0;

    for (size_t i = 0; i < l->size; i++) {
        n += (unsigned)__builtin_popcount(l->bits[i]);
    }
    return n;
}

/* SET_LOG_BASE as QEMU sends it (no NEED_REPLY); the empty reply it waits for. */
static void set_log_base(struct fixture *fx, const struct shm_log *l, uint64_t size)
{
    struct vhost_user_log msg = { .mmap_size = size, .mmap_offset = 0 };
    struct reply r;

    send_msg_fds(fx->sock, VHOST_USER_SET_LOG_BASE, VHOST_USER_VERSION, &msg, sizeof(msg),
                 &l->fd, 1);
    g_assert_cmpint(vu_dev_dispatch(fx->dev), ==, 0);
    r = recv_reply(fx->sock);
    g_assert_cmpuint(r.hdr.request, ==, VHOST_USER_SET_LOG_BASE);
    g_assert_cmpuint(r.hdr.size, ==, 0);
    assert_no_reply(fx->sock);
}

/* n requests on queue idx: a 16-byte header, then a 512-byte response in page i of the data. */
static void post_requests_with_data_in(struct fixture *fx, unsigned idx, unsigned n)
{
    struct vring_desc *desc = (void *)(fx->ram + DESC_OFF(idx));
    struct vring_avail *avail = (void *)(fx->ram + AVAIL_OFF(idx));

    for (unsigned i = 0; i < n; i++) {
        desc[2 * i] = (struct vring_desc) {
            .addr = MEM_GPA + 0x80000 + 0x100 * i, .len = 16, .flags = VRING_DESC_F_NEXT,
            .next = (uint16_t)(2 * i + 1),
        };
        desc[2 * i + 1] = (struct vring_desc) {
            .addr = MEM_GPA + DATA_OFF + 0x1000 * i, .len = 512, .flags = VRING_DESC_F_WRITE,
        };
        avail->ring[(avail->idx + i) % RING_SIZE] = (uint16_t)(2 * i);
    }
    __atomic_store_n(&avail->idx, avail->idx + n, __ATOMIC_RELEASE);
}

/* Queue 2 configured and enabled, as QEMU leaves it after vhost_dev_start. */
static void bring_up(struct fixture *fx, uint64_t features)
{
    negotiate(fx, features);
    configure_queue(fx, 2, 0, fx_eventfd(fx), fx_eventfd(fx));
    set_state(fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
}

static void test_offered_with_shmfd_only(void)
{
    struct fixture fx;
    struct vu_dev_config cfg = {
        .name = "no-shmfd", .num_queues = NUM_QUEUES,
        .protocol_features = 1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK,
    };
    struct vu_dev *dev;
    int sv[2];

    fixture_init(&fx, 0);
    g_assert_cmphex(get_u64(&fx, VHOST_USER_GET_FEATURES) & LOG_ALL, ==, LOG_ALL);
    g_assert_true(get_u64(&fx, VHOST_USER_GET_PROTOCOL_FEATURES) &
                  (1ull << VHOST_USER_PROTOCOL_F_LOG_SHMFD));
    fixture_fini(&fx);

    /* A configuration without LOG_SHMFD cannot log, so it must not offer LOG_ALL. */
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
    dev = vu_dev_new(sv[0], &cfg);
    g_assert_nonnull(dev);
    {
        struct vhost_user_hdr hdr = { .request = VHOST_USER_GET_FEATURES,
                                      .flags = VHOST_USER_VERSION };
        struct reply r;

        g_assert_cmpint(send(sv[1], &hdr, sizeof(hdr), 0), ==, sizeof(hdr));
        g_assert_cmpint(vu_dev_dispatch(dev), ==, 0);
        r = recv_reply(sv[1]);
        g_assert_cmphex(r.p.u64 & LOG_ALL, ==, 0);
    }
    vu_dev_free(dev);
    close(sv[1]);
}

/*
 * QEMU starts a device during a migration with SET_FEATURES(LOG_ALL)
 * before SET_LOG_BASE: the queue waits for the log, then runs and marks
 * the data-in buffers and the used ring of what it completes.
 */
static void test_queue_waits_for_the_log(void)
{
    struct fixture fx;
    struct shm_log l = log_new(LOG_NEED);

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    fx.fake.pop = fx.fake.complete = 3;
    post_requests_with_data_in(&fx, 2, 3);
    bring_up(&fx, LOG_ALL);
    g_assert_cmpuint(fx.fake.starts[2], ==, 0);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 0);

    set_log_base(&fx, &l, LOG_NEED);
    g_assert_cmpuint(fx.fake.starts[2], ==, 1);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 3);
    for (unsigned i = 0; i < 3; i++) {
        g_assert_true(logged(&l, DATA_OFF + 0x1000 * i));
    }
    g_assert_true(logged(&l, USED_OFF(2)));
    /* Headers are only read; nothing else was written. */
    g_assert_false(logged(&l, 0x80000));
    g_assert_cmpuint(count_logged(&l), ==, 4);
    fixture_fini(&fx);
    log_free(&l);
}

/* Without LOG_ALL the log is not written, even while mapped. */
static void test_logging_off_sets_no_bit(void)
{
    struct fixture fx;
    struct shm_log l = log_new(LOG_NEED);

    fixture_init(&fx, 0);
    fx.fake.pop = fx.fake.complete = 2;
    post_requests_with_data_in(&fx, 2, 2);
    negotiate(&fx, 0);
    set_log_base(&fx, &l, LOG_NEED);
    configure_queue(&fx, 2, 0, fx_eventfd(&fx), fx_eventfd(&fx));
    set_state(&fx, VHOST_USER_SET_VRING_ENABLE, 2, 1);
    g_assert_cmpuint(fx.fake.starts[2], ==, 1);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 2);
    g_assert_cmpuint(count_logged(&l), ==, 0);
    fixture_fini(&fx);
    log_free(&l);
}

/*
 * Turning LOG_ALL on restarts the running queues on the log, turning it
 * off restarts them without: what completes after each is marked or not.
 */
static void test_features_switch_logging(void)
{
    struct fixture fx;
    struct shm_log l = log_new(LOG_NEED);

    fixture_init(&fx, 0);
    fx.fake.pop = fx.fake.complete = 1;
    bring_up(&fx, 0);
    g_assert_cmpuint(fx.fake.starts[2], ==, 1);
    set_log_base(&fx, &l, LOG_NEED);
    g_assert_cmpuint(fx.fake.starts[2], ==, 2);

    post_requests_with_data_in(&fx, 2, 1);
    set_u64(&fx, VHOST_USER_SET_FEATURES, ring_features | proto_bit | LOG_ALL);
    g_assert_cmpuint(fx.fake.starts[2], ==, 3);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 1);
    g_assert_true(logged(&l, DATA_OFF));

    memset(l.bits, 0, l.size);
    post_requests_with_data_in(&fx, 2, 1);
    fx.fake.popped = 0;
    set_u64(&fx, VHOST_USER_SET_FEATURES, ring_features | proto_bit);
    g_assert_cmpuint(fx.fake.starts[2], ==, 4);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 2);
    g_assert_cmpuint(count_logged(&l), ==, 0);
    fixture_fini(&fx);
    log_free(&l);
}

/*
 * A log that cannot cover guest memory is refused: the queue stops
 * rather than write a page it cannot mark, and no byte of the log is
 * touched; a log that fits lets it run again.
 */
static void test_short_log_refused(void)
{
    struct fixture fx;
    struct shm_log small = log_new(4096), good = log_new(LOG_NEED);

    fixture_init(&fx, 0);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    fx.fake.pop = fx.fake.complete = 1;
    bring_up(&fx, LOG_ALL);
    set_log_base(&fx, &good, LOG_NEED);
    g_assert_cmpuint(fx.fake.starts[2], ==, 1);

    post_requests_with_data_in(&fx, 2, 1);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*cannot cover guest memory*");
    set_log_base(&fx, &small, LOG_NEED - 1);
    g_test_assert_expected_messages();
    g_assert_cmpuint(fx.fake.stops[2], ==, 1);
    g_assert_cmpuint(fx.fake.starts[2], ==, 1);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 0);
    g_assert_cmpuint(count_logged(&small), ==, 0);

    fx.fake.popped = 0;
    set_log_base(&fx, &good, LOG_NEED);
    g_assert_cmpuint(fx.fake.starts[2], ==, 2);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 1);
    g_assert_true(logged(&good, DATA_OFF));
    fixture_fini(&fx);
    log_free(&small);
    log_free(&good);
}

/* A replaced log is no longer written: QEMU reads only the newest one. */
static void test_replaced_log_is_dropped(void)
{
    struct fixture fx;
    struct shm_log first = log_new(LOG_NEED), second = log_new(LOG_NEED * 2);

    fixture_init(&fx, 0);
    fx.fake.pop = fx.fake.complete = 1;
    bring_up(&fx, LOG_ALL);
    set_log_base(&fx, &first, LOG_NEED);
    memset(first.bits, 0, first.size);
    post_requests_with_data_in(&fx, 2, 1);
    set_log_base(&fx, &second, LOG_NEED * 2);
    g_assert_cmpuint(guest_used_idx(&fx, 2), ==, 1);
    g_assert_true(logged(&second, DATA_OFF));
    g_assert_cmpuint(count_logged(&first), ==, 0);
    fixture_fini(&fx);
    log_free(&first);
    log_free(&second);
}

/*
 * Malformed logs end the connection (QEMU cannot be told otherwise):
 * one beyond the end of its file (mapping it would SIGBUS us), an empty
 * one, one that wraps, and any log without LOG_SHMFD negotiated.
 */
static void test_malformed_log_refused(void)
{
    struct {
        uint64_t size, offset;
        bool shmfd;
        const char *why;
    } cases[] = {
        { 8192, 0, true, "beyond the end of its file" },
        { 4096, 4096, true, "beyond the end of its file" },
        { 0, 0, true, "empty" },
        { UINT64_MAX - 10, 4096, true, "wraps" },
        { 4096, 0, false, "LOG_SHMFD" },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct fixture fx;
        struct shm_log l = log_new(4096);
        struct vhost_user_log msg = { .mmap_size = cases[i].size,
                                      .mmap_offset = cases[i].offset };

        fixture_init(&fx, 0);
        if (cases[i].shmfd) {
            negotiate(&fx, 0);
        }
        g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
        g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*SET_LOG_BASE*");
        send_msg_fds(fx.sock, VHOST_USER_SET_LOG_BASE, VHOST_USER_VERSION, &msg, sizeof(msg),
                     &l.fd, 1);
        g_assert_cmpint(vu_dev_dispatch(fx.dev), <, 0);
        g_test_assert_expected_messages();
        g_assert_cmpuint(count_logged(&l), ==, 0);
        fixture_fini(&fx);
        log_free(&l);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-user-log/offered-with-shmfd-only", test_offered_with_shmfd_only);
    g_test_add_func("/vhost-user-log/queue-waits-for-the-log", test_queue_waits_for_the_log);
    g_test_add_func("/vhost-user-log/logging-off-sets-no-bit", test_logging_off_sets_no_bit);
    g_test_add_func("/vhost-user-log/features-switch-logging", test_features_switch_logging);
    g_test_add_func("/vhost-user-log/short-log-refused", test_short_log_refused);
    g_test_add_func("/vhost-user-log/replaced-log-is-dropped", test_replaced_log_is_dropped);
    g_test_add_func("/vhost-user-log/malformed-log-refused", test_malformed_log_refused);
    return g_test_run();
}
