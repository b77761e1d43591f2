/*
 * The daemon's life (target.h): a target is set up from its options
 * (target_init), started (its threads, the main loop's timer, and, for
 * the program, the signals that stop it), given its LUNs (--config, then
 * --lun), made to listen (the control socket, then the default
 * controller's), run until a signal's shutdown has let every removal and
 * job finish, and taken down (target_end).  The program's main owns the
 * one struct target; a test may start and end its own.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>

#include "guest-mem.h"
#include "target.h"
#include "vs-error.h"

/* A shutdown that has not finished after this long is stuck: exit anyway. */
#define SHUTDOWN_GRACE_S 30

/* Ends a shutdown that an I/O thread stuck in the kernel would hold up forever. */
static void *shutdown_watchdog(void *opaque)
{
    static const char msg[] = "vhost-scsi-target: shutdown did not finish within 30 s; "
                              "exiting without it\n";
    const char *socket_path = opaque;
    struct timespec left = { .tv_sec = SHUTDOWN_GRACE_S };

    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &left, &left) == EINTR) {
    }
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
        /* nothing more to do about it */
    }
    if (socket_path) {
        unlink(socket_path);
    }
    _exit(1);
    return NULL;
}

static void signal_cb(void *opaque, uint32_t events)
{
    struct target *tgt = opaque;
    struct signalfd_siginfo si;

    if (read(tgt->signal_fd, &si, sizeof(si)) == sizeof(si)) {
        pthread_t watchdog;
        pthread_attr_t attr;

        /*
         * A closed terminal or `systemctl kill -s HUP` must not take every
         * tenant's disks with it (the default action ends the process).
         */
        if (si.ssi_signo == SIGHUP) {
            g_message("SIGHUP: nothing to reload; the control socket changes the configuration");
            return;
        }
        g_message("signal %u: shutting down", si.ssi_signo);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&watchdog, &attr, shutdown_watchdog,
                           (void *)tgt->dflt->socket_path) != 0) {
            g_warning("cannot start the shutdown watchdog; shutting down without it");
        }
        pthread_attr_destroy(&attr);
        /*
         * Work off the main thread is called off or given up, and its
         * requests answered, before the control socket closes; no new
         * control requests; a LUN removal under way finishes first.
         */
        target_jobs_stop(tgt);
        target_control_stop(tgt);
        tgt->quitting = true;
        target_maybe_quit(tgt);
    }
}

static void call_enrol(void *opaque)
{
    struct target *tgt = opaque;

    notify_watchdog_enrol(tgt->watchdog);
}

static void call_leave(void *opaque)
{
    struct target *tgt = opaque;

    notify_watchdog_leave(tgt->watchdog);
}

void target_opts_init(struct target_opts *o)
{
    *o = (struct target_opts){ .listen_fd = -1, .queues = 4,
                               .poll = IOTHREAD_POLL_OFF,
                               .max_conns = TARGET_DEFAULT_MAX_CONNECTIONS,
                               .message_timeout_ms = TARGET_DEFAULT_MESSAGE_TIMEOUT_MS,
                               .max_mem_regions = GUEST_MEM_MAX_REGIONS,
                               .max_inflight = TARGET_DEFAULT_MAX_INFLIGHT,
                               .control_max_request = CTL_MAX_REQUEST,
                               .job_timeout_ms = TARGET_DEFAULT_JOB_TIMEOUT_MS };
    o->lun_args = g_ptr_array_new_with_free_func(g_free);
    o->allow_uids = g_array_new(FALSE, FALSE, sizeof(uid_t));
    o->allow_gids = g_array_new(FALSE, FALSE, sizeof(gid_t));
}

void target_opts_clear(struct target_opts *o)
{
    if (o->listen_fd >= 0) {
        close(o->listen_fd);
    }
    g_ptr_array_free(o->lun_args, TRUE);
    g_array_free(o->allow_uids, TRUE);
    g_array_free(o->allow_gids, TRUE);
    g_free(o->socket_path);
    g_free(o->socket_group);
    g_free(o->control_path);
    g_free(o->config_path);
    g_free(o->pr_dir);
    g_free(o->sandbox_user);
}

void target_init(struct target *tgt, struct target_opts *opts)
{
    *tgt = (struct target){ .opts = opts, .signal_fd = -1, .timer_fd = -1 };
    if (!opts->threads) {
        opts->threads = MIN(opts->queues, (unsigned)MAX(1, sysconf(_SC_NPROCESSORS_ONLN)));
    }
    tgt->nthreads = MIN(opts->threads, opts->queues);
    target_backends_init(tgt);
    /* The command line's controller: its socket is decided once the config is read. */
    tgt->dflt = target_controller_new(tgt, "default", opts->allow_uids, opts->allow_gids,
                                      opts->queues);
}

/* SIGINT and SIGTERM stop the daemon, SIGHUP is logged: read from a signalfd. */
static int watch_signals(struct target *tgt, GError **err)
{
    sigset_t mask;

    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    /* Blocked before any thread starts, so only the signalfd sees them. */
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    tgt->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (tgt->signal_fd < 0) {
        int ret = -errno;

        return vs_error_set(err, ret, "cannot watch signals: signalfd: %s", g_strerror(-ret));
    }
    return 0;
}

int target_start(struct target *tgt, bool signals, GError **err)
{
    int ret;

    if (signals && (ret = watch_signals(tgt, err)) < 0) {
        return ret;
    }
    tgt->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (tgt->timer_fd < 0) {
        ret = -errno;
        return vs_error_set(err, ret, "cannot make the main loop's timer: %s", g_strerror(-ret));
    }
    tgt->watchdog = notify_watchdog_start(100);
    if (!tgt->watchdog) {
        return vs_error_set(err, -EIO, "cannot start the call-signal watchdog");
    }
    notify_watchdog_enrol(tgt->watchdog);
    tgt->main = iothread_new("vs-main", 0, 0);
    tgt->start_ns = io_stats_now_ns();
    tgt->threads = g_new0(struct iothread *, tgt->nthreads);
    for (unsigned i = 0; i < tgt->nthreads; i++) {
        char name[16];

        snprintf(name, sizeof(name), "vs-io%u", i);
        tgt->threads[i] = iothread_new(name, i + 1, 256);
        if (!tgt->threads[i]) {
            return vs_error_set(err, -EIO, "cannot make I/O thread %s (its io_uring)", name);
        }
        iothread_set_poll(tgt->threads[i], tgt->opts->poll, tgt->opts->poll_ns);
        ret = iothread_start(tgt->threads[i]);
        if (ret < 0) {
            return vs_error_set(err, ret, "cannot start I/O thread %s: %s", name,
                                g_strerror(-ret));
        }
        iothread_run_sync(tgt->threads[i], call_enrol, tgt);
        tgt->nenrolled = i + 1;
    }
    if (!tgt->main) {
        return vs_error_set(err, -EIO, "cannot make the main loop");
    }
    /* Tables a LUN change replaces are freed once these threads have moved on. */
    scsi_target_set_threads(tgt->dflt->scsi, tgt->main, tgt->threads, tgt->nthreads);
    if ((signals && iothread_add_fd(tgt->main, tgt->signal_fd, EPOLLIN, signal_cb, tgt) < 0) ||
        iothread_add_fd(tgt->main, tgt->timer_fd, EPOLLIN, target_timer_fired, tgt) < 0) {
        return vs_error_set(err, -EIO, "cannot watch the signals and the timer in the main loop");
    }
    return 0;
}

int target_load(struct target *tgt, const char *default_socket, GError **err)
{
    struct target_opts *o = tgt->opts;
    int ret;

    /* Backends attach to the running threads as they open; other controllers listen at once. */
    if (o->config_path) {
        char *sock = NULL;

        ret = target_config_load(tgt, o->config_path, &sock, err);
        if (ret < 0) {
            g_prefix_error(err, "--config ");
            return ret;
        }
        /* The command line wins over the file. */
        if (sock && !o->socket_path && o->listen_fd < 0) {
            o->socket_path = sock;
        } else {
            g_free(sock);
        }
    }
    /*
     * The sockets listen once every LUN is open (a socket that accepts is a
     * daemon that started), but a path they cannot have is refused first,
     * before a LUN takes memory or a connection.
     */
    {
        const char *path = o->listen_fd >= 0 ? NULL : o->socket_path ? o->socket_path
                                                                      : default_socket;

        if (o->control_path &&
            (ret = target_socket_path_check("control socket", o->control_path, err)) < 0) {
            return ret;
        }
        if (path && (ret = target_socket_path_check("socket", path, err)) < 0) {
            return ret;
        }
    }
    for (guint i = 0; i < o->lun_args->len; i++) {
        unsigned port, lun;

        ret = target_lun_add(tgt->dflt, g_ptr_array_index(o->lun_args, i), &port, &lun, err);
        if (ret < 0) {
            g_prefix_error(err, "--lun ");
            return ret;
        }
    }
    return 0;
}

int target_listen(struct target *tgt, const char *path, int fd, GError **err)
{
    int ret;

    /*
     * The control socket listens before the front-ends' socket does, so that
     * one that accepts means both do: a client (a test, a script) that waits
     * for the front-ends' socket used to find the control one not there yet.
     */
    if (tgt->opts->control_path && (ret = target_control_start(tgt, err)) < 0) {
        return ret;
    }
    return target_controller_listen(tgt->dflt, path, fd, NULL, tgt->opts->socket_group, err);
}

void target_end(struct target *tgt)
{
    target_control_stop(tgt);
    target_connections_free(tgt);
    if (tgt->threads) {
        target_attach_backends(tgt, false, NULL);
    }

    /* Threads leave the watchdog before they exit, the watchdog stops before it is freed. */
    for (unsigned i = 0; i < tgt->nenrolled; i++) {
        iothread_run_sync(tgt->threads[i], call_leave, tgt);
    }
    if (tgt->watchdog) {
        notify_watchdog_leave(tgt->watchdog);
        notify_watchdog_stop(tgt->watchdog);
    }
    for (unsigned i = 0; tgt->threads && i < tgt->nthreads; i++) {
        iothread_free(tgt->threads[i]);
    }
    g_free(tgt->threads);
    target_sandbox_end(tgt);
    /* Before the loop goes: a given-up job's thread posts nothing to it any more. */
    target_jobs_free(tgt);
    /* Runs what was posted to it last: the grace periods of the LUN tables. */
    iothread_free(tgt->main);
    tgt->main = NULL;
    /* No connection is left: no table names a backend, none is in use. */
    while (tgt->controllers) {
        target_controller_free(tgt->controllers->data);
    }
    if (tgt->signal_fd >= 0) {
        close(tgt->signal_fd);
    }
    if (tgt->timer_fd >= 0) {
        close(tgt->timer_fd);
    }
    target_backends_free(tgt);
}
