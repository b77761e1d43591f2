/*
 * The daemon layer: vhost-scsi-target's model, which its main drives.
 * Its options, the daemon's state, and the backend and LUN operations
 * (target-backends.c: the table and the mappings; target-backend-open.c:
 * opening and serving one) that the command line and the control socket
 * (target-control.c) both use; controllers (target-controller.c), their
 * sockets (target-listen.c), the accept path with its peer checks and
 * limits (target-accept.c) and the connections (target-connection.c);
 * the work that runs off the main thread (target-job.c: opens in
 * target-opening.c, resizes in target-resize.c, closes, config-save,
 * controller sockets made and removed); the daemon's life from start to
 * end (target-run.c).  The program's main owns the one struct target.
 * Main thread only, but where a function says otherwise.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_DAEMON_TARGET_H
#define VHOST_SCSI_DAEMON_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-server.h"
#include "io-stats.h"
#include "iothread.h"
#include "log-limit.h"
#include "lun-spec.h"
#include "notify-fd.h"
#include "scsi-target.h"

/*
 * Which file a path named when the daemon made it.  An inode number is
 * reused at once by some file systems (ext4), so its change time too.
 */
struct target_file_id {
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
};

/* Defaults of the options without one elsewhere (--max-connections, ...). */
#define TARGET_DEFAULT_MAX_CONNECTIONS 128
#define TARGET_DEFAULT_MESSAGE_TIMEOUT_MS 5000
/* QEMU's largest ring (1024): no QEMU guest meets it, a hostile ring of 32768 does. */
#define TARGET_DEFAULT_MAX_INFLIGHT 1024

enum target_sandbox_mode {
    TARGET_SANDBOX_SECCOMP,        /* the default */
    TARGET_SANDBOX_NONE,
};

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
    unsigned max_mem_regions;      /* per connection (GET_MAX_MEM_SLOTS) */
    unsigned max_inflight;         /* per request queue */
    unsigned control_max_request;  /* bytes per control request line */
    /*
     * --control-timeout-ms: how long a control request's work off the main
     * thread (a file's open, config-save) may take before the request is
     * answered -ETIMEDOUT; 0: no bound.
     */
    unsigned job_timeout_ms;
    char *control_path;            /* --control: the JSON-RPC socket; NULL: none */
    char *config_path;             /* --config: loaded at start, config-save's default */
    char *pr_dir;                  /* --pr-dir: the LUNs' APTPL state files; NULL: beside files */
    enum target_sandbox_mode sandbox;   /* --sandbox */
    char *sandbox_user;            /* --sandbox-user: NULL: stay who we are */
    uid_t sandbox_uid;             /* what it names, looked up while parsing */
    gid_t sandbox_gid;
    /*
     * Test hook, from VHOST_SCSI_TEST_FAULT=log-skip-data-in in a build
     * with -Dtest_hooks=true (never set otherwise): dirty logging leaves
     * data-in buffers unmarked, so the migration tests can show that they
     * catch a back-end that forgets them.
     */
    bool fault_log_skip_data_in;
    /*
     * Test hook, from VHOST_SCSI_TEST_FAULT=sandbox-refused-call (test
     * builds only): each control `version` call makes one system call the
     * filter refuses (getpgid), so that the tests see the daemon survive
     * refusals and report them, rate-limited.
     */
    bool fault_refused_call;
};

/* The defaults (target_opts_init); clear frees what it holds and closes listen_fd. */
void target_opts_init(struct target_opts *o);
void target_opts_clear(struct target_opts *o);

/*
 * What a VM connects to: a vhost-user socket with its own LUN map (a SCSI
 * target of its own: each connection is an I_T nexus to it), its own
 * access control and queue count.  Backends are shared between them.
 */
struct controller {
    struct target *tgt;
    char *name;
    struct scsi_target *scsi;
    int listen_fd;
    char *socket_path;          /* the socket file we made, removed with it; NULL with --fd */
    struct target_file_id socket_id;    /* that file: removed only while it is still ours */
    char *socket_group;         /* the group it was given (0660), or NULL (0600) */
    /*
     * The initiator port name its connections present to persistent
     * reservations: default "iqn.2026-12.org.vhost-scsi:NAME", the same for
     * every connection of the controller, so a VM that reconnects or
     * migrates keeps its registrations.
     */
    char *initiator;
    GArray *allow_uids;         /* uid_t; with allow_gids empty: any peer that can connect */
    GArray *allow_gids;         /* gid_t */
    unsigned queues;            /* request queues offered */
    unsigned nconns;
    bool watched;               /* listen_fd is in the main loop (not during an accept back-off) */
    struct io_stats stats;      /* its connections' requests, kept across them */
    /*
     * The lines a peer of its socket causes at will (connected, refused,
     * disconnected): a local process reconnecting in a loop fills no journal.
     */
    struct log_limit log;
    uint64_t stats_id;          /* 0 until a `stats` call reports it (target-stats.c) */
};

struct target {
    struct target_opts *opts;
    GList *controllers;         /* struct controller *, in creation order */
    struct controller *dflt;    /* "default": --socket-path / --fd, --lun */
    struct iothread *main;
    struct iothread **threads;
    struct notify_watchdog *watchdog;   /* interrupts a call signal that blocks */
    unsigned nenrolled;                 /* threads[0..nenrolled) enrolled with it */
    unsigned nthreads;
    int signal_fd;
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
    GHashTable *backends;         /* name -> struct target_backend */
    unsigned removing;            /* LUN removals not finished yet */
    GList *openings;              /* struct target_reservation *: adds not answered yet */
    GList *jobs;                  /* struct target_job *: work off the main thread, not given up */
    GList *controllers_adding;    /* struct controller_pending *: adds, removes not answered */
    struct target_jobs_shared *jobs_shared;   /* what their threads share, given-up ones too */
    bool quitting;                /* a signal came: quit once removals are done */
    uint64_t start_ns;            /* io_stats_now_ns() at start: figures "since start" */
    uint64_t stats_ids;           /* the last stats_id given to a backend or controller */
    struct sandbox *sandbox;      /* answers the calls the filter refuses; NULL: no filter */
    struct iothread_timer sandbox_report;   /* the next report of refusals that may be made */
};

/* A named, opened backend (target-backends.c). */
struct target_backend {
    char *name;
    char *spec;              /* the SPEC it was opened from (the --lun grammar) */
    struct scsi_lun *lun;    /* owned */
    unsigned mappings;       /* addresses it is mapped at */
    unsigned unmapping;      /* mappings being removed (not handed back yet) */
    bool implicit;           /* made by --lun / lun-add: goes with its last mapping */
    char *pr_path;           /* its reservations file (APTPL), directory resolved; NULL: none */
    bool resizing;           /* (atomic) a resize job holds it: not closed meanwhile */
    bool follow_device;      /* its device changed size while it was resizing */
    uint64_t stats_id;       /* 0 until a `stats` call reports it (target-stats.c) */
};

/*
 * Work off the main thread (target-job.c): whatever may wait on a file
 * system, a network or a name service.  run(arg) runs on a thread of its
 * own; then, on the main thread, done(arg, ret) with its result (arg is
 * the main thread's again).  A job given up (its deadline passed, or the
 * daemon stops and it has no cancel) gets abandoned(arg, -ETIMEDOUT or
 * -ECANCELED) on the main thread instead, at once, and its thread, once
 * run returns, calls discard(arg, ret), which frees arg: arg belongs to
 * the thread from abandoned on.  cancel (optional, main thread) calls the
 * job off when the daemon stops: run must then return promptly, and done
 * follows as usual.  late (optional): a given-up job whose thread returns
 * while the daemon still runs gets late(arg, ret) on the main thread
 * instead of discard (which it must then do itself), so that what it held
 * is seen to on the main thread.
 */
struct target_job_ops {
    int (*run)(void *arg);
    void (*done)(void *arg, int ret);
    void (*abandoned)(void *arg, int why);
    void (*discard)(void *arg, int ret);
    void (*cancel)(void *arg);
    void (*late)(void *arg, int ret);
};
/* Threads at once, those given up but not yet returned included. */
#define TARGET_MAX_JOBS 16
#define TARGET_DEFAULT_JOB_TIMEOUT_MS 10000
/*
 * Starts run(arg) on a thread, with the --control-timeout-ms deadline if
 * timed; 0, or -EAGAIN with *err (nothing is called then).
 */
int target_job_start(struct target *tgt, const char *what, const struct target_job_ops *ops,
                     void *arg, bool timed, GError **err);
/* The daemon stops: every job is called off or given up, and no late result comes any more. */
void target_jobs_stop(struct target *tgt);
/*
 * At exit, before the main loop is freed: threads given up and still
 * running keep what they share, and post nothing.
 */
void target_jobs_free(struct target *tgt);

void target_backends_init(struct target *tgt);
/* Closes every backend (the target must not map any of them any more). */
void target_backends_free(struct target *tgt);
/* Every backend attaches to (true) or detaches from every I/O thread. */
int target_attach_backends(struct target *tgt, bool attach, GError **err);
struct lun_backend;
/* be attaches to every I/O thread there is: 0, or -errno with *err (attached to none then). */
int target_backend_attach(struct target *tgt, struct lun_backend *be, GError **err);
struct target_backend *target_backend_find(struct target *tgt, const char *name);
/* A backend's or controller's name: 1-64 of A-Z a-z 0-9 . _ : - / (target-config-check.c) */
bool target_name_ok(const char *name);
/* An initiator port name a controller may be given: 1..223 of A-Z a-z 0-9 . - : _ */
#define TARGET_INITIATOR_MAX 223
/* 1-TARGET_INITIATOR_MAX of A-Z a-z 0-9 . - : _ (target-config-check.c). */
bool target_initiator_ok(const char *name);
/* The backend whose LUN lun is. */
struct target_backend *target_backend_of(struct target *tgt, const struct scsi_lun *lun);

/*
 * Opens SPEC (the --lun grammar after "ID=") as backend name, attached to
 * every I/O thread.  -errno with *err (VS_ERROR) saying why, without an
 * iSCSI password: -EEXIST for a name in use, -EBUSY for one still
 * opening, -EINVAL for a bad name/spec.
 */
int target_backend_add(struct target *tgt, const char *name, const char *spec, bool implicit,
                       struct target_backend **out, GError **err);
/* Its steps.  Whether name may be added: 0, or -EINVAL, -EEXIST, -EBUSY with *err. */
int target_backend_name_free(struct target *tgt, const char *name, GError **err);
/* SPEC parsed into *ls (lun_spec_clear), or -EINVAL with *err. */
int target_backend_parse(const char *spec, struct lun_spec *ls, GError **err);
/*
 * What opening a backend gives: its LUN, and its reservations file and
 * whether that was read.  Made by target_backend_open on any thread (it
 * waits on the file system or the network: off the main thread once the
 * daemon runs), taken by target_backend_install on the main thread.
 */
struct target_opened {
    struct scsi_lun *lun;
    char *pr_path;           /* NULL: none */
    int pr_ret;              /* reading it: 0, or -errno with pr_err */
    GError *pr_err;
};
/* 0, or -errno with *err; pr_dir: --pr-dir or NULL; cancel_fd: -1 or an eventfd. */
int target_backend_open(const char *pr_dir, const char *name, const char *spec,
                        const struct lun_spec *ls, int cancel_fd, struct target_opened *o,
                        GError **err);
void target_opened_clear(struct target_opened *o);
/*
 * Serves what was opened (o is emptied either way) as backend name,
 * attached.  -EEXIST with *err naming both backends if another backend
 * serves the same file or block device, or has the same reservations file.
 */
int target_backend_install(struct target *tgt, const char *name, const char *spec,
                           bool implicit, struct target_opened *o, struct target_backend **out,
                           GError **err);
/* Closes an unmapped backend: -ENOENT, or -EBUSY while it is mapped or resizing. */
int target_backend_remove(struct target *tgt, const char *name, GError **err);
/*
 * Grows it (size 0: to what its device has grown to) off the main thread
 * (target-resize.c); every mapping is told.  done runs on the main thread
 * with 0, or -errno and a reason: -ENOENT, -EBUSY (a resize of it runs),
 * -EINVAL, -ENOTSUP, -ETIMEDOUT (not done within --control-timeout-ms).
 */
typedef void target_resized_fn(struct target *tgt, int ret, const GError *err, void *opaque);
void target_backend_resize_async(struct target *tgt, const char *name, uint64_t size,
                                 target_resized_fn *done, void *opaque);
/*
 * b's device changed size underneath: b takes its size as a resize to 0
 * does, once any resize of it under way has ended; a failure is logged.
 */
void target_backend_follow_device(struct target *tgt, struct target_backend *b);
/* After a resize of b: every mapping is told, its spec takes the new size. */
void target_backend_resized(struct target *tgt, struct target_backend *b);
/* An implicit backend with no mapping left is closed. */
void target_backend_close_if_unused(struct target *tgt, struct target_backend *b);

/* Maps backend at (port, lun) of ctrl: -ENOENT (no backend), -EEXIST (address in use). */
int target_lun_map(struct controller *ctrl, unsigned port, unsigned lun, const char *backend,
                   GError **err);
/*
 * Unmaps (port, lun) at once; done(ret, opaque) runs on the main thread
 * once its commands have drained (ret 0; an implicit backend is closed by
 * then), or at once with -ENOENT / -EINVAL.
 */
void target_lun_unmap(struct controller *ctrl, unsigned port, unsigned lun,
                      void (*done)(int ret, void *opaque), void *opaque);
/*
 * "ID=SPEC" (--lun, lun-add): an implicit backend named "lunT:L", mapped
 * at ID.  0 and *port / *lun set, or -errno with *err.
 */
int target_lun_add(struct controller *ctrl, const char *arg, unsigned *port, unsigned *lun,
                   GError **err);
/*
 * Its steps.  Whether arg may be added: its address in *port / *lun, the
 * name of its implicit backend in *name (g_free); -EEXIST for an address
 * or name in use, -EBUSY for one still opening.
 */
int target_lun_add_check(struct controller *ctrl, const char *arg, unsigned *port,
                         unsigned *lun, char **name, GError **err);
/* Maps the implicit backend name just added at (port, lun); closes it if that fails. */
int target_lun_map_implicit(struct controller *ctrl, unsigned port, unsigned lun,
                            const char *name, GError **err);

/*
 * The control socket's backend-add and lun-add (target-opening.c): as
 * target_backend_add and target_lun_add, but every backend opens on a
 * thread of its own (a target job), its name and, for lun-add, its
 * address reserved meanwhile; the main thread then finishes the add as
 * the synchronous path does.  done runs on the main thread once the add
 * has finished or failed, or its open was given up (a file's open after
 * --control-timeout-ms: -ETIMEDOUT; the daemon stopping: -ECANCELED);
 * before these return if the add is refused at once.
 */
struct target_added {
    struct target *tgt;
    int ret;                        /* 0, or -errno with err */
    const GError *err;
    struct target_backend *backend; /* ret 0 */
    struct controller *ctrl;        /* lun-add, ret 0: where it was mapped */
    unsigned port, lun;
};
typedef void target_added_fn(const struct target_added *a, void *opaque);
void target_backend_add_async(struct target *tgt, const char *name, const char *spec,
                              target_added_fn *done, void *opaque);
void target_lun_add_async(struct controller *ctrl, const char *arg, target_added_fn *done,
                          void *opaque);
/*
 * What an add under way reserves until it is answered: its backend name
 * and, for lun-add, its controller's address.  tgt->openings holds them
 * (target-opening.c adds and drops them); target-backends.c refuses what
 * they reserve.
 */
struct target_reservation {
    char *name;
    char *ctrl_name;         /* lun-add's controller; NULL: backend-add */
    unsigned port, lun;
};
/* Whether an add under way reserves backend name, or ctrl's (port, lun) (target-backends.c). */
bool target_reserved_name(struct target *tgt, const char *name);
bool target_reserved_slot(struct controller *ctrl, unsigned port, unsigned lun);

/* Controllers (target-controller.c).  name NULL: the default one. */
struct controller *target_controller_find(struct target *tgt, const char *name);
/*
 * A new controller (in tgt's list, not listening yet); uids/gids (may be
 * NULL) are copied.  target_controller_listen: on fd, or on a new socket
 * at path; fd with a path is a socket target_listen_on made there, made
 * the file it made (the controller removes it while it is still that
 * file), fd without one an inherited socket.  -errno, with *err saying
 * why.  target_controller_free: closes its socket, and removes its file.
 */
struct controller *target_controller_new(struct target *tgt, const char *name,
                                         const GArray *uids, const GArray *gids,
                                         unsigned queues);
int target_controller_listen(struct controller *ctrl, const char *path, int fd,
                             const struct target_file_id *made, const char *group,
                             GError **err);
void target_controller_free(struct controller *ctrl);
/*
 * A new controller listening on socket (created like --socket-path: mode
 * 0600, or 0660 with group), or on an inherited listening fd (>= 0; with
 * socket, the one target_listen_on made there as made).  uids/gids (may
 * be NULL) are copied.  -EEXIST for a name in use,
 * -EINVAL for a bad name, another -errno if it cannot listen; *err says.
 */
int target_controller_add(struct target *tgt, const char *name, const char *socket, int fd,
                          const struct target_file_id *made, const char *group, const GArray *uids, const GArray *gids,
                          unsigned queues, struct controller **out, GError **err);
/*
 * What a controller-add job holds while its socket is made off the main
 * thread, or a controller-remove's while its socket file is removed
 * (target-control.c): the socket path is taken, and an add's name (a
 * removal's is NULL).
 */
struct controller_pending {
    char *name;
    char *socket;
};
/* Whether a controller named name at socket may be added: 0, or -errno with *err. */
int target_controller_check(struct target *tgt, const char *name, const char *socket,
                            GError **err);
/*
 * Any thread (target-listen.c): a new listening socket at path, made like --socket-path
 * (mode 0600, or 0660 and the group's), replacing a stale one; its fd, or
 * -errno with *err ("cannot listen on socket PATH: why"); *made (may be
 * NULL) the file it made.  It may wait on the file system and the group
 * database.
 */
int target_listen_on(const char *path, const char *group, struct target_file_id *made,
                     GError **err);
/*
 * Any thread: removes the socket file at path if it is still the one made
 * (another's, made there since, stays); 0 (gone already included), or
 * -errno.
 */
int target_socket_unlink(const char *path, const struct target_file_id *made);
/*
 * Whether a socket could be made at path: not too long, in a folder that
 * exists; 0, or -errno with *err ("cannot listen on KIND PATH: why").  The
 * start-up checks its sockets' paths so before any LUN opens (a RAM LUN
 * allocated, a remote one connected); the listen itself, after them,
 * still says why if the file system changed meanwhile.
 */
int target_socket_path_check(const char *kind, const char *path, GError **err);
#ifdef VHOST_SCSI_TEST_HOOKS
/* Any thread: a test's stand-in for a stuck file system under a socket's path. */
void target_test_socket_hold(const char *path);
#else
static inline void target_test_socket_hold(const char *path)
{
}
#endif
/* A new controller's initiator name (NULL: keep the default); before it has connections. */
void target_controller_set_initiator(struct controller *ctrl, const char *initiator);
/*
 * Removes a controller with no LUNs and no connections (-EBUSY otherwise);
 * *socket (g_free) is the socket file it made, for the caller to remove
 * off the main thread (target_socket_unlink with *id), or NULL.
 */
int target_controller_remove(struct target *tgt, const char *name, char **socket,
                             struct target_file_id *id, GError **err);

/*
 * The saved configuration (target-config.c).  load: creates the backends
 * and mappings file describes (at start, before the threads); *socket_path
 * (g_free) is the socket it names, or NULL.  -errno with *err naming the
 * file and the element at fault.  save: writes the current backends and
 * mappings to file atomically (mode 0600).
 */
int target_config_load(struct target *tgt, const char *file, char **socket_path, GError **err);
/*
 * The file's text parsed and its shape checked whole (target-config-check.c):
 * the root (json_node_unref), or NULL with *err (-EINVAL) naming the byte or
 * the element at fault.  Nothing is opened.
 */
#define TARGET_CONFIG_VERSION 1
JsonNode *target_config_parse(const char *text, size_t len, GError **err);
char *target_config_json(struct target *tgt);
int target_config_save(struct target *tgt, const char *file, GError **err);
/* save's writing of the text target_config_json made: any thread. */
int target_config_write(const char *file, const char *text, GError **err);

/*
 * Accepting front-ends (target-accept.c): ctrl's listening socket is
 * watched unless an accept back-off is under way (the timer resumes it
 * then); -EIO if it cannot be.  target_timer_fired: the main loop's
 * timer_fd handler (opaque: the target): connections past a message
 * deadline close, an ended back-off resumes accepting.
 */
int target_accept_watch(struct controller *ctrl);
void target_timer_fired(void *opaque, uint32_t events);

/*
 * Connections (target-connection.c).  new: a front-end accepted on ctrl's
 * socket as fd (taken: closed if it fails, -EIO), name its log name.
 */
struct ucred;
int target_connection_new(struct controller *ctrl, int fd, const struct ucred *cred,
                          const char *name);
/* Those past their message deadline at now (g_get_monotonic_time) are closed. */
void target_connections_expire(struct target *tgt, int64_t now);
unsigned target_connections_of_uid(struct target *tgt, uid_t uid);
/* At exit: every connection freed at once, whatever it had in flight. */
void target_connections_free(struct target *tgt);
/* The main loop's timer armed for the earliest deadline, or the end of a back-off. */
void target_timer_update(struct target *tgt);
/* The connected front-ends, as connection-list shows them. */
JsonNode *target_connections_json(struct target *tgt);
unsigned target_controller_connections(struct target *tgt, struct controller *ctrl,
                                       unsigned *in_flight);

/*
 * What one control client's `stats` calls reported last of each object,
 * for the intervals of its next call: another client's calls do not move
 * them.  Freed with the client's connection.
 */
struct stats_marks;
struct stats_marks *target_stats_marks_new(void);
void target_stats_marks_free(void *marks);
/* The figures of ctrl or tb (both NULL: all of them), intervals since marks, which move to now. */
JsonNode *target_stats_json(struct target *tgt, struct stats_marks *marks,
                            struct controller *ctrl, struct target_backend *tb);
char *target_stats_prometheus(struct target *tgt);

/* Serves the control socket at tgt->opts->control_path; -errno with *err. */
int target_control_start(struct target *tgt, GError **err);
void target_control_stop(struct target *tgt);

/*
 * Confines the daemon once set-up is done (target-sandbox.c): drops to
 * --sandbox-user, then, unless --sandbox none, the seccomp filter for what
 * the configuration may still do.  -errno with *err: the daemon must not run.
 */
int target_sandbox(struct target *tgt, GError **err);
/* At exit, on the main thread: the last refusals reported, their answerer stopped. */
void target_sandbox_end(struct target *tgt);

/*
 * A removal or an open finished: the main loop may end if a signal asked
 * it to (target-job.c).
 */
void target_maybe_quit(struct target *tgt);

/*
 * The daemon's life (target-run.c).  init: tgt from opts (kept, not
 * owned; --threads resolved), its backend table and default controller.
 * start: the I/O threads, the watchdog, the main loop's timer and, with
 * signals, SIGINT/SIGTERM/SIGHUP blocked in the process and read from a
 * signalfd (a shutdown: jobs stopped, control socket closed, the loop
 * ends once removals are done); -errno with *err.  load: --config's
 * backends and mappings, a check that the sockets' paths can be made
 * (default_socket: the default controller's when neither the options nor
 * the file name one), then every --lun; -errno with *err naming the
 * option.  listen: the control socket, then the default controller on
 * path or the inherited fd (taken on success); -errno with *err.  The main loop is then
 * iothread_run(tgt->main).  end: everything freed, whatever was reached;
 * on the thread that called start.
 */
void target_init(struct target *tgt, struct target_opts *opts);
int target_start(struct target *tgt, bool signals, GError **err);
int target_load(struct target *tgt, const char *default_socket, GError **err);
int target_listen(struct target *tgt, const char *path, int fd, GError **err);
void target_end(struct target *tgt);

#endif
