/*
 * Specification of the backends under the SCSI disk emulation:
 * backend_submit() (hw/scsi/backend.c) refuses a request outside the
 * LUN's geometry, a write to a read-only backend and a discard one cannot
 * do; ram and null (backend-mem.c) refuse a bad block size or size, and
 * ram costs only the pages written; null zero-fills what it reads unless
 * it is fill=none, which leaves the buffer as it was; the hold test backend
 * (backend-hold.c) parks requests while its file exists and completes
 * them on their thread once it is gone, or when the thread detaches.  The
 * harness is scsi-disk-fixture.h.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "backend.h"
#include "iothread.h"
#include "scsi-disk-fixture.h"
#include "test-hooks.h"

/* ---- hold backend (tests only) ------------------------------------------ */

#ifdef VHOST_SCSI_TEST_HOOKS

struct hold_probe {
    struct lun_backend *be;
    struct iothread *t;
    struct backend_io io[4];
    uint8_t buf[4][512];
    struct iovec iov[4];
    GMutex lock;
    GCond cond;
    unsigned done;
    bool all_on_thread;
    int ret;
    unsigned next;
};

static void hold_io_done(struct backend_io *io, int ret)
{
    struct hold_probe *h = io->opaque;

    g_mutex_lock(&h->lock);
    h->done++;
    h->all_on_thread = h->all_on_thread && iothread_is_current(h->t) && ret == 0;
    g_cond_broadcast(&h->cond);
    g_mutex_unlock(&h->lock);
}

static void hold_submit_next(void *opaque)
{
    struct hold_probe *h = opaque;
    unsigned i = h->next++;

    h->iov[i] = (struct iovec){ h->buf[i], 512 };
    h->io[i] = (struct backend_io){ .op = BACKEND_READ, .offset = i * 512, .len = 512,
                                    .iov = &h->iov[i], .iovcnt = 1, .thread = h->t,
                                    .complete = hold_io_done, .opaque = h };
    g_assert_cmpint(backend_submit(h->be, &h->io[i]), ==, 0);
}

static void hold_attach(void *opaque)
{
    struct hold_probe *h = opaque;

    h->ret = h->be->ops->attach_thread(h->be, h->t);
}

static void hold_detach(void *opaque)
{
    struct hold_probe *h = opaque;

    h->be->ops->detach_thread(h->be, h->t);
}

static unsigned hold_done(struct hold_probe *h)
{
    unsigned n;

    g_mutex_lock(&h->lock);
    n = h->done;
    g_mutex_unlock(&h->lock);
    return n;
}

static void test_hold_backend_holds_while_its_file_exists(void)
{
    g_autofree char *dir = g_dir_make_tmp("hold-XXXXXX", NULL);
    g_autofree char *gate = g_build_filename(dir, "gate", NULL);
    gint64 deadline = g_get_monotonic_time() + DRAIN_TIMEOUT_US;
    struct hold_probe h = { .all_on_thread = true };

    g_mutex_init(&h.lock);
    g_cond_init(&h.cond);
    h.t = iothread_new("t-hold", 1, 0);
    g_assert_cmpint(iothread_start(h.t), ==, 0);
    g_assert_true(g_file_set_contents(gate, "", 0, NULL));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*test backend*");
    g_assert_cmpint(backend_hold_new(1 * MiB, 512, gate, &h.be, NULL), ==, 0);
    g_test_assert_expected_messages();
    iothread_run_sync(h.t, hold_attach, &h);
    g_assert_cmpint(h.ret, ==, 0);

    iothread_run_sync(h.t, hold_submit_next, &h);
    iothread_run_sync(h.t, hold_submit_next, &h);
    iothread_run_sync(h.t, nothing, NULL);
    g_assert_cmpuint(hold_done(&h), ==, 0);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*is gone: completed 2 held*");
    g_assert_cmpint(g_unlink(gate), ==, 0);
    g_mutex_lock(&h.lock);
    while (h.done < 2) {
        g_assert_true(g_cond_wait_until(&h.cond, &h.lock, deadline));
    }
    g_mutex_unlock(&h.lock);
    iothread_run_sync(h.t, nothing, NULL);      /* the handler has returned (and logged) */
    g_test_assert_expected_messages();
    g_assert_true(h.all_on_thread);

    /* No file: completes inside submit. */
    iothread_run_sync(h.t, hold_submit_next, &h);
    g_assert_cmpuint(hold_done(&h), ==, 3);

    /* Held again once the file is back; the thread's detach completes stragglers. */
    g_assert_true(g_file_set_contents(gate, "", 0, NULL));
    iothread_run_sync(h.t, hold_submit_next, &h);
    g_assert_cmpuint(hold_done(&h), ==, 3);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*completed 1 held*");
    iothread_run_sync(h.t, hold_detach, &h);
    g_test_assert_expected_messages();
    g_assert_cmpuint(hold_done(&h), ==, 4);
    g_assert_true(h.all_on_thread);
    backend_close(h.be);
    g_unlink(gate);
    g_rmdir(dir);

    /* A thread cannot serve it without the file's directory to watch. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*test backend*");
    g_assert_cmpint(backend_hold_new(1 * MiB, 512, gate, &h.be, NULL), ==, 0);
    g_test_assert_expected_messages();
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "hold:*cannot watch*");
    iothread_run_sync(h.t, hold_attach, &h);
    g_test_assert_expected_messages();
    g_assert_cmpint(h.ret, ==, -ENOENT);
    backend_close(h.be);
    iothread_free(h.t);
    g_mutex_clear(&h.lock);
    g_cond_clear(&h.cond);
}

#endif

/* ---- backends ---------------------------------------------------------- */

static void noop_complete(struct backend_io *io, int ret)
{
    *(int *)io->opaque = ret;
}

static void test_backend_submit_checks_geometry(void)
{
    GError *err = NULL;
    struct lun_backend *be;
    uint8_t buf[1024];
    struct iovec iov = { buf, 512 };
    int ret = 1;
    struct backend_io io = { .op = BACKEND_READ, .offset = 0, .len = 512, .iov = &iov,
                             .iovcnt = 1, .complete = noop_complete, .opaque = &ret };

    g_assert_cmpint(backend_ram_new(MiB, 512, &be, NULL), ==, 0);
    g_assert_cmpint(backend_submit(be, &io), ==, 0);
    g_assert_cmpint(ret, ==, 0);

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*not block aligned*");
    io.offset = 100;
    g_assert_cmpint(backend_submit(be, &io), ==, -EINVAL);
    g_test_assert_expected_messages();

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*beyond the end*");
    io.offset = MiB;
    g_assert_cmpint(backend_submit(be, &io), ==, -EINVAL);
    g_test_assert_expected_messages();

    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*length differs*");
    io.offset = 0;
    io.len = 1024;
    g_assert_cmpint(backend_submit(be, &io), ==, -EINVAL);
    g_test_assert_expected_messages();

    be->read_only = true;
    io.op = BACKEND_WRITE;
    io.len = 512;
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*read-only*");
    g_assert_cmpint(backend_submit(be, &io), ==, -EROFS);
    g_test_assert_expected_messages();

    be->read_only = false;
    be->can_discard = false;
    io.op = BACKEND_DISCARD;
    g_assert_cmpint(backend_submit(be, &io), ==, -EOPNOTSUPP);
    backend_close(be);

    /* Bad geometry: refused with the reason, nothing logged (a warning fails the test). */
    g_assert_cmpint(backend_ram_new(MiB, 1000, &be, &err), ==, -EINVAL);
    g_assert_error(err, VS_ERROR, EINVAL);
    g_assert_cmpstr(err->message, ==, "block size 1000 is not a power of two in 512..4096");
    g_clear_error(&err);
    g_assert_cmpint(backend_null_new(MiB + 1, 512, &be, &err), ==, -EINVAL);
    g_assert_error(err, VS_ERROR, EINVAL);
    g_assert_cmpstr(err->message, ==, "size 1048577 is not a non-zero multiple of the block "
                    "size 512");
    g_clear_error(&err);
}

static void test_null_fill(void)
{
    struct lun_backend *be;
    uint8_t buf[4096];
    struct iovec iov = { buf, sizeof(buf) };
    int ret = 1;
    struct backend_io io = { .op = BACKEND_READ, .offset = 8192, .len = sizeof(buf),
                             .iov = &iov, .iovcnt = 1, .complete = noop_complete,
                             .opaque = &ret };

    g_assert_cmpint(backend_null_new(MiB, 4096, &be, NULL), ==, 0);
    memset(buf, 0xa5, sizeof(buf));
    g_assert_cmpint(backend_submit(be, &io), ==, 0);
    g_assert_cmpint(ret, ==, 0);
    for (size_t i = 0; i < sizeof(buf); i++) {
        g_assert_cmpuint(buf[i], ==, 0);
    }
    backend_close(be);

    g_assert_cmpint(backend_null_nofill_new(MiB, 4096, &be, NULL), ==, 0);
    memset(buf, 0xa5, sizeof(buf));
    ret = 1;
    g_assert_cmpint(backend_submit(be, &io), ==, 0);
    g_assert_cmpint(ret, ==, 0);
    for (size_t i = 0; i < sizeof(buf); i++) {
        g_assert_cmpuint(buf[i], ==, 0xa5);
    }
    backend_close(be);
}

static long rss_kib(void)
{
    g_autofree char *status = NULL;
    const char *p;

    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    p = strstr(status, "VmRSS:");
    g_assert_nonnull(p);
    return strtol(p + 6, NULL, 10);
}

static void test_ram_costs_only_written_pages(void)
{
    struct lun_backend *be;
    long before = rss_kib();
    uint8_t buf[4096];
    struct iovec iov = { buf, sizeof(buf) };
    int ret = 1;
    struct backend_io io = { .op = BACKEND_READ, .offset = 512 * MiB, .len = sizeof(buf),
                             .iov = &iov, .iovcnt = 1, .complete = noop_complete,
                             .opaque = &ret };

    g_assert_cmpint(backend_ram_new(1ULL << 30, 4096, &be, NULL), ==, 0);
    memset(buf, 0xee, sizeof(buf));
    g_assert_cmpint(backend_submit(be, &io), ==, 0);
    g_assert_cmpint(ret, ==, 0);
    g_assert_cmphex(buf[0], ==, 0);
    g_assert_cmphex(buf[4095], ==, 0);
    /* 1 GiB mapped, a page read: far less than 64 MiB resident. */
    g_assert_cmpint(rss_kib() - before, <, 64 * 1024);
    backend_close(be);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/scsi-disk/backend/geometry-checks", test_backend_submit_checks_geometry);
    g_test_add_func("/scsi-disk/backend/ram-sparse", test_ram_costs_only_written_pages);
    g_test_add_func("/scsi-disk/backend/null-fill", test_null_fill);
#ifdef VHOST_SCSI_TEST_HOOKS
    g_test_add_func("/scsi-disk/backend/hold-holds-while-its-file-exists",
                    test_hold_backend_holds_while_its_file_exists);
#else
    g_test_add_func("/scsi-disk/backend/hold-holds-while-its-file-exists", test_hooks_skipped);
#endif

    return g_test_run();
}
