/*
 * Grace periods over I/O threads (include/util/grace.h): one posted call
 * to each thread, which runs between two of its loop iterations, and one
 * call back to the home thread when the last of them has run.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdatomic.h>

#include <glib.h>

#include "grace.h"

struct grace {
    struct iothread *home;
    atomic_uint left;
    void (*done)(void *opaque);
    void *opaque;
};

static void grace_end(void *arg)
{
    struct grace *g = arg;

    g->done(g->opaque);
    g_free(g);
}

static void grace_passed(void *arg)
{
    struct grace *g = arg;

    if (atomic_fetch_sub(&g->left, 1) == 1) {
        iothread_post(g->home, grace_end, g);
    }
}

void iothread_grace(struct iothread *home, struct iothread *const *threads, unsigned n,
                    void (*done)(void *opaque), void *opaque)
{
    struct grace *g;

    if (!home) {
        g_assert(n == 0);
        done(opaque);
        return;
    }
    g = g_new0(struct grace, 1);
    g->home = home;
    g->done = done;
    g->opaque = opaque;
    atomic_init(&g->left, n);
    if (!n) {
        iothread_post(home, grace_end, g);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        iothread_post(threads[i], grace_passed, g);
    }
}
