/*
 * Growing a backend off the main thread (include/daemon/target.h): a file grows by
 * ftruncate and a block device or a file that grew underneath is measured
 * (fstat, BLKGETSIZE64), each of which can wait on a file system, so the
 * backend's resize runs as a target job and the main thread then tells
 * every address it is mapped at and records the new size in its spec.
 * While a resize runs, the backend is marked resizing: another resize of
 * it is refused -EBUSY, and it is not closed (an implicit backend whose
 * last mapping went meanwhile is closed when the resize ends).  A resize
 * not done by --control-timeout-ms is answered -ETIMEDOUT; its backend
 * stays resizing, and so open, until the thread returns (it may still
 * take effect then: the LUN reports the capacity change itself), and an
 * implicit one unmapped meanwhile is closed then.  Main
 * thread only, but for resize_run and resize_discard.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "backend.h"
#include "target.h"
#include "vs-error.h"

struct resizing {
    struct target *tgt;
    struct target_backend *b;   /* kept open while b->resizing */
    uint64_t size;
    target_resized_fn *done;
    void *opaque;
    GError *err;                /* the thread's, read once it has posted */
};

static void resizing_free(struct resizing *r)
{
    g_clear_error(&r->err);
    g_free(r);
}

static int resize_run(void *arg)
{
    struct resizing *r = arg;

    return scsi_lun_resize(r->b->lun, r->size, &r->err);
}

static void resize_done(void *arg, int ret)
{
    struct resizing *r = arg;
    struct target_backend *b = r->b;
    g_autoptr(GError) err = NULL;

    __atomic_store_n(&b->resizing, false, __ATOMIC_RELEASE);
    if (ret == 0) {
        target_backend_resized(r->tgt, b);
    } else if (r->err) {
        g_propagate_prefixed_error(&err, g_steal_pointer(&r->err), "backend %s: cannot resize: ",
                                   b->name);
    } else {
        vs_error_set(&err, ret, "backend %s: cannot resize: %s", b->name, g_strerror(-ret));
    }
    r->done(r->tgt, ret, err, r->opaque);
    if (b->follow_device && !(b->implicit && !b->mappings && !b->unmapping)) {
        b->follow_device = false;
        target_backend_follow_device(r->tgt, b);
    }
    target_backend_close_if_unused(r->tgt, b);
    resizing_free(r);
}

static void resize_abandoned(void *arg, int why)
{
    struct resizing *r = arg;
    g_autoptr(GError) err = NULL;

    if (why == -ETIMEDOUT) {
        vs_error_set(&err, why, "not done within --control-timeout-ms; the backend stays open "
                     "until it is");
    } else {
        vs_error_set(&err, why, "the daemon is shutting down");
    }
    r->done(r->tgt, why, err, r->opaque);
}

/* On the thread, once it returns after all: the backend may close now. */
static void resize_discard(void *arg, int ret)
{
    struct resizing *r = arg;

    __atomic_store_n(&r->b->resizing, false, __ATOMIC_RELEASE);
    resizing_free(r);
}

/*
 * On the main thread, once it returns after all while the daemon runs: an
 * implicit backend whose last mapping went meanwhile closes now.
 */
static void resize_late(void *arg, int ret)
{
    struct resizing *r = arg;
    struct target_backend *b = r->b;

    __atomic_store_n(&b->resizing, false, __ATOMIC_RELEASE);
    target_backend_close_if_unused(r->tgt, b);
    resizing_free(r);
}

static const struct target_job_ops resize_ops = {
    .run = resize_run,
    .done = resize_done,
    .abandoned = resize_abandoned,
    .discard = resize_discard,
    .late = resize_late,
};

void target_backend_resize_async(struct target *tgt, const char *name, uint64_t size,
                                 target_resized_fn *done, void *opaque)
{
    struct target_backend *b = target_backend_find(tgt, name);
    g_autofree char *what = g_strdup_printf("backend %s: resizing", name);
    g_autoptr(GError) err = NULL;
    struct resizing *r;
    int ret;

    if (!b) {
        done(tgt, vs_error_set(&err, -ENOENT, "no backend named '%s'", name), err, opaque);
        return;
    }
    if (__atomic_load_n(&b->resizing, __ATOMIC_ACQUIRE)) {
        done(tgt, vs_error_set(&err, -EBUSY, "backend '%s' is being resized already", name), err,
             opaque);
        return;
    }
    r = g_new0(struct resizing, 1);
    r->tgt = tgt;
    r->b = b;
    r->size = size;
    r->done = done;
    r->opaque = opaque;
    b->resizing = true;
    ret = target_job_start(tgt, what, &resize_ops, r, true, &err);
    if (ret < 0) {
        b->resizing = false;
        g_free(r);
        done(tgt, ret, err, opaque);
    }
}

static void device_followed(struct target *tgt, int ret, const GError *err, void *opaque)
{
    /* Nobody asked for this resize: the daemon's log is where it is told. */
    if (ret < 0) {
        g_warning("%s (its device changed size; the LUN keeps its size)", err->message);
    }
}

void target_backend_follow_device(struct target *tgt, struct target_backend *b)
{
    if (__atomic_load_n(&b->resizing, __ATOMIC_ACQUIRE)) {
        b->follow_device = true;
        return;
    }
    target_backend_resize_async(tgt, b->name, 0, device_followed, NULL);
}
