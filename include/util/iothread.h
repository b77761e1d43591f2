/*
 * An I/O thread: one epoll loop that owns a set of virtqueues, an io_uring
 * for the backends it drives, and the fds of any network backends.  Work is
 * batched per loop iteration: handlers queue backend I/O, and the thread
 * submits the io_uring once and runs its flush hooks (publish used rings,
 * signal call eventfds) once before it sleeps.  Other threads talk to an
 * iothread only through iothread_run_sync() and iothread_post().
 *
 * Poll modes: OFF sleeps in epoll_wait; ON spins on the pollers forever;
 * ADAPTIVE spins for a window after the last useful work, then arms
 * notifications and sleeps, so a loaded host gets its CPU back.  The
 * window tunes itself between 0 and poll_ns (iothread_poll_window_next):
 * it grows while the work that woke the thread came soon after it went
 * to sleep, and shrinks while it came too late for any spin to pay, so a
 * thread whose queues see a request every millisecond does not burn a
 * poll window per request.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_IOTHREAD_H
#define VHOST_SCSI_IOTHREAD_H

#include <stdbool.h>
#include <stdint.h>

struct iothread;
/* Only the io_uring backend and the loop itself see liburing's types. */
struct io_uring_sqe;

enum iothread_poll_mode { IOTHREAD_POLL_OFF, IOTHREAD_POLL_ADAPTIVE, IOTHREAD_POLL_ON };

typedef void iothread_fd_cb(void *opaque, uint32_t events);

/*
 * A completion for an io_uring request: embed it, set fn, and put its
 * address in the SQE's user_data (io_uring_sqe_set_data).
 */
struct iothread_uring_cb {
    void (*fn)(struct iothread_uring_cb *cb, int res);
};

/*
 * A poller is called in poll mode on every loop iteration; it returns true
 * if it found work.  set_notify(opaque, true) must re-arm the source's
 * notifications (e.g. enable virtqueue kicks) and return true if work
 * arrived meanwhile; set_notify(opaque, false) turns them off while polling.
 */
struct iothread_poller {
    bool (*poll)(void *opaque);
    bool (*set_notify)(void *opaque, bool enable);
    void *opaque;
};

/*
 * A one-shot timer of an I/O thread, for work that must wait for time to
 * pass (a rate limit's next refill): armed and cancelled only on that
 * thread; fn runs there, from its loop, at or after deadline_ns
 * (CLOCK_MONOTONIC, io_stats_now_ns()).  Embed it; the thread holds it
 * only while it is armed.  One timerfd per thread serves all its timers.
 */
struct iothread_timer {
    void (*fn)(struct iothread_timer *tm);
    /* Private to iothread.c. */
    uint64_t deadline_ns;
    bool armed;
    struct iothread_timer *next;
};

/*
 * A piece of long work deferred to a later iteration of its own thread's
 * loop (the next chunk of a command of many): each iteration runs at most
 * IOTHREAD_DEFER_PER_ITERATION of them, in order, after the fd handlers,
 * pollers and queued work, so however many such jobs a thread carries it
 * serves its queues between every few pieces, and a loop with tasks left
 * does not sleep.  Embed it, set fn; queue it only from the thread itself
 * (iothread_defer); it is the thread's until fn runs.  Tasks still queued
 * when the loop ends run before iothread_run returns (or in
 * iothread_free), so what they own is completed, not leaked.
 */
#define IOTHREAD_DEFER_PER_ITERATION 1
struct iothread_task {
    void (*fn)(struct iothread_task *task);
    struct iothread_task *next;     /* private to iothread.c */
};

struct iothread_stats {
    uint64_t wakeups;       /* returns from a sleeping epoll_wait: events or task work */
    uint64_t wakeups_kick;  /* of those, ones that brought a kick fd's event */
    uint64_t wakeups_uring; /* ones that brought io_uring completions */
    uint64_t loops;         /* loop iterations */
    uint64_t uring_submits; /* io_uring_submit calls */
    /*
     * The most bytes of backend work done on the thread's own CPU in one
     * loop iteration (iothread_charge): what a request that arrives
     * while the thread is busy can find ahead of it, twice over at most
     * (the rest of the iteration it arrives in, the part of the next one
     * before its queue's turn).  The fairness budgets bound it
     * (docs/security.md, "One command's work, and a neighbour").
     */
    uint64_t max_iteration_work;
    uint64_t poll_window_ns; /* ADAPTIVE's spin window now (0: sleeps at once) */
    uint64_t poll_window_uring_ns; /* its window for io_uring completions */
};

/*
 * ADAPTIVE's rule for its spin window, after a sleep: slept_ns is the
 * sleep alone, from re-arming notifications to the wake-up (QEMU's
 * iothread judges its poll time by its block_ns, which also counts the
 * poll before the sleep: here the spin is left out on purpose, see
 * below).  Woken within max_ns of
 * going to sleep: work comes at a pace a spin can meet, and a longer one
 * would have caught this without the sleep, its wake-up and the driver's
 * kick, so the window doubles (from IOTHREAD_POLL_WINDOW_MIN_NS, up to
 * max_ns).  Woken later: it halves, to 0 below the minimum.  While the
 * spin finds work the loop does not call it: the window that pays is
 * kept.  Judging the sleep and not the time since the last work keeps a
 * whole window open for work that comes in bursts a little further apart
 * than the window (a guest's queue of 16 under TCG: half the wake-ups and
 * kicks; docs/performance.md's git history), and costs nothing when
 * requests come evenly spaced, where the sleep is as long as the gap.
 */
#define IOTHREAD_POLL_WINDOW_MIN_NS 4000
uint64_t iothread_poll_window_next(uint64_t window_ns, uint64_t slept_ns, uint64_t max_ns);

/*
 * ADAPTIVE's second window, for the backends' io_uring completions: the
 * thread spins for the larger of the two.  Judged each time an iteration
 * reaps completions, found by the spin or after a sleep, by waited_ns, the
 * time since the thread last had work: within the window, it paid and
 * stays; within max_ns, it doubles (from IOTHREAD_POLL_WINDOW_MIN_NS); later,
 * it closes.  This is QEMU's rule for each of its handlers' poll times.  A
 * backend whose I/O completes at a pace a spin can meet (a host write a
 * few tens of microseconds after submission) keeps the thread awake after
 * each batch, whatever the kicks' window says, and so does the guest's next
 * request that comes meanwhile: no sleep, no kick.
 */
uint64_t iothread_poll_window_uring_next(uint64_t window_ns, uint64_t waited_ns,
                                         uint64_t max_ns);

/* Creates a thread context (not yet running).  uring_depth 0: no io_uring. */
struct iothread *iothread_new(const char *name, unsigned id, unsigned uring_depth);
void iothread_set_poll(struct iothread *t, enum iothread_poll_mode mode,
                       uint64_t poll_ns);
/*
 * The clock ADAPTIVE measures its windows with (the spin since the last
 * work, the sleep, a completion's wait), in monotonic ns; now(opaque) is
 * called on t's thread.  NULL, the default: CLOCK_MONOTONIC.  Set before
 * iothread_start.  A test drives it to judge the windows' rules by the
 * times it chose, not by how long a sleep took on a loaded machine.
 */
void iothread_set_poll_clock(struct iothread *t, uint64_t (*now)(void *opaque), void *opaque);
/*
 * True while t spins on its pollers with their notifications off (poll
 * mode, awake): a source handled from an fd callback then must not turn
 * its notifications back on, or every kick would arm the next one.  Call
 * on t only.
 */
bool iothread_polling(const struct iothread *t);
/* Spawns the thread. */
int iothread_start(struct iothread *t);
/* Runs the loop in the calling thread until iothread_quit() (for main()). */
void iothread_run(struct iothread *t);
/* Asks the loop to return; safe from any thread and from signal handlers' loops. */
void iothread_quit(struct iothread *t);
/* Stops (if started), joins and frees. */
void iothread_free(struct iothread *t);

const char *iothread_name(const struct iothread *t);
unsigned iothread_id(const struct iothread *t);
bool iothread_is_current(const struct iothread *t);
/*
 * CLOCK_MONOTONIC in ns, read at most once per loop iteration of t: the
 * first call in an iteration reads the clock, later ones in the same
 * iteration get that reading.  For timestamps taken per command (the
 * statistics), where a clock reading (tens of ns under kvm-clock) would
 * cost more than the rest of the accounting; their resolution is one
 * iteration.  From another thread (or t NULL) it reads the clock.
 */
uint64_t iothread_now_ns(struct iothread *t);
/*
 * The same, but later than since (a start time taken with it): when the
 * iteration's reading is not, the clock is read again (and that reading
 * kept for the rest of the iteration), so an end is never the start.
 */
uint64_t iothread_now_after_ns(struct iothread *t, uint64_t since);
void iothread_get_stats(struct iothread *t, struct iothread_stats *st);

/* fd handlers; call from the iothread itself (or before it starts). */
int iothread_add_fd(struct iothread *t, int fd, uint32_t events,
                    iothread_fd_cb *cb, void *opaque);
/*
 * The same for a kick eventfd whose queue a poller of this thread reads:
 * while the thread busy-polls, looking at it is not urgent, so the loop
 * makes the epoll_wait system call less often when only such fds are left.
 */
int iothread_add_kick_fd(struct iothread *t, int fd, uint32_t events,
                         iothread_fd_cb *cb, void *opaque);
int iothread_mod_fd(struct iothread *t, int fd, uint32_t events);
void iothread_del_fd(struct iothread *t, int fd);

/* Pollers and flush hooks; call from the iothread itself. Return a handle. */
int iothread_add_poller(struct iothread *t, const struct iothread_poller *p);
void iothread_del_poller(struct iothread *t, int handle);
int iothread_add_flush(struct iothread *t, void (*fn)(void *opaque), void *opaque);
void iothread_del_flush(struct iothread *t, int handle);
/* Arms (or re-arms) tm on t, from t's own thread. */
void iothread_timer_arm(struct iothread *t, struct iothread_timer *tm, uint64_t deadline_ns);
/* Disarms tm if it is armed, from t's own thread. */
void iothread_timer_cancel(struct iothread *t, struct iothread_timer *tm);

/*
 * Runs fn(opaque) on t and waits for it to return.  Runs it directly if
 * called from t.  Used for queue start/stop and memory table changes.
 */
void iothread_run_sync(struct iothread *t, void (*fn)(void *opaque), void *opaque);

/*
 * Queues fn(opaque) to run on t and returns at once, from any thread,
 * including t itself (fn then runs later in t's loop, never inside the
 * caller).  Work runs in the order it was posted, and in order with
 * run_sync work queued from other threads: such a run_sync issued after a
 * post returns after the posted fn has run.  Work still queued when t is
 * freed runs in iothread_free().  Work t posts to itself from its queued
 * work runs in the next loop iteration, after the pollers and fd handlers,
 * so a long job that continues itself this way yields the thread.
 * For completions handed back to the thread that asked (a task management
 * function waiting for I/O, the next chunk of a long command); allocates a
 * small record per call.
 */
void iothread_post(struct iothread *t, void (*fn)(void *opaque), void *opaque);

/*
 * Counts bytes of work a backend did on t's CPU (copying or zeroing
 * inside its submit) in the current loop iteration, for
 * max_iteration_work; from t itself.  t may be NULL (nothing counted).
 */
void iothread_charge(struct iothread *t, uint64_t bytes);

/* Queues task to run in a later iteration of t's loop, from t itself. */
void iothread_defer(struct iothread *t, struct iothread_task *task);

/*
 * Queues task to run in t's next loop iteration, after that iteration's
 * fd handlers and pollers, from t itself; the loop does not sleep while
 * one is queued.  For a request queue whose turn ended with requests
 * left: it gets its next turn after the queues whose kicks are waiting.
 * Unlike iothread_defer, every task queued runs in the next iteration.
 */
void iothread_resume(struct iothread *t, struct iothread_task *task);
/* Takes task back if iothread_resume queued it and it has not run; from t itself. */
void iothread_resume_cancel(struct iothread *t, struct iothread_task *task);

/*
 * Returns an SQE of this thread's ring (submitting first if the ring is
 * full); the loop submits pending SQEs once per iteration, or at once
 * when the caller says the SQE is ready (iothread_sqe_ready).  NULL only
 * if the thread has no ring.
 */
struct io_uring_sqe *iothread_get_sqe(struct iothread *t);
/* Submits pending SQEs now (rarely needed; the loop does it). */
int iothread_submit(struct iothread *t);
/*
 * An SQE from iothread_get_sqe is ready: a thread that polls all the time
 * (IOTHREAD_POLL_ON) submits it at once, others with the rest of the
 * iteration's.  A device given a whole batch in one io_uring_enter served
 * a polling thread 9-13% fewer IOPS (an O_DIRECT loop device at QD32,
 * docs/performance.md's git history); a thread that sleeps saves the
 * system call.
 */
void iothread_sqe_ready(struct iothread *t);

#endif
