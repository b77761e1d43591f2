/*
 * The RBD backend's data path: requests go to librbd's asynchronous calls
 * (rbd_aio_readv/writev/flush/discard/write_zeroes) straight from the I/O
 * thread that submits them, with the guest's iovecs (librbd reads into
 * them; it copies write data into its own buffers, rbd_disable_zero_copy_
 * writes being on by default).  librbd calls back on its own threads,
 * where nothing of ours may run: the callback only hands the request back
 * to the submitting thread (struct rbd_thread), which completes it from
 * its loop.  Errors: a timed-out operation (librados's osd op timeout)
 * answers BUSY, and NOT READY once timeouts have gone on without a single
 * success for the LUN's busy-timeout; a client the cluster blocklisted, or a
 * writer that lost its exclusive lock, is fenced: every request answers
 * NOT READY from then on, with the reason logged once.  See docs/rbd.md.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend-rbd-int.h"

/* ---- back to the submitting thread -------------------------------------- */

/* librbd's thread: push io onto its thread's stack; wake the thread if it was empty. */
static void aio_cb(rbd_completion_t c, void *arg)
{
    struct backend_io *io = arg;
    struct rbd_thread *th = io_thread(io);
    struct backend_io *head = atomic_load_explicit(&th->done, memory_order_relaxed);
    uint64_t one = 1;

    io->backend_priv[1] = (uint64_t)(int64_t)rbd_aio_get_return_value(c);
    rbd_aio_release(c);
    do {
        io->backend_priv[0] = (uintptr_t)head;
    } while (!atomic_compare_exchange_weak_explicit(&th->done, &head, io, memory_order_release,
                                                    memory_order_relaxed));
    /*
     * Only the push onto an empty stack signals: the thread empties the
     * stack after reading the eventfd, so an earlier push is either taken
     * with this batch or was already signalled.
     */
    if (!head && write(th->efd, &one, sizeof(one)) < 0) {
        /* Cannot happen short of 2^64 - 1 unread wake-ups; nothing else to tell. */
        abort();
    }
}

static void fence(struct rbd_lun *rl, const char *why)
{
    if (!atomic_exchange(&rl->fenced, true)) {
        g_warning("%s: %s; the LUN is NOT READY from now on (remove and add it again "
                  "once the cause is dealt with)", rl->be.name, why);
    }
}

/* librbd's answer as the SCSI layer's -errno. */
static int map_result(struct rbd_lun *rl, struct backend_io *io, int64_t r)
{
    int64_t now, since;

    if (r >= 0) {
        if (io->op == BACKEND_READ && (uint64_t)r != io->len) {
            g_warning("%s: read of %" PRIu64 " bytes at %" PRIu64 " returned %" PRId64,
                      rl->be.name, io->len, io->offset, r);
            return -EIO;
        }
        if (atomic_load_explicit(&rl->timeouts_since, memory_order_relaxed)) {
            atomic_store(&rl->timeouts_since, 0);
            if (atomic_exchange(&rl->unreachable_logged, false)) {
                g_message("%s: the cluster answers again", rl->be.name);
            }
        }
        return 0;
    }
    switch (r) {
    case -ETIMEDOUT:
        now = g_get_monotonic_time();
        since = 0;
        if (!atomic_compare_exchange_strong(&rl->timeouts_since, &since, now) &&
            now - since > rl->busy_us) {
            if (!atomic_exchange(&rl->unreachable_logged, true)) {
                g_warning("%s: no answer from the cluster for %" PRId64 " s (busy-timeout); "
                          "timed-out requests answer NOT READY until it is back", rl->be.name,
                          rl->busy_us / G_USEC_PER_SEC);
            }
            return -ENOTCONN;
        }
        g_debug("%s: operation timed out; BUSY", rl->be.name);
        return -EAGAIN;
    case -EBLOCKLISTED:
        fence(rl, "this client has been blocklisted by the cluster (another client "
              "broke its lock, or an operator fenced it)");
        return -ENOTCONN;
    case -EROFS:
        if (!rl->be.read_only) {
            /* librbd refuses writes once the exclusive lock is lost and cannot be regained. */
            fence(rl, "writes refused: the image's exclusive lock was lost to another client");
            return -ENOTCONN;
        }
        return -EROFS;
    case -ENOSPC:
    case -EDQUOT:
        return -ENOSPC;
    case -EIO:
    case -ENOMEM:
    case -EAGAIN:
    case -EBUSY:
        return (int)r;
    default:
        g_warning("%s: librbd returned %s", rl->be.name, g_strerror((int)-r));
        return -EIO;
    }
}

static int issue(struct rbd_lun *rl, struct backend_io *io);

/* The I/O thread: complete what librbd handed back. */
static void thread_efd_cb(void *opaque, uint32_t events)
{
    struct rbd_thread *th = opaque;
    struct backend_io *io, *rev = NULL;
    uint64_t n;

    if (read(th->efd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
        g_warning("%s: eventfd read: %s", th->rl->be.name, g_strerror(errno));
    }
    io = atomic_exchange_explicit(&th->done, NULL, memory_order_acquire);
    /* The stack is newest first: complete in completion order. */
    while (io) {
        struct backend_io *next = io_next(io);

        io->backend_priv[0] = (uintptr_t)rev;
        rev = io;
        io = next;
    }
    while ((io = rev)) {
        int ret = map_result(th->rl, io, (int64_t)io->backend_priv[1]);

        rev = io_next(io);
        if (ret == 0 && io->op == BACKEND_WRITE && io->fua && th->rl->be.write_cache &&
            !io->backend_priv[3]) {
            /* FUA with librbd's cache on: the write is done once a flush after it is. */
            io->backend_priv[3] = 1;
            ret = issue(th->rl, io);
            if (ret == 0) {
                continue;
            }
        }
        io->complete(io, ret);
    }
}

void rbd_be_drain_threads(struct rbd_lun *rl)
{
    for (unsigned i = 0; i < RBD_MAX_THREADS; i++) {
        struct rbd_thread *th = rl->threads[i];
        struct backend_io *io;

        if (!th) {
            continue;
        }
        io = atomic_exchange(&th->done, NULL);
        while (io) {
            struct backend_io *next = io_next(io);

            io->complete(io, -EAGAIN);
            io = next;
        }
    }
}

/* ---- issuing --------------------------------------------------------------- */

static int issue(struct rbd_lun *rl, struct backend_io *io)
{
    rbd_completion_t c;
    int ret = rbd_aio_create_completion(io, aio_cb, &c);

    if (ret < 0) {
        return -ENOMEM;
    }
    if (io->backend_priv[3]) {
        ret = rbd_aio_flush(rl->image, c);      /* the second half of a FUA write */
    } else {
        switch (io->op) {
        case BACKEND_READ:
            ret = rbd_aio_readv(rl->image, io->iov, (int)io->iovcnt, io->offset, c);
            break;
        case BACKEND_WRITE:
            ret = rbd_aio_writev(rl->image, io->iov, (int)io->iovcnt, io->offset, c);
            break;
        case BACKEND_FLUSH:
            ret = rbd_aio_flush(rl->image, c);
            break;
        case BACKEND_DISCARD:
            ret = rbd_aio_discard(rl->image, io->offset, io->len, c);
            break;
        case BACKEND_WRITE_ZEROES:
            ret = rbd_aio_write_zeroes(rl->image, io->offset, io->len, c, 0, 0);
            break;
        default:
            ret = -EINVAL;
            break;
        }
    }
    if (ret < 0) {
        rbd_aio_release(c);
        g_debug("%s: librbd refused a request: %s", rl->be.name, g_strerror(-ret));
        if (ret == -EBLOCKLISTED) {
            fence(rl, "this client has been blocklisted by the cluster");
            return -ENOTCONN;
        }
        return -EIO;
    }
    return 0;
}

/* ---- backend ops (the table is backend-rbd-open.c's) --------------------- */

int rbd_be_attach_thread(struct lun_backend *be, struct iothread *t)
{
    struct rbd_lun *rl = to_rl(be);
    unsigned id = iothread_id(t);
    struct rbd_thread *th;

    if (id >= RBD_MAX_THREADS) {
        g_warning("%s: I/O thread id %u out of range", be->name, id);
        return -EINVAL;
    }
    th = rl->threads[id];
    if (th && th->t) {
        return 0;
    }
    if (!th) {
        th = g_new0(struct rbd_thread, 1);
        th->rl = rl;
        atomic_init(&th->done, NULL);
        th->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (th->efd < 0) {
            int ret = -errno;

            g_warning("%s: eventfd: %s", be->name, g_strerror(errno));
            g_free(th);
            return ret;
        }
    }
    if (iothread_add_fd(t, th->efd, EPOLLIN, thread_efd_cb, th) < 0) {
        g_warning("%s: cannot watch its eventfd on %s", be->name, iothread_name(t));
        if (!rl->threads[id]) {
            close(th->efd);
            g_free(th);
        }
        return -ENOMEM;
    }
    th->t = t;
    rl->threads[id] = th;
    return 0;
}

void rbd_be_detach_thread(struct lun_backend *be, struct iothread *t)
{
    struct rbd_lun *rl = to_rl(be);
    unsigned id = iothread_id(t);

    /* The thread state stays for completions still to come (freed with the LUN). */
    if (id < RBD_MAX_THREADS && rl->threads[id] && rl->threads[id]->t) {
        iothread_del_fd(t, rl->threads[id]->efd);
        rl->threads[id]->t = NULL;
    }
}

int rbd_be_submit(struct lun_backend *be, struct backend_io *io)
{
    struct rbd_lun *rl = to_rl(be);
    unsigned id = iothread_id(io->thread);
    int ret;

    if (id >= RBD_MAX_THREADS) {
        return -EINVAL;
    }
    if (atomic_load_explicit(&rl->fenced, memory_order_relaxed)) {
        return -ENOTCONN;
    }
    if (!rl->threads[id] || !rl->threads[id]->t) {
        /* A thread the owner did not attach: attach now (submit runs on it). */
        ret = rbd_be_attach_thread(be, io->thread);
        if (ret < 0) {
            return ret;
        }
    }
    io->has_sense = false;
    io->backend_priv[0] = 0;
    io->backend_priv[2] = (uintptr_t)rl->threads[id];
    io->backend_priv[3] = 0;
    return issue(rl, io);
}
