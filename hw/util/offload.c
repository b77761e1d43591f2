/*
 * The offload worker (offload.h): a queue of jobs under a mutex, and one
 * thread that sleeps on a condition until there is one or it is told to
 * end.  A record is allocated per job: what is offloaded is a system call
 * that can take milliseconds, next to which the allocation is nothing.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include <glib.h>

#include "offload.h"

struct offload_job {
    void (*fn)(void *opaque);
    void *opaque;
};

struct offload {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    GQueue jobs;               /* struct offload_job */
    pthread_t thread;
    bool running;
    bool quit;
    char *name;
};

struct offload *offload_new(const char *name)
{
    struct offload *o = g_new0(struct offload, 1);

    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->cond, NULL);
    g_queue_init(&o->jobs);
    o->name = g_strndup(name, 15);
    return o;
}

static void *offload_main(void *opaque)
{
    struct offload *o = opaque;

    pthread_setname_np(pthread_self(), o->name);
    pthread_mutex_lock(&o->lock);
    for (;;) {
        struct offload_job *j = g_queue_pop_head(&o->jobs);

        if (!j) {
            if (o->quit) {
                break;
            }
            pthread_cond_wait(&o->cond, &o->lock);
            continue;
        }
        pthread_mutex_unlock(&o->lock);
        j->fn(j->opaque);
        g_free(j);
        pthread_mutex_lock(&o->lock);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

int offload_run(struct offload *o, void (*fn)(void *opaque), void *opaque)
{
    struct offload_job *j = g_new(struct offload_job, 1);
    int ret = 0;

    *j = (struct offload_job) { fn, opaque };
    pthread_mutex_lock(&o->lock);
    if (!o->running) {
        ret = -pthread_create(&o->thread, NULL, offload_main, o);
        o->running = ret == 0;
    }
    if (ret == 0) {
        g_queue_push_tail(&o->jobs, j);
        pthread_cond_signal(&o->cond);
    } else {
        g_free(j);
    }
    pthread_mutex_unlock(&o->lock);
    return ret;
}

void offload_free(struct offload *o)
{
    if (!o) {
        return;
    }
    pthread_mutex_lock(&o->lock);
    o->quit = true;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);
    if (o->running) {
        pthread_join(o->thread, NULL);
    }
    g_assert(g_queue_is_empty(&o->jobs));
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    g_free(o->name);
    g_free(o);
}
