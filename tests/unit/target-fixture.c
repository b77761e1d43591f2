/*
 * The in-process daemon of the daemon layer's tests (target-fixture.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "control-client.h"
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
    if (f->max_conns) {
        f->opts.max_conns = f->max_conns;
    }
    if (control) {
        f->opts.control_path = target_fixture_path(f, "ctl");
    }
    target_init(&f->tgt, &f->opts);
    g_assert_cmpint(target_start(&f->tgt, false, NULL), ==, 0);
    if (control) {
        g_autofree char *sock = target_fixture_path(f, "vs.sock");
        g_autoptr(GError) err = NULL;

        g_assert_cmpint(target_listen(&f->tgt, sock, -1, &err), ==, 0);
        g_assert_no_error(err);
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

/* A call is answered within this long, or the test fails. */
#define CALL_TIMEOUT_MS 30000

static JsonNode *params_of(const char *json)
{
    g_autoptr(GError) error = NULL;
    JsonNode *n;

    if (!json) {
        return NULL;
    }
    n = json_from_string(json, &error);
    g_assert_no_error(error);
    return n;
}

JsonNode *call_ok(struct target_client *c, const char *method, const char *params)
{
    g_autofree char *msg = NULL;
    JsonNode *result = NULL;
    int code = 0;
    int ret = ctl_client_call(c->fd, method, params_of(params), CALL_TIMEOUT_MS, &result, &code,
                              &msg);

    if (ret < 0) {
        g_error("%s %s: %d (%d %s)", method, params ? params : "", ret, code, msg);
    }
    return result;
}

void call_err(struct target_client *c, const char *method, const char *params, int want_code,
              const char *words)
{
    g_autofree char *msg = NULL;
    JsonNode *result = NULL;
    int code = 0;
    int ret = ctl_client_call(c->fd, method, params_of(params), CALL_TIMEOUT_MS, &result, &code,
                              &msg);

    if (ret == 0) {
        g_autofree char *s = result ? json_to_string(result, FALSE) : g_strdup("null");

        g_error("%s %s: answered %s", method, params ? params : "", s);
    }
    g_assert_cmpint(ret, ==, -EREMOTEIO);
    g_assert_cmpint(code, ==, want_code);
    if (!strstr(msg, words)) {
        g_error("%s %s: \"%s\" does not say \"%s\"", method, params ? params : "", msg, words);
    }
}

static gpointer client_thread(gpointer data)
{
    struct target_client *c = data;
    g_autofree char *path = target_fixture_path(c->f, "ctl");

    c->fd = ctl_client_connect(path);
    g_assert_cmpint(c->fd, >=, 0);
    c->script(c);
    close(c->fd);
    target_fixture_drain_soon(c->f);
    return NULL;
}

void target_client_run(unsigned max_conns, void (*script)(struct target_client *c))
{
    struct target_fixture f = { .max_conns = max_conns };
    struct target_client c = { .f = &f, .script = script, .fd = -1 };
    GThread *t;

    target_fixture_start(&f, true);
    t = g_thread_new("client", client_thread, &c);
    target_fixture_run(&f);
    g_thread_join(t);
    target_fixture_end(&f);
}

