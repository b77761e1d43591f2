/*
 * vhost-scsi-target: a vhost-user-scsi back-end daemon.  It listens on a
 * UNIX socket (or an inherited one), serves the LUNs given with --lun to
 * every front-end (QEMU's vhost-user-scsi-pci) that connects, and keeps
 * listening after a front-end goes away.  The main thread runs the
 * vhost-user conversations and the control/event queues; request queues
 * run on --threads I/O threads.  Command-line conventions follow QEMU's
 * vhost-user back-end rules (docs/interop/vhost-user.rst, "Backend
 * program conventions").
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <glib-unix.h>
#include <linux/virtio_config.h>

#include "guest-mem-guard.h"
#include "sandbox.h"
#include "target.h"
#include "vhost-user-server.h"
#include "virtio-scsi.h"

#define DEFAULT_SOCKET "vhost-scsi.sock"
#define DEFAULT_LUN "0=ram:1G"
#define DEFAULT_MAX_CONNECTIONS 128
#define DEFAULT_MESSAGE_TIMEOUT_MS 5000
/* QEMU's largest ring (1024): no QEMU guest meets it, a hostile ring of 32768 does. */
#define DEFAULT_MAX_INFLIGHT 1024

/* Out of fds (or memory) for a new connection: try again after this long. */
#define ACCEPT_BACKOFF_MS 100

/*
 * A controller's socket logs a connection's arrival and departure: a burst
 * big enough for every front-end the default limit admits to connect and
 * go at once (a host's VMs after a restart of the daemon) before the limit
 * of one line a second holds a reconnecting loop.
 */
#define CONTROLLER_LOG_BURST (2 * DEFAULT_MAX_CONNECTIONS)

/* A shutdown that has not finished after this long is stuck: exit anyway. */
#define SHUTDOWN_GRACE_S 30

struct conn {
    struct target *tgt;
    struct controller *ctrl;
    char name[32];
    int fd;
    uid_t uid;
    pid_t pid;
    uint32_t events;              /* what the main loop waits for on fd */
    struct vu_dev *vu;
    struct vscsi_dev *vs;
    bool closing;                 /* ended; freed once its queues are quiet */
};

static int conn_queue_start(void *opaque, unsigned idx, struct virtqueue *vq)
{
    struct conn *c = opaque;

    /* Fixed by now (FEATURES_OK before DRIVER_OK): which events the driver wants. */
    vscsi_dev_set_features(c->vs, vu_dev_features(c->vu));
    return vscsi_queue_start(c->vs, idx, vq);
}

static void conn_queue_stop(void *opaque, unsigned idx, struct virtqueue *vq)
{
    struct conn *c = opaque;

    vscsi_queue_stop(c->vs, idx, vq);
}

static int conn_queue_quiesce(void *opaque, unsigned idx, void (*done)(void *arg), void *arg)
{
    struct conn *c = opaque;

    return vscsi_queue_quiesce(c->vs, idx, done, arg);
}

static void conn_queue_resume(void *opaque, unsigned idx)
{
    struct conn *c = opaque;

    vscsi_queue_resume(c->vs, idx);
}

static void conn_wake(void *opaque);

static void conn_reset(void *opaque)
{
    struct conn *c = opaque;

    vscsi_dev_reset(c->vs);
}

static void conn_queue_broken(void *opaque, unsigned idx)
{
    struct conn *c = opaque;

    vu_dev_queue_error(c->vu, idx);
}

static const struct vu_dev_ops conn_ops = {
    .queue_start = conn_queue_start,
    .queue_stop = conn_queue_stop,
    .reset = conn_reset,
    .queue_quiesce = conn_queue_quiesce,
    .queue_resume = conn_queue_resume,
    .wake = conn_wake,
};

static void timer_update(struct target *tgt);

static void conn_free(struct conn *c)
{
    struct target *tgt = c->tgt;

    if (!c->closing) {
        iothread_del_fd(tgt->main, c->fd);
    }
    /* vu_dev_free stops the running queues through conn_ops first. */
    vu_dev_free(c->vu);
    vscsi_dev_free(c->vs);
    tgt->conns = g_list_remove(tgt->conns, c);
    tgt->nconns--;
    c->ctrl->nconns--;
    log_limit_message(&c->ctrl->log, "%s: disconnected", c->name);
    g_free(c);
}

/*
 * A connection that ended may still have I/O in flight on its queues,
 * into guest memory it maps: it is freed when that I/O has completed
 * (conn_wake), and the main loop goes on serving the others meanwhile.
 */
static void conn_close(struct conn *c)
{
    if (!c->closing) {
        c->closing = true;
        iothread_del_fd(c->tgt->main, c->fd);
        /* The front-end learns now that the connection is over. */
        shutdown(c->fd, SHUT_RDWR);
    }
    if (vu_dev_quiesce_all(c->vu)) {
        conn_free(c);
    } else {
        log_limit_message(&c->ctrl->log, "%s: waiting for its requests in flight before letting go",
                          c->name);
    }
}

static void conn_cb(void *opaque, uint32_t events)
{
    struct conn *c = opaque;
    struct target *tgt = c->tgt;
    uint32_t want, ev;
    int ret;

    /*
     * A hang-up is reported whatever we wait for, also while a message is
     * held and the socket is not read: the connection is over, and
     * waiting for the held message's queues would only spin on it.
     */
    if ((events & (EPOLLHUP | EPOLLERR)) && vu_dev_poll_events(c->vu) == 0) {
        conn_close(c);
        timer_update(tgt);
        return;
    }
    ret = vu_dev_dispatch(c->vu);
    if (ret < 0) {
        if (ret != -ECONNRESET) {
            log_limit_warning(&c->ctrl->log, "%s: closing connection: %s", c->name,
                              g_strerror(-ret));
        }
        conn_close(c);
        timer_update(tgt);
        return;
    }
    /*
     * A peer that does not take its replies is not read from until it
     * does, nor one whose message waits for its queues to quiesce.
     */
    ev = vu_dev_poll_events(c->vu);
    want = ev == POLLOUT ? EPOLLOUT : ev == POLLIN ? EPOLLIN : 0;
    if (want != c->events && iothread_mod_fd(tgt->main, c->fd, want) == 0) {
        c->events = want;
    }
    timer_update(tgt);
}

/* The device's queues went quiet: a held message or a closing connection goes on. */
static void conn_wake(void *opaque)
{
    struct conn *c = opaque;
    struct target *tgt = c->tgt;

    if (c->closing) {
        conn_close(c);          /* may free c */
        timer_update(tgt);
        return;
    }
    conn_cb(c, 0);
}

/* ---- the main loop's timer: message deadlines and accept back-off -------- */

static void timer_arm(struct target *tgt, int64_t at)
{
    struct itimerspec its = { 0 };

    if (at == tgt->timer_armed) {
        return;
    }
    if (at) {
        its.it_value.tv_sec = at / G_USEC_PER_SEC;
        its.it_value.tv_nsec = (at % G_USEC_PER_SEC) * 1000;
    }
    /* g_get_monotonic_time() is CLOCK_MONOTONIC, like the timer. */
    if (timerfd_settime(tgt->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        g_warning("main loop timer: %s", g_strerror(errno));
        return;
    }
    tgt->timer_armed = at;
}

static void timer_update(struct target *tgt)
{
    int64_t at = tgt->accept_resume;

    for (GList *l = tgt->conns; l; l = l->next) {
        int64_t d = vu_dev_deadline(((struct conn *)l->data)->vu);

        if (d && (!at || d < at)) {
            at = d;
        }
    }
    timer_arm(tgt, at);
}

static void accept_cb(void *opaque, uint32_t events);

static void timer_cb(void *opaque, uint32_t events)
{
    struct target *tgt = opaque;
    int64_t now = g_get_monotonic_time();
    uint64_t expirations;
    GList *l = tgt->conns;

    if (read(tgt->timer_fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN) {
        g_warning("main loop timer: %s", g_strerror(errno));
    }
    tgt->timer_armed = 0;
    while (l) {
        struct conn *c = l->data;

        l = l->next;
        if (vu_dev_expired(c->vu, now)) {
            conn_close(c);
        }
    }
    if (tgt->accept_resume && now >= tgt->accept_resume) {
        tgt->accept_resume = 0;
        for (GList *cl = tgt->controllers; cl; cl = cl->next) {
            struct controller *ctrl = cl->data;

            if (ctrl->listen_fd < 0 || ctrl->watched) {
                continue;
            }
            if (iothread_add_fd(tgt->main, ctrl->listen_fd, EPOLLIN, accept_cb, ctrl) < 0) {
                /* Cannot even watch it: keep trying, the loop is not spinning. */
                tgt->accept_resume = now + ACCEPT_BACKOFF_MS * 1000;
            } else {
                ctrl->watched = true;
            }
        }
    }
    timer_update(tgt);
}

static bool peer_allowed(struct controller *ctrl, const struct ucred *cred, const char *name)
{
    if (!ctrl->allow_uids->len && !ctrl->allow_gids->len) {
        return true;
    }
    for (guint i = 0; i < ctrl->allow_uids->len; i++) {
        if (g_array_index(ctrl->allow_uids, uid_t, i) == cred->uid) {
            return true;
        }
    }
    for (guint i = 0; i < ctrl->allow_gids->len; i++) {
        if (g_array_index(ctrl->allow_gids, gid_t, i) == cred->gid) {
            return true;
        }
    }
    log_limit_warning(&ctrl->log, "%s: %s: refusing peer pid %d uid %u gid %u (not allowed on "
                      "this controller)", ctrl->name, name, cred->pid, cred->uid, cred->gid);
    return false;
}

/*
 * Connection limits: each connection holds fds, guarded mappings and an
 * inflight area, so their number is bounded, in total and per uid.  A
 * peer over the limit is accepted and closed at once (it sees the end of
 * the stream rather than hanging in the backlog); one log line per
 * episode, which ends when a connection is accepted again.
 */
static bool within_limits(struct target *tgt, const struct ucred *cred, const char *name)
{
    struct target_opts *o = tgt->opts;
    unsigned per_uid = o->max_conns_per_uid ? o->max_conns_per_uid : o->max_conns;
    unsigned same_uid = 0;
    const char *what = NULL;

    for (GList *l = tgt->conns; l; l = l->next) {
        same_uid += ((struct conn *)l->data)->uid == cred->uid;
    }
    if (tgt->nconns >= o->max_conns) {
        what = "--max-connections";
    } else if (same_uid >= per_uid) {
        what = "--max-connections-per-uid";
    }
    if (!what) {
        if (tgt->refusing) {
            g_message("accepting connections again (%u refused over the limit)", tgt->refused);
            tgt->refusing = false;
        }
        return true;
    }
    tgt->refused++;
    if (!tgt->refusing) {
        g_warning("%s: refusing peer pid %d uid %u: %s reached (%u connections, %u of this "
                  "uid); further refusals are counted, not logged", name, cred->pid, cred->uid,
                  what, tgt->nconns, same_uid);
        tgt->refusing = true;
        tgt->refused = 1;
    }
    return false;
}

/*
 * accept() failing for lack of fds or memory fails again at once: stop
 * watching the listening socket for a while instead of spinning, and say
 * so once per episode.
 */
static void accept_failed(struct target *tgt, int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED) {
        return;
    }
    tgt->accept_errors++;
    if (!tgt->accept_failing) {
        g_warning("accept: %s (at %u connections); retrying every %d ms until it works",
                  g_strerror(err), tgt->nconns, ACCEPT_BACKOFF_MS);
        tgt->accept_failing = true;
        tgt->accept_errors = 1;
    }
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        /* The shortage is the process's: every controller's socket waits. */
        for (GList *l = tgt->controllers; l; l = l->next) {
            struct controller *ctrl = l->data;

            if (ctrl->watched) {
                iothread_del_fd(tgt->main, ctrl->listen_fd);
                ctrl->watched = false;
            }
        }
        tgt->accept_resume = g_get_monotonic_time() + ACCEPT_BACKOFF_MS * 1000;
        timer_update(tgt);
    }
}

static void accept_cb(void *opaque, uint32_t events)
{
    struct controller *ctrl = opaque;
    struct target *tgt = ctrl->tgt;
    struct vu_dev_config cfg = { 0 };
    struct vscsi_dev_config vcfg = { 0 };
    struct ucred cred;
    socklen_t len = sizeof(cred);
    char name[32];
    struct conn *c;
    int fd = accept4(ctrl->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (fd < 0) {
        accept_failed(tgt, errno);
        return;
    }
    if (tgt->accept_failing) {
        g_message("accept works again (%u failures)", tgt->accept_errors);
        tgt->accept_failing = false;
    }
    snprintf(name, sizeof(name), "conn%u", ++tgt->next_conn_id);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        log_limit_warning(&ctrl->log, "%s: SO_PEERCRED: %s", name, g_strerror(errno));
        close(fd);
        return;
    }
    if (!peer_allowed(ctrl, &cred, name) || !within_limits(tgt, &cred, name)) {
        close(fd);
        return;
    }
    c = g_new0(struct conn, 1);
    c->tgt = tgt;
    c->ctrl = ctrl;
    c->fd = fd;
    c->uid = cred.uid;
    c->pid = cred.pid;
    c->events = EPOLLIN;
    memcpy(c->name, name, sizeof(name));

    vcfg.name = c->name;
    vcfg.target = ctrl->scsi;
    vcfg.main_thread = tgt->main;
    vcfg.threads = tgt->threads;
    vcfg.nthreads = tgt->nthreads;
    vcfg.num_request_queues = ctrl->queues;
    vcfg.max_inflight = tgt->opts->max_inflight;
    vcfg.queue_broken = conn_queue_broken;
    vcfg.opaque = c;
    vcfg.stats = &ctrl->stats;
    vcfg.initiator = ctrl->initiator;
    c->vs = vscsi_dev_new(&vcfg);

    cfg.name = c->name;
    cfg.num_queues = VSCSI_FIRST_REQ_QUEUE + ctrl->queues;
    cfg.features = vscsi_dev_features();
    cfg.message_timeout_ms = tgt->opts->message_timeout_ms;
    cfg.max_mem_slots = tgt->opts->max_mem_regions;
    cfg.test_log_skip_data_in = tgt->opts->fault_log_skip_data_in;
    cfg.ops = &conn_ops;
    cfg.opaque = c;
    c->vu = vu_dev_new(fd, &cfg);
    if (!c->vu || iothread_add_fd(tgt->main, fd, EPOLLIN, conn_cb, c) < 0) {
        if (c->vu) {
            vu_dev_free(c->vu);
        } else {
            close(fd);
        }
        vscsi_dev_free(c->vs);
        g_free(c);
        return;
    }
    tgt->conns = g_list_prepend(tgt->conns, c);
    tgt->nconns++;
    ctrl->nconns++;
    log_limit_message(&ctrl->log, "%s: front-end connected to %s (pid %d uid %u)", c->name,
                      ctrl->name, cred.pid, cred.uid);
}

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

/*
 * 0 if nothing listens at sa (a socket left by a daemon that died), else
 * -EADDRINUSE (or the -errno that keeps us from telling).  Non-blocking, so
 * a full backlog (ours too) answers EAGAIN rather than holding up the loop.
 */
static int socket_in_use(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int ret;

    if (fd < 0) {
        return -errno;
    }
    ret = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? -EADDRINUSE : -errno;
    close(fd);
    if (ret == -ECONNREFUSED || ret == -ENOENT) {
        return 0;
    }
    return ret == -EAGAIN ? -EADDRINUSE : ret;
}

#ifdef VHOST_SCSI_TEST_HOOKS
/*
 * VHOST_SCSI_TEST_FAULT=listen-hold: the work on a controller's socket
 * path first waits in the open of a FIFO PATH.hold, if there is one, as it
 * would on a socket directory on a stuck mount (which a test cannot make
 * without root).
 */
void target_test_socket_hold(const char *path)
{
    if (!g_strcmp0(g_getenv("VHOST_SCSI_TEST_FAULT"), "listen-hold")) {
        g_autofree char *hold = g_strconcat(path, ".hold", NULL);
        int h = open(hold, O_RDONLY | O_CLOEXEC);

        if (h >= 0) {
            close(h);
        }
    }
}
#endif

/*
 * Any thread: everything here waits on the file system at path (a socket
 * directory on NFS, a stuck FUSE mount) or on the group database, so a
 * controller-add runs it as a target job (target-control.c); only the
 * command line's and the --config file's sockets are made on the main
 * thread, at start-up, before anything is served.
 */
/* -errno, with *err saying why the socket at path does not listen. */
static int not_listening(GError **err, int neg_errno, const char *path, const char *why)
{
    return vs_error_set(err, neg_errno, "cannot listen on socket %s: %s", path, why);
}

int target_socket_path_check(const char *kind, const char *path, GError **err)
{
    struct sockaddr_un sa;
    g_autofree char *dir = g_path_get_dirname(path);
    struct stat st;
    int ret = 0;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        ret = -ENAMETOOLONG;
    } else if (stat(dir, &st) < 0) {
        ret = -errno;
    } else if (!S_ISDIR(st.st_mode)) {
        ret = -ENOTDIR;
    }
    if (ret < 0) {
        vs_error_set(err, ret, "cannot listen on %s %s: %s", kind, path,
                     ret == -ENAMETOOLONG ? "the path is too long" : g_strerror(-ret));
    }
    return ret;
}

int target_listen_on(const char *path, const char *group, GError **err)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    int fd, ret;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return not_listening(err, -ENAMETOOLONG, path, "the path is too long");
    }
    strcpy(sa.sun_path, path);
    target_test_socket_hold(path);
    /*
     * Replace a stale socket from a previous run, never any other file, nor
     * a socket something listens on: unlinking that one took its path from
     * it (controller-add at another spelling of a controller's socket, at the
     * control socket, or a second daemon at a first one's), silently.
     */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            return not_listening(err, -EEXIST, path, "a file that is not a socket is in the way");
        }
        ret = socket_in_use(&sa);
        if (ret < 0) {
            return not_listening(err, ret, path, ret == -EADDRINUSE
                                 ? "something listens there already" : g_strerror(-ret));
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return not_listening(err, -errno, path, g_strerror(errno));
    }
    /*
     * Created 0600: only the owner (and --socket-group, below) may attach.
     * The socket's own mode, set before bind, is what bind gives the file
     * (less the umask); the umask itself is the process's, which another
     * job's thread may be setting at the same moment.
     */
    if (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        listen(fd, 16) < 0) {
        ret = -errno;
        close(fd);
        return not_listening(err, ret, path, g_strerror(-ret));
    }
    if (group) {
        gid_t gid;

        /* Under the filter, from /etc/group only: NSS modules are not allowed. */
        if (sandbox_lookup_group(group, &gid) < 0 || chown(path, (uid_t)-1, gid) < 0 ||
            chmod(path, 0660) < 0) {
            g_autofree char *why = g_strdup_printf("cannot give it to group %s", group);

            close(fd);
            unlink(path);
            return not_listening(err, -EINVAL, path, why);
        }
    }
    return fd;
}

/* ---- controllers ------------------------------------------------------- */

struct controller *target_controller_find(struct target *tgt, const char *name)
{
    if (!name) {
        return tgt->dflt;
    }
    for (GList *l = tgt->controllers; l; l = l->next) {
        if (!strcmp(((struct controller *)l->data)->name, name)) {
            return l->data;
        }
    }
    return NULL;
}

static struct controller *controller_new(struct target *tgt, const char *name,
                                         const GArray *uids, const GArray *gids, unsigned queues)
{
    struct controller *ctrl = g_new0(struct controller, 1);

    ctrl->tgt = tgt;
    ctrl->name = g_strdup(name);
    ctrl->initiator = g_strdup_printf("iqn.2026-12.org.vhost-scsi:%s", name);
    ctrl->scsi = scsi_target_new(name);
    ctrl->listen_fd = -1;
    ctrl->queues = queues;
    ctrl->allow_uids = g_array_new(FALSE, FALSE, sizeof(uid_t));
    ctrl->allow_gids = g_array_new(FALSE, FALSE, sizeof(gid_t));
    io_stats_init(&ctrl->stats);
    {
        g_autofree char *who = g_strdup_printf("controller %s's connections", name);

        log_limit_init(&ctrl->log, who, CONTROLLER_LOG_BURST, LOG_LIMIT_PER_SEC);
    }
    if (uids) {
        g_array_append_vals(ctrl->allow_uids, uids->data, uids->len);
    }
    if (gids) {
        g_array_append_vals(ctrl->allow_gids, gids->data, gids->len);
    }
    if (tgt->threads) {
        /* Tables a LUN change replaces are freed once these threads have moved on. */
        scsi_target_set_threads(ctrl->scsi, tgt->main, tgt->threads, tgt->nthreads);
    }
    tgt->controllers = g_list_append(tgt->controllers, ctrl);
    return ctrl;
}

/*
 * Listens on fd, or on a new socket at path, and watches it: fd with a
 * path is a socket target_listen_on made there (the controller removes
 * it), fd without one an inherited socket.
 */
static int controller_listen(struct controller *ctrl, const char *path, int fd, const char *group,
                             GError **err)
{
    struct target *tgt = ctrl->tgt;

    if (fd < 0) {
        fd = target_listen_on(path, group, err);
        if (fd < 0) {
            return fd;
        }
    }
    if (path) {
        ctrl->socket_path = g_strdup(path);
        ctrl->socket_group = g_strdup(group);
    }
    ctrl->listen_fd = fd;
    if (!tgt->accept_resume) {
        if (iothread_add_fd(tgt->main, fd, EPOLLIN, accept_cb, ctrl) < 0) {
            return vs_error_set(err, -EIO, "cannot watch socket %s", path ? path : "its fd");
        }
        ctrl->watched = true;
    }
    return 0;
}

static void controller_free(struct controller *ctrl)
{
    struct target *tgt = ctrl->tgt;

    /* At exit the loop has gone before the controllers (their grace periods ran in it). */
    if (ctrl->watched && tgt->main) {
        iothread_del_fd(tgt->main, ctrl->listen_fd);
    }
    if (ctrl->listen_fd >= 0) {
        close(ctrl->listen_fd);
    }
    if (ctrl->socket_path) {
        unlink(ctrl->socket_path);
    }
    /* No connection is left: no nexus reads its tables. */
    scsi_target_free(ctrl->scsi);
    tgt->controllers = g_list_remove(tgt->controllers, ctrl);
    g_array_free(ctrl->allow_uids, TRUE);
    g_array_free(ctrl->allow_gids, TRUE);
    io_stats_destroy(&ctrl->stats);
    log_limit_end(&ctrl->log);
    g_free(ctrl->mark);
    g_free(ctrl->socket_path);
    g_free(ctrl->socket_group);
    g_free(ctrl->initiator);
    g_free(ctrl->name);
    g_free(ctrl);
}

void target_controller_set_initiator(struct controller *ctrl, const char *initiator)
{
    if (initiator && *initiator) {
        g_free(ctrl->initiator);
        ctrl->initiator = g_strdup(initiator);
    }
}

int target_controller_check(struct target *tgt, const char *name, const char *socket,
                            char **err)
{
    if (!target_name_ok(name) || strchr(name, '/')) {
        *err = g_strdup_printf("controller name '%s': 1-64 of A-Z a-z 0-9 . _ : -", name);
        return -EINVAL;
    }
    if (target_controller_find(tgt, name)) {
        *err = g_strdup_printf("a controller named '%s' exists", name);
        return -EEXIST;
    }
    for (GList *l = tgt->controllers_adding; l; l = l->next) {
        const struct controller_pending *p = l->data;

        if (p->name && !strcmp(p->name, name)) {
            *err = g_strdup_printf("a controller named '%s' is being added", name);
            return -EEXIST;
        }
        if (socket && !strcmp(p->socket, socket)) {
            *err = g_strdup_printf("%s is being made %s controller's socket, or removed", socket,
                                   p->name ? p->name : "a removed");
            return -EADDRINUSE;
        }
    }
    for (GList *l = tgt->controllers; socket && l; l = l->next) {
        const char *other = ((struct controller *)l->data)->socket_path;

        if (other && !strcmp(other, socket)) {
            *err = g_strdup_printf("%s is controller %s's socket", socket,
                                   ((struct controller *)l->data)->name);
            return -EADDRINUSE;
        }
    }
    return 0;
}

int target_controller_add(struct target *tgt, const char *name, const char *socket, int fd,
                          const char *group, const GArray *uids, const GArray *gids,
                          unsigned queues, struct controller **out, char **err)
{
    g_autoptr(GError) why = NULL;
    struct controller *ctrl;
    int ret = target_controller_check(tgt, name, socket, err);

    if (ret < 0) {
        return ret;
    }
    ctrl = controller_new(tgt, name, uids, gids, queues);
    ret = controller_listen(ctrl, socket, fd, group, &why);
    if (ret < 0) {
        *err = g_strdup_printf("controller %s: %s", name, why->message);
        controller_free(ctrl);
        return ret;
    }
    g_message("controller %s: listening on %s", name, socket ? socket : "an inherited socket");
    if (out) {
        *out = ctrl;
    }
    return 0;
}

int target_controller_remove(struct target *tgt, const char *name, char **socket, char **err)
{
    struct controller *ctrl = target_controller_find(tgt, name);

    if (!ctrl) {
        *err = g_strdup_printf("no controller named '%s'", name);
        return -ENOENT;
    }
    if (ctrl == tgt->dflt) {
        *err = g_strdup("the default controller stays (it is the command line's)");
        return -EPERM;
    }
    if (ctrl->nconns || scsi_target_lun_count(ctrl->scsi)) {
        *err = g_strdup_printf("controller %s has %u connection(s) and %u LUN(s); unmap its "
                               "LUNs and let its VMs go first", name, ctrl->nconns,
                               scsi_target_lun_count(ctrl->scsi));
        return -EBUSY;
    }
    g_message("controller %s: removed", name);
    /* Its socket file is the caller's to remove, off the main thread. */
    *socket = g_steal_pointer(&ctrl->socket_path);
    controller_free(ctrl);
    return 0;
}

static int add_luns(struct target *tgt)
{
    GPtrArray *args = tgt->opts->lun_args;

    for (guint i = 0; i < args->len; i++) {
        g_autofree char *err = NULL;
        unsigned port, lun;

        if (target_lun_add(tgt->dflt, g_ptr_array_index(args, i), &port, &lun, &err) < 0) {
            fprintf(stderr, "vhost-scsi-target: --lun %s\n", err);
            return -EINVAL;
        }
    }
    return 0;
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

JsonNode *target_connections_json(struct target *tgt)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_array(b);
    /* Oldest first: the list is kept newest first. */
    for (GList *l = g_list_last(tgt->conns); l; l = l->prev) {
        struct conn *c = l->data;

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, c->name);
        /* Which VM's: without it, two controllers' connections could not be told apart. */
        json_builder_set_member_name(b, "controller");
        json_builder_add_string_value(b, c->ctrl->name);
        json_builder_set_member_name(b, "pid");
        json_builder_add_int_value(b, c->pid);
        json_builder_set_member_name(b, "uid");
        json_builder_add_int_value(b, c->uid);
        json_builder_set_member_name(b, "state");
        json_builder_add_string_value(b, c->closing ? "closing" : "connected");
        json_builder_set_member_name(b, "features");
        json_builder_add_int_value(b, (gint64)vu_dev_features(c->vu));
        json_builder_set_member_name(b, "queues");
        json_builder_begin_array(b);
        for (unsigned q = VSCSI_FIRST_REQ_QUEUE; q < vscsi_dev_num_queues(c->vs); q++) {
            int n = vscsi_queue_inflight(c->vs, q);

            json_builder_begin_object(b);
            json_builder_set_member_name(b, "index");
            json_builder_add_int_value(b, q - VSCSI_FIRST_REQ_QUEUE);
            json_builder_set_member_name(b, "running");
            json_builder_add_boolean_value(b, n >= 0);
            json_builder_set_member_name(b, "in_flight");
            json_builder_add_int_value(b, n >= 0 ? n : 0);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    return json_builder_get_root(b);
}

unsigned target_controller_connections(struct target *tgt, struct controller *ctrl,
                                       unsigned *in_flight)
{
    unsigned n = 0;

    *in_flight = 0;
    for (GList *l = tgt->conns; l; l = l->next) {
        struct conn *c = l->data;

        if (c->ctrl != ctrl) {
            continue;
        }
        n++;
        for (unsigned q = VSCSI_FIRST_REQ_QUEUE; q < vscsi_dev_num_queues(c->vs); q++) {
            int k = vscsi_queue_inflight(c->vs, q);

            *in_flight += k > 0 ? (unsigned)k : 0;
        }
    }
    return n;
}

void target_maybe_quit(struct target *tgt)
{
    if (tgt->quitting && !tgt->removing && !tgt->jobs) {
        iothread_quit(tgt->main);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: vhost-scsi-target [OPTIONS]\n"
"A vhost-user-scsi back-end: serves SCSI LUNs to QEMU's vhost-user-scsi-pci.\n"
"\n"
"  --socket-path PATH    listen on this UNIX socket (default ./" DEFAULT_SOCKET ")\n"
"  --fd N                use the inherited listening socket N (socket activation)\n"
"  --lun ID=SPEC         add a LUN (repeatable); ID is LUN or TARGET:LUN\n"
"                        SPEC: file:PATH[,ro][,direct][,block-size=512|4096][,size=BYTES]\n"
"                              ram:SIZE | null:SIZE[,fill=zero|none]\n"
"                              (file:, ram:, null: also [,physical-block-size=BYTES])\n"
"                              iscsi://[USER[%%PASSWORD]@]HOST[:PORT]/IQN/LUN[,ro]\n"
"                                [,queue-depth=N][,sessions=N][,secret-file=PATH]\n"
"                                [,initiator-name=IQN][,login-timeout=SECONDS]\n"
"                                (see docs/iscsi.md)\n"
"                              rbd:POOL/IMAGE[@SNAP][,conf=PATH][,id=CLIENT]\n"
"                                [,keyring=PATH][,ro][,busy-timeout=SECONDS]\n"
"                                (Ceph RBD; see docs/rbd.md)\n"
"                        default without --lun: " DEFAULT_LUN "\n"
"  --queues N            request queues to offer (default 4; QEMU's num_queues <= N)\n"
"  --threads N           I/O threads serving them (default min(queues, CPUs))\n"
"  --poll off|adaptive|on  request queue polling (default off)\n"
"  --poll-us N           longest adaptive polling window in microseconds (default 50)\n"
"  --socket-group NAME   make the socket 0660 and owned by this group\n"
"  --allow-uid UID       accept only peers with this uid (repeatable)\n"
"  --allow-gid GID       accept only peers with this gid (repeatable)\n"
"  --max-connections N   front-ends connected at once (default %u); more are refused\n"
"  --max-connections-per-uid N  the same per peer uid (default: --max-connections)\n"
"  --max-mem-regions N   memory regions per connection (1..%u, default %u): the\n"
"                        slots GET_MAX_MEM_SLOTS announces; a table beyond is refused\n"
"  --max-inflight N      requests in flight per request queue (1..32768, default\n"
"                        %u); the rest of a fuller ring waits in the ring\n"
"  --config FILE         load the backends and LUNs FILE holds (config-save\n"
"                        writes it; docs/control.md); --lun adds to them\n"
"  --pr-dir DIR          keep persistent reservations set with APTPL in DIR/BACKEND.pr\n"
"                        (default FILE.pr beside a file: LUN; docs/reservations.md)\n"
"  --control PATH        serve the JSON-RPC control socket at PATH (mode 0600;\n"
"                        vhost-scsi-ctl target, docs/control.md)\n"
"  --message-timeout-ms N  a vhost-user message must arrive whole, and a reply\n"
"                        be read, within N ms, else the connection is dropped\n"
"                        (default %u)\n"
"  --control-max-request BYTES  longest control request line (256..16777216,\n"
"                        default %u); a longer one is answered with an error\n"
"                        and its client closed\n"
"  --control-timeout-ms N  a control request whose work waits on a file system\n"
"                        (a file's open, config-save) is answered with an error\n"
"                        after N ms (0..600000, 0: never; default %u)\n"
"  --sandbox MODE        after set-up: seccomp (default: a system-call filter that\n"
"                        kills the daemon on a dangerous call and makes any\n"
"                        other it never makes fail, logged) or none\n"
"                        (docs/security.md)\n"
"  --sandbox-user USER   after set-up, become USER (name or uid) and its group,\n"
"                        with no supplementary groups (needs root)\n"
"  --print-capabilities  print the back-end capabilities as JSON and exit\n"
"  -v, --verbose         log debug messages\n"
"  -h, --help            this text\n", DEFAULT_MAX_CONNECTIONS, GUEST_MEM_MAX_REGIONS,
            GUEST_MEM_MAX_REGIONS, DEFAULT_MAX_INFLIGHT, DEFAULT_MESSAGE_TIMEOUT_MS,
            CTL_MAX_REQUEST, TARGET_DEFAULT_JOB_TIMEOUT_MS);
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        return -EINVAL;
    }
    *out = (unsigned)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct target_opts *o)
{
    enum { OPT_SOCKET = 256, OPT_FD, OPT_LUN, OPT_QUEUES, OPT_THREADS, OPT_POLL,
           OPT_POLL_US, OPT_CAPS, OPT_GROUP, OPT_UID, OPT_GID, OPT_MAX_CONNS,
           OPT_MAX_CONNS_UID, OPT_MSG_TIMEOUT, OPT_CONTROL, OPT_CONFIG, OPT_PR_DIR,
           OPT_MAX_MEM_REGIONS, OPT_MAX_INFLIGHT, OPT_CONTROL_MAX_REQUEST, OPT_CONTROL_TIMEOUT, OPT_SANDBOX,
           OPT_SANDBOX_USER };
    static const struct option longopts[] = {
        { "socket-path", required_argument, NULL, OPT_SOCKET },
        { "fd", required_argument, NULL, OPT_FD },
        { "lun", required_argument, NULL, OPT_LUN },
        { "queues", required_argument, NULL, OPT_QUEUES },
        { "threads", required_argument, NULL, OPT_THREADS },
        { "poll", required_argument, NULL, OPT_POLL },
        { "poll-us", required_argument, NULL, OPT_POLL_US },
        { "print-capabilities", no_argument, NULL, OPT_CAPS },
        { "socket-group", required_argument, NULL, OPT_GROUP },
        { "allow-uid", required_argument, NULL, OPT_UID },
        { "allow-gid", required_argument, NULL, OPT_GID },
        { "max-connections", required_argument, NULL, OPT_MAX_CONNS },
        { "max-connections-per-uid", required_argument, NULL, OPT_MAX_CONNS_UID },
        { "message-timeout-ms", required_argument, NULL, OPT_MSG_TIMEOUT },
        { "max-mem-regions", required_argument, NULL, OPT_MAX_MEM_REGIONS },
        { "max-inflight", required_argument, NULL, OPT_MAX_INFLIGHT },
        { "control-max-request", required_argument, NULL, OPT_CONTROL_MAX_REQUEST },
        { "control-timeout-ms", required_argument, NULL, OPT_CONTROL_TIMEOUT },
        { "control", required_argument, NULL, OPT_CONTROL },
        { "config", required_argument, NULL, OPT_CONFIG },
        { "pr-dir", required_argument, NULL, OPT_PR_DIR },
        { "sandbox", required_argument, NULL, OPT_SANDBOX },
        { "sandbox-user", required_argument, NULL, OPT_SANDBOX_USER },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { 0 }
    };
    unsigned v;
    int c;

    while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_SOCKET:
            g_free(o->socket_path);
            o->socket_path = g_strdup(optarg);
            break;
        case OPT_FD:
            if (parse_uint(optarg, 0, INT32_MAX, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: bad --fd '%s'\n", optarg);
                return -EINVAL;
            }
            o->listen_fd = (int)v;
            break;
        case OPT_LUN:
            g_ptr_array_add(o->lun_args, g_strdup(optarg));
            break;
        case OPT_QUEUES:
            if (parse_uint(optarg, 1, VU_MAX_QUEUES - VSCSI_FIRST_REQ_QUEUE, &o->queues) < 0) {
                fprintf(stderr, "vhost-scsi-target: --queues must be 1..%d\n",
                        VU_MAX_QUEUES - VSCSI_FIRST_REQ_QUEUE);
                return -EINVAL;
            }
            break;
        case OPT_THREADS:
            if (parse_uint(optarg, 1, 256, &o->threads) < 0) {
                fprintf(stderr, "vhost-scsi-target: --threads must be 1..256\n");
                return -EINVAL;
            }
            break;
        case OPT_POLL:
            if (!strcmp(optarg, "off")) {
                o->poll = IOTHREAD_POLL_OFF;
            } else if (!strcmp(optarg, "adaptive")) {
                o->poll = IOTHREAD_POLL_ADAPTIVE;
            } else if (!strcmp(optarg, "on")) {
                o->poll = IOTHREAD_POLL_ON;
            } else {
                fprintf(stderr, "vhost-scsi-target: --poll takes off, adaptive or on\n");
                return -EINVAL;
            }
            break;
        case OPT_POLL_US:
            if (parse_uint(optarg, 1, 1000000, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: --poll-us must be 1..1000000\n");
                return -EINVAL;
            }
            o->poll_ns = (uint64_t)v * 1000;
            break;
        case OPT_CAPS:
            printf("{\n  \"type\": \"scsi\"\n}\n");
            exit(0);
        case OPT_GROUP:
            o->socket_group = g_strdup(optarg);
            break;
        case OPT_UID:
        case OPT_GID:
            if (parse_uint(optarg, 0, UINT32_MAX - 1, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: bad id '%s'\n", optarg);
                return -EINVAL;
            }
            if (c == OPT_UID) {
                uid_t u = v;
                g_array_append_val(o->allow_uids, u);
            } else {
                gid_t g = v;
                g_array_append_val(o->allow_gids, g);
            }
            break;
        case OPT_MAX_CONNS:
        case OPT_MAX_CONNS_UID:
            /* Each connection may hold 33 guarded mappings; the guard has 65,536. */
            if (parse_uint(optarg, 1, 1024, &v) < 0) {
                fprintf(stderr, "vhost-scsi-target: --%s must be 1..1024\n",
                        c == OPT_MAX_CONNS ? "max-connections" : "max-connections-per-uid");
                return -EINVAL;
            }
            *(c == OPT_MAX_CONNS ? &o->max_conns : &o->max_conns_per_uid) = v;
            break;
        case OPT_MSG_TIMEOUT:
            if (parse_uint(optarg, 1, 600000, &o->message_timeout_ms) < 0) {
                fprintf(stderr, "vhost-scsi-target: --message-timeout-ms must be 1..600000\n");
                return -EINVAL;
            }
            break;
        case OPT_MAX_MEM_REGIONS:
            if (parse_uint(optarg, 1, GUEST_MEM_MAX_REGIONS, &o->max_mem_regions) < 0) {
                fprintf(stderr, "vhost-scsi-target: --max-mem-regions must be 1..%u\n",
                        GUEST_MEM_MAX_REGIONS);
                return -EINVAL;
            }
            break;
        case OPT_MAX_INFLIGHT:
            if (parse_uint(optarg, 1, 32768, &o->max_inflight) < 0) {
                fprintf(stderr, "vhost-scsi-target: --max-inflight must be 1..32768\n");
                return -EINVAL;
            }
            break;
        case OPT_CONTROL_MAX_REQUEST:
            if (parse_uint(optarg, 256, 1u << 24, &o->control_max_request) < 0) {
                fprintf(stderr, "vhost-scsi-target: --control-max-request must be "
                        "256..16777216\n");
                return -EINVAL;
            }
            break;
        case OPT_CONTROL_TIMEOUT:
            if (parse_uint(optarg, 0, 600000, &o->job_timeout_ms) < 0) {
                fprintf(stderr, "vhost-scsi-target: --control-timeout-ms must be 0..600000\n");
                return -EINVAL;
            }
            break;
        case OPT_CONTROL:
            g_free(o->control_path);
            o->control_path = g_strdup(optarg);
            break;
        case OPT_CONFIG:
            g_free(o->config_path);
            o->config_path = g_strdup(optarg);
            break;
        case OPT_PR_DIR:
            if (!g_file_test(optarg, G_FILE_TEST_IS_DIR)) {
                fprintf(stderr, "vhost-scsi-target: --pr-dir %s is not a directory\n", optarg);
                return -EINVAL;
            }
            g_free(o->pr_dir);
            o->pr_dir = g_strdup(optarg);
            break;
        case OPT_SANDBOX:
            if (!strcmp(optarg, "seccomp")) {
                o->sandbox = TARGET_SANDBOX_SECCOMP;
            } else if (!strcmp(optarg, "none")) {
                o->sandbox = TARGET_SANDBOX_NONE;
            } else {
                fprintf(stderr, "vhost-scsi-target: --sandbox takes seccomp or none\n");
                return -EINVAL;
            }
            break;
        case OPT_SANDBOX_USER: {
            /* Looked up now: the filter leaves no way to read /etc/passwd later. */
            int r = sandbox_lookup_user(optarg, &o->sandbox_uid, &o->sandbox_gid);

            if (r < 0) {
                fprintf(stderr, "vhost-scsi-target: --sandbox-user %s: %s\n", optarg,
                        r == -ENOENT ? "no such user" : g_strerror(-r));
                return -EINVAL;
            }
            g_free(o->sandbox_user);
            o->sandbox_user = g_strdup(optarg);
            break;
        }
        case 'v':
            g_setenv("G_MESSAGES_DEBUG", "all", TRUE);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vhost-scsi-target: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (o->socket_path && o->listen_fd >= 0) {
        fprintf(stderr, "vhost-scsi-target: --socket-path and --fd are exclusive\n");
        return -EINVAL;
    }
    return 0;
}

/*
 * An inherited --fd must be what socket activation hands over: a
 * listening UNIX stream socket.  Anything else (a pipe, a UDP socket, a
 * connected socketpair end) would make accept() fail on every wake-up.
 */
static int check_listen_fd(int fd)
{
    int v = 0;
    socklen_t len = sizeof(v);
    const char *why = NULL;

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0) {
        why = errno == ENOTSOCK ? "not a socket" : g_strerror(errno);
    } else if (v != AF_UNIX) {
        why = "not a UNIX socket";
    } else if ((len = sizeof(v), getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len)) < 0 ||
               v != SOCK_STREAM) {
        why = "not a stream socket";
    } else if ((len = sizeof(v), getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len)) < 0 ||
               !v) {
        why = "not listening";
    } else if (!g_unix_set_fd_nonblocking(fd, TRUE, NULL) ||
               fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        why = g_strerror(errno);
    }
    if (why) {
        fprintf(stderr, "vhost-scsi-target: --fd %d is not a listening UNIX stream socket "
                "(%s)\n", fd, why);
        return -EINVAL;
    }
    return 0;
}

/*
 * Every connection holds a few fds per queue; the soft limit is often
 * 1024 while the hard one is far higher: use what we are allowed.
 */
static void raise_fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            g_message("cannot raise the open-file limit: %s", g_strerror(errno));
        }
    }
}

static void print_qemu_hint(const struct target *tgt, const char *path)
{
    char *abs = g_canonicalize_filename(path, NULL);

    printf("vhost-scsi-target: serving %u LUN(s) on %s\n"
           "Attach QEMU with:\n"
           "  qemu-system-x86_64 -machine q35,memory-backend=mem -m 1G \\\n"
           "    -object memory-backend-memfd,id=mem,size=1G,share=on \\\n"
           "    -chardev socket,id=vus0,path=%s \\\n"
           "    -device vhost-user-scsi-pci,chardev=vus0,num_queues=%u ...\n",
           scsi_target_lun_count(tgt->dflt->scsi), abs, abs, tgt->opts->queues);
    fflush(stdout);
    g_free(abs);
}

int main(int argc, char **argv)
{
    struct target_opts opts = { .listen_fd = -1, .queues = 4,
                                .poll = IOTHREAD_POLL_OFF,
                                .max_conns = DEFAULT_MAX_CONNECTIONS,
                                .message_timeout_ms = DEFAULT_MESSAGE_TIMEOUT_MS,
                                .max_mem_regions = GUEST_MEM_MAX_REGIONS,
                                .max_inflight = DEFAULT_MAX_INFLIGHT,
                                .control_max_request = CTL_MAX_REQUEST,
                                .job_timeout_ms = TARGET_DEFAULT_JOB_TIMEOUT_MS };
    struct target tgt = { .opts = &opts, .signal_fd = -1, .timer_fd = -1 };
    g_autoptr(GError) why = NULL;
    g_autofree char *ctl_err = NULL;
    const char *path;
    sigset_t mask;
    int ret = 1;

    opts.lun_args = g_ptr_array_new_with_free_func(g_free);
    opts.allow_uids = g_array_new(FALSE, FALSE, sizeof(uid_t));
    opts.allow_gids = g_array_new(FALSE, FALSE, sizeof(gid_t));
    if (parse_args(argc, argv, &opts) < 0) {
        goto out;
    }
    /* Checked before anything else starts, and before it could be closed as ours. */
    if (opts.listen_fd >= 0 && check_listen_fd(opts.listen_fd) < 0) {
        opts.listen_fd = -1;
        goto out;
    }
#ifdef VHOST_SCSI_TEST_HOOKS
    if (!g_strcmp0(g_getenv("VHOST_SCSI_TEST_FAULT"), "log-skip-data-in")) {
        g_warning("VHOST_SCSI_TEST_FAULT=log-skip-data-in: migrated guests WILL be corrupted "
                  "(a test hook; never set it in service)");
        opts.fault_log_skip_data_in = true;
    }
    opts.fault_refused_call = !g_strcmp0(g_getenv("VHOST_SCSI_TEST_FAULT"),
                                         "sandbox-refused-call");
#endif
    raise_fd_limit();
    if (!opts.lun_args->len && !opts.config_path) {
        g_ptr_array_add(opts.lun_args, g_strdup(DEFAULT_LUN));
    }
    if (!opts.threads) {
        opts.threads = MIN(opts.queues, (unsigned)MAX(1, sysconf(_SC_NPROCESSORS_ONLN)));
    }
    tgt.nthreads = MIN(opts.threads, opts.queues);

    target_backends_init(&tgt);
    /* The command line's controller: its socket is decided once the config is read. */
    tgt.dflt = controller_new(&tgt, "default", opts.allow_uids, opts.allow_gids, opts.queues);

    signal(SIGPIPE, SIG_IGN);
    /* A front-end truncating shared memory costs its connection, not the daemon. */
    if (guest_mem_guard_install() < 0) {
        goto out;
    }
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    /* Blocked before any thread starts, so only the signalfd sees them. */
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    tgt.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    tgt.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

    tgt.watchdog = notify_watchdog_start(100);
    if (!tgt.watchdog) {
        goto out;
    }
    notify_watchdog_enrol(tgt.watchdog);
    tgt.main = iothread_new("vs-main", 0, 0);
    tgt.start_ns = io_stats_now_ns();
    tgt.threads = g_new0(struct iothread *, tgt.nthreads);
    for (unsigned i = 0; i < tgt.nthreads; i++) {
        char name[16];

        snprintf(name, sizeof(name), "vs-io%u", i);
        tgt.threads[i] = iothread_new(name, i + 1, 256);
        if (!tgt.threads[i]) {
            goto out;
        }
        iothread_set_poll(tgt.threads[i], opts.poll, opts.poll_ns);
        if (iothread_start(tgt.threads[i]) < 0) {
            goto out;
        }
        iothread_run_sync(tgt.threads[i], call_enrol, &tgt);
        tgt.nenrolled = i + 1;
    }
    if (!tgt.main || tgt.signal_fd < 0 || tgt.timer_fd < 0) {
        goto out;
    }
    /* Tables a LUN change replaces are freed once these threads have moved on. */
    scsi_target_set_threads(tgt.dflt->scsi, tgt.main, tgt.threads, tgt.nthreads);
    if (iothread_add_fd(tgt.main, tgt.signal_fd, EPOLLIN, signal_cb, &tgt) < 0 ||
        iothread_add_fd(tgt.main, tgt.timer_fd, EPOLLIN, timer_cb, &tgt) < 0) {
        goto out;
    }
    /* Backends attach to the running threads as they open; other controllers listen at once. */
    if (opts.config_path) {
        g_autofree char *err = NULL;
        char *sock = NULL;

        if (target_config_load(&tgt, opts.config_path, &sock, &err) < 0) {
            fprintf(stderr, "vhost-scsi-target: --config %s\n", err);
            goto out;
        }
        /* The command line wins over the file. */
        if (sock && !opts.socket_path && opts.listen_fd < 0) {
            opts.socket_path = sock;
        } else {
            g_free(sock);
        }
    }
    /*
     * The sockets listen once every LUN is open (a socket that accepts is a
     * daemon that started), but a path they cannot have is refused first,
     * before a LUN takes memory or a connection.
     */
    path = opts.listen_fd >= 0 ? NULL : opts.socket_path ? opts.socket_path : DEFAULT_SOCKET;
    if ((opts.control_path && target_socket_path_check("control socket", opts.control_path, &why) < 0) ||
        (path && target_socket_path_check("socket", path, &why) < 0)) {
        fprintf(stderr, "vhost-scsi-target: %s\n", why->message);
        goto out;
    }
    if (add_luns(&tgt) < 0) {
        goto out;
    }
    /*
     * The control socket listens before the front-ends' socket does, so that
     * one that accepts means both do: a client (a test, a script) that waits
     * for the front-ends' socket used to find the control one not there yet.
     */
    if (opts.control_path && target_control_start(&tgt, &ctl_err) < 0) {
        fprintf(stderr, "vhost-scsi-target: %s\n", ctl_err);
        goto out;
    }
    if (controller_listen(tgt.dflt, path, opts.listen_fd, opts.socket_group, &why) < 0) {
        fprintf(stderr, "vhost-scsi-target: %s\n", why->message);
        goto out;
    }
    opts.listen_fd = -1;      /* the controller's now */
    if (path) {
        print_qemu_hint(&tgt, path);
    }
    /*
     * Set-up is over: every socket of the command line listens, every LUN
     * is open, every thread runs with its ring.  What runs from here on
     * parses what front-ends and control clients send, so it runs
     * confined; what it may still need (LUNs and controllers added live,
     * reconnects) is in the sets target_sandbox chooses.
     */
    if (target_sandbox(&tgt) < 0) {
        goto out;
    }

    iothread_run(tgt.main);
    ret = 0;

out:
    target_control_stop(&tgt);
    while (tgt.conns) {
        conn_free(tgt.conns->data);
    }
    if (tgt.threads) {
        target_attach_backends(&tgt, false);
    }

    /* Threads leave the watchdog before they exit, the watchdog stops before it is freed. */
    for (unsigned i = 0; i < tgt.nenrolled; i++) {
        iothread_run_sync(tgt.threads[i], call_leave, &tgt);
    }
    if (tgt.watchdog) {
        notify_watchdog_leave(tgt.watchdog);
        notify_watchdog_stop(tgt.watchdog);
    }
    for (unsigned i = 0; tgt.threads && i < tgt.nthreads; i++) {
        iothread_free(tgt.threads[i]);
    }
    g_free(tgt.threads);
    target_sandbox_end(&tgt);
    /* Runs what was posted to it last: the grace periods of the LUN tables. */
    iothread_free(tgt.main);
    tgt.main = NULL;
    /* No connection is left: no table names a backend, none is in use. */
    while (tgt.controllers) {
        controller_free(tgt.controllers->data);
    }
    if (opts.listen_fd >= 0) {
        close(opts.listen_fd);
    }
    if (tgt.signal_fd >= 0) {
        close(tgt.signal_fd);
    }
    if (tgt.timer_fd >= 0) {
        close(tgt.timer_fd);
    }
    target_backends_free(&tgt);
    target_jobs_free(&tgt);
    g_ptr_array_free(opts.lun_args, TRUE);
    g_array_free(opts.allow_uids, TRUE);
    g_array_free(opts.allow_gids, TRUE);
    g_free(opts.socket_path);
    g_free(opts.socket_group);
    g_free(opts.control_path);
    g_free(opts.config_path);
    g_free(opts.pr_dir);
    g_free(opts.sandbox_user);
    return ret;
}
