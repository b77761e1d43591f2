/*
 * What the two files of the iSCSI backend share: its LUN, session and
 * per-thread state, and the calls between the data path (backend-iscsi.c)
 * and opening a LUN (backend-iscsi-open.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BACKEND_ISCSI_INT_H
#define VHOST_SCSI_BACKEND_ISCSI_INT_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <glib.h>
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "backend-iscsi.h"
#include "scsi-disk.h"

#define ISCSI_DEFAULT_QUEUE_DEPTH 64
/* libiscsi's per-task timeout: a task unanswered this long drops the session. */
#define ISCSI_TASK_TIMEOUT_S 10
/* A login that has not finished after this long is abandoned (default of login-timeout=). */
#define ISCSI_LOGIN_TIMEOUT_S 10
/* Without a session this long, requests fail with NOT READY instead of waiting. */
#define ISCSI_UNREACHABLE_S 30
#define ISCSI_RETRY_MAX_S 2
/* I/O thread ids index a table; the target has at most 256 I/O threads. */
#define ISCSI_MAX_THREADS 260
#define ISCSI_MAX_SECRET 256

/* struct scsi_iovec is documented to have struct iovec's layout. */
G_STATIC_ASSERT(sizeof(struct scsi_iovec) == sizeof(struct iovec));
G_STATIC_ASSERT(offsetof(struct scsi_iovec, iov_base) == offsetof(struct iovec, iov_base));
G_STATIC_ASSERT(offsetof(struct scsi_iovec, iov_len) == offsetof(struct iovec, iov_len));
G_STATIC_ASSERT(POLLIN == EPOLLIN && POLLOUT == EPOLLOUT && POLLERR == EPOLLERR &&
                POLLHUP == EPOLLHUP);

/*
 * Per-request state lives in backend_io.backend_priv, so queueing costs no
 * allocation: [0]/[1] link the request into its session's pending or
 * in-flight list, [2] is its libiscsi task while in flight.
 */
static inline struct backend_io *io_next(const struct backend_io *io)
{
    return (struct backend_io *)(uintptr_t)io->backend_priv[0];
}

static inline struct backend_io *io_prev(const struct backend_io *io)
{
    return (struct backend_io *)(uintptr_t)io->backend_priv[1];
}

static inline struct scsi_task *io_task(const struct backend_io *io)
{
    return (struct scsi_task *)(uintptr_t)io->backend_priv[2];
}

static inline void set_next(struct backend_io *io, struct backend_io *v)
{
    io->backend_priv[0] = (uintptr_t)v;
}

static inline void set_prev(struct backend_io *io, struct backend_io *v)
{
    io->backend_priv[1] = (uintptr_t)v;
}

static inline void set_task(struct backend_io *io, struct scsi_task *v)
{
    io->backend_priv[2] = (uintptr_t)v;
}

struct io_list {
    struct backend_io *head, *tail;
    unsigned n;
};

enum session_state { SESSION_DOWN, SESSION_LOGIN, SESSION_UP };

struct iscsi_lun;

struct iscsi_session {
    struct iscsi_lun *il;
    struct iothread *t;
    char *name;                 /* for logs: URL[thread/index] */
    struct iscsi_context *ctx;
    enum session_state state;
    int fd;                     /* the socket registered with t, or -1 */
    uint32_t events;            /* what fd is registered for */
    int timer_fd;
    int flush_handle;
    uint32_t isid;              /* reused on re-login: the target reinstates */
    bool drop;                  /* a callback saw the session fail */
    bool unreachable;           /* down > ISCSI_UNREACHABLE_S: fail fast */
    bool logged_down;
    char *drop_reason;
    int64_t down_since;         /* monotonic us; 0 while up */
    int64_t login_started;
    int64_t next_login;
    unsigned retries;
    struct io_list pending;     /* waiting for the session or a queue slot */
    struct io_list inflight;
};

struct iscsi_thread {
    struct iothread *t;
    unsigned next;              /* round-robin over sessions */
    unsigned n;
    struct iscsi_session *s[];
};

struct iscsi_lun {
    struct lun_backend be;
    char *portal, *target, *user, *password, *initiator;
    int lun;
    unsigned queue_depth;
    unsigned nsessions;
    unsigned login_timeout_s;
    uint32_t max_unmap, max_unmap_bdc;   /* 0: no limit */
    uint64_t max_ws;
    atomic_bool no_write_same;          /* the remote rejected WRITE SAME(16) */
    uint8_t *zero_block;
    char vendor[9], product[17], serial[256];
    struct scsi_lun_info info;
    /* Each slot is written and read only by its own I/O thread. */
    struct iscsi_thread *threads[ISCSI_MAX_THREADS];
};

static inline struct iscsi_lun *to_il(struct lun_backend *be)
{
    return (struct iscsi_lun *)be;
}

/*
 * A libiscsi context for the LUN's target with session id isid, its
 * timeout set for logging in (backend-iscsi.c): once logged in, set it to
 * ISCSI_TASK_TIMEOUT_S.
 */
struct iscsi_context *iscsi_be_new_context(struct iscsi_lun *il, uint32_t isid);
/* The backend's close operation, also for a LUN whose open failed half way. */
void iscsi_be_close(struct lun_backend *be);
/* The operations of an open iSCSI LUN (backend-iscsi.c). */
extern const struct backend_ops iscsi_be_ops;

#endif
