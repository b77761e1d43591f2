/*
 * One backing object, one LUN (docs/control.md, "backend-add"), against
 * the real daemon: a file already served by a backend cannot back another,
 * whether it is named by the same path, a symlink or a hard link:
 *  - on the command line (--lun 0=file:X --lun 1=file:...), or in a
 *    --config file, the daemon refuses to start, naming both backends and
 *    the file;
 *  - through the control socket (lun-add, backend-add) the add is refused
 *    -EEXIST with that message and nothing is added; the explicit way to
 *    share, one backend mapped at two addresses (lun-map), still works;
 *  - two backends can never share one reservations file: with --pr-dir,
 *    the names "a/b" and "a_b" would both give a_b.pr: the second is
 *    refused;
 *  - after an APTPL registration through LUN 0 (its state file beside the
 *    image), a restart with the same command line serves it again, the
 *    registration restored.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
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

#define KEY 0xa0a0a0a0a0a0a0a0ull
#define APTPL 0x01

struct fx {
    struct pu_daemon d;
    char *img, *sym, *hard, *ctl;
    char *lun0;
};

static void fx_init(struct fx *x)
{
    int fd;

    memset(x, 0, sizeof(*x));
    pu_daemon_init(&x->d);
    x->d.capture_log = true;
    x->img = g_build_filename(x->d.dir, "disk.img", NULL);
    x->sym = g_build_filename(x->d.dir, "sym.img", NULL);
    x->hard = g_build_filename(x->d.dir, "hard.img", NULL);
    x->ctl = g_build_filename(x->d.dir, "control.sock", NULL);
    x->lun0 = g_strdup_printf("0=file:%s", x->img);
    fd = open(x->img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 1 << 20), ==, 0);
    close(fd);
    g_assert_cmpint(symlink(x->img, x->sym), ==, 0);
    g_assert_cmpint(link(x->img, x->hard), ==, 0);
}

static void fx_free(struct fx *x)
{
    pu_daemon_cleanup(&x->d);
    g_free(x->img);
    g_free(x->sym);
    g_free(x->hard);
    g_free(x->ctl);
    g_free(x->lun0);
}

/* A refusal's message names the new backend, the one serving the file, and the path. */
static void assert_names_both(const char *msg, const char *added, const char *path)
{
    g_assert_nonnull(msg);
    g_assert_nonnull(strstr(msg, added));
    g_assert_nonnull(strstr(msg, "backend lun0:0"));
    g_assert_nonnull(strstr(msg, path));
    g_assert_nonnull(strstr(msg, "lun-map"));
}

static void test_command_line_refused(void)
{
    struct fx x;

    fx_init(&x);
    for (const char *const *p = (const char *const[]) { x.img, x.sym, x.hard, NULL }; *p;
         p++) {
        g_autofree char *lun1 = g_strdup_printf("1=file:%s", *p);
        g_autofree char *msg = NULL;
        const char *args[] = { "--lun", x.lun0, "--lun", lun1, NULL };
        size_t from = pu_daemon_log_size(&x.d);
        int status;

        g_assert_false(pu_daemon_try_start(&x.d, args, &status));
        g_assert_true(WIFEXITED(status));
        g_assert_cmpint(WEXITSTATUS(status), !=, 0);
        msg = pu_daemon_log_find(&x.d, from, "(backend lun0:1: .*)");
        assert_names_both(msg, "lun0:1", *p);
    }
    fx_free(&x);
}

static void test_config_refused(void)
{
    struct fx x;
    g_autofree char *cfg = NULL, *text = NULL, *msg = NULL;
    const char *args[] = { "--config", NULL, NULL };
    int status;

    fx_init(&x);
    cfg = g_build_filename(x.d.dir, "saved.json", NULL);
    text = g_strdup_printf("{\"version\": 1, \"backends\": ["
                           "{\"name\": \"first\", \"spec\": \"file:%s\"},"
                           "{\"name\": \"second\", \"spec\": \"file:%s\"}],"
                           " \"controllers\": [{\"name\": \"default\", \"luns\": ["
                           "{\"target\": 0, \"lun\": 0, \"backend\": \"first\"},"
                           "{\"target\": 0, \"lun\": 1, \"backend\": \"second\"}]}]}",
                           x.img, x.hard);
    g_assert_true(g_file_set_contents(cfg, text, -1, NULL));
    args[1] = cfg;
    g_assert_false(pu_daemon_try_start(&x.d, args, &status));
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), !=, 0);
    msg = pu_daemon_log_find(&x.d, 0, "(backend second: .*)");
    g_assert_nonnull(msg);
    g_assert_nonnull(strstr(msg, "backend first"));
    g_assert_nonnull(strstr(msg, x.hard));
    fx_free(&x);
}

static void start(struct fx *x, const char *pr_dir)
{
    const char *args[] = { "--lun", x->lun0, "--control", x->ctl, "--queues", "1",
                           pr_dir ? "--pr-dir" : NULL, pr_dir, NULL };

    pu_daemon_start(&x->d, args);
}

static unsigned backends(int fd)
{
    g_autoptr(JsonNode) r = pu_ctl_ok(fd, "backend-list", NULL);

    return json_array_get_length(json_node_get_array(r));
}

static void test_control_add_refused(void)
{
    struct fx x;
    int fd;

    fx_init(&x);
    start(&x, NULL);
    fd = ctl_client_connect(x.ctl);
    g_assert_cmpint(fd, >=, 0);
    for (const char *const *p = (const char *const[]) { x.img, x.sym, x.hard, NULL }; *p;
         p++) {
        g_autofree char *lun1 = g_strdup_printf("1=file:%s,ro", *p);
        g_autofree char *spec = g_strdup_printf("file:%s", *p);
        g_autofree char *by_lun = NULL, *by_backend = NULL;

        by_lun = pu_ctl_fail(fd, "lun-add", pu_jobj("lun", pu_jstr(lun1), NULL), EEXIST);
        assert_names_both(by_lun, "lun0:1", *p);
        by_backend = pu_ctl_fail(fd, "backend-add", pu_jobj("name", pu_jstr("again"), "spec",
                                                            pu_jstr(spec), NULL), EEXIST);
        assert_names_both(by_backend, "again", *p);
        g_assert_cmpuint(backends(fd), ==, 1);
    }
    /* Shared on purpose: one backend, its reservations its own, at two addresses. */
    json_node_unref(pu_ctl_ok(fd, "lun-map", pu_jobj("lun", pu_jint(1), "backend",
                                                      pu_jstr("lun0:0"), NULL)));
    g_assert_cmpuint(backends(fd), ==, 1);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);
    fx_free(&x);
}

static void test_one_reservations_file_each(void)
{
    struct fx x;
    g_autofree char *pr_dir = NULL, *msg = NULL;
    int fd;

    fx_init(&x);
    pr_dir = g_build_filename(x.d.dir, "pr", NULL);
    g_assert_cmpint(g_mkdir(pr_dir, 0700), ==, 0);
    start(&x, pr_dir);
    fd = ctl_client_connect(x.ctl);
    g_assert_cmpint(fd, >=, 0);
    json_node_unref(pu_ctl_ok(fd, "backend-add", pu_jobj("name", pu_jstr("a/b"), "spec",
                                                          pu_jstr("ram:1M"), NULL)));
    msg = pu_ctl_fail(fd, "backend-add", pu_jobj("name", pu_jstr("a_b"), "spec",
                                                 pu_jstr("ram:1M"), NULL), EEXIST);
    g_assert_nonnull(strstr(msg, "a_b.pr"));
    g_assert_nonnull(strstr(msg, "backend a/b"));
    g_assert_cmpuint(backends(fd), ==, 2);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);
    fx_free(&x);
}

/* PERSISTENT RESERVE OUT REGISTER with APTPL through LUN lun: its status. */
static uint8_t register_aptpl(struct vfe *fe, unsigned lun)
{
    uint8_t cdb[10] = { 0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24, 0 };
    uint8_t *p = vfe_alloc(fe, 24, 64);
    struct vfe_req r;

    memset(p, 0, 24);
    pu_put_be(p + 8, KEY, 8);
    p[20] = APTPL;
    pu_cmd(fe, lun, cdb, sizeof(cdb), p, 24, false, &r);
    g_assert_cmpuint(r.resp.response, ==, VIRTIO_SCSI_S_OK);
    vfe_free(fe, p);
    return r.resp.status;
}

static void test_restart_after_aptpl(void)
{
    struct fx x;
    g_autofree char *lun1 = NULL;
    struct vfe *fe;
    size_t from;
    int fd;

    fx_init(&x);
    start(&x, NULL);
    fd = ctl_client_connect(x.ctl);
    g_assert_cmpint(fd, >=, 0);
    lun1 = g_strdup_printf("1=file:%s", x.sym);
    g_free(pu_ctl_fail(fd, "lun-add", pu_jobj("lun", pu_jstr(lun1), NULL), EEXIST));
    json_node_unref(pu_ctl_ok(fd, "lun-map", pu_jobj("lun", pu_jint(1), "backend",
                                                      pu_jstr("lun0:0"), NULL)));
    fe = pu_connect(&x.d, 1);
    pu_make_ready(fe, 0);
    pu_make_ready(fe, 1);
    /* Through either address it is the one LUN's registration, in its one file. */
    g_assert_cmpuint(register_aptpl(fe, 1), ==, 0);
    vfe_close(fe);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);

    from = pu_daemon_log_size(&x.d);
    start(&x, NULL);
    g_assert_cmpuint(pu_daemon_log_count(&x.d, from, "1 registration\\(s\\) restored"), ==, 1);
    g_assert_cmpint(pu_daemon_stop(&x.d, false), ==, 0);
    fx_free(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_test_add_func("/one-object/command-line-refused", test_command_line_refused);
    g_test_add_func("/one-object/config-refused", test_config_refused);
    g_test_add_func("/one-object/control-add-refused", test_control_add_refused);
    g_test_add_func("/one-object/one-reservations-file-each", test_one_reservations_file_each);
    g_test_add_func("/one-object/restart-after-aptpl", test_restart_after_aptpl);
    return g_test_run();
}
