/*
 * Specification of vhost-scsi-ctl's lio commands (hw/lio/lio-command.c):
 *  - the words name one command with its arguments; a WWPN is checked
 *    for its form and a LUN for 0..16383 before any root is opened, and
 *    a refusal names the word at fault;
 *  - qemu-args and generate-wwpn need no root; the others run one
 *    operation on it and return what the command prints (create: the
 *    WWPN, made up when none is given; list: the text or, with --json,
 *    the JSON);
 *  - a refusal is the operation's GError (VS_ERROR, the errno), which
 *    vhost-scsi-ctl prints once as "vhost-scsi-ctl: MESSAGE" (exit 1).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "lio-command.h"
#include "lio-fixture.h"
#include "vs-error.h"

/*
 * NULL if words make a command (into c), or the usage message ("usage:
 * ..."); *keep holds the words c points into (the previous ones freed).
 */
static char *parse(const char *words, struct lio_command *c, GStrv *keep)
{
    g_autoptr(GError) err = NULL;
    char **w;

    g_strfreev(*keep);
    w = *keep = g_strsplit(words, " ", -1);

    *c = (struct lio_command){ .tpgt = LIO_DEFAULT_TPGT };
    if (!lio_command_parse((const char *const *)w, (int)g_strv_length(w), c, &err)) {
        g_assert_error(err, LIO_COMMAND_ERROR, LIO_COMMAND_ERROR_USAGE);
        return g_strdup_printf("usage: %s", err->message);
    }
    g_assert_no_error(err);
    return NULL;
}

static void refused(const char *words, const char *want)
{
    struct lio_command c;
    g_auto(GStrv) keep = NULL;
    g_autofree char *got = parse(words, &c, &keep);

    g_assert_cmpstr(got, ==, want);
}

static void test_words(void)
{
    struct lio_command c;
    g_auto(GStrv) keep = NULL;

    g_assert_null(parse("lun add " WWPN " 7 ram:4M", &c, &keep));
    g_assert_cmpint(c.kind, ==, LIO_CMD_LUN_ADD);
    g_assert_cmpstr(c.wwpn, ==, WWPN);
    g_assert_cmpuint(c.lun, ==, 7);
    g_assert_cmpstr(c.spec, ==, "ram:4M");
    g_assert_true(lio_command_needs_root(&c));
    g_assert_null(parse("lun remove " WWPN " 16383", &c, &keep));
    g_assert_cmpint(c.kind, ==, LIO_CMD_LUN_REMOVE);
    g_assert_cmpuint(c.lun, ==, 16383);
    g_assert_null(parse("create", &c, &keep));
    g_assert_cmpint(c.kind, ==, LIO_CMD_CREATE);
    g_assert_null(c.wwpn);
    g_assert_null(parse("save /tmp/x.json", &c, &keep));
    g_assert_cmpstr(c.file, ==, "/tmp/x.json");
    g_assert_null(parse("qemu-args " WWPN, &c, &keep));
    g_assert_false(lio_command_needs_root(&c));
    g_assert_null(parse("generate-wwpn", &c, &keep));
    g_assert_false(lio_command_needs_root(&c));
}

static void test_refusals_name_the_word(void)
{
    refused("", "usage: missing command");
    refused("frob", "usage: unknown command 'frob'");
    refused("lun", "usage: 'lun' needs 'add' or 'remove'");
    refused("lun move " WWPN " 0", "usage: 'lun' needs 'add' or 'remove'");
    refused("lun add " WWPN " 0", "usage: wrong number of arguments for 'lun'");
    refused("create " WWPN " extra", "usage: wrong number of arguments for 'create'");
    refused("list now", "usage: wrong number of arguments for 'list'");
    refused("delete naa.123", "usage: invalid WWPN 'naa.123' (naa.5<15 hex>, naa.6<31 hex>, "
            "iqn.YYYY-MM.domain, eui.<16 hex>)");
    refused("lun add " WWPN " 16384 ram:4M", "usage: LUN '16384': expected 0..16383");
    refused("lun remove " WWPN " -1", "usage: LUN '-1': expected 0..16383");
}

static void test_no_root_needed(void)
{
    struct lio_command c;
    g_auto(GStrv) keep = NULL;
    g_autofree char *args = NULL, *wwpn = NULL;

    g_assert_null(parse("qemu-args " WWPN, &c, &keep));
    c.bus = "pcie.0";
    c.num_queues = 4;
    g_assert_cmpint(lio_command_run(NULL, &c, &args, NULL), ==, 0);
    g_assert_cmpstr(args, ==, "-device vhost-scsi-pci,wwpn=" WWPN ",bus=pcie.0,num_queues=4\n");
    g_assert_null(parse("generate-wwpn", &c, &keep));
    g_assert_cmpint(lio_command_run(NULL, &c, &wwpn, NULL), ==, 0);
    g_strchomp(wwpn);
    g_assert_true(lio_wwpn_valid(wwpn));
}

static void test_create_add_list(struct fx *f, gconstpointer data)
{
    struct lio_command c;
    g_auto(GStrv) keep = NULL;
    g_autofree char *created = NULL, *added = NULL, *text = NULL, *json = NULL;

    g_assert_null(parse("create " WWPN, &c, &keep));
    g_assert_cmpint(lio_command_run(f->lio, &c, &created, NULL), ==, 0);
    g_assert_cmpstr(created, ==, WWPN "\n");
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1"));
    g_assert_null(parse("lun add " WWPN " 0 ram:4M", &c, &keep));
    g_assert_cmpint(lio_command_run(f->lio, &c, &added, NULL), ==, 0);
    g_assert_null(added);
    g_assert_true(exists(f, "target/vhost/" WWPN "/tpgt_1/lun/lun_0"));
    g_assert_null(parse("list", &c, &keep));
    g_assert_cmpint(lio_command_run(f->lio, &c, &text, NULL), ==, 0);
    g_assert_nonnull(strstr(text, WWPN));
    c.json = true;
    g_assert_cmpint(lio_command_run(f->lio, &c, &json, NULL), ==, 0);
    g_assert_nonnull(strstr(json, "\"" WWPN "\""));
}

static void test_refusal_is_the_error(struct fx *f, gconstpointer data)
{
    struct lio_command c;
    g_auto(GStrv) keep = NULL;
    g_autofree char *out = NULL;
    g_autoptr(GError) err = NULL;

    g_assert_null(parse("lun add " WWPN " 0 ram:4M", &c, &keep));
    g_assert_cmpint(lio_command_run(f->lio, &c, &out, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "target " WWPN " tpgt 1 does not exist (create it first)");
    g_assert_null(out);
    c.tpgt = 256;
    g_assert_cmpint(lio_command_run(f->lio, &c, &out, &err), ==, -ERANGE);
    assert_error(&err, ERANGE, "TPGT 256 out of range 0..255");
    g_assert_null(parse("restore /nonexistent/saved.json", &c, &keep));
    g_assert_cmpint(lio_command_run(f->lio, &c, &out, &err), ==, -ENOENT);
    assert_error(&err, ENOENT, "reading /nonexistent/saved.json failed: *");
}

/* What the user sees of a refusal: one line, the tool's, with the cause. */
static void test_ctl_says_a_refusal_once(struct fx *f, gconstpointer data)
{
    if (!ctl_available()) {
        return;
    }
    g_autofree char *out = NULL, *err = NULL;
    g_assert_cmpint(run_ctl(f, &out, &err, "lun", "add", WWPN, "0", "ram:4M", NULL), ==, 1);
    g_assert_cmpstr(out, ==, "");
    g_assert_cmpstr(err, ==, "vhost-scsi-ctl: target " WWPN " tpgt 1 does not exist (create it "
                    "first)\n");

    g_autofree char *out2 = NULL, *err2 = NULL;
    g_assert_cmpint(run_ctl(f, &out2, &err2, "create", WWPN, "--nexus", "iqn.2024-12.com.x",
                            NULL), ==, 1);
    g_assert_cmpstr(err2, ==, "vhost-scsi-ctl: nexus 'iqn.2024-12.com.x' for " WWPN " must be a "
                    "valid name with the prefix naa.\n");
    g_assert_false(exists(f, "target/vhost/" WWPN));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/lio-command/words", test_words);
    g_test_add_func("/lio-command/refusals-name-the-word", test_refusals_name_the_word);
    g_test_add_func("/lio-command/no-root-needed", test_no_root_needed);
    ADD("/lio-command/create-add-list", test_create_add_list);
    ADD("/lio-command/refusal-is-the-error", test_refusal_is_the_error);
    ADD("/lio-command/ctl-says-a-refusal-once", test_ctl_says_a_refusal_once);
    return g_test_run();
}
