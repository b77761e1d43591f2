/*
 * What the two files of the RBD backend share: its LUN and per-thread
 * state, and the calls between the data path (backend-rbd.c) and opening,
 * watching and closing an image (backend-rbd-open.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_BACKEND_RBD_INT_H
#define VHOST_SCSI_BACKEND_RBD_INT_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include <glib.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "backend-rbd.h"
#include "scsi-disk.h"

/* I/O thread ids index a table; the target has at most 256 I/O threads. */
#define RBD_MAX_THREADS 260
/*
 * librados gives up on an OSD operation after rados_osd_op_timeout (set to
 * half the LUN's busy-timeout, at most RBD_OSD_OP_TIMEOUT_S, unless the
 * configuration sets it): the request completes BUSY, which initiators
 * retry.  Timeouts with no success in between for longer than the
 * busy-timeout (RBD_BUSY_TIMEOUT_S unless the spec says) turn into NOT READY.
 */
#define RBD_OSD_OP_TIMEOUT_S 30
#define RBD_MOUNT_TIMEOUT_S 30
#define RBD_BUSY_TIMEOUT_S 60
/* A close that takes longer is abandoned (backend-rbd-open.c, close_image). */
#define RBD_CLOSE_TIMEOUT_S 5
/* librados's name for a client the cluster has fenced off (compat.h). */
#ifndef EBLOCKLISTED
#define EBLOCKLISTED ESHUTDOWN
#endif

/*
 * Per-request state in backend_io.backend_priv, so a request costs no
 * allocation of ours: [0] links it into its thread's completed stack,
 * [1] is librbd's return value, [2] its thread, [3] set while a FUA
 * write's flush runs.
 */
struct rbd_thread;

static inline struct backend_io *io_next(const struct backend_io *io)
{
    return (struct backend_io *)(uintptr_t)io->backend_priv[0];
}

static inline struct rbd_thread *io_thread(const struct backend_io *io)
{
    return (struct rbd_thread *)(uintptr_t)io->backend_priv[2];
}

/*
 * An I/O thread's side of the LUN.  librbd completes requests on its own
 * threads; those only push the request onto done (a lock-free stack) and
 * write efd when the stack was empty; the I/O thread, woken by efd in its
 * loop, completes them, so SCSI code runs only on the thread that
 * submitted.  Freed with the LUN (librbd may still call back after a
 * detach), so the pointer stays valid for every completion.
 */
struct rbd_thread {
    struct rbd_lun *rl;
    struct iothread *t;        /* NULL once detached */
    int efd;
    _Atomic(struct backend_io *) done;
};

struct rbd_lun {
    struct lun_backend be;
    rados_t cluster;
    rados_ioctx_t ioctx;
    rbd_image_t image;
    char *spec;                 /* "POOL/IMAGE[@SNAP]" for messages */
    bool locked;                /* we hold the image's exclusive lock */
    bool watching;
    uint64_t watch_handle;
    char serial[128];
    struct scsi_lun_info info;
    /*
     * Health, shared by the I/O threads: monotonic µs of the first timeout
     * since the last success (0: none), whether the long outage was logged,
     * and whether the LUN is fenced (blocklisted, lock lost) for good.
     */
    int64_t busy_us;            /* the busy-timeout, µs */
    _Atomic int64_t timeouts_since;
    atomic_bool unreachable_logged;
    atomic_bool fenced;
    /* Each slot is written by its own I/O thread, read by close. */
    struct rbd_thread *threads[RBD_MAX_THREADS];
};

static inline struct rbd_lun *to_rl(struct lun_backend *be)
{
    return (struct rbd_lun *)be;
}

/* The operations of an open image (backend-rbd.c). */
extern const struct backend_ops rbd_be_ops;
/* Resize and close (backend-rbd-open.c). */
int rbd_be_resize(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err);
void rbd_be_close(struct lun_backend *be);
/* Completes what the threads' stacks still hold (close, after rbd_close). */
void rbd_be_drain_threads(struct rbd_lun *rl);

#endif
