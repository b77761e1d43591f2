/*
 * Specification of the LUN-spec grammar (hw/block/lun-spec.c): every
 * form "ID=SPEC" (and a bare SPEC) accepts, what each one parses to, and
 * that each kind of mistake is rejected with a message quoting the text at
 * fault.  The grammar runs the checks it is given where they apply and
 * leaves an iscsi:// URL's LUN alone without them; the daemon's checks and
 * opening are tests/unit/lun-open-test.c's.  The "hold:" test backend
 * exists only with VHOST_SCSI_TEST_BACKENDS=1.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "lun-spec.h"
#include "test-hooks.h"

static struct lun_spec parse_ok(const char *arg)
{
    struct lun_spec s;
    GError *err = NULL;
    int ret = lun_spec_parse(arg, &s, &err);

    if (ret != 0) {
        g_error("\"%s\" was rejected: %s", arg, err->message);
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
    /* 512-byte blocks on 4 KiB physical ones (for ram: and null: too). */
    s = parse_ok("0=file:x,physical-block-size=4k");
    g_assert_cmpuint(s.phys_block_size, ==, 4096);
    lun_spec_clear(&s);
    s = parse_ok("0=ram:1M,block-size=4096,physical-block-size=64K");
    g_assert_cmpuint(s.phys_block_size, ==, 65536);
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
        bool no_fill;
    } cases[] = {
        { "0=ram:64M", LUN_SPEC_RAM, 64ull << 20, 0, false, false },
        { "0=ram:1g,block-size=4096", LUN_SPEC_RAM, 1ull << 30, 4096, false, false },
        { "0=ram:4096,ro", LUN_SPEC_RAM, 4096, 0, true, false },
        { "0=null:2T", LUN_SPEC_NULL, 2ull << 40, 0, false, false },
        { "0=null:512k,ro,block-size=512", LUN_SPEC_NULL, 512 << 10, 512, true, false },
        { "0=null:1G,fill=zero", LUN_SPEC_NULL, 1ull << 30, 0, false, false },
        { "0=null:1G,fill=none,block-size=4096", LUN_SPEC_NULL, 1ull << 30, 4096, false, true },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lun_spec s = parse_ok(cases[i].arg);

        g_assert_cmpint(s.kind, ==, cases[i].kind);
        g_assert_cmpuint(s.size, ==, cases[i].size);
        g_assert_cmpuint(s.block_size, ==, cases[i].block_size);
        g_assert_cmpint(s.ro, ==, cases[i].ro);
        g_assert_cmpint(s.null_no_fill, ==, cases[i].no_fill);
        g_assert_null(s.path);
        lun_spec_clear(&s);
    }
}

/* sanitize=on is the opt-in to SANITIZE, off by default, for every kind but hold:. */
static void test_sanitize_opt_in(void)
{
    static const char *const on[] = { "0=ram:1M,sanitize=on", "0=null:1M,sanitize=on",
                                      "0=file:/x,sanitize=on,ro",
                                      "0=iscsi://h/iqn/0,sanitize=on",
                                      "0=rbd:p/i,sanitize=on" };
    struct lun_spec s;

    for (unsigned i = 0; i < G_N_ELEMENTS(on); i++) {
        s = parse_ok(on[i]);
        g_assert_true(s.sanitize);
        lun_spec_clear(&s);
    }
    s = parse_ok("0=ram:1M,sanitize=off");
    g_assert_false(s.sanitize);
    lun_spec_clear(&s);
    s = parse_ok("0=ram:1M");
    g_assert_false(s.sanitize);
    lun_spec_clear(&s);
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

static void test_rbd_forms(void)
{
    struct lun_spec s = parse_ok("1=rbd:rbd/vm1");
    GError *err = NULL;
    static const char *const bad[] = {
        "0=rbd:", "0=rbd:vm1", "0=rbd:/vm1", "0=rbd:rbd/", "0=rbd:rbd/vm1@", "0=rbd:a/b/c",
        "0=rbd:a/b@c@d", "0=rbd:a/b,conf=", "0=rbd:a/b,direct", "0=rbd:a/b,id=x,id=y",
        "0=rbd:a/b,busy-timeout=0", "0=rbd:a/b,busy-timeout=3601", "0=rbd:a/b,busy-timeout=",
        "0=rbd:a/b,busy-timeout=5s", "0=file:/x,busy-timeout=5",
    };

    g_assert_cmpint(s.kind, ==, LUN_SPEC_RBD);
    g_assert_cmpstr(s.rbd_pool, ==, "rbd");
    g_assert_cmpstr(s.rbd_image, ==, "vm1");
    g_assert_null(s.rbd_snap);
    g_assert_null(s.rbd_conf);
    g_assert_false(s.ro);
    g_assert_cmpuint(s.busy_timeout, ==, 0);
    lun_spec_clear(&s);

    s = parse_ok("1=rbd:rbd/vm1,busy-timeout=3600");
    g_assert_cmpuint(s.busy_timeout, ==, 3600);
    lun_spec_clear(&s);
    s = parse_ok("1=rbd:rbd/vm1,busy-timeout=1");
    g_assert_cmpuint(s.busy_timeout, ==, 1);
    lun_spec_clear(&s);

    s = parse_ok("0:3=rbd:pool-a/base@golden,conf=/etc/ceph/x.conf,id=vhost,"
                 "keyring=/k/ring,ro");
    g_assert_cmpuint(s.target, ==, 0);
    g_assert_cmpuint(s.lun, ==, 3);
    g_assert_cmpstr(s.rbd_pool, ==, "pool-a");
    g_assert_cmpstr(s.rbd_image, ==, "base");
    g_assert_cmpstr(s.rbd_snap, ==, "golden");
    g_assert_cmpstr(s.rbd_conf, ==, "/etc/ceph/x.conf");
    g_assert_cmpstr(s.rbd_id, ==, "vhost");
    g_assert_cmpstr(s.rbd_keyring, ==, "/k/ring");
    g_assert_true(s.ro);
    lun_spec_clear(&s);

    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_assert_cmpint(lun_spec_parse(bad[i], &s, &err), ==, -EINVAL);
        g_assert_nonnull(err);
        g_assert_null(s.rbd_pool);
        g_clear_error(&err);
    }
}

static void test_iscsi_options(void)
{
    struct lun_spec s = parse_ok("0=iscsi://u@10.0.0.1/iqn.2024-01.org.example:t1/1,"
                                 "queue-depth=1024,sessions=16,secret-file=/run/chap.secret,"
                                 "initiator-name=iqn.2026-12.org.example:host1,login-timeout=300");

    g_assert_cmpstr(s.path, ==, "iscsi://u@10.0.0.1/iqn.2024-01.org.example:t1/1");
    g_assert_cmpuint(s.queue_depth, ==, 1024);
    g_assert_cmpuint(s.sessions, ==, 16);
    g_assert_cmpstr(s.secret_file, ==, "/run/chap.secret");
    g_assert_cmpstr(s.initiator_name, ==, "iqn.2026-12.org.example:host1");
    g_assert_cmpuint(s.login_timeout, ==, 300);
    g_assert_false(s.ro);
    lun_spec_clear(&s);
    g_assert_null(s.secret_file);

    s = parse_ok("0=iscsi://h/iqn/1,sessions=1,queue-depth=1,login-timeout=1");
    g_assert_cmpuint(s.queue_depth, ==, 1);
    g_assert_cmpuint(s.sessions, ==, 1);
    g_assert_cmpuint(s.login_timeout, ==, 1);
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
    GError *err = NULL;

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
        g_assert_nonnull(strstr(err->message, "longer than 255"));
        g_clear_error(&err);
    }
    /* A rejected spec's message names the culprit but not the password. */
    g_assert_cmpint(lun_spec_parse("0=iscsi://u%s3cr3t@h/iqn/1,bogus", &s, &err), ==, -EINVAL);
    g_assert_nonnull(strstr(err->message, "\"bogus\""));
    g_assert_null(strstr(err->message, "s3cr3t"));
    g_clear_error(&err);
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
        { "0=file:/x,physical-block-size=3000", "bad physical block size \"3000\"" },
        { "0=file:/x,physical-block-size=256", "bad physical block size \"256\"" },
        { "0=null:1M,block-size=4096,physical-block-size=512", "is smaller than" },
        { "0=iscsi://h/iqn/0,physical-block-size=4096", "\"physical-block-size\" for iscsi://" },
        { "0=file:/x,", "empty option \"\"" },
        { "0=file:/x,,", NULL },    /* path "/x," with no options: accepted */
        { "0=file:/x,=5", "empty option \"=5\"" },
        { "0=ram:1M,direct", "\"direct\" for ram:" },
        { "0=null:1M,size=2M", "\"size\" for null:" },
        { "0=null:1M,fill=random", "bad fill \"random\"" },
        { "0=null:1M,fill=", "bad fill \"\"" },
        { "0=null:1M,fill", "\"fill\" needs a value" },
        { "0=null:1M,fill=none,fill=zero", "\"fill\" given twice" },
        { "0=ram:1M,fill=none", "\"fill\" for ram:" },
        { "0=ram:1M,sanitize=yes", "bad sanitize \"yes\" (expected on or off)" },
        { "0=ram:1M,sanitize", "\"sanitize\" needs a value" },
        { "0=iscsi://h/iqn/0,direct", "\"direct\" for iscsi://" },
        { "0=iscsi://h/iqn/0,queue-depth=0", "bad queue-depth \"0\"" },
        { "0=iscsi://h/iqn/0,queue-depth=1025", "bad queue-depth \"1025\"" },
        { "0=iscsi://h/iqn/0,queue-depth=8k", "bad queue-depth \"8k\"" },
        { "0=iscsi://h/iqn/0,sessions=17", "bad sessions \"17\"" },
        { "0=iscsi://h/iqn/0,sessions=-1", "bad sessions \"-1\"" },
        { "0=iscsi://h/iqn/0,sessions=", "bad sessions \"\"" },
        { "0=iscsi://h/iqn/0,sessions=2,sessions=2", "\"sessions\" given twice" },
        { "0=iscsi://h/iqn/0,login-timeout=0", "bad login-timeout \"0\" (expected 1-300)" },
        { "0=iscsi://h/iqn/0,login-timeout=301", "bad login-timeout \"301\"" },
        { "0=iscsi://h/iqn/0,login-timeout=5s", "bad login-timeout \"5s\"" },
        { "0=file:/x,login-timeout=5", "\"login-timeout\" for file:" },
        { "0=iscsi://h/iqn/0,secret-file=", "\"secret-file\" needs a value" },
        { "0=iscsi://h/iqn/0,initiator-name", "\"initiator-name\" needs a value" },
        { "0=file:/x,sessions=2", "\"sessions\" for file:" },
        { "0=ram:1M,queue-depth=4", "\"queue-depth\" for ram:" },
        { "0=null:1M,secret-file=/x", "\"secret-file\" for null:" },
        { "0=ram:1M,,ro", "empty option \"\"" },
    };

    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        struct lun_spec s;
        GError *err = NULL;
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
        g_assert_error(err, VS_ERROR, EINVAL);
        /* The message quotes the whole argument and names the culprit. */
        g_assert_nonnull(strstr(err->message, cases[i].arg));
        if (!strstr(err->message, cases[i].culprit)) {
            g_error("message for \"%s\" does not name %s: %s", cases[i].arg,
                    cases[i].culprit, err->message);
        }
        /* A rejected spec owns nothing. */
        g_assert_null(s.path);
        g_clear_error(&err);
    }
}

static void test_errmsg_optional(void)
{
    struct lun_spec s;

    g_assert_cmpint(lun_spec_parse("0=bogus", &s, NULL), ==, -EINVAL);
    g_assert_null(s.path);
}

static void parse_fails_with(const char *arg, const char *culprit)
{
    struct lun_spec s;
    GError *err = NULL;

    g_assert_cmpint(lun_spec_parse(arg, &s, &err), ==, -EINVAL);
    g_assert_nonnull(err);
    if (!strstr(err->message, culprit)) {
        g_error("\"%s\": message \"%s\" does not name \"%s\"", arg, err->message, culprit);
    }
    g_clear_error(&err);
}

/* With the test hooks built in: hold: exists, and only with its variable set. */
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

/* Without them (an installed daemon): no hold:, whatever the environment says. */
static void test_no_hold_without_the_hooks(void)
{
    g_setenv(LUN_SPEC_TEST_BACKENDS_ENV, "1", TRUE);
    parse_fails_with("2=hold:4M,while=/run/gate", "unknown backend \"hold:");
    g_unsetenv(LUN_SPEC_TEST_BACKENDS_ENV);
}

/* vhost-scsi-ctl's form: the SPEC alone, its LUN being an argument of its own. */
static void test_backend_alone(void)
{
    struct lun_spec s;
    GError *err = NULL;

    g_assert_cmpint(lun_spec_parse_backend("file:/a,,b,ro,size=1M", &s, &err), ==, 0);
    g_assert_cmpint(s.kind, ==, LUN_SPEC_FILE);
    g_assert_cmpstr(s.path, ==, "/a,b");
    g_assert_true(s.ro);
    g_assert_cmpuint(s.size, ==, 1 << 20);
    g_assert_cmpuint(s.lun, ==, 0);
    lun_spec_clear(&s);
    g_assert_cmpint(lun_spec_parse_backend("null:2G", &s, &err), ==, 0);
    g_assert_cmpint(s.kind, ==, LUN_SPEC_NULL);
    lun_spec_clear(&s);

    /* An "ID=" is not part of SPEC: "0=ram:1M" is an unknown backend "0=ram:1M". */
    g_assert_cmpint(lun_spec_parse_backend("0=ram:1M", &s, &err), ==, -EINVAL);
    g_assert_error(err, VS_ERROR, EINVAL);
    g_assert_cmpstr(err->message, ==,
                    "LUN spec \"0=ram:1M\": unknown backend \"0=ram:1M\" "
                    "(expected file:, ram:, null:, iscsi:// or rbd:)");
    g_clear_error(&err);
    g_assert_cmpint(lun_spec_parse_backend("file:/x,direct,bogus", &s, &err), ==, -EINVAL);
    g_assert_cmpstr(err->message, ==,
                    "LUN spec \"file:/x,direct,bogus\": unknown option \"bogus\" "
                    "for file:");
    g_assert_null(s.path);
    g_clear_error(&err);
}

static int refuse_iscsi_lun(const char *url, unsigned *lun, char **field)
{
    *field = g_strdup("7");
    return -EINVAL;
}

/*
 * The grammar does not judge an iscsi:// URL's LUN (libiscsi's rules are
 * the iscsi layer's); with checks it runs them before the options, so a
 * spec wrong twice is refused for its URL whoever parses it.
 */
static void test_iscsi_lun_left_to_the_checks(void)
{
    static const struct lun_spec_checks checks = {
        .iscsi_url_lun = refuse_iscsi_lun, .iscsi_max_lun = 5,
    };
    struct lun_spec s;
    GError *err = NULL;

    s = parse_ok("0=iscsi://h/iqn.x:t/-1,ro");
    g_assert_cmpuint(s.iscsi_lun, ==, 0);
    g_assert_true(s.ro);
    lun_spec_clear(&s);
    g_assert_cmpint(lun_spec_parse_checked("0=iscsi://h/iqn/7,bogus", &checks, &s, &err), ==,
                    -EINVAL);
    g_assert_cmpstr(err->message, ==,
                    "LUN spec \"0=iscsi://h/iqn/7,bogus\": bad LUN \"7\" at the end "
                    "of the iscsi:// URL (expected 0-5)");
    g_clear_error(&err);
    /* Other kinds never reach the iSCSI check. */
    g_assert_cmpint(lun_spec_parse_checked("0=ram:1M", &checks, &s, NULL), ==, 0);
    lun_spec_clear(&s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lun-spec/sanitize-opt-in", test_sanitize_opt_in);
    g_test_add_func("/lun-spec/parse/ids", test_ids);
    g_test_add_func("/lun-spec/parse/file", test_file_forms);
    g_test_add_func("/lun-spec/parse/ram-and-null", test_ram_null_forms);
    g_test_add_func("/lun-spec/parse/iscsi-recognised", test_iscsi_recognised);
    g_test_add_func("/lun-spec/parse/iscsi-options", test_iscsi_options);
    g_test_add_func("/lun-spec/parse/rbd", test_rbd_forms);
    g_test_add_func("/lun-spec/parse/iscsi-password-redacted", test_iscsi_redact);
    g_test_add_func("/lun-spec/parse/iscsi-lun-left-to-the-checks",
                    test_iscsi_lun_left_to_the_checks);
    g_test_add_func("/lun-spec/parse/rejections", test_rejections);
    g_test_add_func("/lun-spec/parse/errmsg-optional", test_errmsg_optional);
    if (TEST_HOOKS_BUILT) {
        g_test_add_func("/lun-spec/parse/hold-only-for-tests", test_hold_only_for_tests);
    } else {
        g_test_add_func("/lun-spec/parse/no-hold-without-test-hooks",
                        test_no_hold_without_the_hooks);
    }
    g_test_add_func("/lun-spec/parse/backend-alone", test_backend_alone);
    return g_test_run();
}
