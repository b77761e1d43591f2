/*
 * Specification of LUN arguments (lib/config/lun-spec.c): every form
 * "ID=SPEC" accepts, what each one parses to, and that each kind of
 * mistake is rejected with a message quoting the text at fault.  Opening
 * is checked for file specs (a temp file) and, for iSCSI, up to the point
 * where a network is needed: URL, CHAP secret file and option checks,
 * then a refused connection (tests/iscsi/ covers a real target).  The
 * "hold:" test backend exists only with VHOST_SCSI_TEST_BACKENDS=1.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "lun-spec.h"

static struct lun_spec parse_ok(const char *arg)
{
    struct lun_spec s;
    char *err = NULL;
    int ret = lun_spec_parse(arg, &s, &err);

    if (ret != 0) {
        g_error("\"%s\" was rejected: %s", arg, err);
    }
    g_assert_null(err);
    return s;
}

static void test_ids(void)
{
    static const struct {
        const char *arg;
        unsigned target, lun;
    } cases[] = {
        { "0=null:1M", 0, 0 },
        { "7=null:1M", 0, 7 },
        { "16383=null:1M", 0, 16383 },
        { "0:0=null:1M", 0, 0 },
        { "3:12=null:1M", 3, 12 },
        { "255:16383=null:1M", 255, 16383 },
        { "007=null:1M", 0, 7 },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lun_spec s = parse_ok(cases[i].arg);

        g_assert_cmpuint(s.target, ==, cases[i].target);
        g_assert_cmpuint(s.lun, ==, cases[i].lun);
        lun_spec_clear(&s);
    }
}

static void test_file_forms(void)
{
    struct lun_spec s;

    s = parse_ok("0=file:/var/disk.img");
    g_assert_cmpint(s.kind, ==, LUN_SPEC_FILE);
    g_assert_cmpstr(s.path, ==, "/var/disk.img");
    g_assert_false(s.ro);
    g_assert_false(s.direct);
    g_assert_cmpuint(s.block_size, ==, 0);
    g_assert_cmpuint(s.size, ==, 0);
    lun_spec_clear(&s);

    s = parse_ok("1:2=file:disk.img,ro,direct,block-size=4096,size=2G");
    g_assert_cmpint(s.kind, ==, LUN_SPEC_FILE);
    g_assert_cmpstr(s.path, ==, "disk.img");
    g_assert_true(s.ro);
    g_assert_true(s.direct);
    g_assert_cmpuint(s.block_size, ==, 4096);
    g_assert_cmpuint(s.size, ==, 2ull << 30);
    lun_spec_clear(&s);

    /* Options in any order; block-size takes a suffix too. */
    s = parse_ok("0=file:/dev/sdb,size=1048576,block-size=512,direct");
    g_assert_cmpuint(s.size, ==, 1048576);
    g_assert_cmpuint(s.block_size, ==, 512);
    g_assert_true(s.direct);
    g_assert_false(s.ro);
    lun_spec_clear(&s);
    s = parse_ok("0=file:x,block-size=4K");
    g_assert_cmpuint(s.block_size, ==, 4096);
    lun_spec_clear(&s);

    /* ",," is a comma in the path; "=" and ":" are ordinary there. */
    s = parse_ok("0=file:/a,,b=c:d,,,ro");
    g_assert_cmpstr(s.path, ==, "/a,b=c:d,");
    g_assert_true(s.ro);
    lun_spec_clear(&s);
}

static void test_ram_null_forms(void)
{
    static const struct {
        const char *arg;
        enum lun_spec_kind kind;
        uint64_t size;
        uint32_t block_size;
        bool ro;
    } cases[] = {
        { "0=ram:64M", LUN_SPEC_RAM, 64ull << 20, 0, false },
        { "0=ram:1g,block-size=4096", LUN_SPEC_RAM, 1ull << 30, 4096, false },
        { "0=ram:4096,ro", LUN_SPEC_RAM, 4096, 0, true },
        { "0=null:2T", LUN_SPEC_NULL, 2ull << 40, 0, false },
        { "0=null:512k,ro,block-size=512", LUN_SPEC_NULL, 512 << 10, 512, true },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lun_spec s = parse_ok(cases[i].arg);

        g_assert_cmpint(s.kind, ==, cases[i].kind);
        g_assert_cmpuint(s.size, ==, cases[i].size);
        g_assert_cmpuint(s.block_size, ==, cases[i].block_size);
        g_assert_cmpint(s.ro, ==, cases[i].ro);
        g_assert_null(s.path);
        lun_spec_clear(&s);
    }
}

static void test_iscsi_recognised(void)
{
    struct lun_spec s = parse_ok("2:0=iscsi://10.0.0.1:3260/iqn.2024-01.org.example:t1/0,ro");

    g_assert_cmpint(s.kind, ==, LUN_SPEC_ISCSI);
    g_assert_cmpstr(s.path, ==, "iscsi://10.0.0.1:3260/iqn.2024-01.org.example:t1/0");
    g_assert_true(s.ro);
    g_assert_cmpuint(s.queue_depth, ==, 0);       /* 0: the backend's default */
    g_assert_cmpuint(s.sessions, ==, 0);
    g_assert_null(s.secret_file);
    g_assert_null(s.initiator_name);
    lun_spec_clear(&s);
}

static void test_iscsi_options(void)
{
    struct lun_spec s = parse_ok("0=iscsi://u@10.0.0.1/iqn.2024-01.org.example:t1/1,"
                                 "queue-depth=1024,sessions=16,secret-file=/run/chap.secret,"
                                 "initiator-name=iqn.2026-12.org.example:host1");

    g_assert_cmpstr(s.path, ==, "iscsi://u@10.0.0.1/iqn.2024-01.org.example:t1/1");
    g_assert_cmpuint(s.queue_depth, ==, 1024);
    g_assert_cmpuint(s.sessions, ==, 16);
    g_assert_cmpstr(s.secret_file, ==, "/run/chap.secret");
    g_assert_cmpstr(s.initiator_name, ==, "iqn.2026-12.org.example:host1");
    g_assert_false(s.ro);
    lun_spec_clear(&s);
    g_assert_null(s.secret_file);

    s = parse_ok("0=iscsi://h/iqn/1,sessions=1,queue-depth=1");
    g_assert_cmpuint(s.queue_depth, ==, 1);
    g_assert_cmpuint(s.sessions, ==, 1);
    lun_spec_clear(&s);
}

static void test_iscsi_redact(void)
{
    static const struct {
        const char *arg, *shown;
    } cases[] = {
        { "0=iscsi://user%pw@h:3260/iqn.x:t/1,ro", "0=iscsi://user%***@h:3260/iqn.x:t/1,ro" },
        { "0=iscsi://user@h/iqn/1", "0=iscsi://user@h/iqn/1" },
        { "0=iscsi://h/iqn/1", "0=iscsi://h/iqn/1" },
        /* A password may hold a '/': hidden all the same. */
        { "0=iscsi://u%pa/ss@h/iqn/1", "0=iscsi://u%***@h/iqn/1" },
        /* Ambiguous: hidden rather than shown. */
        { "0=iscsi://h/iqn%x@y/1", "0=iscsi://h/iqn%***@y/1" },
        /* An '@' in the options is not the URL's. */
        { "0=iscsi://h/iqn/1,initiator-name=a%b@c", "0=iscsi://h/iqn/1,initiator-name=a%b@c" },
        { "0=file:/a%b@c", "0=file:/a%b@c" },
    };
    struct lun_spec s;
    char *err = NULL;

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *shown = lun_spec_redact(cases[i].arg);
        g_assert_cmpstr(shown, ==, cases[i].shown);
    }
    /* libiscsi reads at most 255 characters of the URL (unterminated beyond). */
    {
        g_autofree char *iqn = g_strnfill(260, 'q');
        g_autofree char *ok = g_strdup_printf("0=iscsi://h/%.*s/1", 240, iqn);
        g_autofree char *tolong = g_strdup_printf("0=iscsi://h/%s/1", iqn);

        g_assert_cmpint(lun_spec_parse(ok, &s, &err), ==, 0);
        lun_spec_clear(&s);
        g_assert_cmpint(lun_spec_parse(tolong, &s, &err), ==, -EINVAL);
        g_assert_nonnull(strstr(err, "longer than 255"));
        g_clear_pointer(&err, g_free);
    }
    /* A rejected spec's message names the culprit but not the password. */
    g_assert_cmpint(lun_spec_parse("0=iscsi://u%s3cr3t@h/iqn/1,bogus", &s, &err), ==, -EINVAL);
    g_assert_nonnull(strstr(err, "\"bogus\""));
    g_assert_null(strstr(err, "s3cr3t"));
    g_free(err);
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
    char *err = NULL;
    int ret;

    memset(&s, 0x5a, sizeof(s));
    ret = lun_spec_parse(arg, &s, &err);
    if (ret != -EINVAL) {
        g_error("\"%s\" was not refused (ret %d)", arg, ret);
    }
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err, arg));
    if (!strstr(err, culprit)) {
        g_error("message for \"%s\" does not name %s: %s", arg, culprit, err);
    }
    g_assert_null(s.path);
    g_free(err);
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
    char *err = NULL;

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
    g_assert_cmpint(lun_spec_parse("0=iscsi://u%s3cr3t@h/iqn/-1", &s, &err), ==, -EINVAL);
    g_assert_nonnull(strstr(err, "LUN \"-1\""));
    g_assert_null(strstr(err, "s3cr3t"));
    g_free(err);
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

static int open_iscsi(const char *arg)
{
    struct lun_spec s = parse_ok(arg);
    struct lun_backend *be = NULL;
    int ret = lun_spec_open(&s, &be);

    g_assert_null(be);
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

    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    /* A URL libiscsi refuses (an unknown header digest) fails before connecting. */
    g_assert_cmpint(open_iscsi("0=iscsi://127.0.0.1:1/iqn.x:t/1?header_digest=md5"), ==,
                    -EINVAL);
    /* Opening checks the LUN again, for a spec that lun_spec_parse() did not make. */
    unparsed.path = g_strdup("iscsi://127.0.0.1:1/iqn.x:t/4294967296");
    g_assert_cmpint(lun_spec_open(&unparsed, &be), ==, -EINVAL);
    g_assert_null(be);
    lun_spec_clear(&unparsed);
    g_assert_cmpint(open_iscsi("0=iscsi://127.0.0.1:1/iqn.2024-01.org.example:t1/1"), ==,
                    -ECONNREFUSED);
    /* A host name is resolved once, at open. */
    g_assert_cmpint(open_iscsi("0=iscsi://localhost:1/iqn.2024-01.org.example:t1/1"), ==,
                    -ECONNREFUSED);

    /* Readable by the group: refused before any password leaves the host. */
    path = secret_file(dir, "user:pw\n", 0640);
    arg = g_strdup_printf("0=iscsi://127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg), ==, -EPERM);
    g_assert_cmpint(chmod(path, 0604), ==, 0);
    g_assert_cmpint(open_iscsi(arg), ==, -EPERM);
    g_assert_cmpint(chmod(path, 0600), ==, 0);
    g_assert_cmpint(open_iscsi(arg), ==, -ECONNREFUSED);
    g_clear_pointer(&arg, g_free);

    /* A password alone needs the user from the URL... */
    g_free(path);
    path = secret_file(dir, "pw", 0600);
    arg = g_strdup_printf("0=iscsi://127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg), ==, -EINVAL);
    g_clear_pointer(&arg, g_free);
    arg = g_strdup_printf("0=iscsi://user@127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg), ==, -ECONNREFUSED);
    g_clear_pointer(&arg, g_free);
    /* ...and a password in both places is ambiguous. */
    arg = g_strdup_printf("0=iscsi://user%%pw@127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg), ==, -EINVAL);
    g_clear_pointer(&arg, g_free);
    /* An empty secret is no secret. */
    g_free(path);
    path = secret_file(dir, "\n", 0600);
    arg = g_strdup_printf("0=iscsi://user@127.0.0.1:1/iqn.x:t/1,secret-file=%s", path);
    g_assert_cmpint(open_iscsi(arg), ==, -EINVAL);
    g_clear_pointer(&arg, g_free);
    arg = g_strdup_printf("0=iscsi://127.0.0.1:1/iqn.x:t/1,secret-file=%s/missing", dir);
    g_assert_cmpint(open_iscsi(arg), ==, -ENOENT);

    g_unlink(path);
    g_rmdir(dir);
}

static void test_rejections(void)
{
    static const struct {
        const char *arg;
        const char *culprit;   /* must appear (quoted) in the message */
    } cases[] = {
        /* IDs */
        { "file:/x", "ID=SPEC" },
        { "=null:1M", "bad LUN \"\"" },
        { "16384=null:1M", "\"16384\"" },
        { "256:0=null:1M", "\"256\"" },
        { "1:=null:1M", "bad LUN \"\"" },
        { ":1=null:1M", "bad target \"\"" },
        { "1:2:3=null:1M", "\"2:3\"" },
        { "x=null:1M", "\"x\"" },
        { "-1=null:1M", "\"-1\"" },
        { " 1=null:1M", "\" 1\"" },
        { "99999999999=null:1M", "\"99999999999\"" },
        /* Backends */
        { "0=disk:/x", "\"disk:/x\"" },
        { "0=File:/x", "\"File:/x\"" },
        { "0=", "\"\"" },
        { "0=iscsi:host/x", "\"iscsi:host/x\"" },
        { "0=iscsi://", "iscsi://" },
        { "0=file:", "needs a path" },
        { "0=file:,ro", "needs a path" },
        /* Sizes */
        { "0=ram:", "bad size \"\"" },
        { "0=ram:0", "bad size \"0\"" },
        { "0=ram:12X", "\"12X\"" },
        { "0=null:1.5M", "\"1.5M\"" },
        { "0=ram:1000", "size 1000" },
        { "0=ram:1536,block-size=4096", "size 1536" },
        { "0=file:/x,size=0", "\"0\"" },
        { "0=file:/x,size=", "\"\"" },
        { "0=file:/x,size=100", "size 100" },
        { "0=file:/x,size=6K,block-size=4096", "size 6144" },
        /* Options */
        { "0=file:/x,rw", "\"rw\"" },
        { "0=file:/x,ro,ro", "\"ro\" given twice" },
        { "0=file:/x,block-size=512,block-size=4096", "\"block-size\" given twice" },
        { "0=file:/x,ro=on", "\"ro\" takes no value" },
        { "0=file:/x,direct=1", "\"direct\" takes no value" },
        { "0=file:/x,block-size", "\"block-size\" needs a value" },
        { "0=file:/x,block-size=1024", "\"1024\"" },
        { "0=file:/x,block-size=4k2", "\"4k2\"" },
        { "0=file:/x,", "empty option \"\"" },
        { "0=file:/x,,", NULL },    /* path "/x," with no options: accepted */
        { "0=file:/x,=5", "empty option \"=5\"" },
        { "0=ram:1M,direct", "\"direct\" for ram:" },
        { "0=null:1M,size=2M", "\"size\" for null:" },
        { "0=iscsi://h/iqn/0,direct", "\"direct\" for iscsi://" },
        { "0=iscsi://h/iqn/0,queue-depth=0", "bad queue-depth \"0\"" },
        { "0=iscsi://h/iqn/0,queue-depth=1025", "bad queue-depth \"1025\"" },
        { "0=iscsi://h/iqn/0,queue-depth=8k", "bad queue-depth \"8k\"" },
        { "0=iscsi://h/iqn/0,sessions=17", "bad sessions \"17\"" },
        { "0=iscsi://h/iqn/0,sessions=-1", "bad sessions \"-1\"" },
        { "0=iscsi://h/iqn/0,sessions=", "bad sessions \"\"" },
        { "0=iscsi://h/iqn/0,sessions=2,sessions=2", "\"sessions\" given twice" },
        { "0=iscsi://h/iqn/0,secret-file=", "\"secret-file\" needs a value" },
        { "0=iscsi://h/iqn/0,initiator-name", "\"initiator-name\" needs a value" },
        { "0=file:/x,sessions=2", "\"sessions\" for file:" },
        { "0=ram:1M,queue-depth=4", "\"queue-depth\" for ram:" },
        { "0=null:1M,secret-file=/x", "\"secret-file\" for null:" },
        { "0=ram:1M,,ro", "empty option \"\"" },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lun_spec s;
        char *err = NULL;
        int ret;

        memset(&s, 0x5a, sizeof(s));
        ret = lun_spec_parse(cases[i].arg, &s, &err);
        if (!cases[i].culprit) {
            g_assert_cmpint(ret, ==, 0);
            lun_spec_clear(&s);
            continue;
        }
        if (ret != -EINVAL) {
            g_error("\"%s\" was not rejected (ret %d)", cases[i].arg, ret);
        }
        g_assert_nonnull(err);
        /* The message quotes the whole argument and names the culprit. */
        g_assert_nonnull(strstr(err, cases[i].arg));
        if (!strstr(err, cases[i].culprit)) {
            g_error("message for \"%s\" does not name %s: %s", cases[i].arg,
                    cases[i].culprit, err);
        }
        /* A rejected spec owns nothing. */
        g_assert_null(s.path);
        g_free(err);
    }
}

static void test_errmsg_optional(void)
{
    struct lun_spec s;

    g_assert_cmpint(lun_spec_parse("0=bogus", &s, NULL), ==, -EINVAL);
    g_assert_null(s.path);
}

static void test_open_file(void)
{
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
    g_assert_cmpint(lun_spec_open(&s, &be), ==, 0);
    g_assert_true(be->read_only);
    g_assert_cmpuint(be->block_size, ==, 4096);
    g_assert_cmpuint(be->size, ==, 256 << 10);
    g_assert_nonnull(strstr(be->name, path));
    be->ops->close(be);
    lun_spec_clear(&s);

    /* A path that does not exist fails at open, not at parse. */
    g_free(arg);
    arg = g_strdup_printf("0=file:%s.missing", path);
    s = parse_ok(arg);
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_assert_cmpint(lun_spec_open(&s, &be), ==, -ENOENT);
    lun_spec_clear(&s);
    g_unlink(path);
}

static void test_open_ram_and_null(void)
{
    static const char *const args[] = { "0=ram:1M,block-size=4096,ro", "0=null:8M,ro" };

    for (unsigned i = 0; i < G_N_ELEMENTS(args); i++) {
        struct lun_spec s = parse_ok(args[i]);
        struct lun_backend *be = NULL;

        g_assert_cmpint(lun_spec_open(&s, &be), ==, 0);
        g_assert_cmpuint(be->size, ==, s.size);
        g_assert_cmpuint(be->block_size, ==, s.block_size ? s.block_size : 512);
        g_assert_true(be->read_only);
        be->ops->close(be);
        lun_spec_clear(&s);
    }
}

static void parse_fails_with(const char *arg, const char *culprit)
{
    struct lun_spec s;
    char *err = NULL;

    g_assert_cmpint(lun_spec_parse(arg, &s, &err), ==, -EINVAL);
    g_assert_nonnull(err);
    if (!strstr(err, culprit)) {
        g_error("\"%s\": message \"%s\" does not name \"%s\"", arg, err, culprit);
    }
    g_free(err);
}

static void test_hold_only_for_tests(void)
{
    struct lun_spec s;

    g_unsetenv(LUN_SPEC_TEST_BACKENDS_ENV);
    parse_fails_with("0=hold:1M,while=/tmp/x", "set VHOST_SCSI_TEST_BACKENDS=1");
    g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "yes", TRUE);
    parse_fails_with("0=hold:1M,while=/tmp/x", "test backend");

    g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "1", TRUE);
    s = parse_ok("2=hold:4M,while=/run/gate,block-size=4096");
    g_assert_cmpint(s.kind, ==, LUN_SPEC_HOLD);
    g_assert_cmpuint(s.lun, ==, 2);
    g_assert_cmpuint(s.size, ==, 4u << 20);
    g_assert_cmpuint(s.block_size, ==, 4096);
    g_assert_cmpstr(s.path, ==, "/run/gate");
    lun_spec_clear(&s);
    parse_fails_with("0=hold:1M", "needs while=PATH");
    parse_fails_with("0=hold:1M,while=", "needs a value");
    parse_fails_with("0=hold:1M,while=/x,ro", "unknown option \"ro\"");
    parse_fails_with("0=hold:0,while=/x", "bad size");
    g_unsetenv(LUN_SPEC_TEST_BACKENDS_ENV);
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
    g_assert_cmpint(lun_spec_open(&s, &be), ==, 0);
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
    g_test_add_func("/lun-spec/parse/ids", test_ids);
    g_test_add_func("/lun-spec/parse/file", test_file_forms);
    g_test_add_func("/lun-spec/parse/ram-and-null", test_ram_null_forms);
    g_test_add_func("/lun-spec/parse/iscsi-recognised", test_iscsi_recognised);
    g_test_add_func("/lun-spec/parse/iscsi-options", test_iscsi_options);
    g_test_add_func("/lun-spec/parse/iscsi-password-redacted", test_iscsi_redact);
    g_test_add_func("/lun-spec/parse/iscsi-lun-accepted", test_iscsi_lun_accepted);
    g_test_add_func("/lun-spec/parse/iscsi-lun-refused", test_iscsi_lun_refused);
    g_test_add_func("/lun-spec/parse/rejections", test_rejections);
    g_test_add_func("/lun-spec/parse/errmsg-optional", test_errmsg_optional);
    g_test_add_func("/lun-spec/open/file", test_open_file);
    g_test_add_func("/lun-spec/open/ram-and-null", test_open_ram_and_null);
    g_test_add_func("/lun-spec/parse/hold-only-for-tests", test_hold_only_for_tests);
    g_test_add_func("/lun-spec/open/hold", test_open_hold);
    g_test_add_func("/lun-spec/open/iscsi-checks-before-connecting",
                    test_open_iscsi_checks_before_connecting);
    return g_test_run();
}
