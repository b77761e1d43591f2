/*
 * What the parts of vhost-scsi-target share: its options, the daemon's
 * state, and the LUN operations (target-luns.c) that the command line and
 * the control socket (target-control.c) both use.  Main thread only.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_TOOLS_TARGET_H
#define VHOST_SCSI_TOOLS_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "control-server.h"
#include "iothread.h"
#include "notify-fd.h"
#include "scsi-target.h"

struct target_opts {
    char *socket_path;
    int listen_fd;
    GPtrArray *lun_args;
    unsigned queues;
    unsigned threads;
    enum iothread_poll_mode poll;
    uint64_t poll_ns;
    char *socket_group;
    GArray *allow_uids;
    GArray *allow_gids;
    unsigned max_conns;
    unsigned max_conns_per_uid;    /* 0: max_conns */
    unsigned message_timeout_ms;
    char *control_path;            /* --control: the JSON-RPC socket; NULL: none */
};

struct target {
    struct target_opts *opts;
    struct scsi_target *scsi;   /* the LUNs, shared by every connection */
    struct iothread *main;
    struct iothread **threads;
    struct notify_watchdog *watchdog;   /* interrupts a call signal that blocks */
    unsigned nenrolled;                 /* threads[0..nenrolled) enrolled with it */
    unsigned nthreads;
    int listen_fd;
    int signal_fd;
    const char *created_socket;   /* the socket file we made, removed at exit */
    unsigned next_conn_id;
    GList *conns;
    unsigned nconns;
    /*
     * One timer for the main loop: the earliest message deadline of any
     * connection, and the end of an accept back-off.
     */
    int timer_fd;
    int64_t timer_armed;          /* monotonic µs it is set to; 0: disarmed */
    int64_t accept_resume;        /* accepts paused until then; 0: not paused */
    bool accept_failing;          /* an accept error episode was logged */
    unsigned accept_errors;       /* failures in this episode */
    bool refusing;                /* a connection-limit episode was logged */
    unsigned refused;             /* connections refused in this episode */
    struct ctl_server *ctl;       /* --control */
    unsigned removing;            /* LUN removals not finished yet */
    bool quitting;                /* a signal came: quit once removals are done */
};

/*
 * Opens and maps the LUN an "ID=SPEC" argument describes (the --lun
 * grammar), attached to every I/O thread.  0 and *port / *lun set, or
 * -errno with *err (g_free) saying why, naming the argument without an
 * iSCSI password.
 */
int target_lun_add(struct target *tgt, const char *arg, unsigned *port, unsigned *lun,
                   char **err);
/*
 * Unmaps the LUN at (port, lun) at once; done(ret, opaque) runs on the
 * main thread once its commands have drained and its backend is closed
 * (ret 0), or at once with -ENOENT / -EINVAL.
 */
void target_lun_remove(struct target *tgt, unsigned port, unsigned lun,
                       void (*done)(int ret, void *opaque), void *opaque);
/* Grows the LUN (size 0: to what its device has grown to); -errno. */
int target_lun_resize(struct target *tgt, unsigned port, unsigned lun, uint64_t size);
/* Every backend attaches to (true) or detaches from every I/O thread. */
int target_attach_luns(struct target *tgt, bool attach);

/* Serves the control socket at tgt->opts->control_path; -errno. */
int target_control_start(struct target *tgt);
void target_control_stop(struct target *tgt);

/* A removal finished: the main loop may end if a signal asked it to. */
void target_maybe_quit(struct target *tgt);

#endif
