/*
 * Specification of front-end eventfd signalling (hw/virtio/notify-fd.c):
 * a signal adds one to the counter; a full non-blocking counter is the
 * front-end's problem (EAGAIN), never a wait; and on a thread enrolled
 * with the watchdog, a write that blocks because the front-end cleared
 * O_NONBLOCK and filled the counter is interrupted and reported as
 * ETIMEDOUT, leaving the counter as it was.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "notify-fd.h"

#define FULL 0xfffffffffffffffeull

static void test_signal_adds_one(void)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    eventfd_t v;

    g_assert_cmpint(notify_fd_signal(fd), ==, 0);
    g_assert_cmpint(notify_fd_signal(fd), ==, 0);
    g_assert_cmpint(eventfd_read(fd, &v), ==, 0);
    g_assert_cmpuint(v, ==, 2);
    close(fd);
    g_assert_cmpint(notify_fd_signal(fd), ==, -EBADF);
}

static void test_full_counter_is_eagain(void)
{
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    eventfd_t v;

    g_assert_cmpint(eventfd_write(fd, FULL), ==, 0);
    g_assert_cmpint(notify_fd_signal(fd), ==, -EAGAIN);
    g_assert_cmpint(eventfd_read(fd, &v), ==, 0);
    g_assert_cmpuint(v, ==, FULL);
    close(fd);
}

struct blocked_writer {
    struct notify_watchdog *wd;
    int fd;
    GAsyncQueue *result;
};

static gpointer blocked_writer_main(gpointer opaque)
{
    struct blocked_writer *b = opaque;
    int r;

    g_assert_cmpint(notify_watchdog_enrol(b->wd), ==, 0);
    r = notify_fd_signal(b->fd);
    notify_watchdog_leave(b->wd);
    g_async_queue_push(b->result, GINT_TO_POINTER(r - 1));   /* never NULL */
    return NULL;
}

static void test_blocked_write_is_interrupted(void)
{
    struct blocked_writer b = { .fd = eventfd(0, EFD_CLOEXEC) };
    GThread *t;
    gpointer r;
    eventfd_t v;

    b.wd = notify_watchdog_start(20);
    g_assert_nonnull(b.wd);
    b.result = g_async_queue_new();
    /* Blocking, and full: the write would sleep until someone reads it. */
    g_assert_cmpint(eventfd_write(b.fd, FULL), ==, 0);
    t = g_thread_new("blocked-writer", blocked_writer_main, &b);
    r = g_async_queue_timeout_pop(b.result, 10 * G_USEC_PER_SEC);
    g_assert_nonnull(r);
    g_assert_cmpint(GPOINTER_TO_INT(r) + 1, ==, -ETIMEDOUT);
    g_thread_join(t);
    g_assert_cmpint(eventfd_read(b.fd, &v), ==, 0);
    g_assert_cmpuint(v, ==, FULL);
    /* The same thread's next, unblocked write works as usual. */
    g_assert_cmpint(notify_fd_signal(b.fd), ==, 0);
    notify_watchdog_stop(b.wd);
    g_async_queue_unref(b.result);
    close(b.fd);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/notify-fd/signal-adds-one", test_signal_adds_one);
    g_test_add_func("/notify-fd/full-counter-is-eagain", test_full_counter_is_eagain);
    g_test_add_func("/notify-fd/blocked-write-is-interrupted", test_blocked_write_is_interrupted);
    return g_test_run();
}
