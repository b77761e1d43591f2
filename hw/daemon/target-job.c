/*
 * Work the main thread hands to a thread of its own (include/daemon/target.h):
 * anything that can wait on a file system, a network or a name service
 * (opening a backend, saving the configuration, making or removing a
 * controller's socket and looking up its group) so that the main thread
 * keeps serving every front-end's vhost-user messages, every other control
 * client and the signals meanwhile.  A job's thread posts its result back
 * to the main thread, which then calls its done callback.  A job that has
 * not finished by its deadline, or one still running when the daemon
 * stops, is abandoned: its request is answered at once with -ETIMEDOUT
 * or -ECANCELED, and whenever the thread does return (an open() of a FIFO
 * nobody writes, a hard NFS mount, may never), it discards the result
 * itself and frees the job, without touching the main thread's state.
 * The lock decides between the two ends: a thread posts only a job not
 * abandoned, and the main thread abandons only a job not posted.  Main
 * thread only, but for job_thread.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "io-stats.h"
#include "target.h"
#include "vs-error.h"

/*
 * What job threads share with the main thread, reference-counted: a
 * thread given up may return after the daemon's main loop, and its struct
 * target, are gone.
 */
struct target_jobs_shared {
    unsigned running;               /* (atomic) job threads, given-up ones included */
    GMutex lock;
    struct iothread *main;          /* under lock: where late results go; NULL: nowhere */
};

struct target_job {
    struct target *tgt;
    char *what;                     /* for log lines */
    const struct target_job_ops *ops;
    void *arg;
    struct target_jobs_shared *shared;  /* a reference held */
    struct iothread_timer timer;    /* the deadline; main thread */
    GMutex lock;
    bool posted;                    /* under lock: the thread has posted its result */
    bool abandoned;                 /* under lock: the thread discards its result */
    int ret;                        /* the thread's result, read once posted */
};

static void shared_clear(gpointer data)
{
    g_mutex_clear(&((struct target_jobs_shared *)data)->lock);
}

static void job_free(struct target_job *j)
{
    __atomic_sub_fetch(&j->shared->running, 1, __ATOMIC_RELAXED);
    g_atomic_rc_box_release_full(j->shared, shared_clear);
    g_mutex_clear(&j->lock);
    g_free(j->what);
    g_free(j);
}

/* Main thread: the job is no longer the main thread's to answer. */
static void job_forget(struct target_job *j)
{
    struct target *tgt = j->tgt;

    iothread_timer_cancel(tgt->main, &j->timer);
    tgt->jobs = g_list_remove(tgt->jobs, j);
}

static void job_finished(void *opaque)
{
    struct target_job *j = opaque;
    struct target *tgt = j->tgt;

    job_forget(j);
    j->ops->done(j->arg, j->ret);
    job_free(j);
    target_maybe_quit(tgt);
}

/* Main thread: a given-up job's thread returned; the daemon may have begun to stop since. */
static void job_late(void *opaque)
{
    struct target_job *j = opaque;
    struct target_jobs_shared *shared = j->tgt->jobs_shared;

    g_message("%s: finished after it was given up (%s)", j->what,
              j->ret < 0 ? g_strerror(-j->ret) : "success");
    if (shared && shared->main) {
        j->ops->late(j->arg, j->ret);
    } else {
        j->ops->discard(j->arg, j->ret);
    }
    job_free(j);
}

/* The thread of a given-up job with a late op: whether its result went to the main thread. */
static bool job_post_late(struct target_job *j)
{
    bool posted = false;

    g_mutex_lock(&j->shared->lock);
    if (j->shared->main) {
        iothread_post(j->shared->main, job_late, j);
        posted = true;
    }
    g_mutex_unlock(&j->shared->lock);
    return posted;
}

static gpointer job_thread(gpointer opaque)
{
    struct target_job *j = opaque;
    int ret = j->ops->run(j->arg);
    bool abandoned;

    g_mutex_lock(&j->lock);
    abandoned = j->abandoned;
    j->ret = ret;
    j->posted = !abandoned;
    g_mutex_unlock(&j->lock);
    if (!abandoned) {
        /*
         * Not given up now, it cannot be any more, and the main loop waits
         * for it (tgt->jobs) before it ends; job_finished frees j.
         */
        iothread_post(j->tgt->main, job_finished, j);
    } else if (j->ops->late && job_post_late(j)) {
        /* The main thread has it. */
    } else {
        /* The main thread has answered and forgotten it: nothing of its state is ours. */
        g_message("%s: finished after it was given up (%s); result discarded", j->what,
                  ret < 0 ? g_strerror(-ret) : "success");
        j->ops->discard(j->arg, ret);
        job_free(j);
    }
    return NULL;
}

/*
 * Main thread: gives j up with ret unless its result is on its way (then
 * job_finished answers it).  Whether it was given up.
 */
static bool job_abandon(struct target_job *j, int ret)
{
    bool posted;

    /*
     * Under the lock: a thread that returns meanwhile waits for it, and
     * only then finds j given up, and frees it.
     */
    g_mutex_lock(&j->lock);
    posted = j->posted;
    if (!posted) {
        job_forget(j);
        j->ops->abandoned(j->arg, ret);
        j->abandoned = true;
    }
    g_mutex_unlock(&j->lock);
    /* Given up, j is the thread's (it still counts until it returns): not touched again. */
    return !posted;
}

static void job_timeout(struct iothread_timer *tm)
{
    struct target_job *j = (struct target_job *)((char *)tm - offsetof(struct target_job, timer));
    struct target *tgt = j->tgt;

    /* Said once, by whoever abandoned answers (a control call's error), not here too. */
    job_abandon(j, -ETIMEDOUT);
    target_maybe_quit(tgt);
}

int target_job_start(struct target *tgt, const char *what, const struct target_job_ops *ops,
                     void *arg, bool timed, GError **err)
{
    g_autoptr(GError) gerr = NULL;
    struct target_job *j;
    GThread *thread;

    /* Threads stuck past their deadline still count: control clients cannot pile them up. */
    if (!tgt->jobs_shared) {
        tgt->jobs_shared = g_atomic_rc_box_new0(struct target_jobs_shared);
        g_mutex_init(&tgt->jobs_shared->lock);
        tgt->jobs_shared->main = tgt->main;
    }
    if (__atomic_load_n(&tgt->jobs_shared->running, __ATOMIC_RELAXED) >= TARGET_MAX_JOBS) {
        return vs_error_set(err, -EAGAIN, "%s: %u backends opening already or files being written; "
                            "try again when one has finished", what, TARGET_MAX_JOBS);
    }
    j = g_new0(struct target_job, 1);
    j->tgt = tgt;
    j->what = g_strdup(what);
    j->ops = ops;
    j->arg = arg;
    j->timer.fn = job_timeout;
    g_mutex_init(&j->lock);
    j->shared = g_atomic_rc_box_acquire(tgt->jobs_shared);
    __atomic_add_fetch(&j->shared->running, 1, __ATOMIC_RELAXED);
    tgt->jobs = g_list_prepend(tgt->jobs, j);
    thread = g_thread_try_new("vs-job", job_thread, j, &gerr);
    if (!thread) {
        tgt->jobs = g_list_remove(tgt->jobs, j);
        job_free(j);
        return vs_error_set(err, -EAGAIN, "%s: cannot start it: %s", what, gerr->message);
    }
    /* Never joined: a thread given up may outlive the daemon's main loop. */
    g_thread_unref(thread);
    if (timed && tgt->opts->job_timeout_ms) {
        iothread_timer_arm(tgt->main, &j->timer,
                           io_stats_now_ns() + (uint64_t)tgt->opts->job_timeout_ms * 1000000);
    }
    return 0;
}

/* No late result is posted from now on. */
static void jobs_close(struct target *tgt)
{
    if (tgt->jobs_shared) {
        g_mutex_lock(&tgt->jobs_shared->lock);
        tgt->jobs_shared->main = NULL;
        g_mutex_unlock(&tgt->jobs_shared->lock);
    }
}

void target_jobs_stop(struct target *tgt)
{
    GList *l = tgt->jobs;

    jobs_close(tgt);
    while (l) {
        struct target_job *j = l->data;

        l = l->next;
        /* A job that can be called off ends promptly; its done answers it then. */
        if (j->ops->cancel) {
            j->ops->cancel(j->arg);
        } else {
            job_abandon(j, -ECANCELED);
        }
    }
}

void target_jobs_free(struct target *tgt)
{
    jobs_close(tgt);
    if (tgt->jobs_shared) {
        g_atomic_rc_box_release_full(tgt->jobs_shared, shared_clear);
        tgt->jobs_shared = NULL;
    }
}

void target_maybe_quit(struct target *tgt)
{
    if (tgt->quitting && !tgt->removing && !tgt->jobs) {
        iothread_quit(tgt->main);
    }
}
