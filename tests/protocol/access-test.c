/*
 * Access control of the listening socket: it is created mode 0600 (0660
 * with --socket-group), peers whose SO_PEERCRED uid/gid are not in
 * --allow-uid/--allow-gid are refused while the daemon keeps serving
 * allowed ones, and the daemon runs as an unprivileged user.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "proto-util.h"
#include "scsi-cmd.h"

static void inquiry_works(struct vfe *fe)
{
    g_assert_cmpint(pu_inquiry_qualifier(fe, 0), ==, SCSI_INQUIRY_PERIPHERAL_QUALIFIER_CONNECTED);
}

static void test_socket_is_owner_only(void)
{
    static const char *const args[] = { "--lun", "0=ram:4M", NULL };
    struct pu_daemon d;
    struct stat st;

    pu_daemon_init(&d);
    pu_daemon_start(&d, args);
    g_assert_cmpint(stat(d.sock, &st), ==, 0);
    g_assert_true(S_ISSOCK(st.st_mode));
    g_assert_cmpuint(st.st_mode & 0777, ==, 0600);
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
}

static void test_socket_group(void)
{
    static const char *const args[] = { "--lun", "0=ram:4M", "--socket-group", "root", NULL };
    struct pu_daemon d;
    struct stat st;

    pu_daemon_init(&d);
    pu_daemon_start(&d, args);
    g_assert_cmpint(stat(d.sock, &st), ==, 0);
    g_assert_cmpuint(st.st_mode & 0777, ==, 0660);
    g_assert_cmpuint(st.st_gid, ==, 0);
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
}

static void test_disallowed_peer_refused_others_served(void)
{
    char *allow = g_strdup_printf("%u", (unsigned)getuid() + 4242);
    char *allow_me = g_strdup_printf("%u", (unsigned)getuid());
    const char *refuse_args[] = { "--lun", "0=ram:4M", "--allow-uid", allow, NULL };
    const char *accept_args[] = { "--lun", "0=ram:4M", "--allow-uid", allow, "--allow-uid",
                                  allow_me, NULL };
    struct vfe_config cfg = { .transport = VFE_VHOST_USER, .num_request_queues = 1,
                              .queue_size = 64, .mem_size = 4 << 20, .timeout_ms = 2000 };
    struct pu_daemon d;
    struct vfe *fe = NULL;

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    pu_daemon_init(&d);
    pu_daemon_start(&d, refuse_args);
    cfg.path = d.sock;
    /* Our uid is not allowed: the daemon hangs up before any negotiation. */
    g_assert_cmpint(vfe_open(&cfg, &fe), <, 0);
    g_assert_true(pu_daemon_alive(&d));
    pu_daemon_stop(&d, false);

    pu_daemon_start(&d, accept_args);
    fe = pu_connect(&d, 1);
    inquiry_works(fe);
    vfe_close(fe);
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
    g_free(allow);
    g_free(allow_me);
}

static void test_runs_unprivileged(void)
{
    static const char *const args[] = { "--lun", "0=ram:4M", NULL };
    struct pu_daemon d;
    struct stat st;
    struct vfe *fe;

    if (getuid() != 0) {
        g_test_skip("needs root to switch to an unprivileged uid");
        return;
    }
    pu_daemon_init(&d);
    d.run_as = 65534;   /* nobody */
    pu_daemon_start(&d, args);
    g_assert_cmpint(stat(d.sock, &st), ==, 0);
    g_assert_cmpuint(st.st_uid, ==, 65534);
    fe = pu_connect(&d, 1);
    pu_make_ready(fe, 0);
    inquiry_works(fe);
    vfe_close(fe);
    pu_daemon_stop(&d, false);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/access/socket-is-owner-only", test_socket_is_owner_only);
    g_test_add_func("/access/socket-group", test_socket_group);
    g_test_add_func("/access/disallowed-peer-refused-others-served",
                    test_disallowed_peer_refused_others_served);
    g_test_add_func("/access/runs-unprivileged", test_runs_unprivileged);
    return g_test_run();
}
