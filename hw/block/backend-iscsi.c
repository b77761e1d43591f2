/*
 * The iSCSI backend: a LUN whose blocks live on a remote iSCSI target,
 * reached with libiscsi's asynchronous API from the I/O threads' event
 * loops.  libiscsi contexts are not thread-safe, so every I/O thread owns
 * its own sessions (one context each, created in attach_thread and used
 * only there); opening the LUN logs in once, on the thread that opens it,
 * to learn the geometry and identity, then logs out.  Connection
 * loss is handled here rather than by libiscsi's automatic reconnect,
 * whose in-flight PDUs sit in a hidden context that neither the task
 * timeout nor cancellation reaches: a dropped session completes its tasks
 * with -EAGAIN (BUSY, which initiators retry), queues new requests while
 * it logs in again, and after ISCSI_UNREACHABLE_S without a session fails
 * them with -ENOTCONN (NOT READY).  See docs/iscsi.md.  Opening a LUN
 * (URL, CHAP secret, login, geometry) is backend-iscsi-open.c's.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "backend-iscsi-int.h"

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
            ((task->sense.ascq >> 8) == SCSI_SENSE_ASCQ_INVALID_OPERATION_CODE >> 8 ||
             (task->sense.ascq >> 8) == SCSI_SENSE_ASCQ_INVALID_FIELD_IN_CDB >> 8)) {
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
    iscsi_set_timeout(ctx, ISCSI_TASK_TIMEOUT_S);
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

struct iscsi_context *iscsi_be_new_context(struct iscsi_lun *il, uint32_t isid)
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
    /*
     * libiscsi's timeout covers every PDU, login ones too: while logging in
     * it must not end the login before our own login-timeout deadline,
     * which is exact (libiscsi counts whole seconds from when a PDU was
     * queued); the task timeout applies once logged in.
     */
    iscsi_set_timeout(ctx, (int)il->login_timeout_s + 2);
    /* Reconnection is ours (see the top of the file). */
    iscsi_set_noautoreconnect(ctx, 1);
    return ctx;
}

static void session_login(struct iscsi_session *s)
{
    s->ctx = iscsi_be_new_context(s->il, s->isid);
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
        now - s->login_started > (int64_t)s->il->login_timeout_s * G_USEC_PER_SEC) {
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

void iscsi_be_close(struct lun_backend *be)
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

const struct backend_ops iscsi_be_ops = {
    .name = "iscsi",
    .submit = iscsi_submit,
    .attach_thread = iscsi_attach_thread,
    .detach_thread = iscsi_detach_thread,
    .identity = iscsi_identity,
    .close = iscsi_be_close,
};
