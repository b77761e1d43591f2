/*
 * The iSCSI backend: a LUN whose blocks live on a remote iSCSI target,
 * reached with libiscsi's asynchronous API from the I/O threads' event
 * loops.  libiscsi contexts are not thread-safe, so every I/O thread owns
 * its own sessions (one context each, created in attach_thread and used
 * only there); opening the LUN logs in once, synchronously, on the main
 * thread to learn the geometry and identity, then logs out.  Connection
 * loss is handled here rather than by libiscsi's automatic reconnect,
 * whose in-flight PDUs sit in a hidden context that neither the task
 * timeout nor cancellation reaches: a dropped session completes its tasks
 * with -EAGAIN (BUSY, which initiators retry), queues new requests while
 * it logs in again, and after ISCSI_UNREACHABLE_S without a session fails
 * them with -ENOTCONN (NOT READY).  See docs/iscsi.md.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
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
/* A login that has not finished after this long is abandoned and retried. */
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
static struct backend_io *io_next(const struct backend_io *io)
{
    return (struct backend_io *)(uintptr_t)io->backend_priv[0];
}

static struct backend_io *io_prev(const struct backend_io *io)
{
    return (struct backend_io *)(uintptr_t)io->backend_priv[1];
}

static struct scsi_task *io_task(const struct backend_io *io)
{
    return (struct scsi_task *)(uintptr_t)io->backend_priv[2];
}

static void set_next(struct backend_io *io, struct backend_io *v)
{
    io->backend_priv[0] = (uintptr_t)v;
}

static void set_prev(struct backend_io *io, struct backend_io *v)
{
    io->backend_priv[1] = (uintptr_t)v;
}

static void set_task(struct backend_io *io, struct scsi_task *v)
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
    uint32_t max_unmap, max_unmap_bdc;   /* 0: no limit */
    uint64_t max_ws;
    atomic_bool no_write_same;          /* the remote rejected WRITE SAME(16) */
    uint8_t *zero_block;
    char vendor[9], product[17], serial[256];
    struct scsi_lun_info info;
    /* Each slot is written and read only by its own I/O thread. */
    struct iscsi_thread *threads[ISCSI_MAX_THREADS];
};

static struct iscsi_lun *to_il(struct lun_backend *be)
{
    return (struct iscsi_lun *)be;
}

/* ---- intrusive request lists ------------------------------------------- */

static void list_push(struct io_list *l, struct backend_io *io)
{
    set_next(io, NULL);
    set_prev(io, l->tail);
    if (l->tail) {
        set_next(l->tail, io);
    } else {
        l->head = io;
    }
    l->tail = io;
    l->n++;
}

static void list_remove(struct io_list *l, struct backend_io *io)
{
    if (io_prev(io)) {
        set_next(io_prev(io), io_next(io));
    } else {
        l->head = io_next(io);
    }
    if (io_next(io)) {
        set_prev(io_next(io), io_prev(io));
    } else {
        l->tail = io_prev(io);
    }
    set_next(io, NULL);
    set_prev(io, NULL);
    l->n--;
}

static struct backend_io *list_pop(struct io_list *l)
{
    struct backend_io *io = l->head;

    if (io) {
        list_remove(l, io);
    }
    return io;
}

/* ---- issuing tasks ------------------------------------------------------- */

static void session_dispatch(struct iscsi_session *s);
static void session_kick_timer(struct iscsi_session *s);

static void set_drop(struct iscsi_session *s, const char *why)
{
    if (!s->drop) {
        s->drop = true;
        g_free(s->drop_reason);
        s->drop_reason = g_strstrip(g_strdup(why));    /* libiscsi's end in '\n' */
    }
}

static void task_cb(struct iscsi_context *ctx, int status, void *command_data, void *opaque)
{
    struct backend_io *io = opaque;
    struct scsi_task *task = io_task(io);
    struct iscsi_session *s = scsi_get_task_private_ptr(task);
    int ret;

    list_remove(&s->inflight, io);
    set_task(io, NULL);
    switch (status) {
    case SCSI_STATUS_GOOD:
        ret = 0;
        /* A short read would hand the guest stale buffer contents as data. */
        if (io->op == BACKEND_READ && task->residual_status == SCSI_RESIDUAL_UNDERFLOW &&
            task->residual > 0) {
            g_warning("%s: read of %" PRIu64 " bytes at %" PRIu64 " came back %zu short",
                      s->name, io->len, io->offset, task->residual);
            ret = -EIO;
        }
        break;
    case SCSI_STATUS_CHECK_CONDITION:
        if (task->sense.key == 0 && task->sense.ascq == 0) {
            /* No usable sense: NO SENSE with CHECK CONDITION would confuse the guest. */
            g_warning("%s: CHECK CONDITION without sense data", s->name);
            ret = -EIO;
            break;
        }
        if (io->op == BACKEND_WRITE_ZEROES && task->sense.key == SCSI_SENSE_ILLEGAL_REQUEST &&
            ((task->sense.ascq >> 8) == 0x20 || (task->sense.ascq >> 8) == 0x24)) {
            /* No WRITE SAME(16) there: the SCSI layer writes the zeros itself. */
            atomic_store(&s->il->no_write_same, true);
            ret = -EOPNOTSUPP;
            break;
        }
        io->has_sense = true;
        io->sense_key = task->sense.key & 0xf;
        io->asc = (task->sense.ascq >> 8) & 0xff;
        io->ascq = task->sense.ascq & 0xff;
        g_debug("%s: CHECK CONDITION %x/%02x/%02x", s->name, io->sense_key, io->asc, io->ascq);
        ret = -EREMOTEIO;
        break;
    case SCSI_STATUS_BUSY:
    case SCSI_STATUS_TASK_SET_FULL:
        ret = -EAGAIN;
        break;
    case SCSI_STATUS_RESERVATION_CONFLICT:
        /*
         * Another initiator holds a reservation: a cluster's normal state,
         * not a fault, so the guest gets the status itself and decides.
         */
        g_debug("%s: reservation conflict", s->name);
        io->status = SCSI_STATUS_RESERVATION_CONFLICT;
        ret = -EREMOTEIO;
        break;
    case SCSI_STATUS_TIMEOUT:
        /* The target may still run the task: only a new session retires it. */
        set_drop(s, "task timed out");
        session_kick_timer(s);
        ret = -EAGAIN;
        break;
    case SCSI_STATUS_CANCELLED:
    case SCSI_STATUS_ERROR:
    default:
        if (s->state == SESSION_UP) {
            set_drop(s, ctx ? iscsi_get_error(ctx) : "task failed");
            session_kick_timer(s);
        }
        ret = -EAGAIN;
        break;
    }
    scsi_free_scsi_task(task);
    io->complete(io, ret);
    session_dispatch(s);
}

/*
 * Builds and queues the libiscsi task for io.  Returns 0, -EOPNOTSUPP for
 * a zeroing or discard beyond the remote's limits (the SCSI layer then
 * writes zeros itself), or -EAGAIN if libiscsi refused.
 */
static int issue(struct iscsi_session *s, struct backend_io *io)
{
    struct iscsi_lun *il = s->il;
    uint32_t bs = il->be.block_size;
    uint64_t lba = io->offset / bs;
    struct scsi_iovec *iov = (struct scsi_iovec *)io->iov;
    struct scsi_task *task = NULL;

    switch (io->op) {
    case BACKEND_READ:
        task = iscsi_read16_iov_task(s->ctx, il->lun, lba, io->len, bs, 0, 0, 0, 0, 0,
                                     task_cb, io, iov, io->iovcnt);
        break;
    case BACKEND_WRITE:
        task = iscsi_write16_iov_task(s->ctx, il->lun, lba, NULL, io->len, bs, 0, 0,
                                      io->fua, 0, 0, task_cb, io, iov, io->iovcnt);
        break;
    case BACKEND_FLUSH:
        task = iscsi_synchronizecache16_task(s->ctx, il->lun, 0, 0, 0, 0, task_cb, io);
        break;
    case BACKEND_DISCARD: {
        /* The SCSI layer caps a discard at 0x400000 blocks; split for the remote. */
        struct unmap_list list[64];
        uint64_t left = io->len / bs;
        uint32_t chunk = il->max_unmap ? il->max_unmap : UINT32_MAX;
        unsigned n = 0, max = il->max_unmap_bdc ? MIN(il->max_unmap_bdc, 64u) : 64u;

        while (left && n < max) {
            list[n].lba = lba;
            list[n].num = MIN(left, chunk);
            lba += list[n].num;
            left -= list[n].num;
            n++;
        }
        if (left) {
            return -EOPNOTSUPP;
        }
        task = iscsi_unmap_task(s->ctx, il->lun, 0, 0, list, n, task_cb, io);
        break;
    }
    case BACKEND_WRITE_ZEROES:
        if (io->len / bs > il->max_ws || atomic_load(&il->no_write_same)) {
            return -EOPNOTSUPP;
        }
        task = iscsi_writesame16_task(s->ctx, il->lun, lba, il->zero_block, bs,
                                      io->len / bs, 0, 0, 0, 0, task_cb, io);
        break;
    }
    if (!task) {
        g_warning("%s: cannot queue a task: %s", s->name, iscsi_get_error(s->ctx));
        return -EAGAIN;
    }
    scsi_set_task_private_ptr(task, s);
    set_task(io, task);
    list_push(&s->inflight, io);
    return 0;
}

/* Moves queued requests into free task slots (session up only). */
static void session_dispatch(struct iscsi_session *s)
{
    while (s->state == SESSION_UP && !s->drop && s->pending.head &&
           s->inflight.n < s->il->queue_depth) {
        struct backend_io *io = list_pop(&s->pending);
        int ret = issue(s, io);

        if (ret < 0) {
            io->complete(io, ret);
        }
    }
}

static void fail_pending(struct iscsi_session *s, int ret)
{
    struct backend_io *io;

    while ((io = list_pop(&s->pending))) {
        io->complete(io, ret);
    }
}

/* ---- session life cycle ----------------------------------------------- */

static void session_fd_cb(void *opaque, uint32_t events);

static void session_kick_timer(struct iscsi_session *s)
{
    /* Fire at once: the drop is handled from the timer, outside libiscsi. */
    struct itimerspec its = { .it_value = { .tv_nsec = 1 },
                              .it_interval = { .tv_sec = 1 } };

    timerfd_settime(s->timer_fd, 0, &its, NULL);
}

/* Registers the context's socket, or follows it if libiscsi replaced it. */
static void session_sync_fd(struct iscsi_session *s)
{
    int fd = iscsi_get_fd(s->ctx);
    uint32_t ev = (uint32_t)iscsi_which_events(s->ctx) & (EPOLLIN | EPOLLOUT);

    if (fd != s->fd) {
        if (s->fd >= 0) {
            iothread_del_fd(s->t, s->fd);
            s->fd = -1;
        }
        if (fd >= 0 && iothread_add_fd(s->t, fd, ev, session_fd_cb, s) == 0) {
            s->fd = fd;
            s->events = ev;
        }
    } else if (fd >= 0 && ev != s->events) {
        if (iothread_mod_fd(s->t, fd, ev) == 0) {
            s->events = ev;
        }
    }
}

static void login_cb(struct iscsi_context *ctx, int status, void *command_data, void *opaque)
{
    struct iscsi_session *s = opaque;

    if (status != SCSI_STATUS_GOOD) {
        set_drop(s, iscsi_get_error(ctx));
        return;
    }
    if (s->logged_down) {
        g_message("%s: session re-established after %.1f s", s->name,
                  (g_get_monotonic_time() - s->down_since) / 1e6);
    } else {
        g_debug("%s: logged in", s->name);
    }
    s->state = SESSION_UP;
    s->down_since = 0;
    s->retries = 0;
    s->unreachable = false;
    s->logged_down = false;
    session_dispatch(s);
}

static struct iscsi_context *new_context(struct iscsi_lun *il, uint32_t isid)
{
    struct iscsi_context *ctx = iscsi_create_context(il->initiator);

    if (!ctx) {
        return NULL;
    }
    iscsi_set_isid_random(ctx, isid, 0);
    iscsi_set_targetname(ctx, il->target);
    iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
    iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE_CRC32C);
    if (il->user) {
        iscsi_set_initiator_username_pwd(ctx, il->user, il->password ? il->password : "");
    }
    iscsi_set_timeout(ctx, ISCSI_TASK_TIMEOUT_S);
    /* Reconnection is ours (see the top of the file). */
    iscsi_set_noautoreconnect(ctx, 1);
    return ctx;
}

static void session_login(struct iscsi_session *s)
{
    s->ctx = new_context(s->il, s->isid);
    if (!s->ctx) {
        set_drop(s, "out of memory");
        return;
    }
    s->state = SESSION_LOGIN;
    s->drop = false;
    s->login_started = g_get_monotonic_time();
    if (iscsi_full_connect_async(s->ctx, s->il->portal, s->il->lun, login_cb, s) != 0) {
        set_drop(s, iscsi_get_error(s->ctx));
        return;
    }
    session_sync_fd(s);
}

/*
 * Tears the context down after a failure: tasks still in flight complete
 * with -EAGAIN (their outcome on the target is unknown, and BUSY makes the
 * initiator send them again), queued requests stay queued for the next
 * session.  Never called from inside a libiscsi callback.
 */
static void session_down(struct iscsi_session *s, const char *why)
{
    struct iscsi_context *ctx = s->ctx;
    enum session_state was = s->state;
    int64_t now = g_get_monotonic_time();
    struct backend_io *io;
    unsigned backoff;

    s->state = SESSION_DOWN;
    s->ctx = NULL;
    if (s->fd >= 0) {
        iothread_del_fd(s->t, s->fd);
        s->fd = -1;
    }
    if (!s->down_since) {
        s->down_since = now;
    }
    if (was == SESSION_UP) {
        g_warning("%s: session lost (%s); requests in flight complete BUSY, logging in "
                  "again", s->name, why ? why : "connection closed");
        s->logged_down = true;
    } else if (!s->logged_down) {
        g_warning("%s: cannot log in (%s); retrying", s->name, why ? why : "?");
        s->logged_down = true;
    } else {
        g_debug("%s: login failed: %s", s->name, why ? why : "?");
    }
    if (ctx) {
        /* Completes (most of) the in-flight tasks with CANCELLED. */
        iscsi_destroy_context(ctx);
    }
    /* Whatever libiscsi did not call back for is ours to finish. */
    while ((io = list_pop(&s->inflight))) {
        scsi_free_scsi_task(io_task(io));
        set_task(io, NULL);
        io->complete(io, -EAGAIN);
    }
    s->drop = false;
    backoff = MIN(1u << MIN(s->retries, 8u), (unsigned)ISCSI_RETRY_MAX_S);
    s->next_login = s->retries == 0 ? now : now + (int64_t)backoff * G_USEC_PER_SEC;
    s->retries++;
}

static void session_check_drop(struct iscsi_session *s)
{
    if (s->drop) {
        g_autofree char *why = g_steal_pointer(&s->drop_reason);

        session_down(s, why);
    }
}

static void session_fd_cb(void *opaque, uint32_t events)
{
    struct iscsi_session *s = opaque;

    if (!s->ctx) {
        return;
    }
    if (iscsi_service(s->ctx, events & (POLLIN | POLLOUT | POLLERR | POLLHUP)) < 0) {
        set_drop(s, iscsi_get_error(s->ctx));
    }
    session_check_drop(s);
}

static void session_timer_cb(void *opaque, uint32_t events)
{
    struct iscsi_session *s = opaque;
    struct itimerspec its = { .it_value = { .tv_sec = 1 }, .it_interval = { .tv_sec = 1 } };
    int64_t now = g_get_monotonic_time();
    uint64_t ticks;

    if (read(s->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN) {
        g_warning("%s: timerfd read: %s", s->name, g_strerror(errno));
    }
    timerfd_settime(s->timer_fd, 0, &its, NULL);
    if (s->ctx && !s->drop && iscsi_service(s->ctx, 0) < 0) {
        set_drop(s, iscsi_get_error(s->ctx));
    }
    if (s->state == SESSION_LOGIN && !s->drop &&
        now - s->login_started > ISCSI_LOGIN_TIMEOUT_S * G_USEC_PER_SEC) {
        set_drop(s, "login timed out");
    }
    session_check_drop(s);

    if (s->state != SESSION_UP && s->down_since && !s->unreachable &&
        now - s->down_since > ISCSI_UNREACHABLE_S * G_USEC_PER_SEC) {
        g_warning("%s: target unreachable for %d s; failing I/O with NOT READY until it "
                  "is back", s->name, ISCSI_UNREACHABLE_S);
        s->unreachable = true;
    }
    if (s->unreachable) {
        fail_pending(s, -ENOTCONN);
    }
    if (s->state == SESSION_DOWN && now >= s->next_login) {
        session_login(s);
        session_check_drop(s);
    }
}

/*
 * Once per loop iteration: writes the PDUs this iteration queued (saving
 * an epoll round trip) and keeps the socket's epoll events in step with
 * what libiscsi wants, with one epoll_ctl at most.
 */
static void session_flush(void *opaque)
{
    struct iscsi_session *s = opaque;

    if (!s->ctx || s->drop) {
        return;
    }
    if (s->state == SESSION_UP && (iscsi_which_events(s->ctx) & POLLOUT) &&
        iscsi_service(s->ctx, POLLOUT) < 0) {
        set_drop(s, iscsi_get_error(s->ctx));
    }
    if (s->drop) {
        /* Completions made now would miss this iteration's used-ring flush. */
        session_kick_timer(s);
        return;
    }
    session_sync_fd(s);
}

static struct iscsi_session *session_new(struct iscsi_lun *il, struct iothread *t, unsigned idx)
{
    struct iscsi_session *s = g_new0(struct iscsi_session, 1);
    struct itimerspec its = { .it_value = { .tv_sec = 1 }, .it_interval = { .tv_sec = 1 } };

    s->il = il;
    s->t = t;
    s->fd = -1;
    s->isid = g_random_int() & 0xffffff;
    s->name = g_strdup_printf("%s[%s/%u]", il->be.name, iothread_name(t), idx);
    s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (s->timer_fd < 0 || timerfd_settime(s->timer_fd, 0, &its, NULL) < 0 ||
        iothread_add_fd(t, s->timer_fd, EPOLLIN, session_timer_cb, s) < 0) {
        g_warning("%s: timerfd: %s", s->name, g_strerror(errno));
        if (s->timer_fd >= 0) {
            close(s->timer_fd);
        }
        g_free(s->name);
        g_free(s);
        return NULL;
    }
    s->flush_handle = iothread_add_flush(t, session_flush, s);
    s->down_since = g_get_monotonic_time();
    session_login(s);
    session_check_drop(s);
    return s;
}

static void session_free(struct iscsi_session *s, bool thread_alive)
{
    struct backend_io *io;

    if (thread_alive) {
        iothread_del_flush(s->t, s->flush_handle);
        iothread_del_fd(s->t, s->timer_fd);
        if (s->fd >= 0) {
            iothread_del_fd(s->t, s->fd);
        }
    }
    s->fd = -1;
    if (s->ctx) {
        struct iscsi_context *ctx = g_steal_pointer(&s->ctx);

        /* A clean logout frees the target's session at once; only if healthy. */
        if (s->state == SESSION_UP && !s->drop && s->inflight.n == 0) {
            iscsi_logout_sync(ctx);
        }
        s->state = SESSION_DOWN;
        iscsi_destroy_context(ctx);
    }
    while ((io = list_pop(&s->inflight))) {
        scsi_free_scsi_task(io_task(io));
        io->complete(io, -EAGAIN);
    }
    fail_pending(s, -EAGAIN);
    close(s->timer_fd);
    g_free(s->drop_reason);
    g_free(s->name);
    g_free(s);
}

/* ---- backend ops ------------------------------------------------------- */

static int iscsi_attach_thread(struct lun_backend *be, struct iothread *t)
{
    struct iscsi_lun *il = to_il(be);
    unsigned id = iothread_id(t);
    struct iscsi_thread *th;

    if (id >= ISCSI_MAX_THREADS) {
        g_warning("%s: I/O thread id %u out of range", be->name, id);
        return -EINVAL;
    }
    if (il->threads[id]) {
        return 0;
    }
    th = g_malloc0(sizeof(*th) + il->nsessions * sizeof(th->s[0]));
    th->t = t;
    for (unsigned i = 0; i < il->nsessions; i++) {
        th->s[i] = session_new(il, t, i);
        if (!th->s[i]) {
            for (unsigned j = 0; j < i; j++) {
                session_free(th->s[j], true);
            }
            g_free(th);
            return -ENOMEM;
        }
        th->n++;
    }
    il->threads[id] = th;
    return 0;
}

static void thread_free(struct iscsi_thread *th, bool thread_alive)
{
    for (unsigned i = 0; i < th->n; i++) {
        session_free(th->s[i], thread_alive);
    }
    g_free(th);
}

static void iscsi_detach_thread(struct lun_backend *be, struct iothread *t)
{
    struct iscsi_lun *il = to_il(be);
    unsigned id = iothread_id(t);

    if (id < ISCSI_MAX_THREADS && il->threads[id]) {
        thread_free(g_steal_pointer(&il->threads[id]), true);
    }
}

static int iscsi_submit(struct lun_backend *be, struct backend_io *io)
{
    struct iscsi_lun *il = to_il(be);
    unsigned id = iothread_id(io->thread);
    struct iscsi_thread *th;
    struct iscsi_session *s;

    io->has_sense = false;
    set_task(io, NULL);
    if (id >= ISCSI_MAX_THREADS) {
        return -EINVAL;
    }
    th = il->threads[id];
    if (!th) {
        /* A thread the owner did not attach: attach now (submit runs on it). */
        int ret = iscsi_attach_thread(be, io->thread);

        if (ret < 0) {
            return ret;
        }
        th = il->threads[id];
    }
    s = th->s[th->next++ % th->n];
    if (s->state != SESSION_UP || s->drop) {
        if (s->unreachable) {
            return -ENOTCONN;
        }
        list_push(&s->pending, io);
        return 0;
    }
    if (s->inflight.n >= il->queue_depth || s->pending.head) {
        list_push(&s->pending, io);
        return 0;
    }
    return issue(s, io);
}

static const struct scsi_lun_info *iscsi_identity(struct lun_backend *be)
{
    return &to_il(be)->info;
}

static void iscsi_close(struct lun_backend *be)
{
    struct iscsi_lun *il = to_il(be);

    for (unsigned i = 0; i < ISCSI_MAX_THREADS; i++) {
        if (il->threads[i]) {
            /* Not detached: the thread may be gone, so leave its loop alone. */
            thread_free(g_steal_pointer(&il->threads[i]), false);
        }
    }
    g_free(il->portal);
    g_free(il->target);
    g_free(il->user);
    if (il->password) {
        memset(il->password, 0, strlen(il->password));
        g_free(il->password);
    }
    g_free(il->initiator);
    g_free(il->zero_block);
    g_free(il->be.name);
    g_free(il);
}

static const struct backend_ops iscsi_ops = {
    .name = "iscsi",
    .submit = iscsi_submit,
    .attach_thread = iscsi_attach_thread,
    .detach_thread = iscsi_detach_thread,
    .identity = iscsi_identity,
    .close = iscsi_close,
};

/* ---- opening ------------------------------------------------------------ */

/*
 * Reads a CHAP secret.  The file must be ours and unreadable by others, as
 * ssh does for keys: a password in a world-readable file is no secret.
 */
static int read_secret(const char *path, char **user, char **password)
{
    char buf[ISCSI_MAX_SECRET + 2];
    struct stat st;
    ssize_t n;
    char *colon;
    int fd, ret = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        ret = -errno;
        g_warning("secret file %s: %s", path, g_strerror(errno));
        return ret;
    }
    if (fstat(fd, &st) < 0) {
        ret = -errno;
        g_warning("secret file %s: %s", path, g_strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        g_warning("secret file %s: not a regular file", path);
        ret = -EINVAL;
        goto out;
    }
    if (st.st_uid != geteuid()) {
        g_warning("secret file %s: owned by uid %u, not by us (uid %u); refusing it", path,
                  (unsigned)st.st_uid, (unsigned)geteuid());
        ret = -EPERM;
        goto out;
    }
    if (st.st_mode & 077) {
        g_warning("secret file %s: mode %04o lets others read it; chmod 600 it", path,
                  (unsigned)(st.st_mode & 07777));
        ret = -EPERM;
        goto out;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0) {
        ret = -errno;
        g_warning("secret file %s: %s", path, g_strerror(errno));
        goto out;
    }
    if (n > ISCSI_MAX_SECRET) {
        g_warning("secret file %s: longer than %d bytes", path, ISCSI_MAX_SECRET);
        ret = -EINVAL;
        goto out;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        *user = g_strdup(buf);
        *password = g_strdup(colon + 1);
    } else {
        *user = NULL;
        *password = g_strdup(buf);
    }
    if (!**password || (*user && !**user)) {
        g_warning("secret file %s: expected USER:PASSWORD or PASSWORD", path);
        g_clear_pointer(user, g_free);
        g_clear_pointer(password, g_free);
        ret = -EINVAL;
    }
out:
    memset(buf, 0, sizeof(buf));
    close(fd);
    return ret;
}

/*
 * Resolves "HOST[:PORT]" once, here on the main thread: libiscsi resolves
 * the portal on every login, and a DNS lookup must not stall an I/O thread
 * while it reconnects.  Returns "ADDR:PORT" (IPv6 in brackets) or NULL.
 */
static char *resolve_portal(const char *portal)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG };
    struct addrinfo *res = NULL;
    char addr[NI_MAXHOST];
    g_autofree char *host = NULL;
    const char *port = "3260";
    const char *colon;
    int err;

    if (portal[0] == '[') {
        const char *end = strchr(portal, ']');

        if (!end) {
            g_warning("bad iSCSI portal \"%s\"", portal);
            return NULL;
        }
        host = g_strndup(portal + 1, end - portal - 1);
        if (end[1] == ':') {
            port = end + 2;
        }
    } else if ((colon = strchr(portal, ':')) && !strchr(colon + 1, ':')) {
        host = g_strndup(portal, colon - portal);
        port = colon + 1;
    } else {
        host = g_strdup(portal);     /* no port, or a bare IPv6 address */
    }
    err = getaddrinfo(host, port, &hints, &res);
    if (err || !res) {
        g_warning("iSCSI portal %s: %s", portal, err ? gai_strerror(err) : "no address");
        return NULL;
    }
    err = getnameinfo(res->ai_addr, res->ai_addrlen, addr, sizeof(addr), NULL, 0,
                      NI_NUMERICHOST);
    if (err) {
        g_warning("iSCSI portal %s: %s", portal, gai_strerror(err));
        freeaddrinfo(res);
        return NULL;
    }
    freeaddrinfo(res);
    return g_strdup_printf(strchr(addr, ':') ? "[%s]:%s" : "%s:%s", addr, port);
}

static char *default_initiator_name(void)
{
    char host[256] = "localhost";

    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    return g_strdup_printf("iqn.2026-12.org.vhost-scsi:%s", host);
}

/* Runs a synchronous INQUIRY; returns the unmarshalled task or NULL. */
static struct scsi_task *inquiry(struct iscsi_context *ctx, int lun, int evpd, int page,
                                 void **data)
{
    struct scsi_task *task = iscsi_inquiry_sync(ctx, lun, evpd, page, 255);

    if (!task || task->status != SCSI_STATUS_GOOD ||
        !(*data = scsi_datain_unmarshall(task))) {
        if (task) {
            scsi_free_scsi_task(task);
        }
        return NULL;
    }
    return task;
}

/* Reads geometry, identity and provisioning over a synchronous session. */
static int probe(struct iscsi_lun *il, struct iscsi_context *ctx)
{
    struct scsi_task *task;
    struct scsi_readcapacity16 *rc;
    struct scsi_inquiry_standard *std;
    void *data;
    bool lbpme;

    task = iscsi_readcapacity16_sync(ctx, il->lun);
    if (!task || task->status != SCSI_STATUS_GOOD || !(rc = scsi_datain_unmarshall(task))) {
        g_warning("%s: READ CAPACITY(16) failed: %s", il->be.name, iscsi_get_error(ctx));
        if (task) {
            scsi_free_scsi_task(task);
        }
        return -EIO;
    }
    il->be.block_size = rc->block_length;
    il->be.size = (rc->returned_lba + 1) * (uint64_t)rc->block_length;
    lbpme = rc->lbpme;
    il->be.discard_zeroes = rc->lbprz;
    scsi_free_scsi_task(task);
    if (il->be.block_size != 512 && il->be.block_size != 4096) {
        g_warning("%s: remote block size %u is not supported (512 or 4096)", il->be.name,
                  il->be.block_size);
        return -ENOTSUP;
    }

    task = inquiry(ctx, il->lun, 0, 0, &data);
    if (!task) {
        g_warning("%s: INQUIRY failed: %s", il->be.name, iscsi_get_error(ctx));
        return -EIO;
    }
    std = data;
    if (std->qualifier != 0 || std->device_type != 0) {
        g_warning("%s: remote LUN is not a disk (qualifier %d, device type %d)", il->be.name,
                  std->qualifier, std->device_type);
        scsi_free_scsi_task(task);
        return -ENOTSUP;
    }
    g_strlcpy(il->vendor, g_strstrip(std->vendor_identification), sizeof(il->vendor));
    g_strlcpy(il->product, g_strstrip(std->product_identification), sizeof(il->product));
    scsi_free_scsi_task(task);

    task = inquiry(ctx, il->lun, 1, SCSI_INQUIRY_PAGECODE_UNIT_SERIAL_NUMBER, &data);
    if (task) {
        struct scsi_inquiry_unit_serial_number *sn = data;

        if (sn->usn) {
            g_strlcpy(il->serial, sn->usn, sizeof(il->serial));
            g_strstrip(il->serial);
        }
        scsi_free_scsi_task(task);
    }

    task = inquiry(ctx, il->lun, 1, SCSI_INQUIRY_PAGECODE_DEVICE_IDENTIFICATION, &data);
    if (task) {
        struct scsi_inquiry_device_identification *di = data;

        for (struct scsi_inquiry_device_designator *d = di->designators; d; d = d->next) {
            if (d->association == SCSI_ASSOCIATION_LOGICAL_UNIT &&
                d->designator_type == SCSI_DESIGNATOR_TYPE_NAA && d->designator_length >= 8) {
                uint64_t v = 0;

                for (int i = 0; i < 8; i++) {
                    v = v << 8 | (uint8_t)d->designator[i];
                }
                il->info.naa_id = v & ((1ull << 60) - 1);
                break;
            }
        }
        scsi_free_scsi_task(task);
    }

    task = inquiry(ctx, il->lun, 1, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, &data);
    if (task) {
        struct scsi_inquiry_block_limits *bl = data;

        il->max_unmap = bl->max_unmap == 0xffffffffu ? 0 : bl->max_unmap;
        il->max_unmap_bdc = bl->max_unmap_bdc == 0xffffffffu ? 0 : bl->max_unmap_bdc;
        il->max_ws = bl->max_ws_len;
        /* Bigger commands would be refused there: report its limit instead. */
        if (bl->max_xfer_len && bl->max_xfer_len != 0xffffffffu) {
            uint64_t bytes = (uint64_t)bl->max_xfer_len * il->be.block_size;

            il->be.max_transfer = (uint32_t)MIN(bytes, (uint64_t)UINT32_MAX / il->be.block_size *
                                                il->be.block_size);
        }
        scsi_free_scsi_task(task);
    }

    if (lbpme) {
        task = inquiry(ctx, il->lun, 1, SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING,
                       &data);
        if (task) {
            struct scsi_inquiry_logical_block_provisioning *lbp = data;

            il->be.can_discard = lbp->lbpu;
            il->be.discard_zeroes = il->be.discard_zeroes || lbp->lbprz;
            scsi_free_scsi_task(task);
        } else {
            /* LBPME without the VPD page: UNMAP is what SBC-3 implies. */
            il->be.can_discard = true;
        }
    }
    if (!il->be.can_discard) {
        il->be.discard_zeroes = false;
    }
    return 0;
}

int backend_iscsi_url_lun(const char *url, unsigned *lun, char **field)
{
    g_autofree char *rest = NULL;
    char *host, *iqn, *text;
    guint64 v;
    bool ok;

    if (field) {
        *field = NULL;
    }
    if (!g_str_has_prefix(url, "iscsi://")) {
        return -EINVAL;
    }
    /* libiscsi's order: cut the query, then USER[%PASSWORD]@, then HOST/IQN/LUN. */
    url += strlen("iscsi://");
    rest = g_strndup(url, strcspn(url, "?"));
    host = strchr(rest, '@');
    host = host ? host + 1 : rest;
    iqn = strchr(host, '/');
    text = iqn ? strchr(iqn + 1, '/') : NULL;
    if (!text) {
        return -EINVAL;
    }
    text++;
    /* No sign, no whitespace, nothing after the digits, no wrap-around. */
    ok = g_ascii_string_to_unsigned(text, 10, 0, BACKEND_ISCSI_MAX_LUN, &v, NULL);
    if (field) {
        *field = g_strdup(text);
    }
    if (!ok) {
        return -EINVAL;
    }
    *lun = v;
    return 0;
}

int backend_iscsi_open(const struct backend_iscsi_opts *o, struct lun_backend **out)
{
    g_autofree char *lun_text = NULL;
    unsigned lun;
    struct iscsi_lun *il = g_new0(struct iscsi_lun, 1);
    struct iscsi_context *ctx = NULL;
    struct iscsi_url *url = NULL;
    g_autofree char *file_user = NULL, *file_pass = NULL;
    int ret;

    il->be.ops = &iscsi_ops;
    il->be.name = g_strdup("iscsi");
    il->queue_depth = o->queue_depth ? o->queue_depth : ISCSI_DEFAULT_QUEUE_DEPTH;
    il->nsessions = o->sessions ? o->sessions : 1;
    il->initiator = o->initiator_name ? g_strdup(o->initiator_name) : default_initiator_name();

    ctx = iscsi_create_context(il->initiator);
    if (!ctx) {
        ret = -ENOMEM;
        goto fail;
    }
    /* libiscsi's parser also knows the URL's CHAP and target-CHAP parts. */
    url = iscsi_parse_full_url(ctx, o->url);
    if (!url) {
        /* The URL may hold a password: name the problem, not the text. */
        g_warning("bad iSCSI URL (expected iscsi://[USER[%%PASSWORD]@]HOST[:PORT]/IQN/LUN): "
                  "%s", iscsi_get_error(ctx));
        ret = -EINVAL;
        goto fail;
    }
    /* Not url->lun: libiscsi lets "-1" through and wraps 4294967296 to 0. */
    if (backend_iscsi_url_lun(o->url, &lun, &lun_text) < 0) {
        g_warning("bad iSCSI LUN \"%s\" at the end of the URL (expected 0-%d)",
                  lun_text ? lun_text : "", BACKEND_ISCSI_MAX_LUN);
        ret = -EINVAL;
        goto fail;
    }
    il->portal = resolve_portal(url->portal);
    if (!il->portal) {
        ret = -EHOSTUNREACH;
        goto fail;
    }
    il->target = g_strdup(url->target);
    il->lun = lun;
    g_free(il->be.name);
    il->be.name = g_strdup_printf("iscsi://%s/%s/%d", url->portal, il->target, il->lun);
    if (url->user[0]) {
        il->user = g_strdup(url->user);
    } else {
        /* libiscsi drops a "USER@" that has no "%PASSWORD": take it ourselves. */
        const char *auth = o->url + strlen("iscsi://");
        const char *at = strchr(auth, '@'), *slash = strchr(auth, '/');

        if (at && at > auth && (!slash || at < slash) && !memchr(auth, '%', at - auth)) {
            il->user = g_strndup(auth, at - auth);
        }
    }
    if (url->passwd[0]) {
        il->password = g_strdup(url->passwd);
    }
    if (o->secret_file) {
        ret = read_secret(o->secret_file, &file_user, &file_pass);
        if (ret < 0) {
            goto fail;
        }
        if (il->password) {
            g_warning("%s: a password in both the URL and secret-file=; give only one",
                      il->be.name);
            ret = -EINVAL;
            goto fail;
        }
        if (file_user && il->user && strcmp(file_user, il->user)) {
            g_warning("%s: the secret file names user \"%s\" but the URL \"%s\"",
                      il->be.name, file_user, il->user);
            ret = -EINVAL;
            goto fail;
        }
        if (!file_user && !il->user) {
            g_warning("%s: the secret file holds only a password: put USER@ in the URL "
                      "or USER:PASSWORD in the file", il->be.name);
            ret = -EINVAL;
            goto fail;
        }
        if (file_user && !il->user) {
            il->user = g_steal_pointer(&file_user);
        }
        il->password = g_steal_pointer(&file_pass);
    }
    iscsi_destroy_url(url);
    url = NULL;

    iscsi_destroy_context(ctx);
    ctx = new_context(il, g_random_int() & 0xffffff);
    if (!ctx) {
        ret = -ENOMEM;
        goto fail;
    }
    if (iscsi_full_connect_sync(ctx, il->portal, il->lun) != 0) {
        g_autofree char *err = g_strstrip(g_strdup(iscsi_get_error(ctx)));

        g_warning("%s: cannot log in as %s%s%s: %s", il->be.name, il->initiator,
                  il->user ? " with CHAP user " : "", il->user ? il->user : "", err);
        ret = strstr(err, "uthentication") || strstr(err, "uthorization") ? -EACCES
                                                                           : -ECONNREFUSED;
        goto fail;
    }
    ret = probe(il, ctx);
    iscsi_logout_sync(ctx);
    if (ret < 0) {
        goto fail;
    }
    iscsi_destroy_context(ctx);
    ctx = NULL;

    il->be.read_only = o->read_only;
    il->be.write_cache = true;
    il->zero_block = g_malloc0(il->be.block_size);
    if (il->max_ws == 0 || il->max_ws > 0x400000) {
        il->max_ws = 0x400000;
    }
    il->info.vendor = il->vendor;
    il->info.product = il->product;
    il->info.serial = il->serial[0] ? il->serial : NULL;
    g_message("%s: %s %s serial \"%s\", %" PRIu64 " bytes, %u-byte blocks%s, %u session(s) "
              "per thread, queue depth %u", il->be.name, il->vendor, il->product, il->serial,
              il->be.size, il->be.block_size, il->be.can_discard ? ", UNMAP" : "",
              il->nsessions, il->queue_depth);
    *out = &il->be;
    return 0;

fail:
    if (url) {
        iscsi_destroy_url(url);
    }
    if (ctx) {
        iscsi_destroy_context(ctx);
    }
    iscsi_close(&il->be);
    return ret;
}
