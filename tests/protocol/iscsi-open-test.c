/*
 * Adding iSCSI LUNs live does not stop the daemon (docs/control.md): the
 * control socket's lun-add and backend-add open an iscsi:// backend off
 * the main thread and answer when the open ends.  Against the real daemon
 * and a silent portal (silent-portal.h: a listener that accepts and never
 * answers), no tgtd needed:
 *  - while a lun-add waits on the portal, other control calls are
 *    answered (before it), a second front-end connects and negotiates,
 *    and verified I/O runs on another LUN of a connected front-end;
 *  - the name and the address it reserves are refused to every other add
 *    and map (EBUSY, "still opening"), and nothing of it is listed;
 *  - the add fails with ETIMEDOUT after its login-timeout (12 s, more
 *    than libiscsi's 10 s task timeout), not before,
 *    the daemon closes its connection, and the name and address are free
 *    again; the same for backend-add (and backend-remove of the name);
 *  - a portal that refuses the connection fails the add at once;
 *  - at most 16 opens run at once: the 17th add is refused EAGAIN;
 *  - SIGTERM while an open waits ends the daemon promptly and cleanly
 *    (exit 0, under ASan without leaks), the pending call answered
 *    ECANCELED.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"
#include "silent-portal.h"

#define IQN "iqn.2026-12.org.vhost-scsi.test:silent"
/*
 * Long enough for every check made meanwhile, on a slow machine under ASan,
 * and beyond libiscsi's own 10 s task timeout, which must not cut a login
 * short of it.
 */
#define LOGIN_TIMEOUT_S 12

struct fx {
    struct pu_daemon d;
    char *ctl;
    struct silent_portal *portal;
    int fd;        /* the control client for calls answered at once */
};

static void fx_start(struct fx *x)
{
    pu_daemon_init(&x->d);
    x->ctl = g_build_filename(x->d.dir, "control.sock", NULL);
    {
        const char *args[] = { "--lun", "0=ram:16M", "--control", x->ctl, "--queues", "2",
                               NULL };

        pu_daemon_start(&x->d, args);
    }
    x->portal = silent_portal_start();
    x->fd = ctl_client_connect(x->ctl);
    g_assert_cmpint(x->fd, >=, 0);
}

/* Stops the daemon, which must exit 0 (under ASan: no leak, no error). */
static void fx_stop(struct fx *x)
{
    int status;

    close(x->fd);
    status = pu_daemon_stop(&x->d, false);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    silent_portal_stop(x->portal);
    pu_daemon_cleanup(&x->d);
    g_free(x->ctl);
}

static int ctl_connect(struct fx *x)
{
    int fd = ctl_client_connect(x->ctl);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

static char *silent_url(struct fx *x, unsigned timeout_s)
{
    return g_strdup_printf("iscsi://127.0.0.1:%d/%s/0,login-timeout=%u",
                           silent_portal_port(x->portal), IQN, timeout_s);
}

/* Whether backend-list shows a backend named name. */
static bool backend_listed(struct fx *x, const char *name)
{
    g_autoptr(JsonNode) r = pu_ctl_ok(x->fd, "backend-list", NULL);
    JsonArray *a = json_node_get_array(r);

    for (guint i = 0; i < json_array_get_length(a); i++) {
        if (!strcmp(json_object_get_string_member(json_array_get_object_element(a, i), "name"),
                    name)) {
            return true;
        }
    }
    return false;
}

static void assert_still_opening(char *msg)
{
    g_assert_nonnull(strstr(msg, "still opening"));
    g_free(msg);
}

static JsonNode *lun_params(const char *arg)
{
    return pu_jobj("lun", pu_jstr(arg), NULL);
}

static void test_lun_add_to_a_silent_portal(void)
{
    struct fx x;
    g_autofree char *url = NULL, *arg = NULL, *msg = NULL;
    struct pu_rw_spec rw = { .lun = 0, .queues = 1, .n_io = 32, .io_bytes = 4096, .seed = 7 };
    g_autoptr(JsonNode) answer = NULL;
    struct vfe *fe, *fe2;
    gint64 sent, took;
    int pending;

    fx_start(&x);
    fe = pu_connect(&x.d, 1);
    pu_make_ready(fe, 0);
    url = silent_url(&x, LOGIN_TIMEOUT_S);
    arg = g_strdup_printf("1=%s", url);
    pending = ctl_connect(&x);
    sent = g_get_monotonic_time();
    pu_ctl_send(pending, 1, "lun-add", lun_params(arg));
    g_assert_true(silent_portal_wait_accepted(x.portal, 1, PU_TIMEOUT_MS));

    /* The daemon is waiting on the portal: everything else goes on meanwhile. */
    json_node_unref(pu_ctl_ok(x.fd, "version", NULL));
    g_assert_false(pu_ctl_lun_listed(x.fd, 1));
    g_assert_false(backend_listed(&x, "lun0:1"));
    fe2 = pu_connect(&x.d, 1);
    pu_make_ready(fe2, 0);
    pu_write_read_compare(fe, &rw);
    /* ...all of it answered before the add, which only its timeout ends. */
    g_assert_false(pu_ctl_answer_waiting(pending));

    /* What it reserves, nobody else may have. */
    assert_still_opening(pu_ctl_fail(x.fd, "lun-add", lun_params(arg), EBUSY));
    assert_still_opening(pu_ctl_fail(x.fd, "lun-add", lun_params("1=ram:1M"), EBUSY));
    assert_still_opening(pu_ctl_fail(x.fd, "lun-map", pu_jobj("lun", pu_jint(1), "backend",
                                                              pu_jstr("lun0:0"), NULL), EBUSY));
    assert_still_opening(pu_ctl_fail(x.fd, "backend-add", pu_jobj("name", pu_jstr("lun0:1"),
                                                                  "spec", pu_jstr("ram:1M"),
                                                                  NULL), EBUSY));
    /* Other addresses are not held up. */
    json_node_unref(pu_ctl_ok(x.fd, "lun-add", lun_params("2=ram:1M")));
    g_assert_false(pu_ctl_answer_waiting(pending));

    /* The wait's bound only guards against a hang. */
    answer = pu_ctl_answer(pending, LOGIN_TIMEOUT_S * 1000 + 6 * PU_TIMEOUT_MS);
    took = g_get_monotonic_time() - sent;
    g_test_message("the add failed after %.1f s", took / 1e6);
    /*
     * A timeout ended the open (ETIMEDOUT), and not before the
     * login-timeout: libiscsi's 10 s task timeout did not cut it short.
     * That lower bound is the product's; how much later the answer comes
     * is the machine's load, so there is no upper one.
     */
    msg = pu_ctl_answer_failed(answer, 1, ETIMEDOUT);
    g_assert_nonnull(strstr(msg, "cannot open"));
    g_assert_cmpint(took, >=, LOGIN_TIMEOUT_S * G_USEC_PER_SEC);
    /* Nothing left: the connection closed, the name and the address free again. */
    g_assert_true(silent_portal_wait_closed(x.portal, 1, PU_TIMEOUT_MS));
    g_assert_false(pu_ctl_lun_listed(x.fd, 1));
    g_assert_false(backend_listed(&x, "lun0:1"));
    json_node_unref(pu_ctl_ok(x.fd, "lun-add", lun_params("1=ram:1M")));
    g_assert_true(pu_ctl_lun_listed(x.fd, 1));

    close(pending);
    vfe_close(fe2);
    vfe_close(fe);
    fx_stop(&x);
}

static void test_backend_add_to_a_silent_portal(void)
{
    struct fx x;
    g_autofree char *url = NULL, *msg = NULL;
    g_autoptr(JsonNode) answer = NULL;
    int pending;

    fx_start(&x);
    url = silent_url(&x, 2);
    pending = ctl_connect(&x);
    pu_ctl_send(pending, 7, "backend-add",
                pu_jobj("name", pu_jstr("remote"), "spec", pu_jstr(url), NULL));
    g_assert_true(silent_portal_wait_accepted(x.portal, 1, PU_TIMEOUT_MS));

    assert_still_opening(pu_ctl_fail(x.fd, "backend-add", pu_jobj("name", pu_jstr("remote"),
                                                                  "spec", pu_jstr(url), NULL),
                                     EBUSY));
    assert_still_opening(pu_ctl_fail(x.fd, "backend-remove",
                                     pu_jobj("name", pu_jstr("remote"), NULL), EBUSY));
    g_assert_false(backend_listed(&x, "remote"));
    /* Not mapped, and not mappable until it is there. */
    g_free(pu_ctl_fail(x.fd, "lun-map", pu_jobj("lun", pu_jint(1), "backend",
                                                pu_jstr("remote"), NULL), ENOENT));
    g_assert_false(pu_ctl_answer_waiting(pending));

    answer = pu_ctl_answer(pending, 2000 + 6 * PU_TIMEOUT_MS);   /* against a hang only */
    msg = pu_ctl_answer_failed(answer, 7, ETIMEDOUT);
    g_assert_true(silent_portal_wait_closed(x.portal, 1, PU_TIMEOUT_MS));
    g_assert_false(backend_listed(&x, "remote"));
    json_node_unref(pu_ctl_ok(x.fd, "backend-add",
                              pu_jobj("name", pu_jstr("remote"), "spec", pu_jstr("null:1M"),
                                      NULL)));
    g_assert_true(backend_listed(&x, "remote"));

    close(pending);
    fx_stop(&x);
}

static void test_refused_connection_fails_at_once(void)
{
    struct fx x;
    g_autofree char *arg = NULL, *msg = NULL;

    fx_start(&x);
    arg = g_strdup_printf("1=iscsi://127.0.0.1:%d/%s/0,login-timeout=60", pu_free_tcp_port(), IQN);
    /*
     * A refusal ends the open: the answer says ECONNREFUSED, where the 60 s
     * login-timeout would say ETIMEDOUT (and come after pu_ctl_fail's wait).
     */
    msg = pu_ctl_fail(x.fd, "lun-add", lun_params(arg), ECONNREFUSED);
    g_assert_nonnull(strstr(msg, "cannot open"));
    g_assert_false(pu_ctl_lun_listed(x.fd, 1));
    g_assert_false(backend_listed(&x, "lun0:1"));
    json_node_unref(pu_ctl_ok(x.fd, "lun-add", lun_params("1=ram:1M")));
    fx_stop(&x);
}

/* Past 16 opens at once an add is refused (EAGAIN) rather than start one more thread. */
static void test_opens_at_once_are_bounded(void)
{
    struct fx x;
    g_autofree char *url = NULL, *msg = NULL;
    int pending;

    fx_start(&x);
    url = silent_url(&x, 2);
    pending = ctl_connect(&x);
    for (unsigned i = 0; i < 16; i++) {
        g_autofree char *name = g_strdup_printf("r%u", i);

        pu_ctl_send(pending, 100 + i, "backend-add",
                    pu_jobj("name", pu_jstr(name), "spec", pu_jstr(url), NULL));
    }
    g_assert_true(silent_portal_wait_accepted(x.portal, 16, PU_TIMEOUT_MS));
    msg = pu_ctl_fail(x.fd, "backend-add", pu_jobj("name", pu_jstr("r16"), "spec",
                                                   pu_jstr(url), NULL), EAGAIN);
    g_assert_nonnull(strstr(msg, "opening already"));
    for (unsigned i = 0; i < 16; i++) {
        g_autoptr(JsonNode) answer = pu_ctl_answer(pending, PU_TIMEOUT_MS);
        gint64 id;

        g_assert_nonnull(answer);
        id = json_object_get_int_member(json_node_get_object(answer), "id");
        g_assert_cmpint(id, >=, 100);
        g_assert_cmpint(id, <, 116);
        g_free(pu_ctl_answer_failed(answer, id, ETIMEDOUT));
    }
    g_assert_true(silent_portal_wait_closed(x.portal, 16, PU_TIMEOUT_MS));
    json_node_unref(pu_ctl_ok(x.fd, "backend-add", pu_jobj("name", pu_jstr("r16"), "spec",
                                                           pu_jstr("null:1M"), NULL)));
    close(pending);
    fx_stop(&x);
}

static void test_sigterm_while_opening(void)
{
    struct fx x;
    g_autofree char *url = NULL, *arg = NULL, *msg = NULL;
    g_autoptr(JsonNode) answer = NULL;
    gint64 start;
    int pending, status;

    fx_start(&x);
    /* A timeout far beyond the test's: only the shutdown can end this open. */
    url = silent_url(&x, 300);
    arg = g_strdup_printf("3=%s", url);
    pending = ctl_connect(&x);
    pu_ctl_send(pending, 9, "lun-add", lun_params(arg));
    g_assert_true(silent_portal_wait_accepted(x.portal, 1, PU_TIMEOUT_MS));

    start = g_get_monotonic_time();
    close(x.fd);
    x.fd = -1;
    status = pu_daemon_stop(&x.d, false);
    g_test_message("the daemon exited %.1f s after SIGTERM",
                   (g_get_monotonic_time() - start) / 1e6);
    /* pu_daemon_stop SIGKILLs after PU_TIMEOUT_MS: a clean exit came before. */
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    answer = pu_ctl_answer(pending, PU_TIMEOUT_MS);
    msg = pu_ctl_answer_failed(answer, 9, ECANCELED);
    g_assert_nonnull(strstr(msg, "shutting down"));
    /* Then the socket closes. */
    g_assert_null(pu_ctl_answer(pending, PU_TIMEOUT_MS));
    g_assert_true(silent_portal_wait_closed(x.portal, 1, PU_TIMEOUT_MS));

    close(pending);
    silent_portal_stop(x.portal);
    pu_daemon_cleanup(&x.d);
    g_free(x.ctl);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_assert_nonnull(g_getenv("VHOST_SCSI_TARGET"));
    g_test_add_func("/iscsi-open/lun-add-to-a-silent-portal", test_lun_add_to_a_silent_portal);
    g_test_add_func("/iscsi-open/backend-add-to-a-silent-portal",
                    test_backend_add_to_a_silent_portal);
    g_test_add_func("/iscsi-open/refused-connection-fails-at-once",
                    test_refused_connection_fails_at_once);
    g_test_add_func("/iscsi-open/opens-at-once-are-bounded", test_opens_at_once_are_bounded);
    g_test_add_func("/iscsi-open/sigterm-while-opening", test_sigterm_while_opening);
    return g_test_run();
}
