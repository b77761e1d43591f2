/*
 * The in-process daemon of the daemon layer's tests (target-fixture.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "target-fixture.h"

/* Longest a test's main loop may run: a hang fails the test rather than the suite's timeout. */
#define RUN_BOUND_S 60

void target_fixture_test_init(int *argc, char ***argv)
{
    g_test_init(argc, argv, NULL);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
}

void target_fixture_start(struct target_fixture *f, bool control)
{
    g_autoptr(GError) error = NULL;

    f->dir = g_dir_make_tmp("target-test-XXXXXX", &error);
    g_assert_no_error(error);
    target_opts_init(&f->opts);
    f->opts.queues = 1;
    f->opts.threads = 1;
    f->opts.sandbox = TARGET_SANDBOX_NONE;
    if (control) {
        f->opts.control_path = target_fixture_path(f, "ctl");
    }
    target_init(&f->tgt, &f->opts);
    g_assert_cmpint(target_start(&f->tgt, false), ==, 0);
    if (control) {
        g_assert_cmpint(target_control_start(&f->tgt), ==, 0);
    }
}

char *target_fixture_path(const struct target_fixture *f, const char *name)
{
    return g_build_filename(f->dir, name, NULL);
}

char *target_fixture_file(const struct target_fixture *f, const char *name, size_t size)
{
    char *path = target_fixture_path(f, name);
    g_autofree char *zeros = g_malloc0(size);
    g_autoptr(GError) error = NULL;

    g_file_set_contents(path, zeros, size, &error);
    g_assert_no_error(error);
    return path;
}

static void run_too_long(void *opaque, uint32_t events)
{
    g_error("the target's main loop ran for %d s without being quit", RUN_BOUND_S);
}

void target_fixture_run(struct target_fixture *f)
{
    struct itimerspec its = { .it_value.tv_sec = RUN_BOUND_S };
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(timerfd_settime(fd, 0, &its, NULL), ==, 0);
    g_assert_cmpint(iothread_add_fd(f->tgt.main, fd, EPOLLIN, run_too_long, NULL), ==, 0);
    g_assert_false(f->ran);
    f->ran = true;
    iothread_run(f->tgt.main);
    iothread_del_fd(f->tgt.main, fd);
    close(fd);
}

/*
 * As a signal's shutdown, but jobs are let finish rather than given up:
 * a job given up would outlive the test.
 */
static void drain(void *opaque)
{
    struct target *tgt = opaque;

    target_control_stop(tgt);
    tgt->quitting = true;
    target_maybe_quit(tgt);
}

void target_fixture_drain(struct target_fixture *f)
{
    drain(&f->tgt);
}

void target_fixture_drain_soon(struct target_fixture *f)
{
    iothread_post(f->tgt.main, drain, &f->tgt);
}

void target_fixture_end(struct target_fixture *f)
{
    g_autoptr(GDir) d = NULL;
    const char *name;

    if (!f->ran) {
        target_fixture_drain(f);
        target_fixture_run(f);
    }
    target_end(&f->tgt);
    target_opts_clear(&f->opts);
    d = g_dir_open(f->dir, 0, NULL);
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *p = target_fixture_path(f, name);

        g_unlink(p);
    }
    g_rmdir(f->dir);
    g_free(f->dir);
}
