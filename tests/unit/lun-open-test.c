/*
 * Specification of the daemon's side of LUN specs (hw/block/lun-open.c):
 * lun_spec_parse_full() is the grammar (tests/unit/lun-spec-test.c) plus
 * the iscsi:// URL's LUN, checked as libiscsi would read it but strictly;
 * and opening: file specs (a temp file), RAM and null, the "hold:" test
 * backend and, for iSCSI, up to the point where a network is needed: URL,
 * CHAP secret file and option checks, then a refused connection
 * (tests/iscsi/ covers a real target).  A file backend knows the object
 * it serves: the same file however it is reached (the same path, a
 * symlink, a hard link), whatever the options, is the same object; another
 * file, RAM and null never are (backend_same_object, which the daemon uses
 * to refuse a second backend over one file).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "lun-open.h"
#include "test-hooks.h"

static struct lun_spec parse_ok(const char *arg)
{
    struct lun_spec s;
    GError *err = NULL;

    if (lun_spec_parse_full(arg, &s, &err) != 0) {
        g_error("\"%s\" was rejected: %s", arg, err->message);
    }
    return s;
}

/*
 * The remote LUN is the URL's last field, found as libiscsi finds it (after
 * HOST/IQN/, before a "?" query), and is a plain decimal number 0-16383.
 */
static void test_iscsi_lun_accepted(void)
{
    static const struct {
        const char *arg;
        unsigned lun;
    } cases[] = {
        { "5=iscsi://h/iqn/0", 0 },
        { "5=iscsi://h/iqn/16383", 16383 },
        { "5=iscsi://h/iqn/007", 7 },
        { "5=iscsi://u%p@h:3260/iqn.x:t/12,ro", 12 },
        { "5=iscsi://[::1]:3260/iqn.x:t/3?header_digest=crc32c", 3 },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lun_spec s = parse_ok(cases[i].arg);

        g_assert_cmpuint(s.iscsi_lun, ==, cases[i].lun);
        g_assert_cmpuint(s.lun, ==, 5);     /* the ID is ours, the URL's LUN the target's */
        lun_spec_clear(&s);
    }
}

/* Asserts that arg is refused with a message quoting it and naming culprit. */
static void assert_refused(const char *arg, const char *culprit)
{
    struct lun_spec s;
    GError *err = NULL;
    int ret;

    memset(&s, 0x5a, sizeof(s));
    ret = lun_spec_parse_full(arg, &s, &err);
    if (ret != -EINVAL) {
        g_error("\"%s\" was not refused (ret %d)", arg, ret);
    }
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, arg));
    if (!strstr(err->message, culprit)) {
        g_error("message for \"%s\" does not name %s: %s", arg, culprit, err->message);
    }
    g_assert_null(s.path);
    g_clear_error(&err);
}

/*
 * libiscsi reads the LUN with strtol() into an int: "-1" would be LUN -1,
 * "+1" LUN 1, 4294967296 LUN 0 and 99999999999999 LUN 276447231.  All of
 * them, and anything else that is not 0-16383 in plain decimal, are
 * refused when the spec is parsed, before any connection.
 */
static void test_iscsi_lun_refused(void)
{
    static const char *const bad[] = {
        "4294967296", "99999999999999", "-1", "+1", " 1", "1x", "", "16384",
    };
    struct lun_spec s;
    GError *err = NULL;

    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *arg = g_strdup_printf("0=iscsi://h/iqn.x:t/%s,ro", bad[i]);
        g_autofree char *culprit = g_strdup_printf("bad LUN \"%s\" at the end of the iscsi:// URL "
                                                   "(expected 0-16383)", bad[i]);

        assert_refused(arg, culprit);
    }
    /* Without a LUN field there is nothing to default to. */
    assert_refused("0=iscsi://h/iqn.x:t", "without /IQN/LUN");
    assert_refused("0=iscsi://h", "without /IQN/LUN");
    /* The password is not shown when the LUN is at fault. */
    g_assert_cmpint(lun_spec_parse_full("0=iscsi://u%s3cr3t@h/iqn/-1", &s, &err), ==, -EINVAL);
    g_assert_nonnull(strstr(err->message, "LUN \"-1\""));
    g_assert_null(strstr(err->message, "s3cr3t"));
    g_clear_error(&err);
}

/* Writes contents to a fresh file in dir with mode; returns its path. */
static char *secret_file(const char *dir, const char *contents, mode_t mode)
{
    char *path = g_build_filename(dir, "secret", NULL);

    g_unlink(path);
    g_assert_true(g_file_set_contents(path, contents, -1, NULL));
    g_assert_cmpint(chmod(path, mode), ==, 0);
    return path;
}

/*
 * Opens arg, which must fail, with an error that says words (and no
 * warning: that would fail the test); returns its -errno.
 */
static int open_iscsi(const char *arg, const char *words)
{
    struct lun_spec s = parse_ok(arg);
    struct lun_backend *be = NULL;
    g_autoptr(GError) err = NULL;
    int ret = lun_spec_open(&s, &be, &err);

    g_assert_null(be);
    g_assert_cmpint(ret, <, 0);
    g_assert_error(err, VS_ERROR, -ret);
    if (!strstr(err->message, words)) {
        g_error("%s: \"%s\" does not say \"%s\"", arg, err->message, words);
    }
    lun_spec_clear(&s);
    return ret;
}

/*
 * Opening checks the URL and the CHAP secret before it connects; nothing
 * listens on 127.0.0.1 port 1, so a spec that passes them is refused there.
 */
static void test_open_iscsi_checks_before_connecting(void)
{
    g_autofree char *dir = g_dir_make_tmp("lun-spec-test-XXXXXX", NULL);
    g_autofree char *arg = NULL;
    g_autofree char *path = NULL;
    struct lun_spec unparsed = { .kind = LUN_SPEC_ISCSI };
    struct lun_backend *be = NULL;

    /* A URL libiscsi refuses (an unknown header digest) fails before connecting. */
    g_assert_cmpint(open_iscsi("0=iscsi://127.0.0.1:1/iqn.x:t/1?header_digest=md5",
                               "bad iSCSI URL"), ==, -EINVAL);
    /* Opening checks the LUN again, for a spec that lun_spec_parse_full() did not make. */
    unparsed.path = g_strdup("iscsi://127.0.0.1:1/iqn.x:t/4294967296");
    g_assert_cmpint(lun_spec_open(&unparsed, &be, NULL), ==, -EINVAL);
    g_assert_null(be);
    lun_spec_clear(&unparsed);
    g_assert_cmpint(open_iscsi("0=iscsi://127.0.0.1:1/iqn.2024-01.org.example:t1/1",
                               "cannot log in to 127.0.0.1:1 as "), ==, -ECONNREFUSED);
    /* A host name is resolved once, at open. */
    g_assert_cmpint(open_iscsi("0=iscsi://localhost:1/iqn.2024-01.org.example:t1/1",
                               "cannot log in to "), ==, -ECONNREFUSED);

    /* Readable by the group: refused before any password leaves the host. */
    path = secret_file(dir, "user:pw\n", 0640);
    arg = g_strdup_printf("0=iscsi://127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg, "mode 0640 lets others read it; chmod 600 it"), ==, -EPERM);
    g_assert_cmpint(chmod(path, 0604), ==, 0);
    g_assert_cmpint(open_iscsi(arg, "mode 0604 lets others read it"), ==, -EPERM);
    g_assert_cmpint(chmod(path, 0600), ==, 0);
    g_assert_cmpint(open_iscsi(arg, "cannot log in to 127.0.0.1:1 as "), ==, -ECONNREFUSED);
    g_clear_pointer(&arg, g_free);

    /* A password alone needs the user from the URL... */
    g_free(path);
    path = secret_file(dir, "pw", 0600);
    arg = g_strdup_printf("0=iscsi://127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg, "the secret file holds only a password"), ==, -EINVAL);
    g_clear_pointer(&arg, g_free);
    arg = g_strdup_printf("0=iscsi://user@127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg, "with CHAP user user"), ==, -ECONNREFUSED);
    g_clear_pointer(&arg, g_free);
    /* ...and a password in both places is ambiguous. */
    arg = g_strdup_printf("0=iscsi://user%%pw@127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg, "a password in both the URL and secret-file="), ==,
                    -EINVAL);
    g_clear_pointer(&arg, g_free);
    /* An empty secret is no secret. */
    g_free(path);
    path = secret_file(dir, "\n", 0600);
    arg = g_strdup_printf("0=iscsi://user@127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg, "expected USER:PASSWORD or PASSWORD"), ==, -EINVAL);
    g_clear_pointer(&arg, g_free);
    arg = g_strdup_printf("0=iscsi://127.0.0.1:1/iqn.x:t/1,secret-file=%s/missing", dir);
    g_assert_cmpint(open_iscsi(arg, "No such file or directory"), ==, -ENOENT);

    g_unlink(path);
    g_rmdir(dir);
}

static void test_open_file(void)
{
    GError *err = NULL;
    g_autofree char *path = NULL;
    g_autofree char *arg = NULL;
    struct lun_backend *be = NULL;
    struct lun_spec s;
    int fd = g_file_open_tmp("lun-spec-XXXXXX", &path, NULL);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 1 << 20), ==, 0);
    close(fd);

    /* The spec's options reach the backend. */
    arg = g_strdup_printf("0=file:%s,ro,block-size=4096,size=256K", path);
    s = parse_ok(arg);
    g_assert_cmpint(lun_spec_open(&s, &be, NULL), ==, 0);
    g_assert_true(be->read_only);
    g_assert_cmpuint(be->block_size, ==, 4096);
    g_assert_cmpuint(be->size, ==, 256 << 10);
    g_assert_nonnull(strstr(be->name, path));
    be->ops->close(be);
    lun_spec_clear(&s);

    /* A path that does not exist fails at open, not at parse, saying so. */
    g_free(arg);
    arg = g_strdup_printf("0=file:%s.missing", path);
    s = parse_ok(arg);
    g_assert_cmpint(lun_spec_open(&s, &be, &err), ==, -ENOENT);
    g_assert_error(err, VS_ERROR, ENOENT);
    g_assert_cmpstr(err->message, ==, "No such file or directory");
    g_clear_error(&err);
    lun_spec_clear(&s);

    /* A size past a read-only file's end: the error says that, not EINVAL's words. */
    g_free(arg);
    arg = g_strdup_printf("0=file:%s,ro,size=2M", path);
    s = parse_ok(arg);
    g_assert_cmpint(lun_spec_open(&s, &be, &err), ==, -EINVAL);
    g_assert_error(err, VS_ERROR, EINVAL);
    g_assert_cmpstr(err->message, ==,
                    "size 2097152 is larger than the read-only file (1048576 bytes)");
    g_clear_error(&err);
    lun_spec_clear(&s);
    g_unlink(path);
}

static struct lun_backend *open_ok(const char *fmt, const char *path)
{
    g_autofree char *arg = g_strdup_printf(fmt, path);
    struct lun_spec s = parse_ok(arg);
    struct lun_backend *be = NULL;

    g_assert_cmpint(lun_spec_open(&s, &be, NULL), ==, 0);
    lun_spec_clear(&s);
    return be;
}

static void test_open_same_object(void)
{
    g_autofree char *dir = g_dir_make_tmp("lun-open-XXXXXX", NULL);
    g_autofree char *img = g_build_filename(dir, "img", NULL);
    g_autofree char *other = g_build_filename(dir, "other", NULL);
    g_autofree char *sym = g_build_filename(dir, "sym", NULL);
    g_autofree char *hard = g_build_filename(dir, "hard", NULL);
    g_autofree char *dotted = g_build_filename(dir, ".", "img", NULL);
    const char *const same[] = { img, sym, hard, dotted };
    struct lun_backend *first, *be;

    g_assert_nonnull(dir);
    g_assert_true(g_file_set_contents(img, "", 0, NULL));
    g_assert_cmpint(truncate(img, 1 << 20), ==, 0);
    g_assert_true(g_file_set_contents(other, "", 0, NULL));
    g_assert_cmpint(truncate(other, 1 << 20), ==, 0);
    g_assert_cmpint(symlink(img, sym), ==, 0);
    g_assert_cmpint(link(img, hard), ==, 0);

    first = open_ok("0=file:%s", img);
    g_assert_cmpint(first->object_kind, ==, BACKEND_OBJECT_FILE);
    for (unsigned i = 0; i < G_N_ELEMENTS(same); i++) {
        /* Options do not make it another object: the blocks are the same. */
        be = open_ok(i % 2 ? "0=file:%s,ro" : "0=file:%s,size=512K", same[i]);
        g_assert_true(backend_same_object(first, be));
        g_assert_true(backend_same_object(be, first));
        be->ops->close(be);
    }
    be = open_ok("0=file:%s", other);
    g_assert_false(backend_same_object(first, be));
    be->ops->close(be);
    {
        struct lun_spec s = parse_ok("0=ram:1M");
        struct lun_backend *ram = NULL, *ram2 = NULL;

        g_assert_cmpint(lun_spec_open(&s, &ram, NULL), ==, 0);
        g_assert_cmpint(lun_spec_open(&s, &ram2, NULL), ==, 0);
        g_assert_cmpint(ram->object_kind, ==, BACKEND_OBJECT_NONE);
        g_assert_false(backend_same_object(ram, ram2));
        g_assert_false(backend_same_object(ram, first));
        ram->ops->close(ram);
        ram2->ops->close(ram2);
        lun_spec_clear(&s);
    }
    first->ops->close(first);
    for (const char *const *p = (const char *const[]) { img, other, sym, hard, NULL }; *p; p++) {
        g_unlink(*p);
    }
    g_rmdir(dir);
}

static void test_open_ram_and_null(void)
{
    static const char *const args[] = { "0=ram:1M,block-size=4096,ro",
                                        "0=null:8M,ro,sanitize=on" };

    for (unsigned i = 0; i < G_N_ELEMENTS(args); i++) {
        struct lun_spec s = parse_ok(args[i]);
        struct lun_backend *be = NULL;

        g_assert_cmpint(lun_spec_open(&s, &be, NULL), ==, 0);
        g_assert_cmpuint(be->size, ==, s.size);
        g_assert_cmpuint(be->block_size, ==, s.block_size ? s.block_size : 512);
        g_assert_true(be->read_only);
        g_assert_cmpint(be->allow_sanitize, ==, i == 1);   /* the opt-in reaches the LUN */
        be->ops->close(be);
        lun_spec_clear(&s);
    }
}

static void test_open_hold(void)
{
    g_autofree char *dir = g_dir_make_tmp("lun-spec-hold-XXXXXX", NULL);
    g_autofree char *arg = g_strdup_printf("0=hold:1M,while=%s/gate", dir);
    struct lun_backend *be = NULL;
    struct lun_spec s;

    g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "1", TRUE);
    s = parse_ok(arg);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_MESSAGE, "hold:*test backend*");
    g_assert_cmpint(lun_spec_open(&s, &be, NULL), ==, 0);
    g_test_assert_expected_messages();
    g_assert_cmpuint(be->size, ==, 1u << 20);
    g_assert_cmpuint(be->block_size, ==, 512);
    g_assert_cmpstr(be->ops->name, ==, "hold");
    g_assert_nonnull(be->ops->attach_thread);
    be->ops->close(be);
    lun_spec_clear(&s);
    g_unsetenv(LUN_SPEC_TEST_BACKENDS_ENV);
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lun-open/parse/iscsi-lun-accepted", test_iscsi_lun_accepted);
    g_test_add_func("/lun-open/parse/iscsi-lun-refused", test_iscsi_lun_refused);
    g_test_add_func("/lun-open/open/file", test_open_file);
    g_test_add_func("/lun-open/open/same-object", test_open_same_object);
    g_test_add_func("/lun-open/open/ram-and-null", test_open_ram_and_null);
    g_test_add_func("/lun-open/open/hold", TEST_HOOKED(test_open_hold));
    g_test_add_func("/lun-open/open/iscsi-checks-before-connecting",
                    test_open_iscsi_checks_before_connecting);
    return g_test_run();
}
