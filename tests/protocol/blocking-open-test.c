/*
 * The main thread never waits on a file system (docs/security.md, "The
 * main thread never waits"), against the real daemon: a `lun-add` of a
 * FIFO read-only (nobody writes it, so its open() waits for ever, as an
 * NFS hard mount or a stuck FUSE file would) does not stop the daemon
 * from serving:
 *  - while the open waits, another control client is answered (version,
 *    stats, lun-list), a new vhost-user front-end gets its GET_FEATURES
 *    reply, and SIGTERM ends the daemon promptly (exit 0, the add answered
 *    -ECANCELED);
 *  - the add itself is answered -ETIMEDOUT at --control-timeout-ms, its
 *    address is free again, and when the open does return later its
 *    result is discarded;
 *  - with no timeout, the add completes when the FIFO's other end opens
 *    (refused then: a FIFO is no disk);
 *  - every piece of work that runs off the main thread (a file's open, a
 *    resize with and without a size, config-save, the close of a removed
 *    LUN) does so under the daemon's seccomp filter, which the job
 *    threads inherit: each is answered and the daemon exits 0.
 *  - a controller-add whose socket work waits (VHOST_SCSI_TEST_FAULT=
 *    listen-hold, a test hook) does not stop the daemon either: others are
 *    served, its name and socket are taken meanwhile, it is answered when
 *    the work ends or at --control-timeout-ms (the socket made later is
 *    removed); a controller-remove's unlink of its socket file likewise,
 *    and one given up spares a newer controller's socket at its path.
 * Each wait is on an event (a thread of the daemon found waiting in the
 * FIFO's open, an answer, the process's exit) and bounded.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "proto-util.h"
#include "raw-vu.h"
#include "test-hooks.h"

struct fx {
    struct pu_daemon d;
    char *ctl, *fifo, *arg;
    int fd;                 /* a control client */
    int pending;            /* the control client whose lun-add waits */
};

static void fx_start(struct fx *x, const char *timeout_ms)
{
    memset(x, 0, sizeof(*x));
    pu_daemon_init(&x->d);
    x->d.capture_log = true;
    x->ctl = g_build_filename(x->d.dir, "control.sock", NULL);
    x->fifo = g_build_filename(x->d.dir, "fifo", NULL);
    x->arg = g_strdup_printf("5=file:%s,ro", x->fifo);
    g_assert_cmpint(mkfifo(x->fifo, 0600), ==, 0);
    {
        const char *args[] = { "--lun", "0=ram:1M", "--control", x->ctl, "--queues", "1",
                               "--control-timeout-ms", timeout_ms, NULL };

        pu_daemon_start(&x->d, args);
    }
    x->fd = ctl_client_connect(x->ctl);
    x->pending = ctl_client_connect(x->ctl);
    g_assert_cmpint(x->fd, >=, 0);
    g_assert_cmpint(x->pending, >=, 0);
}

static void fx_free(struct fx *x)
{
    close(x->fd);
    close(x->pending);
    pu_daemon_cleanup(&x->d);
    g_free(x->ctl);
    g_free(x->fifo);
    g_free(x->arg);
}

/*
 * Sends the lun-add of the FIFO and waits until the daemon waits in its
 * open; unless it may time out meanwhile, the add must not be answered.
 */
static void add_the_fifo(struct fx *x, bool may_time_out)
{
    int64_t deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * 1000ll;

    pu_ctl_send(x->pending, 1, "lun-add", pu_jobj("lun", pu_jstr(x->arg), NULL));
    while (!pu_proc_in_fifo_open(x->d.proc.pid)) {
        struct pollfd p = { .fd = x->pending, .events = POLLIN };

        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        /* An early answer would mean it never waited: fail on it, not on the deadline. */
        g_assert_cmpint(poll(&p, may_time_out ? 0 : 1, 1), ==, 0);
    }
}

/* Opens the FIFO's writing end, which ends the daemon's open. */
static int open_other_end(struct fx *x)
{
    /* A reader waits in open(): a non-blocking writer's open succeeds at once. */
    int w = open(x->fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

    g_assert_cmpint(w, >=, 0);
    return w;
}

static void test_others_served_meanwhile(void)
{
    struct fx x;
    int sock, status;
    uint64_t features = 0;

    fx_start(&x, "0");          /* no timeout: only the open's end or a stop answers it */
    add_the_fifo(&x, false);

    /* Other control clients, new and old... */
    json_node_unref(pu_ctl_ok(x.fd, "version", NULL));
    json_node_unref(pu_ctl_ok(x.fd, "stats", NULL));
    g_assert_true(pu_ctl_lun_listed(x.fd, 0));
    g_assert_false(pu_ctl_lun_listed(x.fd, 5));
    /* ...and a new front-end are served. */
    sock = rv_connect(x.d.sock, PU_TIMEOUT_MS);
    g_assert_cmpint(sock, >=, 0);
    g_assert_cmpint(rv_get_u64(sock, VHOST_USER_GET_FEATURES, PU_TIMEOUT_MS, &features), ==, 0);
    g_assert_cmphex(features & (1ull << VHOST_USER_F_PROTOCOL_FEATURES), !=, 0);
    close(sock);
    g_assert_false(pu_ctl_answer_waiting(x.pending));
    g_assert_true(pu_proc_in_fifo_open(x.d.proc.pid));

    /* SIGTERM: the add is answered, the daemon exits at once and cleanly. */
    g_assert_cmpint(kill(x.d.proc.pid, SIGTERM), ==, 0);
    {
        g_autoptr(JsonNode) answer = pu_ctl_answer(x.pending, PU_TIMEOUT_MS);

        g_assert_nonnull(answer);
        g_free(pu_ctl_answer_failed(answer, 1, ECANCELED));
    }
    g_assert_true(pu_proc_exited(&x.d.proc, PU_TIMEOUT_MS));
    status = pu_daemon_stop(&x.d, false);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    fx_free(&x);
}

static void test_answered_at_its_timeout(void)
{
    struct fx x;
    g_autofree char *msg = NULL;
    size_t from;
    int w;

    fx_start(&x, "300");
    add_the_fifo(&x, true);
    {
        g_autoptr(JsonNode) answer = pu_ctl_answer(x.pending, PU_TIMEOUT_MS);

        g_assert_nonnull(answer);
        msg = pu_ctl_answer_failed(answer, 1, ETIMEDOUT);
    }
    g_assert_nonnull(strstr(msg, x.fifo));
    g_assert_nonnull(strstr(msg, "--control-timeout-ms"));
    /* The address is free again, though the thread still waits. */
    g_assert_true(pu_proc_in_fifo_open(x.d.proc.pid));
    g_assert_false(pu_ctl_lun_listed(x.fd, 5));
    json_node_unref(pu_ctl_ok(x.fd, "lun-add", pu_jobj("lun", pu_jstr("5=ram:1M"), NULL)));
    g_assert_true(pu_ctl_lun_listed(x.fd, 5));

    /* The open returns at last: its result goes, nothing of it is served. */
    from = 0;
    w = open_other_end(&x);
    g_assert_cmpint(pu_daemon_log_wait(&x.d, from, "opening: finished after it was given up",
                                       PU_TIMEOUT_MS), ==, 0);
    close(w);
    g_assert_true(pu_ctl_lun_listed(x.fd, 5));
    json_node_unref(pu_ctl_ok(x.fd, "version", NULL));
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);
    fx_free(&x);
}

static void test_completes_when_it_opens(void)
{
    struct fx x;
    g_autofree char *msg = NULL;
    int w;

    fx_start(&x, "0");
    add_the_fifo(&x, false);
    w = open_other_end(&x);
    {
        g_autoptr(JsonNode) answer = pu_ctl_answer(x.pending, PU_TIMEOUT_MS);

        g_assert_nonnull(answer);
        msg = pu_ctl_answer_failed(answer, 1, EINVAL);
    }
    close(w);
    g_assert_nonnull(strstr(msg, x.fifo));
    g_assert_false(pu_ctl_lun_listed(x.fd, 5));
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);
    fx_free(&x);
}

static void test_jobs_run_confined(void)
{
    struct fx x;
    g_autofree char *img = NULL, *arg = NULL, *cfg = NULL;
    g_autoptr(JsonNode) grown = NULL;
    JsonNode *r;

    fx_start(&x, "10000");
    img = g_build_filename(x.d.dir, "disk.img", NULL);
    cfg = g_build_filename(x.d.dir, "saved.json", NULL);
    arg = g_strdup_printf("1=file:%s,size=1M", img);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    json_node_unref(pu_ctl_ok(x.fd, "lun-add", pu_jobj("lun", pu_jstr(arg), NULL)));
    grown = pu_ctl_ok(x.fd, "lun-resize", pu_jobj("lun", pu_jint(1), "size", pu_jstr("2M"),
                                                  NULL));
    g_assert_cmpint(json_object_get_int_member(json_node_get_object(grown), "size"), ==,
                    2 << 20);
    g_assert_cmpint(truncate(img, 3 << 20), ==, 0);
    json_node_unref(pu_ctl_ok(x.fd, "backend-resize", pu_jobj("name", pu_jstr("lun0:1"),
                                                               NULL)));
    json_node_unref(pu_ctl_ok(x.fd, "config-save", pu_jobj("file", pu_jstr(cfg), NULL)));
    g_assert_true(g_file_test(cfg, G_FILE_TEST_IS_REGULAR));
    r = pu_ctl_ok(x.fd, "lun-remove", pu_jobj("lun", pu_jint(1), NULL));
    g_assert_true(JSON_NODE_HOLDS_NULL(r));
    json_node_unref(r);
    g_assert_false(pu_ctl_lun_listed(x.fd, 1));
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);
    fx_free(&x);
}

/*
 * controller-add's socket work (the stale socket's check, bind, the
 * group's look-up, chown, chmod) waits on the file system holding the
 * socket's path.  A socket directory that blocks needs a stuck mount,
 * which a test cannot make without root: the test hook
 * VHOST_SCSI_TEST_FAULT=listen-hold makes that work wait in the open of
 * the FIFO SOCKET.hold first, wherever it runs.  On the main thread that
 * wait would stop the daemon; in the add's job, it does not.
 */
struct held_add {
    struct fx x;
    char *sock, *hold;
};

static void held_add_start(struct held_add *h, const char *timeout_ms)
{
    g_autofree char *gid = NULL;

    g_setenv("VHOST_SCSI_TEST_FAULT", "listen-hold", TRUE);
    fx_start(&h->x, timeout_ms);
    g_unsetenv("VHOST_SCSI_TEST_FAULT");
    h->sock = g_build_filename(h->x.d.dir, "vm2.sock", NULL);
    h->hold = g_strconcat(h->sock, ".hold", NULL);
    g_assert_cmpint(mkfifo(h->hold, 0600), ==, 0);
    /* add_the_fifo's wait, for the hold FIFO: the same kind of open. */
    g_free(h->x.fifo);
    h->x.fifo = g_strdup(h->hold);
    gid = g_strdup_printf("%u", (unsigned)getgid());
    pu_ctl_send(h->x.pending, 1, "controller-add",
                pu_jobj("name", pu_jstr("vm2"), "socket", pu_jstr(h->sock), "socket_group",
                        pu_jstr(gid), NULL));
}

/* Until a thread of the daemon waits in the hold FIFO's open; the add not answered meanwhile. */
static void held_add_wait(struct held_add *h, bool may_time_out)
{
    int64_t deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * 1000ll;

    while (!pu_proc_in_fifo_open(h->x.d.proc.pid)) {
        struct pollfd p = { .fd = h->x.pending, .events = POLLIN };

        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_assert_cmpint(poll(&p, may_time_out ? 0 : 1, 1), ==, 0);
    }
}

static void held_add_free(struct held_add *h)
{
    g_free(h->sock);
    g_free(h->hold);
    fx_free(&h->x);
}

/* The next answer on fd is a success. */
static void answered_ok(int fd)
{
    g_autoptr(JsonNode) answer = pu_ctl_answer(fd, PU_TIMEOUT_MS);

    g_assert_nonnull(answer);
    g_assert_true(json_object_has_member(json_node_get_object(answer), "result"));
}

/* While the work waits, another add at its socket is refused, and the held request waits. */
static void socket_taken(struct held_add *h)
{
    g_free(pu_ctl_fail(h->x.fd, "controller-add", pu_jobj("name", pu_jstr("vm3"), "socket",
                                                           pu_jstr(h->sock), NULL), EADDRINUSE));
    g_assert_false(pu_ctl_answer_waiting(h->x.pending));
}

/* The wait ends: the held request succeeds. */
static void release(struct held_add *h)
{
    int w = open_other_end(&h->x);

    answered_ok(h->x.pending);
    close(w);
}

static bool controller_listed(int fd, const char *name)
{
    g_autoptr(JsonNode) list = pu_ctl_ok(fd, "controller-list", NULL);
    JsonArray *a = json_node_get_array(list);

    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *o = json_array_get_object_element(a, i);

        if (!strcmp(json_object_get_string_member(o, "name"), name)) {
            return true;
        }
    }
    return false;
}

static void test_controller_add_served_meanwhile(void)
{
    struct held_add h;
    uint64_t features = 0;
    struct stat st;
    int sock;

    if (test_hooks_missing()) {
        return;
    }
    held_add_start(&h, "0");
    held_add_wait(&h, false);
    /* Other control clients and a new front-end are served while it waits... */
    json_node_unref(pu_ctl_ok(h.x.fd, "version", NULL));
    g_assert_false(controller_listed(h.x.fd, "vm2"));
    sock = rv_connect(h.x.d.sock, PU_TIMEOUT_MS);
    g_assert_cmpint(sock, >=, 0);
    g_assert_cmpint(rv_get_u64(sock, VHOST_USER_GET_FEATURES, PU_TIMEOUT_MS, &features), ==, 0);
    close(sock);
    /* ...and a second add of the same name or socket is refused, not queued behind it. */
    g_free(pu_ctl_fail(h.x.fd, "controller-add", pu_jobj("name", pu_jstr("vm2"), "socket",
                                                          pu_jstr("/nonexistent/x.sock"), NULL),
                       EEXIST));
    socket_taken(&h);

    /* The wait ends: the add is answered then, the socket listens, 0660 and the group's. */
    release(&h);
    g_assert_true(controller_listed(h.x.fd, "vm2"));
    g_assert_cmpint(stat(h.sock, &st), ==, 0);
    g_assert_true(S_ISSOCK(st.st_mode));
    g_assert_cmpuint(st.st_mode & 0777, ==, 0660);
    g_assert_cmpuint(st.st_gid, ==, getgid());
    sock = rv_connect(h.sock, PU_TIMEOUT_MS);
    g_assert_cmpint(sock, >=, 0);
    g_assert_cmpint(rv_get_u64(sock, VHOST_USER_GET_FEATURES, PU_TIMEOUT_MS, &features), ==, 0);
    close(sock);
    g_assert_cmpint(pu_daemon_stop(&h.x.d, false), ==, 0);
    held_add_free(&h);
}

static void test_controller_add_times_out(void)
{
    struct held_add h;
    g_autofree char *msg = NULL;
    int w;

    if (test_hooks_missing()) {
        return;
    }
    held_add_start(&h, "300");
    held_add_wait(&h, true);
    {
        g_autoptr(JsonNode) answer = pu_ctl_answer(h.x.pending, PU_TIMEOUT_MS);

        g_assert_nonnull(answer);
        msg = pu_ctl_answer_failed(answer, 1, ETIMEDOUT);
    }
    g_assert_nonnull(strstr(msg, "--control-timeout-ms"));
    g_assert_false(controller_listed(h.x.fd, "vm2"));
    /* The thread goes on and makes its socket at last: nobody's, it is removed. */
    w = open_other_end(&h.x);
    g_assert_cmpint(pu_daemon_log_wait(&h.x.d, 0, "controller-add: finished after it was "
                                       "given up", PU_TIMEOUT_MS), ==, 0);
    close(w);
    g_assert_false(g_file_test(h.sock, G_FILE_TEST_EXISTS));
    g_assert_false(controller_listed(h.x.fd, "vm2"));
    /* The name and the socket are free again (and nothing holds the work any more). */
    g_assert_cmpint(unlink(h.hold), ==, 0);
    json_node_unref(pu_ctl_ok(h.x.fd, "controller-add", pu_jobj("name", pu_jstr("vm2"), "socket",
                                                                 pu_jstr(h.sock), NULL)));
    g_assert_cmpint(pu_daemon_stop(&h.x.d, false), ==, 0);
    held_add_free(&h);
}

/* controller-remove: the controller goes at once, its socket file off the main thread. */
static void test_controller_remove_served_meanwhile(void)
{
    struct held_add h;

    if (test_hooks_missing()) {
        return;
    }
    held_add_start(&h, "0");
    held_add_wait(&h, false);
    release(&h);
    g_assert_true(controller_listed(h.x.fd, "vm2"));

    /* The removal's unlink waits in its turn. */
    pu_ctl_send(h.x.pending, 2, "controller-remove", pu_jobj("name", pu_jstr("vm2"), NULL));
    held_add_wait(&h, false);
    json_node_unref(pu_ctl_ok(h.x.fd, "version", NULL));
    g_assert_false(controller_listed(h.x.fd, "vm2"));
    /* Its path stays taken until the file is gone: no add can race the unlink. */
    socket_taken(&h);
    release(&h);
    g_assert_false(g_file_test(h.sock, G_FILE_TEST_EXISTS));
    g_assert_cmpint(pu_daemon_stop(&h.x.d, false), ==, 0);
    held_add_free(&h);
}

/*
 * A controller-remove given up at --control-timeout-ms frees its path at
 * once; when its unlink does come, it must not take the socket a newer
 * controller made there meanwhile, only the file the removed one made.
 */
static void test_controller_remove_late_spares_newer(void)
{
    struct held_add h = { 0 };
    g_autofree char *held = NULL;
    g_autofree char *msg = NULL;
    int64_t deadline = g_get_monotonic_time() + PU_TIMEOUT_MS * 1000ll;
    uint64_t features = 0;
    int w, sock;

    if (test_hooks_missing()) {
        return;
    }
    g_setenv("VHOST_SCSI_TEST_FAULT", "listen-hold", TRUE);
    fx_start(&h.x, "300");
    g_unsetenv("VHOST_SCSI_TEST_FAULT");
    h.sock = g_build_filename(h.x.d.dir, "vm2.sock", NULL);
    h.hold = g_strconcat(h.sock, ".hold", NULL);
    /* No hold FIFO yet: vm2's socket is made at once. */
    json_node_unref(pu_ctl_ok(h.x.fd, "controller-add", pu_jobj("name", pu_jstr("vm2"), "socket",
                                                                 pu_jstr(h.sock), NULL)));
    g_assert_cmpint(mkfifo(h.hold, 0600), ==, 0);
    pu_ctl_send(h.x.pending, 2, "controller-remove", pu_jobj("name", pu_jstr("vm2"), NULL));
    /* Its unlink waits in the hold FIFO's open; the removal is answered at its timeout. */
    while (!pu_proc_in_fifo_open(h.x.d.proc.pid)) {
        struct pollfd p = { .fd = -1 };

        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        poll(&p, 1, 1);
    }
    {
        g_autoptr(JsonNode) answer = pu_ctl_answer(h.x.pending, PU_TIMEOUT_MS);

        g_assert_nonnull(answer);
        msg = pu_ctl_answer_failed(answer, 2, ETIMEDOUT);
    }
    g_assert_nonnull(strstr(msg, "not within --control-timeout-ms"));
    /* A second name keeps the FIFO the unlink waits in; a new add is not held. */
    held = g_strconcat(h.hold, "2", NULL);
    g_assert_cmpint(link(h.hold, held), ==, 0);
    g_assert_cmpint(unlink(h.hold), ==, 0);
    json_node_unref(pu_ctl_ok(h.x.fd, "controller-add", pu_jobj("name", pu_jstr("vm3"), "socket",
                                                                 pu_jstr(h.sock), NULL)));
    /* The given-up unlink comes at last... */
    w = open(held, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    g_assert_cmpint(w, >=, 0);
    g_assert_cmpint(pu_daemon_log_wait(&h.x.d, 0, "controller-remove: finished after it was "
                                       "given up", PU_TIMEOUT_MS), ==, 0);
    close(w);
    /* ...and vm3 still listens at the path. */
    sock = rv_connect(h.sock, PU_TIMEOUT_MS);
    g_assert_cmpint(sock, >=, 0);
    g_assert_cmpint(rv_get_u64(sock, VHOST_USER_GET_FEATURES, PU_TIMEOUT_MS, &features), ==, 0);
    close(sock);
    g_assert_cmpint(pu_daemon_stop(&h.x.d, false), ==, 0);
    g_assert_cmpint(unlink(held), ==, 0);
    held_add_free(&h);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/blocking-open/others-served-meanwhile", test_others_served_meanwhile);
    g_test_add_func("/blocking-open/answered-at-its-timeout", test_answered_at_its_timeout);
    g_test_add_func("/blocking-open/completes-when-it-opens", test_completes_when_it_opens);
    g_test_add_func("/blocking-open/jobs-run-confined", test_jobs_run_confined);
    g_test_add_func("/blocking-open/controller-add-served-meanwhile",
                    test_controller_add_served_meanwhile);
    g_test_add_func("/blocking-open/controller-add-times-out", test_controller_add_times_out);
    g_test_add_func("/blocking-open/controller-remove-served-meanwhile",
                    test_controller_remove_served_meanwhile);
    g_test_add_func("/blocking-open/controller-remove-late-spares-newer",
                    test_controller_remove_late_spares_newer);
    return g_test_run();
}
