/*
 * Specification of the vrings of a vhost-user connection
 * (hw/virtio/vhost-user-rings.c): a queue runs once it has a size,
 * translatable addresses, a kick fd (or NOFD: polling) and, with
 * PROTOCOL_FEATURES, SET_VRING_ENABLE 1; GET_VRING_BASE and disabling
 * stop it, and only a new kick restarts it; a device that refuses to
 * start leaves it stopped; a running queue's call and err fds are swapped
 * in place; kick, call and err fds must be eventfds, made non-blocking;
 * RESET_DEVICE stops and forgets every ring; and end to end, the device
 * serves what the guest posted through the translated ring.  The
 * front-end is vhost-user-server-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "vhost-user-server.h"
#include "vhost-user-server-fixture.h"

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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vhost-user-server/queue-lifecycle", test_queue_lifecycle);
    g_test_add_func("/vhost-user-server/start-without-protocol-features",
                    test_start_without_protocol_features);
    g_test_add_func("/vhost-user-server/polling-queue", test_polling_queue);
    g_test_add_func("/vhost-user-server/call-fd-swap-while-running",
                    test_call_fd_swap_while_running);
    g_test_add_func("/vhost-user-server/reset-device", test_reset_device);
    g_test_add_func("/vhost-user-server/device-serves-guest-ring",
                    test_device_serves_guest_ring);
    g_test_add_func("/vhost-user-server/notify-fds-must-be-eventfds",
                    test_notify_fds_must_be_eventfds);
    g_test_add_func("/vhost-user-server/device-refuses-start", test_device_refuses_start);
    return g_test_run();
}
