/*
 * The daemon's sandbox (--sandbox, --sandbox-user; docs/security.md),
 * against the real vhost-scsi-target:
 *  - by default, once it serves I/O, every one of its threads has no new
 *    privileges and seccomp filter mode (/proc/PID/task/TID/status:
 *    NoNewPrivs 1, Seccomp 2), the data path writes and reads back a
 *    pattern through the filter, and SIGTERM still ends it cleanly;
 *  - with a control socket, live operations run confined too: a file LUN
 *    added, config-save, a controller added that listens on a new socket
 *    and serves I/O; the wider sets are named in its log;
 *  - `--sandbox none` leaves every thread unconfined (Seccomp 0);
 *  - `--sandbox-user` (as root) leaves every thread with the other uid and
 *    no capabilities, still serving the LUN opened before the drop;
 *  - a bad --sandbox or an unknown user is refused before it listens.
 * That a forbidden call kills the process rather than run is
 * tests/unit/sandbox-test.c's, on the same filter.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "proto-util.h"

/* Every thread's status holds line; how many threads there are. */
static unsigned threads_all_have(pid_t pid, const char *line)
{
    g_autofree char *dir = g_strdup_printf("/proc/%d/task", (int)pid);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *tid;
    unsigned n = 0;

    g_assert_nonnull(d);
    while ((tid = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, tid, "status", NULL);
        g_autofree char *text = NULL;

        /* A thread that has just exited has no status to read any more. */
        if (!g_file_get_contents(path, &text, NULL, NULL)) {
            continue;
        }
        if (!strstr(text, line)) {
            g_error("thread %s of %d lacks \"%s\":\n%s", tid, (int)pid, g_strstrip(g_strdup(line)),
                    text);
        }
        n++;
    }
    return n;
}

static void rw(struct vfe *fe, uint64_t seed)
{
    const struct pu_rw_spec s = { .lun = 0, .queues = 2, .n_io = 32, .io_bytes = 4096,
                                  .seed = seed };

    pu_write_read_compare(fe, &s);
}

static char *make_lun(const struct pu_daemon *d, const char *name)
{
    g_autofree char *img = g_build_filename(d->dir, name, NULL);
    int fd = open(img, O_CREAT | O_RDWR | O_CLOEXEC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 16 << 20), ==, 0);
    close(fd);
    return g_strdup_printf("0=file:%s", img);
}

/*
 * Starts the daemon on a 16 MiB file LUN 0 with 2 queues and extra
 * arguments (NULL-terminated, at most 8), connects a front-end and writes
 * and reads back a pattern: it served I/O, so its main loop runs and the
 * sandbox (which precedes the loop) is in place.
 */
static struct vfe *serve(struct pu_daemon *d, const char *const *extra)
{
    g_autofree char *lun = NULL;
    const char *args[16] = { "--lun", NULL, "--queues", "2" };
    unsigned n = 4;
    struct vfe *fe;

    pu_daemon_init(d);
    d->capture_log = true;
    lun = make_lun(d, "d.img");
    args[1] = lun;
    for (; extra && *extra; extra++) {
        g_assert_cmpuint(n, <, G_N_ELEMENTS(args) - 1);
        args[n++] = *extra;
    }
    pu_daemon_start(d, args);
    fe = pu_connect(d, 2);
    pu_make_ready(fe, 0);
    rw(fe, 1);
    return fe;
}

/* SIGTERM still ends it cleanly, under whatever it confined itself with. */
static void finish(struct pu_daemon *d, struct vfe *fe)
{
    int status;

    vfe_close(fe);
    status = pu_daemon_stop(d, false);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    pu_daemon_cleanup(d);
}

static void test_seccomp_by_default(void)
{
    const char *extra[] = { "--threads", "2", NULL };
    struct pu_daemon d = { 0 };
    struct vfe *fe = serve(&d, extra);

    /* main, the notify watchdog and two I/O threads at least */
    g_assert_cmpuint(threads_all_have(d.proc.pid, "\nSeccomp:\t2\n"), >=, 4);
    threads_all_have(d.proc.pid, "\nNoNewPrivs:\t1\n");
    g_assert_cmpuint(pu_daemon_log_count(&d, 0, "sandbox: seccomp filter on every thread "
                                         "\\(base, files, uring, vhost-user\\)$"), ==, 1);
    finish(&d, fe);
}

static void test_live_operations_confined(void)
{
    g_autofree char *dir = g_dir_make_tmp("vhost-scsi-sandbox-XXXXXX", NULL);
    g_autofree char *ctl = g_build_filename(dir, "control.sock", NULL);
    g_autofree char *sock2 = g_build_filename(dir, "vm2.sock", NULL);
    g_autofree char *cfg = g_build_filename(dir, "saved.json", NULL);
    g_autofree char *img = g_build_filename(dir, "e.img", NULL);
    g_autofree char *lun1 = g_strdup_printf("0=file:%s,size=8M", img);
    const char *extra[] = { "--control", ctl, NULL };
    struct pu_daemon d = { 0 };
    struct vfe *fe, *fe2;
    int fd;

    g_assert_nonnull(dir);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    fe = serve(&d, extra);
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    /* A LUN file opened, a listening socket made, a file written and renamed, all confined. */
    json_node_unref(pu_ctl_ok(fd, "controller-add", pu_jobj("name", pu_jstr("vm2"), "socket",
                                                            pu_jstr(sock2), NULL)));
    json_node_unref(pu_ctl_ok(fd, "lun-add", pu_jobj("controller", pu_jstr("vm2"), "lun",
                                                     pu_jstr(lun1), NULL)));
    json_node_unref(pu_ctl_ok(fd, "config-save", pu_jobj("file", pu_jstr(cfg), NULL)));
    g_assert_true(g_file_test(cfg, G_FILE_TEST_IS_REGULAR));
    fe2 = pu_connect_at(sock2, 2);
    pu_make_ready(fe2, 0);
    rw(fe2, 2);
    rw(fe, 3);
    threads_all_have(d.proc.pid, "\nSeccomp:\t2\n");
    threads_all_have(d.proc.pid, "\nNoNewPrivs:\t1\n");
    g_assert_cmpuint(pu_daemon_log_count(&d, 0, "sandbox: seccomp filter on every thread "
                                         "\\(base, files, uring, vhost-user, control, net, "
                                         "rbd\\)$"), ==, 1);
    close(fd);
    vfe_close(fe2);
    finish(&d, fe);
    g_assert_true(g_remove(cfg) == 0 && g_remove(img) == 0 && g_rmdir(dir) == 0);
}

static void test_none(void)
{
    const char *extra[] = { "--sandbox", "none", NULL };
    struct pu_daemon d = { 0 };
    struct vfe *fe = serve(&d, extra);

    g_assert_cmpuint(threads_all_have(d.proc.pid, "\nSeccomp:\t0\n"), >=, 3);
    threads_all_have(d.proc.pid, "\nNoNewPrivs:\t0\n");
    g_assert_cmpuint(pu_daemon_log_count(&d, 0, "sandbox: none"), ==, 1);
    finish(&d, fe);
}

static void test_user(void)
{
    const char *extra[] = { "--sandbox-user", "65534", NULL };
    struct pu_daemon d = { 0 };
    struct vfe *fe;

    if (geteuid() != 0) {
        g_test_skip("--sandbox-user needs root");
        return;
    }
    /* The file is root's, mode 0644: only the fd opened before the drop can write it. */
    fe = serve(&d, extra);
    threads_all_have(d.proc.pid, "\nUid:\t65534\t65534\t65534\t65534\n");
    threads_all_have(d.proc.pid, "\nGroups:\t \n");
    threads_all_have(d.proc.pid, "\nCapEff:\t0000000000000000\n");
    threads_all_have(d.proc.pid, "\nSeccomp:\t2\n");
    rw(fe, 5);
    finish(&d, fe);
}

static void refused(const char *opt, const char *value)
{
    struct pu_daemon d = { 0 };
    const char *args[] = { opt, value, NULL };
    int status;

    pu_daemon_init(&d);
    g_assert_false(pu_daemon_try_start(&d, args, &status));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), !=, 0);
    pu_daemon_cleanup(&d);
}

static void test_refused(void)
{
    refused("--sandbox", "bogus");
    refused("--sandbox", "");
    refused("--sandbox-user", "no-such-user-vhost-scsi");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_assert_nonnull(g_getenv("VHOST_SCSI_TARGET"));
    g_test_add_func("/sandbox/seccomp-by-default", test_seccomp_by_default);
    g_test_add_func("/sandbox/live-operations-confined", test_live_operations_confined);
    g_test_add_func("/sandbox/none", test_none);
    g_test_add_func("/sandbox/user", test_user);
    g_test_add_func("/sandbox/refused", test_refused);
    return g_test_run();
}
