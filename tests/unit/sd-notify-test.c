/*
 * Specification of the readiness protocol's sending side
 * (hw/util/sd-notify.c) against a datagram socket the test binds and
 * names in NOTIFY_SOCKET, as systemd does for a Type=notify service: the
 * path and the abstract ("@") forms, the message arriving whole with the
 * sender's credentials (by which systemd's NotifyAccess=main knows the
 * daemon), the variable unset once read, and the names refused with an
 * error (never a log line: a warning would fail this test).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "notify-receiver.h"
#include "sd-notify.h"

/* Opens with NOTIFY_SOCKET=name, sends two messages, and checks they arrive at fd. */
static void notify_through(const char *name, int fd)
{
    struct sd_notify *n;
    g_autofree char *first = NULL, *second = NULL;
    pid_t pid;

    g_setenv("NOTIFY_SOCKET", name, TRUE);
    g_assert_cmpint(sd_notify_open(&n), ==, 0);
    g_assert_nonnull(n);
    /* Read once: a program the daemon might start does not inherit it. */
    g_assert_null(g_getenv("NOTIFY_SOCKET"));
    g_assert_cmpint(sd_notify_send(n, "READY=1\nSTATUS=serving 2 sockets"), ==, 0);
    g_assert_cmpint(sd_notify_send(n, "STOPPING=1"), ==, 0);
    first = notify_receiver_next(fd, 10000, &pid);
    g_assert_cmpstr(first, ==, "READY=1\nSTATUS=serving 2 sockets");
    g_assert_cmpint(pid, ==, getpid());
    second = notify_receiver_next(fd, 10000, &pid);
    g_assert_cmpstr(second, ==, "STOPPING=1");
    sd_notify_free(n);
}

static void test_path(void)
{
    g_autofree char *dir = g_dir_make_tmp("sd-notify-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "notify", NULL);
    int fd = notify_receiver_bind(path);

    notify_through(path, fd);
    close(fd);
    g_unlink(path);
    g_rmdir(dir);
}

static void test_abstract(void)
{
    g_autofree char *name = g_strdup_printf("@vhost-scsi-sd-notify-test/%d/%u", (int)getpid(),
                                            g_random_int());
    int fd = notify_receiver_bind(name);

    notify_through(name, fd);
    close(fd);
}

/* Not started as a Type=notify service: nothing to connect to, and sending is a no-op. */
static void test_unset_is_a_no_op(void)
{
    struct sd_notify *n = (struct sd_notify *)&n;

    g_unsetenv("NOTIFY_SOCKET");
    g_assert_cmpint(sd_notify_open(&n), ==, 0);
    g_assert_null(n);
    g_assert_cmpint(sd_notify_send(n, "READY=1"), ==, 0);
    sd_notify_free(n);
}

/* Refused names are errors, and the variable is gone all the same. */
static void test_bad_names(void)
{
    /* sun_path holds 108 bytes: a path of 107 and its NUL, an abstract name of 108. */
    g_autofree char *path107 = g_strnfill(107, 'p'), *path108 = g_strnfill(108, 'p');
    g_autofree char *abs108 = g_strnfill(108, 'a'), *abs109 = g_strnfill(109, 'a');
    struct {
        const char *name;
        int err;
    } cases[] = {
        { "", -EINVAL }, { "/", -EINVAL }, { "@", -EINVAL }, { "relative/notify", -EINVAL },
        { "vsock:2:1234", -EINVAL },
        { path108, -ENAMETOOLONG }, { abs109, -ENAMETOOLONG },
        /* Long enough to be held, and nothing listens there. */
        { path107, -ENOENT }, { abs108, -ECONNREFUSED },
    };

    path107[0] = path108[0] = '/';
    abs108[0] = abs109[0] = '@';
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct sd_notify *n = NULL;
        int r;

        g_setenv("NOTIFY_SOCKET", cases[i].name, TRUE);
        r = sd_notify_open(&n);
        if (r != cases[i].err) {
            g_error("NOTIFY_SOCKET=%s: %d (%s), expected %d", cases[i].name, r,
                    g_strerror(-r), cases[i].err);
        }
        g_assert_null(n);
        g_assert_null(g_getenv("NOTIFY_SOCKET"));
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sd-notify/path", test_path);
    g_test_add_func("/sd-notify/abstract", test_abstract);
    g_test_add_func("/sd-notify/unset-is-a-no-op", test_unset_is_a_no_op);
    g_test_add_func("/sd-notify/bad-names-are-errors", test_bad_names);
    return g_test_run();
}
