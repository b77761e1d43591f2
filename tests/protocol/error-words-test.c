/*
 * The words a user reads when something fails, from the real daemon and
 * vhost-scsi-ctl (docs/design.md, "Errors"): the cause a layer found
 * reaches the command line and the JSON-RPC answer, named with what
 * failed (the LUN, the spec, the socket), and each failure is printed
 * once: one line in the daemon's log for a refused control call, one line
 * on stderr for a refused start, never a library's warning besides.
 *  - lun-add (and --lun) of a read-only file smaller than size= says so;
 *  - a file the daemon may only read, without ,ro, hints at ,ro;
 *  - a socket in a folder that does not exist says "cannot listen on
 *    socket PATH", at start-up (--socket-path, --control, a --config
 *    controller's) before any LUN is made, and for controller-add;
 *  - a refused lun-resize says whether it was smaller or not whole blocks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "proto-util.h"
#include "read-only-file.h"

struct fx {
    struct pu_daemon d;
    char *ctl;          /* the control socket */
    char *img;          /* a 4 KiB file in the daemon's folder */
};

static void fx_start(struct fx *x, const char *lun0)
{
    pu_daemon_init(&x->d);
    x->d.capture_log = true;
    x->ctl = g_build_filename(x->d.dir, "control.sock", NULL);
    x->img = g_build_filename(x->d.dir, "disk.img", NULL);
    g_assert_true(g_file_set_contents(x->img, "", 0, NULL));
    g_assert_cmpint(truncate(x->img, 4096), ==, 0);
    {
        const char *args[] = { "--lun", lun0, "--control", x->ctl, NULL };

        pu_daemon_start(&x->d, args);
    }
}

static void fx_stop(struct fx *x)
{
    g_assert_cmpint(pu_daemon_stop(&x->d, false), ==, 0);
    pu_daemon_cleanup(&x->d);
    g_free(x->ctl);
    g_free(x->img);
}

static unsigned occurrences(const char *text, const char *words)
{
    unsigned n = 0;

    for (const char *p = text; (p = strstr(p, words)); p += strlen(words)) {
        n++;
    }
    return n;
}

/*
 * vhost-scsi-ctl target ARGS... fails (exit 1) and prints words once; the
 * daemon logs the refusal in one line that has them, and nothing else.
 */
static void ctl_refused(struct fx *x, const char *const *args, const char *words)
{
    size_t from = pu_daemon_log_size(&x->d);
    g_autofree char *err = NULL;
    g_autofree char *out = NULL;
    g_autofree char *log = NULL;
    int code;

    if (!g_getenv("VHOST_SCSI_CTL")) {
        g_test_skip("VHOST_SCSI_CTL is not set (run through meson test)");
        return;
    }
    out = pu_ctl_tool(x->ctl, args, &code, &err);
    g_assert_cmpint(code, ==, 1);
    if (occurrences(err, words) != 1) {
        g_error("vhost-scsi-ctl target %s ... said \"%s\", not \"%s\" once", args[0], err, words);
    }
    g_assert_cmpuint(occurrences(err, "\n"), ==, 1);
    log = pu_daemon_log_read(&x->d, from, 1 << 16);
    if (occurrences(log, words) != 1 || occurrences(log, "WARNING") != 1) {
        g_error("the daemon's log has not one line with \"%s\":\n%s", words, log);
    }
}

/*
 * vhost-scsi-target ARGS... refuses to start (exit 1), and its stderr is
 * the one line "vhost-scsi-target: " words.
 */
static void start_refused(const char *const *args, const char *words)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GError) e = NULL;
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autofree char *want = g_strdup_printf("vhost-scsi-target: %s\n", words);
    int status;

    g_ptr_array_add(argv, (char *)g_getenv("VHOST_SCSI_TARGET"));
    g_assert_nonnull(argv->pdata[0]);
    for (; *args; args++) {
        g_ptr_array_add(argv, (char *)*args);
    }
    g_ptr_array_add(argv, NULL);
    g_assert_true(g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &out, &err, &status, &e));
    g_assert_no_error(e);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    g_assert_cmpstr(err, ==, want);
}

/* ---- opening a file ------------------------------------------------------ */

static void test_read_only_file_smaller_than_size(void)
{
    struct fx x;
    g_autofree char *arg = NULL;
    g_autofree char *words = NULL;

    fx_start(&x, "0=ram:1M");
    arg = g_strdup_printf("1=file:%s,ro,size=1G", x.img);
    words = g_strdup_printf("lun0:1: cannot open file:%s,ro,size=1G: size 1073741824 is larger "
                            "than the read-only file (4096 bytes)", x.img);
    ctl_refused(&x, (const char *const[]){ "lun", "add", arg, NULL }, words);
    /* The same words at start-up. */
    {
        g_autofree char *sock = g_build_filename(x.d.dir, "other.sock", NULL);
        g_autofree char *line = g_strdup_printf("--lun %s", words);

        start_refused((const char *const[]){ "--socket-path", sock, "--lun", arg, NULL }, line);
    }
    fx_stop(&x);
}

static void test_file_only_readable_hints_ro(void)
{
    struct fx x;
    g_autofree char *path = NULL;
    g_autofree char *arg = NULL;
    g_autofree char *words = NULL;

    fx_start(&x, "0=ram:1M");
    path = read_only_file(x.img);
    if (!path) {
        g_test_skip("no file here that this user may only read");
        fx_stop(&x);
        return;
    }
    arg = g_strdup_printf("1=file:%s", path);
    words = g_strdup_printf("lun0:1: cannot open file:%s: Permission denied (use ,ro?)", path);
    ctl_refused(&x, (const char *const[]){ "lun", "add", arg, NULL }, words);
    fx_stop(&x);
}

/* ---- sockets ------------------------------------------------------------- */

/* Refused before the RAM LUN is made: no "backend lun0:0" line, nothing but the cause. */
static void test_socket_in_missing_folder_at_start(void)
{
    g_autofree char *dir = g_dir_make_tmp("error-words-XXXXXX", NULL);
    g_autofree char *sock = g_build_filename(dir, "missing", "x.sock", NULL);
    g_autofree char *ctl = g_build_filename(dir, "missing", "control.sock", NULL);
    g_autofree char *ok = g_build_filename(dir, "x.sock", NULL);
    g_autofree char *words = g_strdup_printf("cannot listen on socket %s: No such file or "
                                             "directory", sock);
    g_autofree char *ctl_words = g_strdup_printf("cannot listen on control socket %s: No such "
                                                 "file or directory", ctl);

    start_refused((const char *const[]){ "--socket-path", sock, "--lun", "0=ram:64M", NULL },
                  words);
    start_refused((const char *const[]){ "--socket-path", ok, "--control", ctl, "--lun",
                                         "0=ram:64M", NULL }, ctl_words);
    g_rmdir(dir);
}

/* A --config controller's socket in a missing folder: refused before its backends open. */
static void test_config_socket_in_missing_folder(void)
{
    g_autofree char *dir = g_dir_make_tmp("error-words-XXXXXX", NULL);
    g_autofree char *conf = g_build_filename(dir, "target.json", NULL);
    g_autofree char *sock = g_build_filename(dir, "missing", "vm2.sock", NULL);
    g_autofree char *ok = g_build_filename(dir, "x.sock", NULL);
    g_autofree char *text = g_strdup_printf(
        "{\"version\": 1, \"backends\": [{\"name\": \"disk\", \"spec\": \"ram:64M\"}],"
        " \"controllers\": [{\"name\": \"vm2\", \"socket\": \"%s\","
        " \"luns\": [{\"target\": 0, \"lun\": 0, \"backend\": \"disk\"}]}]}", sock);
    g_autofree char *words = g_strdup_printf("--config %s: controllers[0]: cannot listen on "
                                             "socket %s: No such file or directory", conf, sock);

    g_assert_true(g_file_set_contents(conf, text, -1, NULL));
    start_refused((const char *const[]){ "--socket-path", ok, "--config", conf, NULL }, words);
    g_unlink(conf);
    g_rmdir(dir);
}

static void test_controller_add_in_missing_folder(void)
{
    struct fx x;
    g_autofree char *sock = NULL;
    g_autofree char *words = NULL;

    fx_start(&x, "0=ram:1M");
    sock = g_build_filename(x.d.dir, "missing", "vm2.sock", NULL);
    words = g_strdup_printf("controller vm2: cannot listen on socket %s: No such file or "
                            "directory", sock);
    ctl_refused(&x, (const char *const[]){ "controller", "add", "vm2", sock, NULL }, words);
    fx_stop(&x);
}

/* ---- resizing ------------------------------------------------------------ */

static void test_shrink_refusal_says_which(void)
{
    struct fx x;

    fx_start(&x, "0=null:64M");
    ctl_refused(&x, (const char *const[]){ "lun", "resize", "0", "32M", NULL },
                "backend lun0:0: cannot resize: 33554432 bytes is smaller than now "
                "(67108864 bytes): shrinking is refused");
    ctl_refused(&x, (const char *const[]){ "lun", "resize", "0", "67109000", NULL },
                "backend lun0:0: cannot resize: 67109000 bytes is not a whole number of "
                "512-byte blocks");
    fx_stop(&x);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/error-words/open/read-only-file-smaller-than-size",
                    test_read_only_file_smaller_than_size);
    g_test_add_func("/error-words/open/file-only-readable-hints-ro",
                    test_file_only_readable_hints_ro);
    g_test_add_func("/error-words/socket/missing-folder-at-start",
                    test_socket_in_missing_folder_at_start);
    g_test_add_func("/error-words/socket/config-socket-in-missing-folder",
                    test_config_socket_in_missing_folder);
    g_test_add_func("/error-words/socket/controller-add-in-missing-folder",
                    test_controller_add_in_missing_folder);
    g_test_add_func("/error-words/resize/shrink-refusal-says-which",
                    test_shrink_refusal_says_which);
    return g_test_run();
}
