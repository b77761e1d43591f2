/*
 * Specification of the I/O thread loop (hw/virtio/iothread.c): work handed
 * over with run_sync runs on the thread, fd handlers and io_uring
 * completions are dispatched there, flush hooks run once per batch, and
 * adaptive polling re-arms notifications and sleeps when idle.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "iothread.h"

struct probe {
    struct iothread *t;
    pthread_t tid;
    bool on_thread;
    int efd;
    atomic_int fd_events;
    atomic_int flushes;
    atomic_int flushes_after_fd;  /* flush calls that saw the handler's work */
    int uring_res;
    bool uring_done;
    struct iothread_uring_cb cb;
};

static void record_thread(void *opaque)
{
    struct probe *p = opaque;

    p->tid = pthread_self();
    p->on_thread = iothread_is_current(p->t);
}

static void test_run_sync_runs_on_the_thread(void)
{
    struct probe p = { 0 };

    p.t = iothread_new("t-sync", 1, 0);
    g_assert_nonnull(p.t);
    g_assert_cmpint(iothread_start(p.t), ==, 0);
    iothread_run_sync(p.t, record_thread, &p);
    g_assert_true(p.on_thread);
    g_assert_false(pthread_equal(p.tid, pthread_self()));
    iothread_free(p.t);
}

static void fd_cb(void *opaque, uint32_t events)
{
    struct probe *p = opaque;
    uint64_t v;

    g_assert_cmpint(read(p->efd, &v, sizeof(v)), ==, sizeof(v));
    atomic_fetch_add(&p->fd_events, 1);
}

static void flush_cb(void *opaque)
{
    struct probe *p = opaque;

    atomic_fetch_add(&p->flushes, 1);
    if (atomic_load(&p->fd_events) > 0) {
        atomic_fetch_add(&p->flushes_after_fd, 1);
    }
}

static void add_handlers(void *opaque)
{
    struct probe *p = opaque;

    g_assert_cmpint(iothread_add_fd(p->t, p->efd, EPOLLIN, fd_cb, p), ==, 0);
    iothread_add_flush(p->t, flush_cb, p);
}

static void nothing(void *opaque)
{
}

static void test_fd_handler_then_flush(void)
{
    struct probe p = { 0 };
    uint64_t one = 1;

    p.t = iothread_new("t-fd", 1, 0);
    p.efd = eventfd(0, EFD_NONBLOCK);
    g_assert_cmpint(iothread_start(p.t), ==, 0);
    iothread_run_sync(p.t, add_handlers, &p);
    g_assert_cmpint(atomic_load(&p.flushes_after_fd), ==, 0);
    g_assert_cmpint(write(p.efd, &one, sizeof(one)), ==, sizeof(one));
    /*
     * run_sync work runs before the flush hooks of its iteration and may
     * return before they do, so its return orders nothing against a flush:
     * wait (bounded) for a flush that saw the handler's work instead. A
     * loop that dispatched the fd but never flushed afterwards fails here.
     */
    for (int i = 0; i < 100000 && atomic_load(&p.flushes_after_fd) == 0; i++) {
        iothread_run_sync(p.t, nothing, NULL);
    }
    g_assert_cmpint(atomic_load(&p.fd_events), ==, 1);
    g_assert_cmpint(atomic_load(&p.flushes_after_fd), >=, 1);
    iothread_free(p.t);
    close(p.efd);
}

static void uring_done(struct iothread_uring_cb *cb, int res)
{
    struct probe *p = (struct probe *)((char *)cb - offsetof(struct probe, cb));

    p->uring_res = res;
    p->uring_done = true;
}

static void queue_nop(void *opaque)
{
    struct probe *p = opaque;
    struct io_uring_sqe *sqe = iothread_get_sqe(p->t);

    g_assert_nonnull(sqe);
    io_uring_prep_nop(sqe);
    p->cb.fn = uring_done;
    io_uring_sqe_set_data(sqe, &p->cb);
}

static void test_uring_completion_is_dispatched(void)
{
    struct probe p = { 0 };

    p.t = iothread_new("t-uring", 1, 8);
    g_assert_nonnull(p.t);
    g_assert_cmpint(iothread_start(p.t), ==, 0);
    iothread_run_sync(p.t, queue_nop, &p);
    for (int i = 0; i < 100000 && !p.uring_done; i++) {
        iothread_run_sync(p.t, nothing, NULL);
    }
    g_assert_true(p.uring_done);
    g_assert_cmpint(p.uring_res, ==, 0);
    iothread_free(p.t);
}

struct poll_probe {
    struct iothread *t;
    atomic_int polls;
    atomic_int armed;
    atomic_int disarmed;
};

static bool poll_cb(void *opaque)
{
    struct poll_probe *pp = opaque;

    atomic_fetch_add(&pp->polls, 1);
    return false;
}

static bool set_notify_cb(void *opaque, bool enable)
{
    struct poll_probe *pp = opaque;

    atomic_fetch_add(enable ? &pp->armed : &pp->disarmed, 1);
    return false;
}

static void add_poller(void *opaque)
{
    struct poll_probe *pp = opaque;
    struct iothread_poller p = { .poll = poll_cb, .set_notify = set_notify_cb, .opaque = pp };

    iothread_add_poller(pp->t, &p);
}

static void test_adaptive_poll_rearms_when_idle(void)
{
    struct poll_probe pp = { 0 };
    struct iothread_stats st;

    pp.t = iothread_new("t-poll", 1, 0);
    iothread_set_poll(pp.t, IOTHREAD_POLL_ADAPTIVE, 1000);
    g_assert_cmpint(iothread_start(pp.t), ==, 0);
    iothread_run_sync(pp.t, add_poller, &pp);
    /* Each run_sync wakes the loop: it polls, finds nothing, re-arms and sleeps. */
    for (int i = 0; i < 100000 && atomic_load(&pp.armed) < 2; i++) {
        iothread_run_sync(pp.t, nothing, NULL);
    }
    g_assert_cmpint(atomic_load(&pp.polls), >, 0);
    g_assert_cmpint(atomic_load(&pp.armed), >=, 2);
    g_assert_cmpint(atomic_load(&pp.disarmed), >=, 1);
    iothread_get_stats(pp.t, &st);
    g_assert_cmpuint(st.loops, >, 0);
    iothread_free(pp.t);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/iothread/run-sync-runs-on-the-thread", test_run_sync_runs_on_the_thread);
    g_test_add_func("/iothread/fd-handler-then-flush", test_fd_handler_then_flush);
    g_test_add_func("/iothread/uring-completion-is-dispatched", test_uring_completion_is_dispatched);
    g_test_add_func("/iothread/adaptive-poll-rearms-when-idle", test_adaptive_poll_rearms_when_idle);
    return g_test_run();
}
