/*
 * The second thread of the "shared memory is read once" tests (see
 * shared-writer.h): it plays a front-end that rewrites shared memory
 * without pause, with values from its own seeded generator (GRand is not
 * shared between threads), until the test stops it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "shared-writer.h"

struct shared_writer {
    GThread *thread;
    shared_writer_pass pass;
    void *shared;
    guint32 seed;
    gint stop;
    guint64 passes;             /* made so far */
};

static gpointer writer_main(gpointer opaque)
{
    struct shared_writer *w = opaque;
    GRand *rand = g_rand_new_with_seed(w->seed);

    while (!g_atomic_int_get(&w->stop)) {
        w->pass(w->shared, rand);
        __atomic_add_fetch(&w->passes, 1, __ATOMIC_RELEASE);
    }
    g_rand_free(rand);
    return NULL;
}

struct shared_writer *shared_writer_start(shared_writer_pass pass, void *shared)
{
    struct shared_writer *w = g_new0(struct shared_writer, 1);

    w->pass = pass;
    w->shared = shared;
    w->seed = g_test_rand_int();
    w->thread = g_thread_new("shared-writer", writer_main, w);
    while (__atomic_load_n(&w->passes, __ATOMIC_ACQUIRE) == 0) {
        g_thread_yield();
    }
    return w;
}

guint64 shared_writer_stop(struct shared_writer *w)
{
    guint64 passes;

    g_atomic_int_set(&w->stop, 1);
    g_thread_join(w->thread);
    passes = w->passes;
    g_free(w);
    return passes;
}
