/*
 * Signalling front-end eventfds without ever blocking for long.  An
 * eventfd write blocks only when the counter would pass its maximum, which
 * only a front-end can bring about, and only on an fd that is blocking:
 * the server sets O_NONBLOCK on receipt, but the front-end shares the open
 * file and can clear it.  Checking the flag before each write would cost a
 * system call per signal and still race; instead, each enrolled thread
 * marks its writes (an odd sequence number while inside one; two plain
 * stores, no system call) and a watchdog thread looks every period: a
 * thread seen inside the same write twice in a row is sent a signal whose
 * handler does nothing and does not restart system calls, so the write
 * returns EINTR, which a non-blocking eventfd write never does.  The
 * caller then treats the fd as hostile and drops its front-end.
 *
 * A signal handler cannot be given a context and the writer's slot is
 * found through a thread-local pointer (set by notify_watchdog_enrol), so
 * this file holds the one such pointer; the watchdog itself is an object
 * its owner (the program's main) creates and frees.  A signal that
 * arrives just after the write returned interrupts nothing or a sleep
 * that the caller retries (epoll_wait); it is harmless.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "notify-fd.h"

/* Every I/O thread (at most 256) and the main thread. */
#define NOTIFY_MAX_THREADS 260

#define NOTIFY_SIGNAL (SIGRTMIN + 1)

struct notify_slot {
    _Atomic uint64_t seq;    /* odd while its thread is inside a write */
    uint64_t last_seen;      /* the watchdog's previous look */
    pthread_t tid;
    bool used;               /* under the watchdog's lock */
};

struct notify_watchdog {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    unsigned period_ms;
    struct notify_slot slots[NOTIFY_MAX_THREADS];
};

static __thread struct notify_slot *self;

static void interrupt_handler(int sig)
{
    /* Its only purpose is to make a blocked write return EINTR. */
    (void)sig;
}

static void *watchdog_main(void *opaque)
{
    struct notify_watchdog *wd = opaque;
    struct timespec next;

    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&wd->lock);
    while (!wd->stop) {
        next.tv_nsec += (long)(wd->period_ms % 1000) * 1000000;
        next.tv_sec += wd->period_ms / 1000 + next.tv_nsec / 1000000000;
        next.tv_nsec %= 1000000000;
        while (!wd->stop && pthread_cond_timedwait(&wd->cond, &wd->lock, &next) != ETIMEDOUT) {
        }
        for (unsigned i = 0; !wd->stop && i < NOTIFY_MAX_THREADS; i++) {
            struct notify_slot *s = &wd->slots[i];
            uint64_t seq;

            if (!s->used) {
                continue;
            }
            seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
            if ((seq & 1) && seq == s->last_seen) {
                /* Under the lock: the thread cannot leave (and exit) meanwhile. */
                pthread_kill(s->tid, NOTIFY_SIGNAL);
            }
            s->last_seen = seq;
        }
    }
    pthread_mutex_unlock(&wd->lock);
    return NULL;
}

struct notify_watchdog *notify_watchdog_start(unsigned period_ms)
{
    struct notify_watchdog *wd = g_new0(struct notify_watchdog, 1);
    struct sigaction sa;
    pthread_condattr_t ca;
    int r;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = interrupt_handler;   /* no SA_RESTART: that is the point */
    sigemptyset(&sa.sa_mask);
    if (sigaction(NOTIFY_SIGNAL, &sa, NULL) < 0) {
        g_warning("notify watchdog: sigaction: %s", g_strerror(errno));
        g_free(wd);
        return NULL;
    }
    wd->period_ms = period_ms ? period_ms : 100;
    pthread_mutex_init(&wd->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cond, &ca);
    pthread_condattr_destroy(&ca);
    r = pthread_create(&wd->thread, NULL, watchdog_main, wd);
    if (r != 0) {
        g_warning("notify watchdog: pthread_create: %s", g_strerror(r));
        pthread_cond_destroy(&wd->cond);
        pthread_mutex_destroy(&wd->lock);
        g_free(wd);
        return NULL;
    }
    return wd;
}

void notify_watchdog_stop(struct notify_watchdog *wd)
{
    if (!wd) {
        return;
    }
    pthread_mutex_lock(&wd->lock);
    wd->stop = true;
    pthread_cond_signal(&wd->cond);
    pthread_mutex_unlock(&wd->lock);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cond);
    pthread_mutex_destroy(&wd->lock);
    g_free(wd);
}

int notify_watchdog_enrol(struct notify_watchdog *wd)
{
    sigset_t set;
    int r = -ENOSPC;

    /* The interrupt must reach this thread whatever mask it inherited. */
    sigemptyset(&set);
    sigaddset(&set, NOTIFY_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    pthread_mutex_lock(&wd->lock);
    for (unsigned i = 0; i < NOTIFY_MAX_THREADS; i++) {
        struct notify_slot *s = &wd->slots[i];

        if (!s->used) {
            s->used = true;
            s->tid = pthread_self();
            atomic_store_explicit(&s->seq, 0, memory_order_relaxed);
            s->last_seen = 0;
            self = s;
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&wd->lock);
    if (r < 0) {
        g_warning("notify watchdog: no room for another thread");
    }
    return r;
}

void notify_watchdog_leave(struct notify_watchdog *wd)
{
    if (!self) {
        return;
    }
    pthread_mutex_lock(&wd->lock);
    self->used = false;
    pthread_mutex_unlock(&wd->lock);
    self = NULL;
}

int notify_fd_signal(int fd)
{
    static const uint64_t one = 1;
    struct notify_slot *s = self;
    uint64_t seq = 0;
    ssize_t n;
    int err;

    /* Only this thread writes its sequence: plain stores, no locked instruction. */
    if (s) {
        seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
        atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
    }
    n = write(fd, &one, sizeof(one));
    err = errno;
    if (s) {
        atomic_store_explicit(&s->seq, seq + 2, memory_order_relaxed);
    }
    if (n == sizeof(one)) {
        return 0;
    }
    if (n >= 0) {
        return -EIO;
    }
    /* A non-blocking eventfd write never sleeps, so it is never interrupted. */
    return err == EINTR ? -ETIMEDOUT : -err;
}
