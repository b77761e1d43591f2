/*
 * Specification of a backend's resize off the main thread
 * (hw/daemon/target-resize.c), in-process: a resize not done within
 * --control-timeout-ms is answered -ETIMEDOUT and keeps its backend open
 * until its thread returns; an implicit backend whose last mapping went
 * meanwhile is closed then, on the main thread.  The resize is held by a
 * backend whose resize waits on an eventfd the test writes, as a file
 * system that does not answer would hold it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "backend.h"
#include "iothread.h"
#include "target-fixture.h"
#include "vs-error.h"

/* How long the test waits for the late close: far above any scheduling delay. */
#define CLOSE_BOUND_MS 10000

/* The held backend's operations: the RAM backend's, its resize waiting for the test. */
static struct backend_ops held_ops;
static int release_fd = -1;

static int held_resize(struct lun_backend *be, uint64_t size, uint64_t *out, GError **err)
{
    uint64_t v;

    if (read(release_fd, &v, sizeof(v)) != sizeof(v)) {
        return vs_error_set(err, -EIO, "the test's eventfd: %s", g_strerror(errno));
    }
    return vs_error_set(err, -ENOTSUP, "held, then refused");
}

struct late {
    struct target_fixture f;
    struct controller *ctrl;
    int resized;                    /* the resize's answer; 1: none yet */
    unsigned checks;                /* of the backend's close, once released */
    struct iothread_timer check;
};

/* Every millisecond, until the backend is gone (bounded). */
static void check_closed(struct iothread_timer *tm)
{
    struct late *l = (struct late *)((char *)tm - offsetof(struct late, check));

    if (!target_backend_find(&l->f.tgt, "lun0:0")) {
        target_fixture_drain(&l->f);
        return;
    }
    if (++l->checks > CLOSE_BOUND_MS) {
        g_error("the implicit backend was not closed once its given-up resize returned");
    }
    iothread_timer_arm(l->f.tgt.main, &l->check, io_stats_now_ns() + 1000000);
}

/* Its mapping gone: the backend stays while the resize holds it, then the resize returns. */
static void unmapped(int ret, void *opaque)
{
    struct late *l = opaque;
    uint64_t one = 1;

    g_assert_cmpint(ret, ==, 0);
    g_assert_nonnull(target_backend_find(&l->f.tgt, "lun0:0"));
    g_assert_cmpint(write(release_fd, &one, sizeof(one)), ==, sizeof(one));
    l->check.fn = check_closed;
    iothread_timer_arm(l->f.tgt.main, &l->check, io_stats_now_ns() + 1000000);
}

static void resized(struct target *tgt, int ret, const GError *err, void *opaque)
{
    struct late *l = opaque;

    l->resized = ret;
    g_assert_cmpint(ret, ==, -ETIMEDOUT);
    g_assert_error(err, VS_ERROR, ETIMEDOUT);
    g_assert_nonnull(strstr(err->message, "--control-timeout-ms"));
    target_lun_unmap(l->ctrl, 0, 0, unmapped, l);
}

static void test_late_closes_unmapped_implicit(void)
{
    struct late l = { .resized = 1 };
    struct target_backend *b;
    struct lun_backend *be;
    GError *err = NULL;
    unsigned port, lun;

    release_fd = eventfd(0, EFD_CLOEXEC);
    g_assert_cmpint(release_fd, >=, 0);
    target_fixture_start(&l.f, false);
    l.f.opts.job_timeout_ms = 20;
    l.ctrl = target_controller_find(&l.f.tgt, NULL);
    g_assert_cmpint(target_lun_add(l.ctrl, "0=ram:1M", &port, &lun, &err), ==, 0);
    g_assert_no_error(err);
    b = target_backend_find(&l.f.tgt, "lun0:0");
    g_assert_nonnull(b);
    be = scsi_lun_backend(b->lun);
    held_ops = *be->ops;
    held_ops.resize = held_resize;
    be->ops = &held_ops;

    target_backend_resize_async(&l.f.tgt, "lun0:0", 2 << 20, resized, &l);
    target_fixture_run(&l.f);
    g_assert_cmpint(l.resized, ==, -ETIMEDOUT);
    g_assert_null(target_backend_find(&l.f.tgt, "lun0:0"));
    target_fixture_end(&l.f);
    close(release_fd);
}

int main(int argc, char **argv)
{
    target_fixture_test_init(&argc, &argv);
    g_test_add_func("/target-resize/late-closes-unmapped-implicit",
                    test_late_closes_unmapped_implicit);
    return g_test_run();
}
