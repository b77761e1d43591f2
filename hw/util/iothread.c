/*
 * The I/O thread event loop described in include/util/iothread.h.  One epoll set
 * per thread holds the kick eventfds of its virtqueues, its io_uring fd and
 * any backend sockets; the loop batches work so that one wake-up serves as
 * many requests as are ready, with one io_uring submit and one pass of
 * flush hooks (used-ring publication and call-eventfd signalling) per
 * iteration.  Cross-thread requests go through a mutex-protected queue and
 * an eventfd, and only on the slow path (queue start/stop, memory table,
 * task management): run_sync waits for its function on the caller's stack,
 * post queues an allocated one and returns.  The thread's own long work
 * waits in two lists: deferred pieces (one per iteration, FIFO) and
 * resumed tasks (all of them in the next iteration, after its fd
 * handlers: a request queue's next turn).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <liburing.h>

#include "iothread.h"

#define IOTHREAD_MAX_EVENTS 64
/*
 * In busy-poll mode, look at the epoll set every this many iterations.  An
 * idle iteration costs ~100 ns and epoll_wait(0) a system call (several
 * times that, more in a VM), so looking too often taxes the rings; the fds
 * that matter while polling (network backends, quit) wait ~25 us at most.
 */
#define IOTHREAD_EPOLL_EVERY 256
/*
 * The same while nothing needs it sooner: no fds but kicks (whose queues a
 * poller reads anyway) and the thread's own, no timer armed.  Then the
 * look only catches a kick's handler that must turn its kicks off again;
 * every 256 rounds it was 9% of a polling thread's samples at QD1 here.
 */
#define IOTHREAD_EPOLL_EVERY_QUIET 4096

/*
 * What an I/O thread's ring may run: the file backend's reads, writes,
 * syncs and fallocates, and NOP; any other operation completes with
 * -EACCES, and no io_uring_register call is allowed once it is enabled.
 * The kernel runs io_uring operations without consulting seccomp, so a
 * ring that could open files or connect sockets would be a way around
 * the daemon's filter (docs/security.md, "Sandbox").
 */
static const uint8_t ring_ops[] = {
    IORING_OP_NOP, IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_READ, IORING_OP_WRITE,
    IORING_OP_FSYNC, IORING_OP_FALLOCATE,
};

static int ring_restrict(struct io_uring *ring)
{
    struct io_uring_restriction res[G_N_ELEMENTS(ring_ops)];
    memset(res, 0, sizeof(res));
    for (size_t i = 0; i < G_N_ELEMENTS(ring_ops); i++) {
        res[i].opcode = IORING_RESTRICTION_SQE_OP;
        res[i].sqe_op = ring_ops[i];
    }
    /*
     * The system call itself: Debian's liburing 2.3 declares
     * io_uring_register_restrictions() and io_uring_enable_rings() but its
     * shared library does not export them.
     */
    if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_RESTRICTIONS, res,
                (unsigned)G_N_ELEMENTS(res)) < 0 ||
        syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0) {
        return -errno;
    }
    return 0;
}

struct fd_handler {
    int fd;
    iothread_fd_cb *cb;
    void *opaque;
    bool deleted;
    bool polled_too;          /* iothread_add_kick_fd: a poller sees its source */
};

struct poller_entry {
    struct iothread_poller p;
    int handle;
    bool active;
};

struct flush_entry {
    void (*fn)(void *opaque);
    void *opaque;
    int handle;
    bool active;
};

struct sync_req {
    void (*fn)(void *opaque);
    void *opaque;
    bool done;
    bool posted;              /* iothread_post: g_free'd once run, nobody waits */
};

struct iothread {
    char *name;
    unsigned id;
    pthread_t tid;
    bool started;      /* a pthread was spawned by iothread_start */
    bool running;      /* tid is valid */
    atomic_bool quit;

    int epfd;
    int wake_fd;
    struct fd_handler wake_handler;
    struct fd_handler uring_handler;
    int timer_fd;             /* CLOCK_MONOTONIC, set to timers' first deadline */
    struct fd_handler timer_handler;
    struct iothread_timer *timers;   /* armed, earliest first */

    struct io_uring ring;
    bool has_ring;
    /*
     * SQEs handed out whose completion is not reaped yet (every user's SQE
     * gives exactly one CQE: no links, no multishot).  At 0 a loop
     * iteration skips the ring: four loads of lines the kernel writes,
     * 9% of a polling thread's samples at QD1 with no file LUN busy.  A
     * count gone wrong costs nothing worse than a later reap: the ring's
     * fd is in the epoll set, looked at every IOTHREAD_EPOLL_EVERY rounds.
     */
    unsigned ring_owed;
    uint64_t cqes_reaped;   /* for the loop to tell an iteration that reaped some */

    GPtrArray *handlers;      /* struct fd_handler *, owned */
    unsigned urgent_fds;      /* handlers not polled_too: the busy loop looks often */
    GPtrArray *dead_handlers; /* freed at the end of an iteration */
    GArray *pollers;          /* struct poller_entry */
    GArray *flushes;          /* struct flush_entry */
    int next_handle;

    pthread_mutex_t sync_lock;
    pthread_cond_t sync_cond;
    GQueue sync_queue;        /* struct sync_req *, run_sync and post alike, FIFO */
    struct iothread_task *defer_head;    /* iothread_defer, FIFO, own thread only */
    struct iothread_task **defer_tail;
    struct iothread_task *resume_head;   /* iothread_resume, FIFO, own thread only */
    struct iothread_task **resume_tail;
    struct iothread_task *resume_due;    /* those queued before this iteration: run in it */
    /*
     * Requests in sync_queue: lets a polling loop look without taking the
     * lock on every iteration.  Raised after the push, so a loop that
     * misses it sees it on its next iteration (or is woken by wake_fd).
     */
    atomic_uint sync_pending;

    enum iothread_poll_mode poll_mode;
    uint64_t poll_ns;         /* ADAPTIVE's longest window */
    /* What ADAPTIVE measures its windows with (iothread_set_poll_clock). */
    uint64_t (*poll_clock)(void *opaque);
    void *poll_clock_opaque;
    bool notify_armed;        /* pollers' notifications are on */

    struct iothread_stats stats;
    uint64_t iter_work;       /* iothread_charge in this iteration */
    uint64_t now_cache;       /* iothread_now_ns() in this iteration; 0: not read yet */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t monotonic_ns(void *opaque)
{
    (void)opaque;
    return now_ns();
}

static uint64_t poll_now(struct iothread *t)
{
    return t->poll_clock(t->poll_clock_opaque);
}

static void wake_cb(void *opaque, uint32_t events)
{
    struct iothread *t = opaque;
    uint64_t v;

    if (read(t->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        g_warning("iothread %s: wake eventfd read: %s", t->name, g_strerror(errno));
    }
}

/* Sets the timerfd to the first deadline (or disarms it). */
static void timer_program(struct iothread *t)
{
    struct itimerspec its = { 0 };

    if (t->timers) {
        uint64_t d = MAX(t->timers->deadline_ns, 1u);   /* 0 would disarm */

        its.it_value.tv_sec = (time_t)(d / 1000000000u);
        its.it_value.tv_nsec = (long)(d % 1000000000u);
    }
    if (timerfd_settime(t->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        g_warning("iothread %s: timerfd_settime: %s", t->name, g_strerror(errno));
    }
}

void iothread_timer_cancel(struct iothread *t, struct iothread_timer *tm)
{
    bool first = t->timers == tm;

    if (!tm->armed) {
        return;
    }
    for (struct iothread_timer **p = &t->timers; *p; p = &(*p)->next) {
        if (*p == tm) {
            *p = tm->next;
            break;
        }
    }
    tm->armed = false;
    tm->next = NULL;
    if (first) {
        timer_program(t);
    }
}

void iothread_timer_arm(struct iothread *t, struct iothread_timer *tm, uint64_t deadline_ns)
{
    struct iothread_timer **p = &t->timers;

    iothread_timer_cancel(t, tm);
    tm->deadline_ns = deadline_ns;
    /* Few timers per thread (one per rate-limited LUN waiting): a sorted list. */
    while (*p && (*p)->deadline_ns <= deadline_ns) {
        p = &(*p)->next;
    }
    tm->next = *p;
    *p = tm;
    tm->armed = true;
    if (t->timers == tm) {
        timer_program(t);
    }
}

static void timer_cb(void *opaque, uint32_t events)
{
    struct iothread *t = opaque;
    uint64_t v, now = now_ns();

    if (read(t->timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        g_warning("iothread %s: timerfd read: %s", t->name, g_strerror(errno));
    }
    /* fn may arm timers again, even itself: take each expired one off first. */
    while (t->timers && t->timers->deadline_ns <= now) {
        struct iothread_timer *tm = t->timers;

        t->timers = tm->next;
        tm->next = NULL;
        tm->armed = false;
        tm->fn(tm);
    }
    timer_program(t);
}

static void reap_cqes(struct iothread *t)
{
    struct io_uring_cqe *cqes[64];
    unsigned n;

    if (!t->has_ring) {
        return;
    }
    while ((n = io_uring_peek_batch_cqe(&t->ring, cqes, G_N_ELEMENTS(cqes))) > 0) {
        for (unsigned i = 0; i < n; i++) {
            struct iothread_uring_cb *cb = io_uring_cqe_get_data(cqes[i]);
            int res = cqes[i]->res;

            /*
             * Advance before the callback: a callback may submit and reap
             * again (short I/O resubmission) and must not see this CQE.
             */
            io_uring_cqe_seen(&t->ring, cqes[i]);
            t->cqes_reaped++;
            if (t->ring_owed) {
                t->ring_owed--;
            }
            if (cb && cb->fn) {
                cb->fn(cb, res);
            }
        }
    }
}

static void uring_cb(void *opaque, uint32_t events)
{
    reap_cqes(opaque);
}

struct iothread *iothread_new(const char *name, unsigned id, unsigned uring_depth)
{
    struct iothread *t = g_new0(struct iothread, 1);
    struct epoll_event ev = { .events = EPOLLIN };

    t->name = g_strdup(name);
    t->id = id;
    t->epfd = -1;
    t->wake_fd = -1;
    t->timer_fd = -1;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    t->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (t->epfd < 0 || t->wake_fd < 0 || t->timer_fd < 0) {
        g_warning("iothread %s: epoll/eventfd: %s", name, g_strerror(errno));
        goto fail;
    }
    t->handlers = g_ptr_array_new_with_free_func(g_free);
    t->dead_handlers = g_ptr_array_new_with_free_func(g_free);
    t->pollers = g_array_new(FALSE, TRUE, sizeof(struct poller_entry));
    t->flushes = g_array_new(FALSE, TRUE, sizeof(struct flush_entry));
    pthread_mutex_init(&t->sync_lock, NULL);
    pthread_cond_init(&t->sync_cond, NULL);
    g_queue_init(&t->sync_queue);
    t->defer_tail = &t->defer_head;
    t->resume_tail = &t->resume_head;
    t->poll_ns = 50000;
    t->poll_clock = monotonic_ns;

    t->wake_handler = (struct fd_handler){ .fd = t->wake_fd, .cb = wake_cb, .opaque = t };
    ev.data.ptr = &t->wake_handler;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->wake_fd, &ev) < 0) {
        g_warning("iothread %s: epoll_ctl: %s", name, g_strerror(errno));
        goto fail;
    }
    t->timer_handler = (struct fd_handler){ .fd = t->timer_fd, .cb = timer_cb, .opaque = t };
    ev.data.ptr = &t->timer_handler;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->timer_fd, &ev) < 0) {
        g_warning("iothread %s: epoll_ctl(timerfd): %s", name, g_strerror(errno));
        goto fail;
    }

    if (uring_depth) {
        /*
         * Made disabled, so that its operations are fixed before it can run
         * any.  COOP_TASKRUN: a completion's task work waits for the thread
         * to enter the kernel (TASKRUN_FLAG tells the polling loop when)
         * instead of interrupting it with an IPI while it runs, which on a
         * virtual machine is an exit per completion; a sleeping thread is
         * still woken.  Kernels before 5.19 refuse the flags: set up without.
         */
        const unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED;
        struct io_uring_params p = { .flags = base | IORING_SETUP_COOP_TASKRUN |
                                              IORING_SETUP_TASKRUN_FLAG,
                                     .cq_entries = uring_depth * 4 };
        int ret = io_uring_queue_init_params(uring_depth, &t->ring, &p);

        if (ret == -EINVAL) {
            p = (struct io_uring_params){ .flags = base, .cq_entries = uring_depth * 4 };
            ret = io_uring_queue_init_params(uring_depth, &t->ring, &p);
        }

        if (ret < 0) {
            g_warning("iothread %s: io_uring_queue_init(%u): %s", name, uring_depth,
                      g_strerror(-ret));
            goto fail;
        }
        t->has_ring = true;
        ret = ring_restrict(&t->ring);
        if (ret < 0) {
            g_warning("iothread %s: io_uring restrictions: %s", name, g_strerror(-ret));
            goto fail;
        }
        t->uring_handler = (struct fd_handler){ .fd = t->ring.ring_fd, .cb = uring_cb,
                                                .opaque = t };
        ev.data.ptr = &t->uring_handler;
        if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->ring.ring_fd, &ev) < 0) {
            g_warning("iothread %s: epoll_ctl(io_uring): %s", name, g_strerror(errno));
            goto fail;
        }
    }
    return t;

fail:
    iothread_free(t);
    return NULL;
}

void iothread_set_poll(struct iothread *t, enum iothread_poll_mode mode, uint64_t poll_ns)
{
    t->poll_mode = mode;
    if (poll_ns) {
        t->poll_ns = poll_ns;
    }
    t->stats.poll_window_ns = 0;
    t->stats.poll_window_uring_ns = 0;
}

void iothread_set_poll_clock(struct iothread *t, uint64_t (*now)(void *opaque), void *opaque)
{
    t->poll_clock = now ? now : monotonic_ns;
    t->poll_clock_opaque = opaque;
}

/* Both windows grow alike: opened at the minimum, then doubled, never past max_ns. */
static uint64_t poll_window_doubled(uint64_t window_ns, uint64_t max_ns)
{
    window_ns = window_ns ? window_ns * 2 : IOTHREAD_POLL_WINDOW_MIN_NS;
    return window_ns < max_ns ? window_ns : max_ns;
}

uint64_t iothread_poll_window_next(uint64_t window_ns, uint64_t slept_ns, uint64_t max_ns)
{
    if (slept_ns > max_ns) {
        window_ns /= 2;
        return window_ns < IOTHREAD_POLL_WINDOW_MIN_NS ? 0 : window_ns;
    }
    return poll_window_doubled(window_ns, max_ns);
}

uint64_t iothread_poll_window_uring_next(uint64_t window_ns, uint64_t waited_ns,
                                         uint64_t max_ns)
{
    if (waited_ns <= window_ns) {
        return window_ns;
    }
    if (waited_ns > max_ns) {
        return 0;
    }
    return poll_window_doubled(window_ns, max_ns);
}

/* Completions were reaped, waited for since since_ns: the window's verdict. */
static void judge_uring_window(struct iothread *t, uint64_t since_ns)
{
    t->stats.poll_window_uring_ns = iothread_poll_window_uring_next(
        t->stats.poll_window_uring_ns, poll_now(t) - since_ns, t->poll_ns);
}

const char *iothread_name(const struct iothread *t)
{
    return t->name;
}

unsigned iothread_id(const struct iothread *t)
{
    return t->id;
}

bool iothread_is_current(const struct iothread *t)
{
    return t->running && pthread_equal(t->tid, pthread_self());
}

uint64_t iothread_now_ns(struct iothread *t)
{
    if (!t || !iothread_is_current(t)) {
        return now_ns();
    }
    if (!t->now_cache) {
        t->now_cache = now_ns();
    }
    return t->now_cache;
}

uint64_t iothread_now_after_ns(struct iothread *t, uint64_t since)
{
    uint64_t now = iothread_now_ns(t);

    if (now <= since) {
        now = now_ns();
        if (t && iothread_is_current(t)) {
            t->now_cache = now;
        }
    }
    return now;
}

void iothread_get_stats(struct iothread *t, struct iothread_stats *st)
{
    *st = t->stats;
}

void iothread_charge(struct iothread *t, uint64_t bytes)
{
    if (t) {
        t->iter_work += bytes;
    }
}

static void resume_take_due(struct iothread *t);

/* An iteration begins: the last one's work is in, the clock re-read. */
static void iteration_begin(struct iothread *t)
{
    t->stats.loops++;
    t->now_cache = 0;
    resume_take_due(t);
    if (t->iter_work) {
        if (t->iter_work > t->stats.max_iteration_work) {
            t->stats.max_iteration_work = t->iter_work;
        }
        t->iter_work = 0;
    }
}

static int add_fd(struct iothread *t, int fd, uint32_t events, iothread_fd_cb *cb,
                  void *opaque, bool polled_too)
{
    struct fd_handler *h = g_new0(struct fd_handler, 1);
    struct epoll_event ev = { .events = events };

    h->fd = fd;
    h->cb = cb;
    h->opaque = opaque;
    h->polled_too = polled_too;
    ev.data.ptr = h;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int err = errno;

        g_warning("iothread %s: cannot watch fd %d: %s", t->name, fd, g_strerror(err));
        g_free(h);
        return -err;
    }
    g_ptr_array_add(t->handlers, h);
    if (!polled_too) {
        t->urgent_fds++;
    }
    return 0;
}

int iothread_add_fd(struct iothread *t, int fd, uint32_t events,
                    iothread_fd_cb *cb, void *opaque)
{
    return add_fd(t, fd, events, cb, opaque, false);
}

int iothread_add_kick_fd(struct iothread *t, int fd, uint32_t events,
                         iothread_fd_cb *cb, void *opaque)
{
    return add_fd(t, fd, events, cb, opaque, true);
}

static struct fd_handler *find_handler(struct iothread *t, int fd, guint *idx)
{
    for (guint i = 0; i < t->handlers->len; i++) {
        struct fd_handler *h = g_ptr_array_index(t->handlers, i);

        if (h->fd == fd) {
            *idx = i;
            return h;
        }
    }
    return NULL;
}

int iothread_mod_fd(struct iothread *t, int fd, uint32_t events)
{
    guint idx;
    struct fd_handler *h = find_handler(t, fd, &idx);
    struct epoll_event ev = { .events = events };

    if (!h) {
        return -ENOENT;
    }
    ev.data.ptr = h;
    if (epoll_ctl(t->epfd, EPOLL_CTL_MOD, fd, &ev) < 0) {
        return -errno;
    }
    return 0;
}

void iothread_del_fd(struct iothread *t, int fd)
{
    guint idx;
    struct fd_handler *h = find_handler(t, fd, &idx);

    if (!h) {
        return;
    }
    epoll_ctl(t->epfd, EPOLL_CTL_DEL, fd, NULL);
    /*
     * The handler may be named by an epoll event of the batch being
     * dispatched right now: keep the memory until the iteration ends.
     */
    h->deleted = true;
    if (!h->polled_too) {
        t->urgent_fds--;
    }
    g_ptr_array_steal_index(t->handlers, idx);
    g_ptr_array_add(t->dead_handlers, h);
}

int iothread_add_poller(struct iothread *t, const struct iothread_poller *p)
{
    struct poller_entry e = { .p = *p, .handle = ++t->next_handle, .active = true };

    g_array_append_val(t->pollers, e);
    /* A new source starts with notifications on unless we are polling. */
    if (t->poll_mode != IOTHREAD_POLL_OFF && !t->notify_armed && p->set_notify) {
        p->set_notify(p->opaque, false);
    }
    return e.handle;
}

void iothread_del_poller(struct iothread *t, int handle)
{
    for (guint i = 0; i < t->pollers->len; i++) {
        if (g_array_index(t->pollers, struct poller_entry, i).handle == handle) {
            g_array_remove_index(t->pollers, i);
            return;
        }
    }
}

int iothread_add_flush(struct iothread *t, void (*fn)(void *opaque), void *opaque)
{
    struct flush_entry e = { .fn = fn, .opaque = opaque, .handle = ++t->next_handle,
                             .active = true };

    g_array_append_val(t->flushes, e);
    return e.handle;
}

void iothread_del_flush(struct iothread *t, int handle)
{
    for (guint i = 0; i < t->flushes->len; i++) {
        if (g_array_index(t->flushes, struct flush_entry, i).handle == handle) {
            g_array_remove_index(t->flushes, i);
            return;
        }
    }
}

struct io_uring_sqe *iothread_get_sqe(struct iothread *t)
{
    struct io_uring_sqe *sqe;

    if (!t->has_ring) {
        return NULL;
    }
    sqe = io_uring_get_sqe(&t->ring);
    while (!sqe) {
        /* SQ full: push what we have, making room (reaping if the CQ is tight). */
        int ret = io_uring_submit(&t->ring);

        t->stats.uring_submits++;
        if (ret == -EBUSY || ret == -EAGAIN) {
            reap_cqes(t);
        }
        sqe = io_uring_get_sqe(&t->ring);
    }
    t->ring_owed++;
    return sqe;
}

int iothread_submit(struct iothread *t)
{
    int ret = 0;

    if (!t->has_ring) {
        return 0;
    }
    while (io_uring_sq_ready(&t->ring) > 0) {
        ret = io_uring_submit(&t->ring);
        t->stats.uring_submits++;
        if (ret == -EBUSY || ret == -EAGAIN) {
            /* Completion queue overflow pressure: drain completions, retry. */
            reap_cqes(t);
            continue;
        }
        if (ret < 0) {
            g_warning("iothread %s: io_uring_submit: %s", t->name, g_strerror(-ret));
            return ret;
        }
    }
    return ret;
}

void iothread_sqe_ready(struct iothread *t)
{
    if (t->poll_mode == IOTHREAD_POLL_ON && t->pollers->len > 0) {
        iothread_submit(t);
    }
}

/*
 * Runs the queued work; returns true if it ran anything.  With bounded set
 * (the loop's own pass) it runs only what was queued when it began: work
 * posted meanwhile (a long command continuing itself) waits for the next
 * iteration, so the pollers and fd handlers get their turn in between.
 * Unbounded (the loop ending, free) it runs until the queue is empty.
 */
static bool run_sync_queue(struct iothread *t, bool bounded)
{
    bool ran = false;
    unsigned budget = atomic_load_explicit(&t->sync_pending, memory_order_acquire);

    if (!budget) {
        return false;
    }
    for (;; budget--) {
        struct sync_req *r;

        if (bounded && budget == 0) {
            return ran;
        }

        pthread_mutex_lock(&t->sync_lock);
        r = g_queue_pop_head(&t->sync_queue);
        if (r) {
            atomic_fetch_sub_explicit(&t->sync_pending, 1, memory_order_relaxed);
        }
        pthread_mutex_unlock(&t->sync_lock);
        if (!r) {
            return ran;
        }
        ran = true;
        r->fn(r->opaque);
        if (r->posted) {
            g_free(r);
            continue;
        }
        pthread_mutex_lock(&t->sync_lock);
        r->done = true;
        pthread_cond_broadcast(&t->sync_cond);
        pthread_mutex_unlock(&t->sync_lock);
    }
}

void iothread_defer(struct iothread *t, struct iothread_task *task)
{
    task->next = NULL;
    *t->defer_tail = task;
    t->defer_tail = &task->next;
}

/* Runs at most budget deferred tasks (tasks they defer go to the back). */
static void run_deferred(struct iothread *t, unsigned budget)
{
    while (budget-- && t->defer_head) {
        struct iothread_task *task = t->defer_head;

        t->defer_head = task->next;
        if (!t->defer_head) {
            t->defer_tail = &t->defer_head;
        }
        task->fn(task);
    }
}

void iothread_resume(struct iothread *t, struct iothread_task *task)
{
    task->next = NULL;
    *t->resume_tail = task;
    t->resume_tail = &task->next;
}

void iothread_resume_cancel(struct iothread *t, struct iothread_task *task)
{
    for (struct iothread_task **p = &t->resume_due; *p; p = &(*p)->next) {
        if (*p == task) {
            *p = task->next;
            return;
        }
    }
    for (struct iothread_task **p = &t->resume_head; *p; p = &(*p)->next) {
        if (*p == task) {
            *p = task->next;
            if (!*p) {
                t->resume_tail = p;
            }
            return;
        }
    }
}

/* An iteration begins: what was resumed until now is due in it. */
static void resume_take_due(struct iothread *t)
{
    if (t->resume_head && !t->resume_due) {
        t->resume_due = t->resume_head;
        t->resume_head = NULL;
        t->resume_tail = &t->resume_head;
    }
}

/* Runs the tasks due in this iteration (those they resume wait for the next). */
static void run_resumed(struct iothread *t)
{
    while (t->resume_due) {
        struct iothread_task *task = t->resume_due;

        t->resume_due = task->next;
        task->fn(task);
    }
}

/* Work is queued that must run without waiting for an fd: the loop must not sleep. */
static bool work_queued(const struct iothread *t)
{
    return t->defer_head || t->resume_head || t->resume_due;
}

/*
 * Completions held by the kernel as task work (COOP_TASKRUN), which this
 * thread's next system call runs and posts; the ring must exist.
 */
static bool uring_task_work_held(const struct iothread *t)
{
    return IO_URING_READ_ONCE(*t->ring.sq.kflags) & IORING_SQ_TASKRUN;
}

/*
 * A backend's completion is posted, or held as task work: a blocking
 * epoll_wait would return at once (EINTR, or the ring's fd ready) without
 * sleeping, and be counted as a wake-up that never was.
 */
static bool uring_work_waiting(const struct iothread *t)
{
    return t->has_ring && (io_uring_cq_ready(&t->ring) || uring_task_work_held(t));
}

/* At the loop's end: everything queued, and what that queues, until nothing is left. */
static void run_all_left(struct iothread *t)
{
    do {
        run_sync_queue(t, false);
        resume_take_due(t);
        run_resumed(t);
        run_deferred(t, UINT_MAX);
    } while (work_queued(t) || atomic_load(&t->sync_pending));
}

static void sync_queue_push(struct iothread *t, struct sync_req *r)
{
    uint64_t one = 1;

    pthread_mutex_lock(&t->sync_lock);
    g_queue_push_tail(&t->sync_queue, r);
    atomic_fetch_add_explicit(&t->sync_pending, 1, memory_order_release);
    pthread_mutex_unlock(&t->sync_lock);
    /* EAGAIN: the counter is full, so a wake-up is pending anyway. */
    if (write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
        g_warning("iothread %s: wake eventfd write: %s", t->name, g_strerror(errno));
    }
}

void iothread_post(struct iothread *t, void (*fn)(void *opaque), void *opaque)
{
    struct sync_req *r = g_new0(struct sync_req, 1);

    r->fn = fn;
    r->opaque = opaque;
    r->posted = true;
    /*
     * Queued even when t is the caller or not running: the caller may be
     * in the middle of something fn must not interrupt, and a loop that
     * has not started yet runs it once it does (iothread_free at the
     * latest).
     */
    sync_queue_push(t, r);
}

void iothread_run_sync(struct iothread *t, void (*fn)(void *opaque), void *opaque)
{
    struct sync_req r = { .fn = fn, .opaque = opaque };

    if (!t->running || iothread_is_current(t)) {
        fn(opaque);
        return;
    }
    sync_queue_push(t, &r);
    pthread_mutex_lock(&t->sync_lock);
    while (!r.done) {
        pthread_cond_wait(&t->sync_cond, &t->sync_lock);
    }
    pthread_mutex_unlock(&t->sync_lock);
}

bool iothread_polling(const struct iothread *t)
{
    return t->poll_mode != IOTHREAD_POLL_OFF && t->pollers->len > 0 && !t->notify_armed;
}

static void set_notify_all(struct iothread *t, bool enable, bool *work_pending)
{
    for (guint i = 0; i < t->pollers->len; i++) {
        struct poller_entry *e = &g_array_index(t->pollers, struct poller_entry, i);

        if (e->p.set_notify && e->p.set_notify(e->p.opaque, enable) && work_pending) {
            *work_pending = true;
        }
    }
    t->notify_armed = enable;
}

static bool run_pollers(struct iothread *t)
{
    bool progress = false;

    /* Index loop: a poller may add or remove pollers. */
    for (guint i = 0; i < t->pollers->len; i++) {
        struct poller_entry *e = &g_array_index(t->pollers, struct poller_entry, i);

        if (e->p.poll(e->p.opaque)) {
            progress = true;
        }
    }
    return progress;
}

static void run_flushes(struct iothread *t)
{
    for (guint i = 0; i < t->flushes->len; i++) {
        struct flush_entry *e = &g_array_index(t->flushes, struct flush_entry, i);

        e->fn(e->opaque);
    }
}

static int dispatch_epoll(struct iothread *t, int timeout_ms)
{
    struct epoll_event evs[IOTHREAD_MAX_EVENTS];
    int n = epoll_wait(t->epfd, evs, IOTHREAD_MAX_EVENTS, timeout_ms);

    if (n < 0) {
        if (errno != EINTR) {
            g_warning("iothread %s: epoll_wait: %s", t->name, g_strerror(errno));
        } else if (timeout_ms != 0 && t->has_ring) {
            /*
             * io_uring's task work interrupts the sleep to post a backend's
             * completion (an O_DIRECT read or write finishing) before the
             * ring's fd could say so (the daemon's SIGINT and SIGTERM are
             * blocked in every thread: its signalfd takes them).
             */
            t->stats.wakeups++;
            t->stats.wakeups_uring++;
        }
        return 0;
    }
    bool by_kick = false, by_uring = false;

    for (int i = 0; i < n; i++) {
        struct fd_handler *h = evs[i].data.ptr;

        by_kick |= h->polled_too;
        by_uring |= h == &t->uring_handler;
        if (!h->deleted) {
            h->cb(h->opaque, evs[i].events);
        }
    }
    /* What woke it, for an operator weighing --poll: a driver's kick, or a backend's I/O. */
    if (n > 0 && timeout_ms != 0) {
        t->stats.wakeups++;
        t->stats.wakeups_kick += by_kick;
        t->stats.wakeups_uring += by_uring;
    }
    return n;
}

/* Returns true if sync work ran (it may have changed pollers' notify state). */
static bool end_iteration(struct iothread *t)
{
    /* First: work handed over by run_sync may queue SQEs or used entries. */
    bool ran_sync = run_sync_queue(t, true);
    if (t->defer_head) {
        run_deferred(t, IOTHREAD_DEFER_PER_ITERATION);
    }
    if (t->ring_owed) {
        iothread_submit(t);
        reap_cqes(t);
    }
    run_flushes(t);
    if (t->ring_owed && io_uring_sq_ready(&t->ring) > 0) {
        iothread_submit(t);
    }
    if (t->dead_handlers->len) {
        g_ptr_array_set_size(t->dead_handlers, 0);
    }
    return ran_sync;
}

void iothread_run(struct iothread *t)
{
    uint64_t last_work = poll_now(t);
    unsigned iter = 0;

    t->tid = pthread_self();
    t->running = true;
    while (!atomic_load_explicit(&t->quit, memory_order_acquire)) {
        bool polling = t->poll_mode != IOTHREAD_POLL_OFF && t->pollers->len > 0;
        bool work;
        uint64_t reaped = t->cqes_reaped;

        iteration_begin(t);
        if (!polling) {
            /* Deferred or resumed tasks left: look at the fds without sleeping. */
            dispatch_epoll(t, work_queued(t) || uring_work_waiting(t) ? 0 : -1);
            run_resumed(t);
            end_iteration(t);
            continue;
        }

        /* Poll mode: spin on the rings with kicks off. */
        if (t->notify_armed) {
            set_notify_all(t, false, NULL);
        }
        work = run_pollers(t);
        if (t->ring_owed) {
            /* Task work waiting to post completions: one system call runs it all. */
            if (uring_task_work_held(t)) {
                io_uring_get_events(&t->ring);
            }
            if (io_uring_cq_ready(&t->ring)) {
                reap_cqes(t);
                work = true;
            }
        }
        /*
         * fd handlers (a kick that raced with disabling kicks) and sync
         * work (a queue attached) may re-arm their source's notifications;
         * treat the set as armed so the next round turns them off again,
         * otherwise the driver keeps kicking a thread that polls anyway.
         */
        if (++iter >= (t->urgent_fds || t->timers ? IOTHREAD_EPOLL_EVERY
                                                  : IOTHREAD_EPOLL_EVERY_QUIET)) {
            iter = 0;
            if (dispatch_epoll(t, 0) > 0) {
                t->notify_armed = true;
                work = true;
            }
        }
        if (t->resume_due) {
            run_resumed(t);
            work = true;
        }
        if (end_iteration(t)) {
            t->notify_armed = true;
        }

        /* ON never looks at the clock: it has no window to measure. */
        if (t->poll_mode != IOTHREAD_POLL_ADAPTIVE) {
            continue;
        }
        if (t->cqes_reaped != reaped) {
            /* Completions, wherever in the iteration they were reaped. */
            judge_uring_window(t, last_work);
            work = true;
        }
        if (work || work_queued(t)) {
            last_work = poll_now(t);
        } else if (poll_now(t) - last_work > MAX(t->stats.poll_window_ns,
                                              t->stats.poll_window_uring_ns)) {
            bool pending = false;

            /*
             * Idle for a whole poll window: re-arm notifications and sleep,
             * giving the CPU back; re-check after arming so a request that
             * raced with the re-arm is not left waiting for a kick.
             */
            set_notify_all(t, true, &pending);
            if (!pending && uring_work_waiting(t)) {
                /*
                 * Reap it polling, with last_work kept: the completion
                 * window judges it as one that came after the window.
                 */
                continue;
            }
            if (!pending) {
                uint64_t slept = poll_now(t), uring_wakes = t->stats.wakeups_uring, woke;

                iteration_begin(t);   /* what wakes it is timed from now */
                reaped = t->cqes_reaped;
                dispatch_epoll(t, -1);
                woke = poll_now(t);
                end_iteration(t);
                t->stats.poll_window_ns = iothread_poll_window_next(
                    t->stats.poll_window_ns, poll_now(t) - slept, t->poll_ns);
                if (t->cqes_reaped != reaped) {
                    /*
                     * Completions that woke it were waited for since the last
                     * work, the spin and the sleep; others were of I/O
                     * submitted since something else woke it.
                     */
                    judge_uring_window(t, t->stats.wakeups_uring != uring_wakes ? last_work
                                                                                : woke);
                }
            }
            last_work = poll_now(t);
        }
    }
    /*
     * Leave sources with notifications on for whoever serves them next
     * (notify_armed may only mean "possibly armed": re-arm regardless).
     */
    if (t->poll_mode != IOTHREAD_POLL_OFF && t->pollers->len) {
        set_notify_all(t, true, NULL);
    }
    run_all_left(t);
    t->running = false;
}

static void *thread_main(void *opaque)
{
    struct iothread *t = opaque;
    char comm[16];

    g_strlcpy(comm, t->name, sizeof(comm));
    pthread_setname_np(pthread_self(), comm);
    iothread_run(t);
    return NULL;
}

int iothread_start(struct iothread *t)
{
    int ret;

    /* running must be true before start returns so run_sync queues work. */
    t->running = true;
    ret = pthread_create(&t->tid, NULL, thread_main, t);
    if (ret) {
        t->running = false;
        g_warning("iothread %s: pthread_create: %s", t->name, g_strerror(ret));
        return -ret;
    }
    t->started = true;
    return 0;
}

void iothread_quit(struct iothread *t)
{
    uint64_t one = 1;

    atomic_store_explicit(&t->quit, true, memory_order_release);
    if (write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
        /* Nothing more we can do; the loop sees quit on its next wake-up. */
    }
}

void iothread_free(struct iothread *t)
{
    if (!t) {
        return;
    }
    if (t->started) {
        iothread_quit(t);
        pthread_join(t->tid, NULL);
        t->started = false;
        t->running = false;
    }
    /*
     * Work posted after the loop ended (or to a loop that never ran):
     * run it here, so that what it owns is released rather than leaked.
     */
    if (t->handlers) {
        run_all_left(t);
    }
    if (t->has_ring) {
        io_uring_queue_exit(&t->ring);
    }
    if (t->epfd >= 0) {
        close(t->epfd);
    }
    if (t->wake_fd >= 0) {
        close(t->wake_fd);
    }
    if (t->timer_fd >= 0) {
        close(t->timer_fd);
    }
    if (t->handlers) {
        g_ptr_array_free(t->handlers, TRUE);
        g_ptr_array_free(t->dead_handlers, TRUE);
        g_array_free(t->pollers, TRUE);
        g_array_free(t->flushes, TRUE);
        pthread_mutex_destroy(&t->sync_lock);
        pthread_cond_destroy(&t->sync_cond);
    }
    g_free(t->name);
    g_free(t);
}
