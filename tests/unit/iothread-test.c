/*
 * Specification of the I/O thread loop (hw/util/iothread.c): work handed
 * over with run_sync runs on the thread, work handed over with post runs
 * there later, in order, without the poster waiting (and runs at free at
 * the latest; posted by the thread's own queued work, in the next
 * iteration, after the fd handlers; deferred tasks a few per iteration,
 * all of them before the loop returns), fd handlers and io_uring completions are dispatched there,
 * flush hooks run once per batch, adaptive polling re-arms
 * notifications and sleeps when idle, timers fire on the thread in
 * deadline order, not before their deadline, unless cancelled, resumed
 * tasks run in the next iteration after its fd handlers, and the stats
 * keep the most work charged to one iteration.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <liburing.h>

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

struct poll_probe {
    struct iothread *t;
    atomic_int polls;
    atomic_int armed;
    atomic_int disarmed;
};

static void add_poller(void *opaque);

/*
 * Runs queue (which prepares one SQE) on a new thread's ring; the
 * completion's result.  With poller set the thread busy-polls one (pp).
 */
static int uring_run(void (*queue)(void *opaque), struct poll_probe *poller)
{
    struct probe p = { 0 };

    p.t = iothread_new("t-uring", 1, 8);
    g_assert_nonnull(p.t);
    if (poller) {
        poller->t = p.t;
        iothread_set_poll(p.t, IOTHREAD_POLL_ON, 0);
    }
    g_assert_cmpint(iothread_start(p.t), ==, 0);
    if (poller) {
        iothread_run_sync(p.t, add_poller, poller);
    }
    iothread_run_sync(p.t, queue, &p);
    for (int i = 0; i < 100000 && !p.uring_done; i++) {
        iothread_run_sync(p.t, nothing, NULL);
    }
    g_assert_true(p.uring_done);
    iothread_free(p.t);
    return p.uring_res;
}

static int uring_run_one(void (*queue)(void *opaque))
{
    return uring_run(queue, NULL);
}

static void test_uring_completion_is_dispatched(void)
{
    g_assert_cmpint(uring_run_one(queue_nop), ==, 0);
}

/*
 * A busy-polling thread reaps its ring in the loop itself (it skips the
 * ring only while no SQE it handed out is owed a completion).
 */
static void test_uring_completion_while_polling(void)
{
    struct poll_probe pp = { 0 };

    g_assert_cmpint(uring_run(queue_nop, &pp), ==, 0);
    g_assert_cmpint(atomic_load(&pp.polls), >, 0);
}

static void queue_openat(void *opaque)
{
    struct probe *p = opaque;
    struct io_uring_sqe *sqe = iothread_get_sqe(p->t);

    g_assert_nonnull(sqe);
    io_uring_prep_openat(sqe, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 0);
    p->cb.fn = uring_done;
    io_uring_sqe_set_data(sqe, &p->cb);
}

/*
 * The ring runs only the file backend's operations: an OPENAT (which
 * seccomp would never see) is refused by the kernel.
 */
static void test_uring_runs_only_backend_ops(void)
{
    g_assert_cmpint(uring_run_one(queue_openat), ==, -EACCES);
}

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

/*
 * ADAPTIVE's window: a wake-up within the longest window of going to sleep
 * means work comes at a pace a spin can meet, so the window opens and
 * doubles, never past the longest; a later one means no spin would have
 * caught it, so it halves, and closes below the minimum.
 */
static void test_poll_window_grows_while_wakes_come_soon(void)
{
    const uint64_t max = 50000, min = IOTHREAD_POLL_WINDOW_MIN_NS;

    g_assert_cmpuint(iothread_poll_window_next(0, 10000, max), ==, min);
    g_assert_cmpuint(iothread_poll_window_next(min, 10000, max), ==, 2 * min);
    g_assert_cmpuint(iothread_poll_window_next(32000, 40000, max), ==, max);
    g_assert_cmpuint(iothread_poll_window_next(max, max, max), ==, max);
    /* A longest window below the minimum is still the cap. */
    g_assert_cmpuint(iothread_poll_window_next(0, 500, 1000), ==, 1000);
}

static void test_poll_window_shrinks_while_wakes_come_late(void)
{
    const uint64_t max = 50000, min = IOTHREAD_POLL_WINDOW_MIN_NS;

    g_assert_cmpuint(iothread_poll_window_next(max, max + 1, max), ==, max / 2);
    g_assert_cmpuint(iothread_poll_window_next(2 * min, 1000000, max), ==, min);
    g_assert_cmpuint(iothread_poll_window_next(min, 1000000, max), ==, 0);
    g_assert_cmpuint(iothread_poll_window_next(0, 1000000, max), ==, 0);
}

struct stats_probe {
    struct iothread *t;
    struct iothread_stats st;
};

/* On the thread itself: its statistics are plain fields it writes. */
static void read_stats(void *opaque)
{
    struct stats_probe *sp = opaque;

    iothread_get_stats(sp->t, &sp->st);
}

/*
 * A clock the test moves (iothread_set_poll_clock): ADAPTIVE's windows are
 * judged by the times the test chose, not by how long a sleep took on the
 * machine.  It stands still, so a thread with nothing to do spins, until
 * the test asks for a sleep: then each read moves it on by a spin longer
 * than the window (work the thread finds meanwhile only starts the spin
 * again), until the thread goes idle.  The loop re-arms its pollers'
 * notifications right before it reads the clock to time its sleep
 * (iothread_poll_window_next: "from re-arming notifications to the
 * wake-up"): that read moves the clock on by the sleep's length, which
 * the test chose, whatever wakes the thread and when; then it stands still
 * again.
 */
struct test_clock {
    struct iothread *t;
    struct stats_probe sp;
    GMutex lock;
    GCond cond;
    uint64_t now;
    bool arming;              /* re-armed: the next read starts a sleep */
    uint64_t spin_ns;         /* while a sleep is asked for: each read's step */
    uint64_t sleep_ns;        /* the length of that sleep */
    unsigned sleeps;          /* sleeps started */
    unsigned sleeps_seen;     /* of which the test has waited for */
};

static uint64_t test_clock_read(void *opaque)
{
    struct test_clock *c = opaque;
    uint64_t now;

    g_mutex_lock(&c->lock);
    now = c->now;
    if (c->spin_ns && c->arming) {
        c->now += c->sleep_ns;
        c->spin_ns = 0;
        c->sleeps++;
        g_cond_broadcast(&c->cond);
    } else {
        c->now += c->spin_ns;
    }
    c->arming = false;
    g_mutex_unlock(&c->lock);
    return now;
}

static bool clock_poll_cb(void *opaque)
{
    return false;
}

static bool clock_set_notify_cb(void *opaque, bool enable)
{
    struct test_clock *c = opaque;

    if (enable) {
        g_mutex_lock(&c->lock);
        c->arming = true;
        g_mutex_unlock(&c->lock);
    }
    return false;
}

static void add_clock_poller(void *opaque)
{
    struct test_clock *c = opaque;
    struct iothread_poller p = { .poll = clock_poll_cb, .set_notify = clock_set_notify_cb,
                                 .opaque = c };

    iothread_add_poller(c->t, &p);
}

/* A thread polling adaptively, up to max_ns, on the test's clock (at 1 s). */
static void test_clock_start(struct test_clock *c, const char *name, unsigned uring_depth,
                             uint64_t max_ns)
{
    g_mutex_init(&c->lock);
    g_cond_init(&c->cond);
    c->now = G_USEC_PER_SEC * 1000ull;
    c->t = c->sp.t = iothread_new(name, 1, uring_depth);
    g_assert_nonnull(c->t);
    iothread_set_poll(c->t, IOTHREAD_POLL_ADAPTIVE, max_ns);
    iothread_set_poll_clock(c->t, test_clock_read, c);
    g_assert_cmpint(iothread_start(c->t), ==, 0);
    iothread_run_sync(c->t, add_clock_poller, c);
}

static void test_clock_free(struct test_clock *c)
{
    iothread_free(c->t);
    g_mutex_clear(&c->lock);
    g_cond_clear(&c->cond);
}

/*
 * Asks for a sleep of sleep_ns after spins of spin_ns, which must be
 * longer than the thread's window; returns once the sleep has started.
 * The wait is bounded only against a hang.
 */
static void spin_then_sleep(struct test_clock *c, uint64_t spin_ns, uint64_t sleep_ns)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_TIME_SPAN_SECOND;

    g_mutex_lock(&c->lock);
    c->sleep_ns = sleep_ns;
    c->spin_ns = spin_ns;
    while (c->sleeps == c->sleeps_seen) {
        g_assert_true(g_cond_wait_until(&c->cond, &c->lock, deadline) ||
                      c->sleeps != c->sleeps_seen);
    }
    c->sleeps_seen = c->sleeps;
    g_mutex_unlock(&c->lock);
}

/*
 * After spin_ns without work the thread sleeps sleep_ns, work comes, and
 * its statistics are read on the thread (the window's update follows the
 * wake-up that a run_sync's return does not wait for; the clock stands
 * still meanwhile, so the thread spins and reads them next).
 */
static void sleep_then_wake(struct test_clock *c, uint64_t spin_ns, uint64_t sleep_ns)
{
    spin_then_sleep(c, spin_ns, sleep_ns);
    iothread_run_sync(c->t, nothing, NULL);
    iothread_run_sync(c->t, read_stats, &c->sp);
}

/*
 * The loop follows the rule: a thread woken soon after it went to sleep
 * (1 us into the sleep, its longest window one second) opens its window,
 * and says so in its statistics.
 */
static void test_adaptive_poll_window_opens_on_frequent_work(void)
{
    struct test_clock c = { 0 };

    test_clock_start(&c, "t-window", 0, 1000000000ull);
    iothread_run_sync(c.t, read_stats, &c.sp);
    g_assert_cmpuint(c.sp.st.poll_window_ns, ==, 0);
    sleep_then_wake(&c, 1, 1000);
    g_assert_cmpuint(c.sp.st.poll_window_ns, ==, IOTHREAD_POLL_WINDOW_MIN_NS);
    sleep_then_wake(&c, IOTHREAD_POLL_WINDOW_MIN_NS + 1, 1000);
    g_assert_cmpuint(c.sp.st.poll_window_ns, ==, 2 * IOTHREAD_POLL_WINDOW_MIN_NS);
    test_clock_free(&c);
}

/*
 * The loop judges its window by the sleep alone, as QEMU's iothread does:
 * a thread that spun its whole window and was woken soon after it went to
 * sleep keeps the window, although the work came later than the longest
 * window after the last work (bursts a little further apart than the
 * window, a TCG guest's queue, are then mostly caught by the spin); one
 * woken later than the longest window into its sleep halves it.
 */
static void test_adaptive_poll_window_judged_by_the_sleep(void)
{
    const uint64_t max = 100 * 1000 * 1000ull;
    struct test_clock c = { 0 };

    test_clock_start(&c, "t-window", 0, max);
    /* Woken 1 ms into each sleep: the window doubles up to the longest. */
    for (int i = 0; i < 64 && c.sp.st.poll_window_ns < max; i++) {
        sleep_then_wake(&c, c.sp.st.poll_window_ns + 1, 1000 * 1000);
    }
    g_assert_cmpuint(c.sp.st.poll_window_ns, ==, max);
    /* 130 ms after the last work, but 30 ms into the sleep: kept. */
    sleep_then_wake(&c, max + 1, 30 * 1000 * 1000);
    g_assert_cmpuint(c.sp.st.poll_window_ns, ==, max);
    /* 150 ms into the sleep: halved. */
    sleep_then_wake(&c, max + 1, 150 * 1000 * 1000);
    g_assert_cmpuint(c.sp.st.poll_window_ns, ==, max / 2);
    test_clock_free(&c);
}

/*
 * What an fd handler (a kick) learns from iothread_polling(): true on a
 * thread spinning on its pollers, so the source leaves its notifications
 * off (re-enabling them there made every kick arm the next one); false
 * on a thread that sleeps in epoll, where they must be on.
 */
struct kick_probe {
    struct poll_probe pp;
    int efd;
    atomic_int seen;          /* handler runs */
    atomic_int polling;       /* of which saw iothread_polling() true */
    bool as_kick_fd;          /* watched with iothread_add_kick_fd */
};

static void kick_cb(void *opaque, uint32_t events)
{
    struct kick_probe *k = opaque;
    uint64_t v;

    g_assert_cmpint(read(k->efd, &v, sizeof(v)), ==, sizeof(v));
    if (iothread_polling(k->pp.t)) {
        atomic_fetch_add(&k->polling, 1);
    }
    atomic_fetch_add(&k->seen, 1);
}

static void add_poller_and_kick_fd(void *opaque)
{
    struct kick_probe *k = opaque;

    add_poller(&k->pp);
    g_assert_cmpint((k->as_kick_fd ? iothread_add_kick_fd : iothread_add_fd)(
                        k->pp.t, k->efd, EPOLLIN, kick_cb, k), ==, 0);
}

static int kick_seen_polling_as(enum iothread_poll_mode mode, bool as_kick_fd)
{
    struct kick_probe k = { .efd = eventfd(0, EFD_NONBLOCK), .as_kick_fd = as_kick_fd };
    uint64_t one = 1;
    int polling;

    k.pp.t = iothread_new("t-kick", 1, 0);
    iothread_set_poll(k.pp.t, mode, 0);
    g_assert_cmpint(iothread_start(k.pp.t), ==, 0);
    iothread_run_sync(k.pp.t, add_poller_and_kick_fd, &k);
    g_assert_cmpint(write(k.efd, &one, sizeof(one)), ==, sizeof(one));
    for (int i = 0; i < 1000000 && atomic_load(&k.seen) == 0; i++) {
        iothread_run_sync(k.pp.t, nothing, NULL);
    }
    g_assert_cmpint(atomic_load(&k.seen), ==, 1);
    polling = atomic_load(&k.polling);
    iothread_free(k.pp.t);
    close(k.efd);
    return polling;
}

static int kick_seen_polling(enum iothread_poll_mode mode)
{
    return kick_seen_polling_as(mode, false);
}

/*
 * A kick fd the loop looks at seldom while it polls (only pollers' kicks
 * and no timer: every IOTHREAD_EPOLL_EVERY_QUIET rounds) is still seen.
 */
static void test_kick_fd_seen_while_polling(void)
{
    g_assert_cmpint(kick_seen_polling_as(IOTHREAD_POLL_ON, true), ==, 1);
    g_assert_cmpint(kick_seen_polling_as(IOTHREAD_POLL_OFF, true), ==, 0);
}

static void test_kick_while_polling_leaves_notifications_off(void)
{
    g_assert_cmpint(kick_seen_polling(IOTHREAD_POLL_ON), ==, 1);
}

static void test_kick_without_polling_rearms(void)
{
    g_assert_cmpint(kick_seen_polling(IOTHREAD_POLL_OFF), ==, 0);
}

/*
 * A sleeping thread counts what woke it, for an operator weighing --poll:
 * a kick fd's event is a kick wake-up; a completion of its io_uring (a
 * read of a pipe that waited for data, as an O_DIRECT read waits for the
 * device: io_uring's task work interrupts the sleep) is a ring wake-up;
 * work handed over by run_sync is neither.
 */
struct wake_probe {
    struct iothread *t;
    pid_t tid;
    int efd;
    int pipe[2];
    char byte;
    atomic_int kicks;
    atomic_int reads;
    struct iothread_uring_cb cb;
    struct stats_probe sp;
};

static void wake_kick_cb(void *opaque, uint32_t events)
{
    struct wake_probe *w = opaque;
    uint64_t v;

    (void)events;
    g_assert_cmpint(read(w->efd, &v, sizeof(v)), ==, sizeof(v));
    atomic_fetch_add(&w->kicks, 1);
}

static void wake_read_done(struct iothread_uring_cb *cb, int res)
{
    struct wake_probe *w = (struct wake_probe *)((char *)cb - offsetof(struct wake_probe, cb));

    g_assert_cmpint(res, ==, 1);
    atomic_fetch_add(&w->reads, 1);
}

static void wake_watch(void *opaque)
{
    struct wake_probe *w = opaque;

    w->tid = (pid_t)syscall(SYS_gettid);
    g_assert_cmpint(iothread_add_kick_fd(w->t, w->efd, EPOLLIN, wake_kick_cb, w), ==, 0);
}

/* Submitted before the caller returns, so the read is waiting when it writes. */
static void wake_queue_read(void *opaque)
{
    struct wake_probe *w = opaque;
    struct io_uring_sqe *sqe = iothread_get_sqe(w->t);

    g_assert_nonnull(sqe);
    io_uring_prep_read(sqe, w->pipe[0], &w->byte, 1, 0);
    w->cb.fn = wake_read_done;
    io_uring_sqe_set_data(sqe, &w->cb);
    g_assert_cmpint(iothread_submit(w->t), ==, 1);
}

/* Until the thread sleeps (state S: its epoll_wait). */
static void wait_asleep(struct wake_probe *w)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d/stat", (int)w->tid);

    for (int i = 0; i < 500000; i++) {
        g_autofree char *stat = NULL;

        g_assert_true(g_file_get_contents(path, &stat, NULL, NULL));
        if (strrchr(stat, ')')[2] == 'S') {
            return;
        }
        g_usleep(20);
    }
    g_assert_not_reached();
}

static void wait_count(atomic_int *n, int want)
{
    for (int i = 0; i < 500000 && atomic_load(n) < want; i++) {
        g_usleep(20);
    }
    g_assert_cmpint(atomic_load(n), ==, want);
}

static void test_wakeups_counted_by_source(void)
{
    struct wake_probe w = { .efd = eventfd(0, EFD_NONBLOCK) };
    uint64_t one = 1;

    g_assert_cmpint(pipe(w.pipe), ==, 0);
    w.t = w.sp.t = iothread_new("t-wake", 1, 8);
    g_assert_cmpint(iothread_start(w.t), ==, 0);
    iothread_run_sync(w.t, wake_watch, &w);
    iothread_run_sync(w.t, read_stats, &w.sp);
    g_assert_cmpuint(w.sp.st.wakeups_kick, ==, 0);
    g_assert_cmpuint(w.sp.st.wakeups_uring, ==, 0);

    wait_asleep(&w);
    g_assert_cmpint(write(w.efd, &one, sizeof(one)), ==, sizeof(one));
    wait_count(&w.kicks, 1);
    iothread_run_sync(w.t, wake_queue_read, &w);
    wait_asleep(&w);
    g_assert_cmpint(write(w.pipe[1], "x", 1), ==, 1);
    wait_count(&w.reads, 1);
    iothread_run_sync(w.t, read_stats, &w.sp);
    g_assert_cmpuint(w.sp.st.wakeups_kick, ==, 1);
    g_assert_cmpuint(w.sp.st.wakeups_uring, ==, 1);
    /* The two, and the run_syncs' own. */
    g_assert_cmpuint(w.sp.st.wakeups, >=, 3);
    iothread_free(w.t);
    close(w.efd);
    close(w.pipe[0]);
    close(w.pipe[1]);
}

/*
 * A completion that comes as task work (the pipe read waited: io_uring
 * posts it from the task's own context) reaches a thread that spins and
 * never sleeps: with COOP_TASKRUN the kernel does not interrupt it, the
 * loop sees IORING_SQ_TASKRUN and enters the kernel to run the work.
 */
static void test_uring_task_work_while_polling(void)
{
    struct wake_probe w = { .efd = -1 };
    struct poll_probe pp = { 0 };

    g_assert_cmpint(pipe(w.pipe), ==, 0);
    w.t = w.sp.t = pp.t = iothread_new("t-taskwork", 1, 8);
    iothread_set_poll(w.t, IOTHREAD_POLL_ON, 0);
    g_assert_cmpint(iothread_start(w.t), ==, 0);
    iothread_run_sync(w.t, add_poller, &pp);
    iothread_run_sync(w.t, wake_queue_read, &w);
    g_assert_cmpint(write(w.pipe[1], "x", 1), ==, 1);
    wait_count(&w.reads, 1);
    iothread_run_sync(w.t, read_stats, &w.sp);
    g_assert_cmpuint(w.sp.st.wakeups_uring, ==, 0);   /* it never slept */
    iothread_free(w.t);
    close(w.pipe[0]);
    close(w.pipe[1]);
}

static void note_tid(void *opaque)
{
    struct wake_probe *w = opaque;

    w->tid = (pid_t)syscall(SYS_gettid);
}

/*
 * A completion that lands while the thread is still at work (after it
 * reaped, before it sleeps) is held as task work that any system call
 * runs: the thread must not count the sleep it then skips as a wake-up.
 * The flush hook, the last thing an iteration runs, makes that moment
 * reliable: it makes no system call until the test has written the pipe.
 */
struct late_probe {
    struct wake_probe w;
    atomic_int stage;   /* 1: armed; 2: flush running; 3: pipe written */
};

static void late_flush(void *opaque)
{
    struct late_probe *l = opaque;
    int armed = 1;

    if (!atomic_compare_exchange_strong(&l->stage, &armed, 2)) {
        return;
    }
    for (unsigned long i = 0; atomic_load(&l->stage) != 3; i++) {
        g_assert_cmpuint(i, <, 1ul << 34);   /* seconds: the writer is gone */
    }
}

static void late_add_flush(void *opaque)
{
    struct late_probe *l = opaque;

    note_tid(&l->w);
    g_assert_cmpint(iothread_add_flush(l->w.t, late_flush, l), >=, 0);
}

static void test_task_work_before_sleep_is_no_wake_up(void)
{
    struct late_probe l = { .w = { .efd = -1 } };

    g_assert_cmpint(pipe(l.w.pipe), ==, 0);
    l.w.t = l.w.sp.t = iothread_new("t-late", 1, 8);
    g_assert_cmpint(iothread_start(l.w.t), ==, 0);
    iothread_run_sync(l.w.t, late_add_flush, &l);
    iothread_run_sync(l.w.t, wake_queue_read, &l.w);

    atomic_store(&l.stage, 1);
    iothread_post(l.w.t, nothing, NULL);   /* an iteration, so that the flush runs */
    wait_count(&l.stage, 2);
    g_assert_cmpint(write(l.w.pipe[1], "x", 1), ==, 1);
    atomic_store(&l.stage, 3);
    wait_count(&l.w.reads, 1);

    wait_asleep(&l.w);
    iothread_run_sync(l.w.t, read_stats, &l.w.sp);
    g_assert_cmpuint(l.w.sp.st.wakeups_uring, ==, 0);
    iothread_free(l.w.t);
    close(l.w.pipe[0]);
    close(l.w.pipe[1]);
}

/*
 * The window for io_uring completions follows QEMU's rule for a handler's
 * poll time: a completion that came within the window leaves it alone,
 * one within the longest window doubles it (opening it at the minimum),
 * a later one closes it at once.
 */
static void test_poll_window_uring_rule(void)
{
    const uint64_t max = 50000, min = IOTHREAD_POLL_WINDOW_MIN_NS;

    g_assert_cmpuint(iothread_poll_window_uring_next(0, 200, max), ==, min);
    g_assert_cmpuint(iothread_poll_window_uring_next(min, 1000, max), ==, min);
    g_assert_cmpuint(iothread_poll_window_uring_next(min, min + 1, max), ==, 2 * min);
    g_assert_cmpuint(iothread_poll_window_uring_next(32000, 40000, max), ==, max);
    g_assert_cmpuint(iothread_poll_window_uring_next(max, max, max), ==, max);
    g_assert_cmpuint(iothread_poll_window_uring_next(max, max + 1, max), ==, 0);
    g_assert_cmpuint(iothread_poll_window_uring_next(0, max + 1, max), ==, 0);
}

/* A read on the thread's ring whose completion takes took_ns of the test's clock. */
struct clocked_read {
    struct test_clock c;
    int pipe[2];
    char byte;
    unsigned reads;           /* under c.lock */
    uint64_t took_ns;
    struct iothread_uring_cb cb;
};

static void clocked_read_done(struct iothread_uring_cb *cb, int res)
{
    struct clocked_read *r = (struct clocked_read *)((char *)cb -
                                                     offsetof(struct clocked_read, cb));

    g_assert_cmpint(res, ==, 1);
    g_mutex_lock(&r->c.lock);
    r->c.now += r->took_ns;
    r->reads++;
    g_cond_broadcast(&r->c.cond);
    g_mutex_unlock(&r->c.lock);
}

/* Submitted before the caller returns, so the read is waiting when it writes. */
static void clocked_queue_read(void *opaque)
{
    struct clocked_read *r = opaque;
    struct io_uring_sqe *sqe = iothread_get_sqe(r->c.t);

    g_assert_nonnull(sqe);
    io_uring_prep_read(sqe, r->pipe[0], &r->byte, 1, 0);
    r->cb.fn = clocked_read_done;
    io_uring_sqe_set_data(sqe, &r->cb);
    g_assert_cmpint(iothread_submit(r->c.t), ==, 1);
}

/*
 * Until the read has completed; then the statistics, read on the thread
 * after the iteration that judged the completion (bounded against a hang).
 */
static void clocked_read_wait(struct clocked_read *r, unsigned want)
{
    gint64 deadline = g_get_monotonic_time() + 60 * G_TIME_SPAN_SECOND;

    g_mutex_lock(&r->c.lock);
    while (r->reads < want) {
        g_assert_true(g_cond_wait_until(&r->c.cond, &r->c.lock, deadline) || r->reads >= want);
    }
    g_mutex_unlock(&r->c.lock);
    iothread_run_sync(r->c.t, nothing, NULL);
    iothread_run_sync(r->c.t, read_stats, &r->c.sp);
}

/*
 * In the loop: a read whose data was already there completes as soon as
 * it is submitted (1 us, a prompt completion), and opens the window,
 * though the thread had slept for longer than any window before it was
 * asked to submit (the sleep is not the completion's wait); a read that
 * waited longer than the longest window, while the thread slept, closes
 * it.
 */
static void test_poll_window_uring_follows_completions(void)
{
    const uint64_t max = 5 * 1000 * 1000;
    struct clocked_read r = { .took_ns = 1000 };

    g_assert_cmpint(pipe(r.pipe), ==, 0);
    test_clock_start(&r.c, "t-uwin", 8, max);

    spin_then_sleep(&r.c, 1, 2 * max);   /* asleep for longer than any window */
    g_assert_cmpint(write(r.pipe[1], "x", 1), ==, 1);
    iothread_run_sync(r.c.t, clocked_queue_read, &r);
    clocked_read_wait(&r, 1);
    g_assert_cmpuint(r.c.sp.st.poll_window_uring_ns, ==, IOTHREAD_POLL_WINDOW_MIN_NS);

    /* The completion comes later than any window, the thread asleep meanwhile. */
    r.took_ns = 2 * max;
    iothread_run_sync(r.c.t, clocked_queue_read, &r);
    spin_then_sleep(&r.c, IOTHREAD_POLL_WINDOW_MIN_NS + 1, 0);
    g_assert_cmpint(write(r.pipe[1], "y", 1), ==, 1);
    clocked_read_wait(&r, 2);
    g_assert_cmpuint(r.c.sp.st.poll_window_uring_ns, ==, 0);

    test_clock_free(&r.c);
    close(r.pipe[0]);
    close(r.pipe[1]);
}

/*
 * A thread that polls all the time submits each SQE as it is made ready
 * (the device sees requests as they come); one that sleeps submits an
 * iteration's together, once.
 */
struct ready_probe {
    struct probe nop[2];       /* queue_nop's: one SQE and its completion each */
    uint64_t submits;          /* io_uring_submit calls the two SQEs took */
};

static void ready_two_nops(void *opaque)
{
    struct ready_probe *r = opaque;
    struct iothread *t = r->nop[0].t;
    struct iothread_stats st;
    uint64_t before;

    iothread_get_stats(t, &st);
    before = st.uring_submits;
    for (int i = 0; i < 2; i++) {
        queue_nop(&r->nop[i]);
        iothread_sqe_ready(t);
    }
    iothread_get_stats(t, &st);
    r->submits = st.uring_submits - before;
}

static uint64_t submits_for_two(enum iothread_poll_mode mode)
{
    struct ready_probe r = { 0 };
    struct poll_probe pp = { 0 };

    r.nop[0].t = r.nop[1].t = pp.t = iothread_new("t-ready", 1, 8);
    iothread_set_poll(pp.t, mode, 0);
    g_assert_cmpint(iothread_start(pp.t), ==, 0);
    iothread_run_sync(pp.t, add_poller, &pp);
    iothread_run_sync(pp.t, ready_two_nops, &r);
    for (int i = 0; i < 100000 && !(r.nop[0].uring_done && r.nop[1].uring_done); i++) {
        iothread_run_sync(pp.t, nothing, NULL);
    }
    for (int i = 0; i < 2; i++) {
        g_assert_true(r.nop[i].uring_done);
        g_assert_cmpint(r.nop[i].uring_res, ==, 0);
    }
    iothread_free(pp.t);
    return r.submits;
}

static void test_sqe_ready_submits_at_once_when_polling(void)
{
    g_assert_cmpuint(submits_for_two(IOTHREAD_POLL_ON), ==, 2);
    g_assert_cmpuint(submits_for_two(IOTHREAD_POLL_OFF), ==, 0);
    g_assert_cmpuint(submits_for_two(IOTHREAD_POLL_ADAPTIVE), ==, 0);
}

/* ---- post ------------------------------------------------------------- */

#define GATE_TIMEOUT_US (10 * G_TIME_SPAN_SECOND)

struct post_probe {
    struct iothread *t;
    GMutex lock;
    GCond cond;
    bool gate_open;       /* lets a blocked fn return */
    bool blocked;         /* the blocking fn is running */
    char order[16];       /* letters of the fns in the order they ran */
    unsigned n;
    bool all_on_thread;
    bool ran_inside_poster; /* a self-post ran before its poster returned */
};

static void post_probe_init(struct post_probe *pp, struct iothread *t)
{
    memset(pp, 0, sizeof(*pp));
    pp->t = t;
    pp->all_on_thread = true;
    g_mutex_init(&pp->lock);
    g_cond_init(&pp->cond);
}

static void post_probe_clear(struct post_probe *pp)
{
    g_mutex_clear(&pp->lock);
    g_cond_clear(&pp->cond);
}

static void record(struct post_probe *pp, char c)
{
    g_mutex_lock(&pp->lock);
    g_assert_cmpuint(pp->n, <, sizeof(pp->order) - 1);
    pp->order[pp->n++] = c;
    if (pp->t && !iothread_is_current(pp->t)) {
        pp->all_on_thread = false;
    }
    g_cond_broadcast(&pp->cond);
    g_mutex_unlock(&pp->lock);
}

static void rec_a(void *opaque) { record(opaque, 'a'); }
static void rec_b(void *opaque) { record(opaque, 'b'); }
static void rec_c(void *opaque) { record(opaque, 'c'); }

static void test_post_runs_on_the_thread_in_order(void)
{
    struct iothread *t = iothread_new("t-post", 1, 0);
    struct post_probe pp;

    post_probe_init(&pp, t);
    g_assert_cmpint(iothread_start(t), ==, 0);
    iothread_post(t, rec_a, &pp);
    iothread_post(t, rec_b, &pp);
    iothread_post(t, rec_c, &pp);
    /* A run_sync queued after the posts returns after they ran. */
    iothread_run_sync(t, nothing, NULL);
    g_assert_cmpstr(pp.order, ==, "abc");
    g_assert_true(pp.all_on_thread);
    iothread_free(t);
    post_probe_clear(&pp);
}

static void post_b_then_record_a(void *opaque)
{
    struct post_probe *pp = opaque;

    iothread_post(pp->t, rec_b, pp);
    g_mutex_lock(&pp->lock);
    pp->ran_inside_poster = pp->n > 0;
    g_mutex_unlock(&pp->lock);
    record(pp, 'a');
}

static void test_post_to_itself_runs_later(void)
{
    struct iothread *t = iothread_new("t-post-self", 1, 0);
    struct post_probe pp;

    post_probe_init(&pp, t);
    g_assert_cmpint(iothread_start(t), ==, 0);
    iothread_run_sync(t, post_b_then_record_a, &pp);
    iothread_run_sync(t, nothing, NULL);
    g_assert_false(pp.ran_inside_poster);
    g_assert_cmpstr(pp.order, ==, "ab");
    g_assert_true(pp.all_on_thread);
    iothread_free(t);
    post_probe_clear(&pp);
}

/*
 * A job that continues itself by posting to its own thread yields it: an
 * fd handler that is always ready runs between any two of its steps.
 */
#define YIELD_STEPS 5
struct yielder {
    struct iothread *t;
    int efd;
    unsigned handler_runs;          /* on the thread only */
    unsigned seen[YIELD_STEPS];     /* handler_runs at each step */
    atomic_uint steps;
};

static void ready_handler(void *opaque, uint32_t events)
{
    struct yielder *y = opaque;

    y->handler_runs++;
}

static void yield_step(void *opaque)
{
    struct yielder *y = opaque;
    unsigned i = atomic_load(&y->steps);

    y->seen[i] = y->handler_runs;
    atomic_store(&y->steps, i + 1);
    if (i + 1 < YIELD_STEPS) {
        iothread_post(y->t, yield_step, y);
    }
}

static void add_ready_fd(void *opaque)
{
    struct yielder *y = opaque;
    uint64_t one = 1;

    g_assert_cmpint(write(y->efd, &one, sizeof(one)), ==, sizeof(one));
    g_assert_cmpint(iothread_add_fd(y->t, y->efd, EPOLLIN, ready_handler, y), ==, 0);
    iothread_post(y->t, yield_step, y);
}

static void del_ready_fd(void *opaque)
{
    struct yielder *y = opaque;

    iothread_del_fd(y->t, y->efd);
}

static void test_post_to_itself_yields_to_fd_handlers(void)
{
    struct yielder y = { .t = iothread_new("t-yield", 1, 0), .efd = eventfd(0, EFD_NONBLOCK) };
    gint64 deadline = g_get_monotonic_time() + GATE_TIMEOUT_US;

    g_assert_cmpint(y.efd, >=, 0);
    g_assert_cmpint(iothread_start(y.t), ==, 0);
    iothread_run_sync(y.t, add_ready_fd, &y);
    while (atomic_load(&y.steps) < YIELD_STEPS) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    iothread_run_sync(y.t, del_ready_fd, &y);
    for (unsigned i = 1; i < YIELD_STEPS; i++) {
        g_assert_cmpuint(y.seen[i], >, y.seen[i - 1]);
    }
    iothread_free(y.t);
    close(y.efd);
}

/*
 * Deferred tasks: however many a thread has, each iteration runs at most
 * IOTHREAD_DEFER_PER_ITERATION of them, and an always-ready fd handler
 * runs between those batches; tasks left at the end of the loop run
 * before it returns.
 */
#define DEFER_JOBS 6
#define DEFER_PIECES 4
struct defer_job {
    struct iothread_task task;
    struct deferrer *dr;
    unsigned pieces;
};
struct deferrer {
    struct yielder y;               /* the ready fd and its handler's count */
    struct defer_job jobs[DEFER_JOBS];
    unsigned seen[DEFER_JOBS * DEFER_PIECES];   /* handler runs at each piece */
    unsigned n;
    atomic_uint done;
};

static void defer_piece(struct iothread_task *task)
{
    struct defer_job *j = (struct defer_job *)task;
    struct deferrer *dr = j->dr;

    dr->seen[dr->n++] = dr->y.handler_runs;
    if (++j->pieces < DEFER_PIECES) {
        iothread_defer(dr->y.t, &j->task);
    } else {
        atomic_fetch_add(&dr->done, 1);
    }
}

static void defer_all(void *opaque)
{
    struct deferrer *dr = opaque;
    uint64_t one = 1;

    g_assert_cmpint(write(dr->y.efd, &one, sizeof(one)), ==, sizeof(one));
    g_assert_cmpint(iothread_add_fd(dr->y.t, dr->y.efd, EPOLLIN, ready_handler, &dr->y), ==, 0);
    for (unsigned i = 0; i < DEFER_JOBS; i++) {
        dr->jobs[i] = (struct defer_job){ .task.fn = defer_piece, .dr = dr };
        iothread_defer(dr->y.t, &dr->jobs[i].task);
    }
}

static void test_defer_runs_a_few_per_iteration(void)
{
    struct deferrer dr = { .y = { .t = iothread_new("t-defer", 1, 0),
                                  .efd = eventfd(0, EFD_NONBLOCK) } };
    gint64 deadline = g_get_monotonic_time() + GATE_TIMEOUT_US;
    unsigned same = 1;

    g_assert_cmpint(dr.y.efd, >=, 0);
    g_assert_cmpint(iothread_start(dr.y.t), ==, 0);
    iothread_run_sync(dr.y.t, defer_all, &dr);
    while (atomic_load(&dr.done) < DEFER_JOBS) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    iothread_run_sync(dr.y.t, del_ready_fd, &dr.y);
    g_assert_cmpuint(dr.n, ==, DEFER_JOBS * DEFER_PIECES);
    for (unsigned i = 1; i < dr.n; i++) {
        g_assert_cmpuint(dr.seen[i], >=, dr.seen[i - 1]);
        same = dr.seen[i] == dr.seen[i - 1] ? same + 1 : 1;
        g_assert_cmpuint(same, <=, IOTHREAD_DEFER_PER_ITERATION);
    }
    iothread_free(dr.y.t);
    close(dr.y.efd);
}

/*
 * Resumed tasks (iothread_resume): every task queued runs in the next
 * iteration, after its fd handlers (an always-ready fd's handler runs
 * between two steps of a job, all jobs' step i run in one iteration, and
 * a task the handler resumes runs after the handler's next run, not in
 * its own iteration), and a cancelled task never runs.
 */
#define RESUME_JOBS 4
#define RESUME_STEPS 5
struct resumer;
struct resume_job {
    struct iothread_task task;
    struct resumer *rs;
    unsigned steps;
    unsigned seen[RESUME_STEPS];    /* handler runs at each step */
};
struct resumer {
    struct yielder y;
    struct resume_job jobs[RESUME_JOBS + 1];   /* the last one is cancelled */
    struct iothread_task from_handler;          /* resumed by the fd handler */
    unsigned handler_at_resume, handler_at_run;
    atomic_uint done;
};

/* The ready fd's handler, which also resumes a task once: due next iteration, not this. */
static void resume_handler(void *opaque, uint32_t events)
{
    struct resumer *rs = opaque;

    ready_handler(&rs->y, events);
    if (rs->y.handler_runs == 1) {
        rs->handler_at_resume = rs->y.handler_runs;
        iothread_resume(rs->y.t, &rs->from_handler);
    }
}

static void resumed_from_handler(struct iothread_task *task)
{
    struct resumer *rs = (struct resumer *)((char *)task - offsetof(struct resumer, from_handler));

    rs->handler_at_run = rs->y.handler_runs;
    atomic_fetch_add(&rs->done, 1);
}

static void resume_step(struct iothread_task *task)
{
    struct resume_job *j = (struct resume_job *)task;

    g_assert_true(j != &j->rs->jobs[RESUME_JOBS]);
    j->seen[j->steps] = j->rs->y.handler_runs;
    if (++j->steps < RESUME_STEPS) {
        iothread_resume(j->rs->y.t, &j->task);
    } else {
        atomic_fetch_add(&j->rs->done, 1);
    }
}

static void resume_all(void *opaque)
{
    struct resumer *rs = opaque;
    uint64_t one = 1;

    g_assert_cmpint(write(rs->y.efd, &one, sizeof(one)), ==, sizeof(one));
    rs->from_handler.fn = resumed_from_handler;
    g_assert_cmpint(iothread_add_fd(rs->y.t, rs->y.efd, EPOLLIN, resume_handler, rs), ==, 0);
    for (unsigned i = 0; i <= RESUME_JOBS; i++) {
        rs->jobs[i] = (struct resume_job){ .task.fn = resume_step, .rs = rs };
        iothread_resume(rs->y.t, &rs->jobs[i].task);
    }
    iothread_resume_cancel(rs->y.t, &rs->jobs[RESUME_JOBS].task);
}

static bool idle_poll(void *opaque)
{
    return false;
}

static void add_idle_poller(void *opaque)
{
    struct iothread_poller p = { .poll = idle_poll };

    iothread_add_poller(opaque, &p);
}

/* Polling (mode), every task still runs, between the pollers' rounds. */
static void resume_runs_next_iteration(enum iothread_poll_mode mode)
{
    struct resumer rs = { .y = { .t = iothread_new("t-resume", 1, 0),
                                 .efd = eventfd(0, EFD_NONBLOCK) } };
    gint64 deadline = g_get_monotonic_time() + GATE_TIMEOUT_US;

    g_assert_cmpint(rs.y.efd, >=, 0);
    iothread_set_poll(rs.y.t, mode, 0);
    g_assert_cmpint(iothread_start(rs.y.t), ==, 0);
    if (mode != IOTHREAD_POLL_OFF) {
        iothread_run_sync(rs.y.t, add_idle_poller, rs.y.t);
    }
    iothread_run_sync(rs.y.t, resume_all, &rs);
    while (atomic_load(&rs.done) < RESUME_JOBS + 1) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(1000);
    }
    iothread_run_sync(rs.y.t, del_ready_fd, &rs.y);
    /* Polling looks at its fds only every few hundred rounds: no order to check. */
    for (unsigned i = 0; mode == IOTHREAD_POLL_OFF && i < RESUME_JOBS; i++) {
        for (unsigned k = 0; k < RESUME_STEPS; k++) {
            g_assert_cmpuint(rs.jobs[i].seen[k], ==, rs.jobs[0].seen[k]);
            if (k) {
                g_assert_cmpuint(rs.jobs[i].seen[k], >, rs.jobs[i].seen[k - 1]);
            }
        }
    }
    g_assert_cmpuint(rs.jobs[RESUME_JOBS].steps, ==, 0);
    if (mode == IOTHREAD_POLL_OFF) {
        g_assert_cmpuint(rs.handler_at_run, >, rs.handler_at_resume);
    }
    iothread_free(rs.y.t);
    close(rs.y.efd);
}

static void test_resume_runs_next_iteration(void)
{
    resume_runs_next_iteration(IOTHREAD_POLL_OFF);
}

static void test_resume_runs_while_polling(void)
{
    resume_runs_next_iteration(IOTHREAD_POLL_ON);
}

/* Deferred work left when the loop is told to quit still runs, with what it defers. */
static void defer_and_quit(void *opaque)
{
    struct deferrer *dr = opaque;

    for (unsigned i = 0; i < DEFER_JOBS; i++) {
        dr->jobs[i] = (struct defer_job){ .task.fn = defer_piece, .dr = dr };
        iothread_defer(dr->y.t, &dr->jobs[i].task);
    }
    iothread_quit(dr->y.t);
}

static void test_defer_left_at_quit_runs(void)
{
    struct deferrer dr = { .y = { .t = iothread_new("t-defer-quit", 1, 0) } };

    g_assert_cmpint(iothread_start(dr.y.t), ==, 0);
    iothread_post(dr.y.t, defer_and_quit, &dr);
    iothread_free(dr.y.t);
    g_assert_cmpuint(atomic_load(&dr.done), ==, DEFER_JOBS);
    g_assert_cmpuint(dr.n, ==, DEFER_JOBS * DEFER_PIECES);
}

static void block_until_gate(void *opaque)
{
    struct post_probe *pp = opaque;
    gint64 deadline = g_get_monotonic_time() + GATE_TIMEOUT_US;

    g_mutex_lock(&pp->lock);
    pp->blocked = true;
    g_cond_broadcast(&pp->cond);
    while (!pp->gate_open) {
        g_assert_true(g_cond_wait_until(&pp->cond, &pp->lock, deadline));
    }
    g_mutex_unlock(&pp->lock);
}

/* The poster never waits for the thread, even a thread busy for long. */
static void test_post_does_not_wait_for_a_busy_thread(void)
{
    struct iothread *t = iothread_new("t-post-busy", 1, 0);
    gint64 deadline = g_get_monotonic_time() + GATE_TIMEOUT_US;
    struct post_probe pp;

    post_probe_init(&pp, t);
    g_assert_cmpint(iothread_start(t), ==, 0);
    iothread_post(t, block_until_gate, &pp);
    g_mutex_lock(&pp.lock);
    while (!pp.blocked) {
        g_assert_true(g_cond_wait_until(&pp.cond, &pp.lock, deadline));
    }
    g_mutex_unlock(&pp.lock);
    /* The thread is stuck in block_until_gate; this returns regardless. */
    iothread_post(t, rec_a, &pp);
    g_mutex_lock(&pp.lock);
    g_assert_cmpuint(pp.n, ==, 0);
    pp.gate_open = true;
    g_cond_broadcast(&pp.cond);
    g_mutex_unlock(&pp.lock);
    iothread_run_sync(t, nothing, NULL);
    g_assert_cmpstr(pp.order, ==, "a");
    iothread_free(t);
    post_probe_clear(&pp);
}

/* Posted work owns what it is handed: it runs even if the loop never does. */
static void test_post_to_a_stopped_thread_runs_at_free(void)
{
    struct iothread *t = iothread_new("t-post-idle", 1, 0);
    struct post_probe pp;

    post_probe_init(&pp, NULL);
    iothread_post(t, rec_a, &pp);
    iothread_post(t, rec_b, &pp);
    g_assert_cmpuint(pp.n, ==, 0);
    iothread_free(t);
    g_assert_cmpstr(pp.order, ==, "ab");
    post_probe_clear(&pp);
}

/* ---- timers ----------------------------------------------------------- */

struct timer_probe;

struct probe_timer {
    struct iothread_timer tm;    /* first: the callback gets its address */
    struct timer_probe *p;
    unsigned i;
};

struct timer_probe {
    struct iothread *t;
    struct probe_timer tm[4];
    uint64_t deadline[4];
    GMutex lock;
    GCond cond;
    int order[8];
    unsigned fired;
    bool early, off_thread;
    bool rearmed;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void timer_fired(struct iothread_timer *tm)
{
    struct probe_timer *pt = (struct probe_timer *)tm;
    struct timer_probe *p = pt->p;
    unsigned i = pt->i;

    g_mutex_lock(&p->lock);
    p->early |= mono_ns() < p->deadline[i];
    p->off_thread |= !iothread_is_current(p->t);
    p->order[p->fired++] = (int)i;
    /*
     * Timer 0 re-arms itself once, from its own callback, 1 ms past its
     * first deadline: not past "now", which on a loaded machine may
     * already be beyond timer 3's deadline and make the order a race.
     */
    if (i == 0 && !p->rearmed) {
        p->rearmed = true;
        p->deadline[0] += 1000000;
        iothread_timer_arm(p->t, tm, p->deadline[0]);
    }
    g_cond_broadcast(&p->cond);
    g_mutex_unlock(&p->lock);
}

static void arm_timers(void *opaque)
{
    struct timer_probe *p = opaque;
    uint64_t now = mono_ns();
    /* Armed out of order; timer 2 is cancelled, timer 3 re-armed later. */
    static const unsigned ms[4] = { 30, 10, 20, 5 };

    for (unsigned i = 0; i < 4; i++) {
        p->tm[i] = (struct probe_timer){ .tm.fn = timer_fired, .p = p, .i = i };
        p->deadline[i] = now + ms[i] * 1000000u;
        iothread_timer_arm(p->t, &p->tm[i].tm, p->deadline[i]);
    }
    iothread_timer_cancel(p->t, &p->tm[2].tm);
    p->deadline[3] = now + 40 * 1000000u;
    iothread_timer_arm(p->t, &p->tm[3].tm, p->deadline[3]);
}

/*
 * iothread_charge: what one iteration was charged is summed, the stats
 * keep the largest iteration's sum, and work charged in other iterations
 * is not added to it.
 */
struct charge {
    struct iothread *t;
    uint64_t bytes[3];
};

static void charge_on_thread(void *opaque)
{
    struct charge *c = opaque;

    for (unsigned i = 0; i < G_N_ELEMENTS(c->bytes); i++) {
        iothread_charge(c->t, c->bytes[i]);
    }
}

static void test_charge_keeps_the_largest_iteration(void)
{
    struct iothread *t = iothread_new("t-charge", 1, 0);
    struct charge a = { .bytes = { 1000, 500, 600 } }, b = { .bytes = { 900 } };
    struct iothread_stats st;

    a.t = b.t = t;
    g_assert_cmpint(iothread_start(t), ==, 0);
    /* Each run_sync is queued after the last returned: one iteration each. */
    iothread_run_sync(t, charge_on_thread, &a);
    iothread_run_sync(t, charge_on_thread, &b);
    iothread_run_sync(t, charge_on_thread, &b);
    iothread_run_sync(t, charge_on_thread, &(struct charge){ .t = t });
    iothread_get_stats(t, &st);
    g_assert_cmpuint(st.max_iteration_work, ==, 2100);
    iothread_charge(NULL, 1);       /* no thread: nothing counted, nothing breaks */
    iothread_free(t);
}

static void test_timers_fire_in_deadline_order(void)
{
    struct timer_probe p = { 0 };
    gint64 end = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;

    g_mutex_init(&p.lock);
    g_cond_init(&p.cond);
    p.t = iothread_new("t-timer", 1, 0);
    g_assert_cmpint(iothread_start(p.t), ==, 0);
    iothread_run_sync(p.t, arm_timers, &p);
    g_mutex_lock(&p.lock);
    while (p.fired < 4) {
        g_assert_true(g_cond_wait_until(&p.cond, &p.lock, end));
    }
    g_mutex_unlock(&p.lock);
    /* 1 (10 ms), 0 (30 ms), 0 again (re-armed for 31 ms), 3 (40 ms); 2 never. */
    g_assert_cmpint(p.order[0], ==, 1);
    g_assert_cmpint(p.order[1], ==, 0);
    g_assert_cmpint(p.order[2], ==, 0);
    g_assert_cmpint(p.order[3], ==, 3);
    g_assert_false(p.early);
    g_assert_false(p.off_thread);
    iothread_free(p.t);
    g_assert_cmpuint(p.fired, ==, 4);
    g_mutex_clear(&p.lock);
    g_cond_clear(&p.cond);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/iothread/run-sync-runs-on-the-thread", test_run_sync_runs_on_the_thread);
    g_test_add_func("/iothread/timers/fire-in-deadline-order", test_timers_fire_in_deadline_order);
    g_test_add_func("/iothread/fd-handler-then-flush", test_fd_handler_then_flush);
    g_test_add_func("/iothread/uring-completion-is-dispatched", test_uring_completion_is_dispatched);
    g_test_add_func("/iothread/uring-runs-only-backend-ops", test_uring_runs_only_backend_ops);
    g_test_add_func("/iothread/poll/uring-completion-while-polling",
                    test_uring_completion_while_polling);
    g_test_add_func("/iothread/poll/kick-fd-seen-while-polling", test_kick_fd_seen_while_polling);
    g_test_add_func("/iothread/adaptive-poll-rearms-when-idle", test_adaptive_poll_rearms_when_idle);
    g_test_add_func("/iothread/poll-window-grows-while-wakes-come-soon",
                    test_poll_window_grows_while_wakes_come_soon);
    g_test_add_func("/iothread/poll-window-shrinks-while-wakes-come-late",
                    test_poll_window_shrinks_while_wakes_come_late);
    g_test_add_func("/iothread/adaptive-poll-window-opens-on-frequent-work",
                    test_adaptive_poll_window_opens_on_frequent_work);
    g_test_add_func("/iothread/adaptive/uring-window-rule", test_poll_window_uring_rule);
    g_test_add_func("/iothread/adaptive/uring-window-follows-completions",
                    test_poll_window_uring_follows_completions);
    g_test_add_func("/iothread/poll/sqe-ready-submits-at-once-when-polling",
                    test_sqe_ready_submits_at_once_when_polling);
    g_test_add_func("/iothread/adaptive-poll-window-judged-by-the-sleep",
                    test_adaptive_poll_window_judged_by_the_sleep);
    g_test_add_func("/iothread/wakeups-counted-by-source", test_wakeups_counted_by_source);
    g_test_add_func("/iothread/poll/uring-task-work-while-polling",
                    test_uring_task_work_while_polling);
    g_test_add_func("/iothread/wakeups/task-work-before-sleep-is-no-wake-up",
                    test_task_work_before_sleep_is_no_wake_up);
    g_test_add_func("/iothread/poll/kick-while-polling-leaves-notifications-off",
                    test_kick_while_polling_leaves_notifications_off);
    g_test_add_func("/iothread/poll/kick-without-polling-rearms", test_kick_without_polling_rearms);
    g_test_add_func("/iothread/post/runs-on-the-thread-in-order",
                    test_post_runs_on_the_thread_in_order);
    g_test_add_func("/iothread/post/to-itself-runs-later", test_post_to_itself_runs_later);
    g_test_add_func("/iothread/post/to-itself-yields-to-fd-handlers",
                    test_post_to_itself_yields_to_fd_handlers);
    g_test_add_func("/iothread/defer/a-few-per-iteration", test_defer_runs_a_few_per_iteration);
    g_test_add_func("/iothread/resume/runs-next-iteration", test_resume_runs_next_iteration);
    g_test_add_func("/iothread/resume/runs-while-polling", test_resume_runs_while_polling);
    g_test_add_func("/iothread/charge/keeps-the-largest-iteration",
                    test_charge_keeps_the_largest_iteration);
    g_test_add_func("/iothread/defer/left-at-quit-runs", test_defer_left_at_quit_runs);
    g_test_add_func("/iothread/post/does-not-wait-for-a-busy-thread",
                    test_post_does_not_wait_for_a_busy_thread);
    g_test_add_func("/iothread/post/to-a-stopped-thread-runs-at-free",
                    test_post_to_a_stopped_thread_runs_at_free);
    return g_test_run();
}
