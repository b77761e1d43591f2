/*
 * Accepting front-ends on a controller's socket (target.h): the peer's
 * credentials against the controller's --allow-uid/--allow-gid, the
 * connection limits in total and per uid, and a back-off when accept()
 * fails for want of fds or memory, which the main loop's timer ends.  An
 * accepted peer becomes a connection (target-connection.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "target.h"

/* Out of fds (or memory) for a new connection: try again after this long. */
#define ACCEPT_BACKOFF_MS 100

static void accept_cb(void *opaque, uint32_t events);

void target_timer_fired(void *opaque, uint32_t events)
{
    struct target *tgt = opaque;
    int64_t now = g_get_monotonic_time();
    uint64_t expirations;

    if (read(tgt->timer_fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN) {
        g_warning("main loop timer: %s", g_strerror(errno));
    }
    tgt->timer_armed = 0;
    target_connections_expire(tgt, now);
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
    target_timer_update(tgt);
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
    unsigned same_uid = target_connections_of_uid(tgt, cred->uid);
    const char *what = NULL;

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
        target_timer_update(tgt);
    }
}

static void accept_cb(void *opaque, uint32_t events)
{
    struct controller *ctrl = opaque;
    struct target *tgt = ctrl->tgt;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    char name[32];
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
    /* It takes fd, and closes it if it fails. */
    target_connection_new(ctrl, fd, &cred, name);
}

int target_accept_watch(struct controller *ctrl)
{
    struct target *tgt = ctrl->tgt;

    if (!tgt->accept_resume) {
        if (iothread_add_fd(tgt->main, ctrl->listen_fd, EPOLLIN, accept_cb, ctrl) < 0) {
            return -EIO;
        }
        ctrl->watched = true;
    }
    return 0;
}
