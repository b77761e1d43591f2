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
 *  - a bad --sandbox or an unknown user is refused before it listens;
 *  - no normal operation meets the filter (the daemon survives it, still
 *    serves I/O and has refused no call: no "sandbox: refused" line):
 *    every control method with every backend kind that runs here (file,
 *    file with direct, a block device on a loop device, ram, null; iSCSI
 *    and RBD are tests/iscsi's and tests/ceph's, which run confined too),
 *    controllers with every option (socket_group by name, by number, and
 *    a name /etc/group lacks, which must fail cleanly), the error paths
 *    (bad paths and specs), and SIGTERM with I/O in flight;
 *  - with the test hooks, 1000 calls the filter refuses (not dangerous
 *    ones) leave the daemon alive and serving, reported in a bounded
 *    number of "sandbox: refused" lines whose counts add up;
 *  - SIGHUP during I/O is logged and otherwise ignored: the daemon serves
 *    on and SIGTERM still ends it with status 0.
 * That a dangerous call kills the process rather than run, and that any
 * other refused call fails with ENOSYS and is logged, rate-limited, is
 * tests/unit/sandbox-test.c's, on the same filter.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"
#include "sandbox.h"
#include "test-hooks.h"

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

/* SIGTERM still ends it cleanly, under whatever it confined itself with, and nothing was refused. */
static void finish(struct pu_daemon *d, struct vfe *fe)
{
    int status;

    vfe_close(fe);
    status = pu_daemon_stop(d, false);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    /* What was refused is reported at exit at the latest: nothing was. */
    g_assert_cmpuint(pu_daemon_log_count(d, 0, "sandbox: refused"), ==, 0);
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

/* Alive, every thread confined, and no call refused since it started. */
static void still_confined(const struct pu_daemon *d)
{
    g_assert_true(pu_daemon_alive((struct pu_daemon *)d));
    threads_all_have(d->proc.pid, "\nSeccomp:\t2\n");
    g_assert_cmpuint(pu_daemon_log_count(d, 0, "sandbox: refused"), ==, 0);
}

static void ctl(int fd, const char *method, JsonNode *params)
{
    json_node_unref(pu_ctl_ok(fd, method, params));
}

static void rw_lun(struct vfe *fe, unsigned lun, uint64_t seed)
{
    const struct pu_rw_spec s = { .lun = lun, .queues = 2, .n_io = 16, .io_bytes = 4096,
                                  .seed = seed };

    pu_write_read_compare(fe, &s);
}

/* A daemon with --control and the default sandbox, serving LUN 0 to fe. */
struct confined {
    struct pu_daemon d;
    struct vfe *fe;
    char *dir;          /* holds the control socket */
    char *ctl_path;
    int ctl;
};

static void confined_start(struct confined *c)
{
    const char *extra[] = { "--control", NULL, "--threads", "2", NULL };

    c->dir = g_dir_make_tmp("vhost-scsi-sandbox-XXXXXX", NULL);
    g_assert_nonnull(c->dir);
    c->ctl_path = g_build_filename(c->dir, "control.sock", NULL);
    extra[1] = c->ctl_path;
    c->fe = serve(&c->d, extra);
    c->ctl = ctl_client_connect(c->ctl_path);
    g_assert_cmpint(c->ctl, >=, 0);
    still_confined(&c->d);
}

static void confined_cleanup(struct confined *c)
{
    g_unlink(c->ctl_path);
    g_assert_cmpint(g_rmdir(c->dir), ==, 0);
    g_free(c->ctl_path);
    g_free(c->dir);
}

static void confined_finish(struct confined *c)
{
    still_confined(&c->d);
    /* LUNs added and removed: REPORTED LUNS DATA HAS CHANGED first. */
    pu_make_ready(c->fe, 0);
    rw(c->fe, 99);
    close(c->ctl);
    finish(&c->d, c->fe);
    confined_cleanup(c);
}

/* A sparse file of size bytes in d's directory; its path (g_free). */
static char *image(const struct pu_daemon *d, const char *name, off_t size)
{
    char *img = g_build_filename(d->dir, name, NULL);
    int fd = open(img, O_CREAT | O_RDWR | O_CLOEXEC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, size), ==, 0);
    close(fd);
    return img;
}

static JsonNode *lun_param(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static JsonNode *lun_param(const char *fmt, ...)
{
    va_list ap;
    g_autofree char *spec = NULL;

    va_start(ap, fmt);
    spec = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return pu_jobj("lun", pu_jstr(spec), NULL);
}

static JsonNode *lun_at(unsigned lun)
{
    return pu_jobj("lun", pu_jint(lun), NULL);
}

/* Every control method on file, direct, ram and null LUNs, and their error paths. */
static void test_every_method_confined(void)
{
    struct confined c = { 0 };
    g_autofree char *f1 = NULL, *f2 = NULL, *f3 = NULL, *cfg = NULL, *spec5 = NULL;
    const char *lists[] = { "version", "lun-list", "backend-list", "controller-list",
                            "connection-list", "stats", "stats-prometheus" };

    confined_start(&c);
    f1 = image(&c.d, "f1.img", 16 << 20);
    f2 = image(&c.d, "f2.img", 16 << 20);
    f3 = image(&c.d, "f3.img", 16 << 20);
    cfg = g_build_filename(c.d.dir, "saved.json", NULL);
    ctl(c.ctl, "lun-add", lun_param("1=file:%s", f1));
    ctl(c.ctl, "lun-add", lun_param("2=file:%s,direct", f2));
    ctl(c.ctl, "lun-add", lun_param("3=ram:8M"));
    ctl(c.ctl, "lun-add", lun_param("4=null:8M"));
    spec5 = g_strdup_printf("file:%s,ro", f3);
    ctl(c.ctl, "backend-add", pu_jobj("name", pu_jstr("b5"), "spec", pu_jstr(spec5), NULL));
    ctl(c.ctl, "lun-map", pu_jobj("lun", pu_jint(5), "backend", pu_jstr("b5"), NULL));
    pu_make_ready(c.fe, 1);
    for (unsigned lun = 1; lun <= 3; lun++) {
        pu_make_ready(c.fe, lun);
        rw_lun(c.fe, lun, 10 + lun);
    }
    ctl(c.ctl, "lun-resize", pu_jobj("lun", pu_jint(1), "size", pu_jstr("32M"), NULL));
    ctl(c.ctl, "lun-resize", pu_jobj("lun", pu_jint(4), "size", pu_jstr("64M"), NULL));
    ctl(c.ctl, "backend-resize", pu_jobj("name", pu_jstr("lun0:1"), "size", pu_jstr("48M"), NULL));
    ctl(c.ctl, "qos-set", pu_jobj("backend", pu_jstr("lun0:1"), "iops", pu_jint(100000),
                                  "bandwidth", pu_jstr("100M"), NULL));
    pu_make_ready(c.fe, 1);     /* CAPACITY DATA HAS CHANGED */
    rw_lun(c.fe, 1, 21);
    for (size_t i = 0; i < G_N_ELEMENTS(lists); i++) {
        ctl(c.ctl, lists[i], NULL);
    }
    ctl(c.ctl, "stats", pu_jobj("backend", pu_jstr("lun0:1"), NULL));
    ctl(c.ctl, "config-save", pu_jobj("file", pu_jstr(cfg), NULL));
    still_confined(&c.d);

    /* Error paths: refused with a reason, nothing refused by the filter. */
    g_free(pu_ctl_fail(c.ctl, "lun-add", lun_param("6=file:%s/no-such.img", c.d.dir), ENOENT));
    g_free(pu_ctl_err(c.ctl, "lun-add", lun_param("6=bogus:x"), CTL_E_FAILED));
    g_free(pu_ctl_err(c.ctl, "lun-add", lun_param("6=file:"), CTL_E_FAILED));
    g_free(pu_ctl_fail(c.ctl, "lun-add", lun_param("6=file:%s", c.d.dir), EISDIR));
    g_free(pu_ctl_fail(c.ctl, "lun-resize", pu_jobj("lun", pu_jint(1), "size", pu_jstr("1M"),
                                                   NULL), EINVAL));
    g_free(pu_ctl_fail(c.ctl, "lun-resize", pu_jobj("lun", pu_jint(3), "size", pu_jstr("64M"),
                                                   NULL), EOPNOTSUPP));
    g_free(pu_ctl_fail(c.ctl, "backend-remove", pu_jobj("name", pu_jstr("b5"), NULL), EBUSY));
    g_free(pu_ctl_fail(c.ctl, "config-save",
                       pu_jobj("file", pu_jstr("/nonexistent-dir/x.json"), NULL), ENOENT));
    g_free(pu_ctl_fail(c.ctl, "controller-add",
                       pu_jobj("name", pu_jstr("vmx"), "socket", pu_jstr(f1), NULL), EEXIST));
    still_confined(&c.d);

    ctl(c.ctl, "lun-unmap", lun_at(5));
    ctl(c.ctl, "backend-remove", pu_jobj("name", pu_jstr("b5"), NULL));
    for (unsigned lun = 1; lun <= 4; lun++) {
        ctl(c.ctl, "lun-remove", lun_at(lun));
    }
    confined_finish(&c);
}

/* A JSON array of one id. */
static JsonNode *id_array(gint64 id)
{
    JsonArray *a = json_array_new();
    JsonNode *n = json_node_new(JSON_NODE_ARRAY);

    json_array_add_int_element(a, id);
    json_node_take_array(n, a);
    return n;
}

/* Round trips until connection-list shows only the default's, bounded by PU_TIMEOUT_MS. */
static void wait_one_connection(int fd)
{
    gint64 deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;

    for (;;) {
        g_autoptr(JsonNode) list = pu_ctl_ok(fd, "connection-list", NULL);

        if (json_array_get_length(json_node_get_array(list)) == 1) {
            return;
        }
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    }
}

/* Controllers with every option: socket_group by name and number, allowed peers. */
static void test_controllers_confined(void)
{
    struct confined c = { 0 };
    g_autofree char *s2 = NULL, *s3 = NULL, *s4 = NULL;
    struct vfe *fe2;

    confined_start(&c);
    s2 = g_build_filename(c.d.dir, "vm2.sock", NULL);
    s3 = g_build_filename(c.d.dir, "vm3.sock", NULL);
    s4 = g_build_filename(c.d.dir, "vm4.sock", NULL);
    ctl(c.ctl, "controller-add", pu_jobj("name", pu_jstr("vm2"), "socket", pu_jstr(s2),
                                         "queues", pu_jint(2), "socket_group", pu_jstr("root"),
                                         "allow_uid", id_array(getuid()),
                                         "allow_gid", id_array(getgid()),
                                         "initiator", pu_jstr("iqn.2026-12.org.test:vm2"),
                                         NULL));
    ctl(c.ctl, "controller-add", pu_jobj("name", pu_jstr("vm3"), "socket", pu_jstr(s3),
                                         "socket_group", pu_jstr("4321"), NULL));
    ctl(c.ctl, "lun-add", pu_jobj("controller", pu_jstr("vm2"), "lun",
                                  pu_jstr("0=ram:8M"), NULL));
    fe2 = pu_connect_at(s2, 2);
    pu_make_ready(fe2, 0);
    rw(fe2, 31);
    ctl(c.ctl, "controller-list", NULL);
    ctl(c.ctl, "connection-list", NULL);
    ctl(c.ctl, "stats", pu_jobj("controller", pu_jstr("vm2"), NULL));
    vfe_close(fe2);
    ctl(c.ctl, "lun-remove", pu_jobj("controller", pu_jstr("vm2"), "lun", pu_jint(0), NULL));
    /* Its disconnection is seen asynchronously: until then, removal is refused. */
    wait_one_connection(c.ctl);
    ctl(c.ctl, "controller-remove", pu_jobj("name", pu_jstr("vm2"), NULL));
    ctl(c.ctl, "controller-remove", pu_jobj("name", pu_jstr("vm3"), NULL));
    g_assert_false(g_file_test(s4, G_FILE_TEST_EXISTS));
    confined_finish(&c);
}

/*
 * A group name /etc/group lacks: refused with a reason, nothing added.
 * Looked up through NSS, its modules (systemd's, with "group: files
 * systemd") made calls the filter killed the daemon for.
 */
static void test_unknown_group_confined(void)
{
    struct confined c = { 0 };
    g_autofree char *s4 = NULL, *msg = NULL;

    confined_start(&c);
    s4 = g_build_filename(c.d.dir, "vm4.sock", NULL);
    msg = pu_ctl_fail(c.ctl, "controller-add",
                      pu_jobj("name", pu_jstr("vm4"), "socket", pu_jstr(s4), "socket_group",
                              pu_jstr("no-such-group-vhost-scsi"), NULL), EINVAL);
    g_assert_false(g_file_test(s4, G_FILE_TEST_EXISTS));
    confined_finish(&c);
}

/* Runs argv; its stdout, stripped, or NULL if it failed. */
static char *run_out(const char *const *argv)
{
    g_autofree char *out = NULL;
    int status;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, &out, NULL, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        return NULL;
    }
    return g_strdup(g_strstrip(out));
}

/*
 * A block device added live (docs/control.md's own example): its sizes
 * are asked with BLKGETSIZE64, BLKSSZGET and BLKPBSZGET under the filter,
 * and used; resized from the device; removed.
 */
static void test_block_device_confined(void)
{
    struct confined c = { 0 };
    g_autofree char *img = NULL, *dev = NULL;
    uint64_t blocks;
    uint32_t bsize;

    if (geteuid() != 0) {
        g_test_skip("a loop device needs root");
        return;
    }
    confined_start(&c);
    img = image(&c.d, "blk.img", 16 << 20);
    dev = run_out((const char *const[]){ "losetup", "-f", "--show", img, NULL });
    if (!dev) {
        g_test_skip("losetup -f --show failed: no loop device here");
        confined_finish(&c);
        return;
    }
    ctl(c.ctl, "lun-add", lun_param("1=file:%s", dev));
    pu_make_ready(c.fe, 1);
    pu_read_capacity16(c.fe, 1, &blocks, &bsize);
    g_assert_cmpuint(blocks * bsize, ==, 16 << 20);
    rw_lun(c.fe, 1, 41);
    ctl(c.ctl, "lun-resize", lun_at(1));
    ctl(c.ctl, "stats", NULL);
    ctl(c.ctl, "lun-remove", lun_at(1));
    g_free(run_out((const char *const[]){ "losetup", "-d", dev, NULL }));
    confined_finish(&c);
}

/* n 64 KiB writes to LUN 0 over both queues, all in flight (completions counted in b if not NULL). */
static void submit_writes(struct confined *c, struct vfe_req *reqs, unsigned n, struct pu_batch *b)
{
    for (unsigned i = 0; i < n; i++) {
        struct vfe_req *r = &reqs[i];

        memset(r, 0, sizeof(*r));
        vfe_lun(r->lun, 0, 0);
        r->queue = i % 2;
        r->data = vfe_alloc(c->fe, 64 << 10, 4096);
        r->data_len = 64 << 10;
        if (b) {
            r->complete = pu_batch_done;
            r->opaque = b;
        }
        pu_make_rw16(r, true, (uint64_t)i * 128, 128);
        g_assert_cmpint(vfe_submit(c->fe, r), ==, 0);
    }
    vfe_kick(c->fe);
}

/* SIGTERM with writes in flight ends it cleanly, still confined. */
static void test_term_during_io(void)
{
    struct confined c = { 0 };
    struct vfe_req reqs[32];
    int status;

    confined_start(&c);
    submit_writes(&c, reqs, G_N_ELEMENTS(reqs), NULL);
    still_confined(&c.d);
    status = pu_daemon_stop(&c.d, false);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpuint(pu_daemon_log_count(&c.d, 0, "sandbox: refused"), ==, 0);
    close(c.ctl);
    /* Closing talks to a peer that has gone: its warnings are expected here. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    vfe_close(c.fe);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL);
    pu_daemon_cleanup(&c.d);
    confined_cleanup(&c);
}

/*
 * SIGHUP (systemd's reload, a closed terminal) with writes in flight
 * neither ends it nor costs a request: it says once that there is nothing
 * to reload, completes the writes, serves on, still confined, and SIGTERM
 * still ends it with status 0.
 */
static void test_hup_during_io(void)
{
    struct confined c = { 0 };
    struct vfe_req reqs[32];
    struct pu_batch b = { 0 };
    size_t from;

    confined_start(&c);
    from = pu_daemon_log_size(&c.d);
    submit_writes(&c, reqs, G_N_ELEMENTS(reqs), &b);
    g_assert_cmpint(kill(c.d.proc.pid, SIGHUP), ==, 0);
    g_assert_cmpint(pu_daemon_log_wait(&c.d, from, "SIGHUP: nothing to reload", PU_TIMEOUT_MS),
                    ==, 0);
    pu_batch_wait(c.fe, &b, G_N_ELEMENTS(reqs), PU_TIMEOUT_MS);
    for (unsigned i = 0; i < G_N_ELEMENTS(reqs); i++) {
        g_assert_cmpuint(reqs[i].resp.response, ==, VIRTIO_SCSI_S_OK);
        g_assert_cmpuint(reqs[i].resp.status, ==, 0);
    }
    g_assert_cmpuint(pu_daemon_log_count(&c.d, from, "SIGHUP"), ==, 1);
    g_assert_cmpuint(pu_daemon_log_count(&c.d, from, "shutting down"), ==, 0);
    rw(c.fe, 77);
    /* Still there, confined, and SIGTERM ends it with 0. */
    confined_finish(&c);
}

#define REFUSED_CALLS 1000

/*
 * A call outside the filter's sets that is not a dangerous one fails with
 * ENOSYS and costs nothing else: with the test hook that makes each
 * `version` call also call getpgid, 1000 of them leave the daemon alive and
 * serving, and what it logs of them is a report at most every
 * SANDBOX_REPORT_INTERVAL_NS of the time they took (and one at exit), whose
 * counts add up to the 1000, each naming the call.
 */
static void test_refused_calls_reported(void)
{
    struct confined c = { 0 };
    g_autofree char *log = NULL;
    g_auto(GStrv) lines = NULL;
    unsigned reports = 0, total = 0, bound;
    int64_t t0, secs;
    int status;

    g_setenv("VHOST_SCSI_TEST_FAULT", "sandbox-refused-call", TRUE);
    confined_start(&c);
    g_unsetenv("VHOST_SCSI_TEST_FAULT");
    t0 = g_get_monotonic_time();
    for (unsigned i = 0; i < REFUSED_CALLS; i++) {
        ctl(c.ctl, "version", NULL);
    }
    g_assert_true(pu_daemon_alive(&c.d));
    threads_all_have(c.d.proc.pid, "\nSeccomp:\t2\n");
    rw(c.fe, 31);
    close(c.ctl);
    vfe_close(c.fe);
    /* What is still counted is reported at exit. */
    status = pu_daemon_stop(&c.d, false);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    secs = (g_get_monotonic_time() - t0) / G_USEC_PER_SEC + 1;
    log = pu_daemon_log_read(&c.d, 0, 16 << 20);
    lines = g_strsplit(log, "\n", -1);
    for (char **l = lines; *l; l++) {
        const char *at = strstr(*l, "sandbox: refused ");

        if (!at) {
            continue;
        }
        reports++;
        g_assert_nonnull(strstr(at, " (getpgid) "));
        total += (unsigned)g_ascii_strtoull(at + strlen("sandbox: refused "), NULL, 10);
    }
    bound = (unsigned)(secs * G_USEC_PER_SEC * 1000 / SANDBOX_REPORT_INTERVAL_NS) + 2;
    g_printerr("# %u refused calls in %" G_GINT64_FORMAT " s: %u report lines (at most %u), "
               "counting %u\n", REFUSED_CALLS, secs, reports, bound, total);
    g_assert_cmpuint(reports, >=, 1);
    g_assert_cmpuint(reports, <=, bound);
    g_assert_cmpuint(total, ==, REFUSED_CALLS);
    pu_daemon_cleanup(&c.d);
    confined_cleanup(&c);
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
    g_test_add_func("/sandbox/confined/every-method", test_every_method_confined);
    g_test_add_func("/sandbox/confined/controllers", test_controllers_confined);
    g_test_add_func("/sandbox/confined/unknown-group", test_unknown_group_confined);
    g_test_add_func("/sandbox/confined/block-device", test_block_device_confined);
    g_test_add_func("/sandbox/confined/term-during-io", test_term_during_io);
    g_test_add_func("/sandbox/confined/hup-during-io", test_hup_during_io);
    g_test_add_func("/sandbox/confined/refused-calls-reported",
                    TEST_HOOKED(test_refused_calls_reported));
    g_test_add_func("/sandbox/none", test_none);
    g_test_add_func("/sandbox/user", test_user);
    g_test_add_func("/sandbox/refused", test_refused);
    return g_test_run();
}
