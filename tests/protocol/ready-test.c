/*
 * The daemon as a Type=notify service (systemd/vhost-scsi-target@.service):
 * started with NOTIFY_SOCKET naming a datagram socket the test binds, as
 * systemd's, it sends READY=1 from its own pid once every socket listens,
 * so that whoever waited for it (`systemctl start`) then finds both the
 * control socket and the front-ends' socket accepting.  Held (the
 * listen-hold test hook) between the control socket's listen and the
 * front-ends' socket's, it has said nothing yet.  The message passes the
 * smallest seccomp filter; a manager's socket it cannot reach is logged,
 * not fatal; without NOTIFY_SOCKET it starts as always (every other
 * protocol test).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glib.h>

#include "control-client.h"
#include "notify-receiver.h"
#include "proto-util.h"
#include "test-hooks.h"

/* Whether something accepts a stream connection at path now. */
static bool accepts(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int r;

    g_assert_cmpint(fd, >=, 0);
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    close(fd);
    return r == 0;
}

static void test_ready_once_every_socket_listens(void)
{
    struct pu_daemon d;
    g_autofree char *ctl = NULL, *notify = NULL, *hold = NULL, *msg = NULL;
    gint64 deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * 1000ll;
    g_autoptr(JsonNode) version = NULL;
    pid_t sender;
    int mgr, fd, w;

    if (test_hooks_missing()) {
        return;
    }
    pu_daemon_init(&d);
    ctl = g_build_filename(d.dir, "control.sock", NULL);
    notify = g_build_filename(d.dir, "notify", NULL);
    hold = g_strconcat(d.sock, ".hold", NULL);
    mgr = notify_receiver_bind(notify);
    /* The front-ends' socket waits in the open of this FIFO: the control socket listens already. */
    g_assert_cmpint(mkfifo(hold, 0600), ==, 0);
    g_setenv("NOTIFY_SOCKET", notify, TRUE);
    g_setenv("VHOST_SCSI_TEST_FAULT", "listen-hold", TRUE);
    pu_spawn(&d.proc, (const char *const[]){ g_getenv("VHOST_SCSI_TARGET"), "--socket-path",
                                             d.sock, "--lun", "0=ram:1M", "--control", ctl,
                                             NULL });
    g_unsetenv("NOTIFY_SOCKET");
    g_unsetenv("VHOST_SCSI_TEST_FAULT");
    while (!pu_proc_in_fifo_open(d.proc.pid)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_assert_false(pu_proc_exited(&d.proc, 1));
    }
    /* Held: the control socket listens, the front-ends' does not, and nothing was said. */
    g_assert_true(accepts(ctl));
    g_assert_false(accepts(d.sock));
    g_assert_false(notify_receiver_waiting(mgr));

    w = open(hold, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    g_assert_cmpint(w, >=, 0);
    close(w);
    msg = notify_receiver_next(mgr, PU_TIMEOUT_MS, &sender);
    g_assert_cmpstr(msg, ==, "READY=1");
    /* From the main pid (NotifyAccess=main), and both sockets accept by now. */
    g_assert_cmpint(sender, ==, d.proc.pid);
    g_assert_true(accepts(d.sock));
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    version = pu_ctl_ok(fd, "version", NULL);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    /* Said once. */
    g_assert_false(notify_receiver_waiting(mgr));
    close(mgr);
    pu_daemon_cleanup(&d);
}

/*
 * Without --control the filter allows the fewest calls (no new socket):
 * the message still goes out, on the socket connected before it.
 */
static void test_ready_under_the_smallest_filter(void)
{
    struct pu_daemon d;
    g_autofree char *notify = NULL, *msg = NULL;
    pid_t sender;
    int mgr;

    pu_daemon_init(&d);
    notify = g_build_filename(d.dir, "notify", NULL);
    mgr = notify_receiver_bind(notify);
    g_setenv("NOTIFY_SOCKET", notify, TRUE);
    pu_daemon_start(&d, (const char *const[]){ "--lun", "0=ram:1M", "--sandbox", "seccomp",
                                               NULL });
    g_unsetenv("NOTIFY_SOCKET");
    msg = notify_receiver_next(mgr, PU_TIMEOUT_MS, &sender);
    g_assert_cmpstr(msg, ==, "READY=1");
    g_assert_cmpint(sender, ==, d.proc.pid);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    close(mgr);
    pu_daemon_cleanup(&d);
}

/* A NOTIFY_SOCKET nobody listens on is said in the log; the daemon serves all the same. */
static void test_unreachable_manager_is_not_fatal(void)
{
    struct pu_daemon d;
    g_autofree char *notify = NULL;

    pu_daemon_init(&d);
    d.capture_log = true;
    notify = g_build_filename(d.dir, "nobody", NULL);
    g_setenv("NOTIFY_SOCKET", notify, TRUE);
    pu_daemon_start(&d, (const char *const[]){ "--lun", "0=ram:1M", NULL });
    g_unsetenv("NOTIFY_SOCKET");
    vfe_close(pu_connect(&d, 1));
    /* Counted once the daemon has gone: the line follows the listen a started daemon shows. */
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    g_assert_cmpuint(pu_daemon_log_count(&d, 0, "NOTIFY_SOCKET: .*ready"), ==, 1);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/ready/once-every-socket-listens", test_ready_once_every_socket_listens);
    g_test_add_func("/ready/under-the-smallest-filter", test_ready_under_the_smallest_filter);
    g_test_add_func("/ready/unreachable-manager-is-not-fatal",
                    test_unreachable_manager_is_not_fatal);
    return g_test_run();
}
