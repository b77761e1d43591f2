/*
 * The hold backend, for tests only (compiled only with -Dtest_hooks=true,
 * and lun-spec accepts "hold:" only when VHOST_SCSI_TEST_BACKENDS=1):
 * RAM that holds every request submitted
 * while a given file exists, and completes what it holds, on the thread
 * that submitted it, once the file is removed.  A protocol test uses it to
 * keep I/O in flight in the real daemon for as long as it needs (an iSCSI
 * remote that stopped answering, without the network) and to release it
 * deterministically with one unlink(2).
 *
 * Each I/O thread watches the file's directory with its own inotify fd in
 * its own loop, set up before the thread's first look at the file, so a
 * removal that races a submission is seen after the request was parked:
 * nothing is held once the file is gone.  Parked requests are linked
 * through their backend_priv scratch; nothing is allocated per request.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <glib.h>

#include "backend.h"

/* iothread ids index the per-thread state; the daemon's are 0..--threads. */
#define HOLD_MAX_THREADS 256

struct hold_thread {
    struct hold_backend *hb;
    struct iothread *t;
    int ifd;
    struct backend_io *head;      /* parked, oldest first */
    struct backend_io **tail;
};

struct hold_backend {
    struct lun_backend be;
    struct lun_backend *inner;    /* ram */
    char *path;
    char *dir;
    struct hold_thread *threads[HOLD_MAX_THREADS];
};

static struct hold_backend *to_hold(struct lun_backend *be)
{
    return (struct hold_backend *)be;
}

static struct backend_io **io_next(struct backend_io *io)
{
    return (struct backend_io **)(void *)&io->backend_priv[0];
}

static bool hold_file_exists(const struct hold_backend *hb)
{
    return access(hb->path, F_OK) == 0;
}

static void hold_release_all(struct hold_thread *ht)
{
    struct backend_io *io = ht->head;
    unsigned n = 0;

    /* Detach the list first: a completion may submit (and park) again. */
    ht->head = NULL;
    ht->tail = &ht->head;
    while (io) {
        struct backend_io *next = *io_next(io);

        ht->hb->inner->ops->submit(ht->hb->inner, io);
        io = next;
        n++;
    }
    if (n) {
        g_message("%s: %s is gone: completed %u held request%s on %s", ht->hb->be.name,
                  ht->hb->path, n, n == 1 ? "" : "s", iothread_name(ht->t));
    }
}

static void hold_event_cb(void *opaque, uint32_t events)
{
    struct hold_thread *ht = opaque;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

    /* Any change in the directory: look at the file itself. */
    while (read(ht->ifd, buf, sizeof(buf)) > 0) {
    }
    if (!hold_file_exists(ht->hb)) {
        hold_release_all(ht);
    }
}

static int hold_attach_thread(struct lun_backend *be, struct iothread *t)
{
    struct hold_backend *hb = to_hold(be);
    unsigned id = iothread_id(t);
    struct hold_thread *ht;
    int ret;

    if (id >= HOLD_MAX_THREADS) {
        g_warning("%s: thread %s (id %u) beyond the %u this test backend serves", be->name,
                  iothread_name(t), id, HOLD_MAX_THREADS);
        return -EINVAL;
    }
    if (hb->threads[id]) {
        return 0;
    }
    ht = g_new0(struct hold_thread, 1);
    ht->hb = hb;
    ht->t = t;
    ht->tail = &ht->head;
    ht->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (ht->ifd < 0 || inotify_add_watch(ht->ifd, hb->dir, IN_DELETE | IN_MOVED_FROM) < 0) {
        ret = -errno;
        g_warning("%s: cannot watch %s: %s", be->name, hb->dir, g_strerror(-ret));
        goto fail;
    }
    ret = iothread_add_fd(t, ht->ifd, EPOLLIN, hold_event_cb, ht);
    if (ret < 0) {
        goto fail;
    }
    hb->threads[id] = ht;
    return 0;

fail:
    if (ht->ifd >= 0) {
        close(ht->ifd);
    }
    g_free(ht);
    return ret;
}

static void hold_detach_thread(struct lun_backend *be, struct iothread *t)
{
    struct hold_backend *hb = to_hold(be);
    unsigned id = iothread_id(t);
    struct hold_thread *ht = id < HOLD_MAX_THREADS ? hb->threads[id] : NULL;

    if (!ht) {
        return;
    }
    /* Queues stop only when their requests are done; complete any stragglers. */
    hold_release_all(ht);
    iothread_del_fd(t, ht->ifd);
    close(ht->ifd);
    hb->threads[id] = NULL;
    g_free(ht);
}

static int hold_submit(struct lun_backend *be, struct backend_io *io)
{
    struct hold_backend *hb = to_hold(be);
    unsigned id = iothread_id(io->thread);
    struct hold_thread *ht;

    if (id >= HOLD_MAX_THREADS || !hb->threads[id]) {
        /* A thread the owner did not attach: attach now (submit runs on it). */
        int ret = hold_attach_thread(be, io->thread);

        if (ret < 0) {
            return ret;
        }
    }
    ht = hb->threads[id];
    if (!hold_file_exists(hb)) {
        return hb->inner->ops->submit(hb->inner, io);
    }
    *io_next(io) = NULL;
    *ht->tail = io;
    ht->tail = io_next(io);
    return 0;
}

static void hold_close(struct lun_backend *be)
{
    struct hold_backend *hb = to_hold(be);

    /* Threads attached on the fly were never detached; their loops are gone. */
    for (unsigned i = 0; i < HOLD_MAX_THREADS; i++) {
        if (hb->threads[i]) {
            g_assert(!hb->threads[i]->head);
            close(hb->threads[i]->ifd);
            g_free(hb->threads[i]);
        }
    }
    backend_close(hb->inner);
    g_free(hb->path);
    g_free(hb->dir);
    g_free(hb->be.name);
    g_free(hb);
}

static const struct backend_ops hold_ops = {
    .name = "hold",
    .submit = hold_submit,
    .attach_thread = hold_attach_thread,
    .detach_thread = hold_detach_thread,
    .close = hold_close,
};

int backend_hold_new(uint64_t size, uint32_t block_size, const char *path,
                     struct lun_backend **out, GError **err)
{
    struct hold_backend *hb = g_new0(struct hold_backend, 1);
    int ret = backend_ram_new(size, block_size, &hb->inner, err);

    if (ret < 0) {
        g_free(hb);
        return ret;
    }
    hb->be = *hb->inner;
    hb->be.ops = &hold_ops;
    hb->be.name = g_strdup_printf("hold:%s", path);
    hb->path = g_strdup(path);
    hb->dir = g_path_get_dirname(path);
    g_message("%s: test backend: every request waits while %s exists", hb->be.name, path);
    *out = &hb->be;
    return 0;
}
