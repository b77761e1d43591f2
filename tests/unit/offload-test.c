/*
 * The offload worker (hw/util/offload.c): a job held on the worker does
 * not hold the I/O thread that queued it, which serves its other work
 * meanwhile and gets the job's result back when it ends; jobs run in the
 * order queued, one at a time; freeing runs what is still queued and
 * joins the worker; an offload never used starts no thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "iothread.h"
#include "offload.h"

#define WAIT_US (10 * G_TIME_SPAN_SECOND)

struct held_job {
    GMutex lock;
    GCond cond;
    bool started, released, back;
    bool back_on_thread;
    struct iothread *t;
    struct offload *o;
    int queued;
};

static void job_back(void *opaque)
{
    struct held_job *h = opaque;

    g_mutex_lock(&h->lock);
    h->back = true;
    h->back_on_thread = iothread_is_current(h->t);
    g_cond_broadcast(&h->cond);
    g_mutex_unlock(&h->lock);
}

/* On the worker: waits until the test releases it, then reports back to the I/O thread. */
static void job_held(void *opaque)
{
    struct held_job *h = opaque;

    g_mutex_lock(&h->lock);
    h->started = true;
    g_cond_broadcast(&h->cond);
    while (!h->released) {
        g_cond_wait(&h->cond, &h->lock);
    }
    g_mutex_unlock(&h->lock);
    iothread_post(h->t, job_back, h);
}

static void queue_held(void *opaque)
{
    struct held_job *h = opaque;

    h->queued = offload_run(h->o, job_held, h);
}

static void nothing(void *opaque)
{
}

static bool wait_for(struct held_job *h, const bool *flag)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    g_mutex_lock(&h->lock);
    while (!*flag && g_cond_wait_until(&h->cond, &h->lock, end)) {
    }
    g_mutex_unlock(&h->lock);
    return *flag;
}

static void test_held_job_does_not_hold_thread(void)
{
    struct held_job h = { 0 };

    g_mutex_init(&h.lock);
    g_cond_init(&h.cond);
    h.t = iothread_new("t-offload", 1, 0);
    h.o = offload_new("test-worker");
    g_assert_cmpint(iothread_start(h.t), ==, 0);
    iothread_run_sync(h.t, queue_held, &h);
    g_assert_cmpint(h.queued, ==, 0);
    g_assert_true(wait_for(&h, &h.started));

    /* The job is held on the worker: the I/O thread still serves. */
    for (int i = 0; i < 3; i++) {
        iothread_run_sync(h.t, nothing, NULL);
    }
    g_assert_false(h.back);

    g_mutex_lock(&h.lock);
    h.released = true;
    g_cond_broadcast(&h.cond);
    g_mutex_unlock(&h.lock);
    g_assert_true(wait_for(&h, &h.back));
    g_assert_true(h.back_on_thread);
    offload_free(h.o);
    iothread_free(h.t);
    g_cond_clear(&h.cond);
    g_mutex_clear(&h.lock);
}

struct order_job {
    GArray *ran;
    int n;
};

static void job_record(void *opaque)
{
    struct order_job *j = opaque;

    g_array_append_val(j->ran, j->n);
}

static void test_order_and_free_runs_queued(void)
{
    struct offload *w = offload_new("test-order");
    GArray *ran = g_array_new(FALSE, FALSE, sizeof(int));
    struct order_job jobs[4];

    for (int i = 0; i < 4; i++) {
        jobs[i] = (struct order_job) { ran, i };
        g_assert_cmpint(offload_run(w, job_record, &jobs[i]), ==, 0);
    }
    offload_free(w);                   /* runs what is left, joins */
    g_assert_cmpuint(ran->len, ==, 4);
    for (int i = 0; i < 4; i++) {
        g_assert_cmpint(g_array_index(ran, int, i), ==, i);
    }
    g_array_free(ran, TRUE);
}

static void test_unused_frees(void)
{
    offload_free(offload_new("test-unused"));
    offload_free(NULL);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/offload/held-job-does-not-hold-thread", test_held_job_does_not_hold_thread);
    g_test_add_func("/offload/order-and-free-runs-queued", test_order_and_free_runs_queued);
    g_test_add_func("/offload/unused-frees", test_unused_frees);
    return g_test_run();
}
