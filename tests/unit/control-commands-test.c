/*
 * Specification of `vhost-scsi-ctl target` commands as JSON-RPC requests
 * (hw/control/control-commands.c):
 *  - each command is one method with the params the server reads
 *    (docs/control.md); a LUN is [TARGET:]LUN, a size takes K/M/G/T;
 *  - --controller goes to the lun-* methods only;
 *  - controller add takes its options anywhere, as "--opt value" or
 *    "--opt=value", repeatable --allow-uid/--allow-gid into arrays;
 *  - what is not a command is a usage error naming the word at fault,
 *    and no request is left behind.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-commands.h"

/* The request words make, as "method {params}" (params compact), or the usage message. */
static char *request_of(const char *controller, const char *words)
{
    g_auto(GStrv) argv = g_strsplit(words, " ", -1);
    g_autoptr(GError) err = NULL;
    struct ctl_request req;
    char *out;

    if (!ctl_command_parse((int)g_strv_length(argv), argv, controller, &req, &err)) {
        g_assert_error(err, CTL_COMMAND_ERROR, CTL_COMMAND_ERROR_USAGE);
        g_assert_null(req.params);
        return g_strdup_printf("usage: %s", err->message);
    }
    g_assert_no_error(err);
    if (req.params) {
        g_autofree char *params = json_to_string(req.params, FALSE);

        out = g_strdup_printf("%s %s [%s]", req.method, params, req.what);
    } else {
        out = g_strdup_printf("%s [%s]", req.method, req.what);
    }
    ctl_request_clear(&req);
    return out;
}

static void check(const char *controller, const char *words, const char *want)
{
    g_autofree char *got = request_of(controller, words);

    if (strcmp(got, want)) {
        g_error("'%s': got\n  %s\nwanted\n  %s", words, got, want);
    }
}

static void test_methods_and_params(void)
{
    check(NULL, "version", "version []");
    check(NULL, "lun list", "lun-list []");
    check(NULL, "lun add 1=file:/d.img,ro", "lun-add {\"lun\":\"1=file:/d.img,ro\"} [added]");
    check(NULL, "lun remove 2:5", "lun-remove {\"target\":2,\"lun\":5} [removed]");
    check(NULL, "lun resize 3 2G",
          "lun-resize {\"target\":0,\"lun\":3,\"size\":2147483648} [resized]");
    check(NULL, "lun resize 3", "lun-resize {\"target\":0,\"lun\":3} [resized]");
    check(NULL, "lun map 0:1 disk", "lun-map {\"target\":0,\"lun\":1,\"backend\":\"disk\"} [mapped]");
    check(NULL, "lun unmap 1", "lun-unmap {\"target\":0,\"lun\":1} [unmapped]");
    check(NULL, "backend add disk ram:1G",
          "backend-add {\"name\":\"disk\",\"spec\":\"ram:1G\"} [added]");
    check(NULL, "backend resize disk 4M",
          "backend-resize {\"name\":\"disk\",\"size\":4194304} [resized]");
    check(NULL, "backend remove disk", "backend-remove {\"name\":\"disk\"} [removed]");
    check(NULL, "backend list", "backend-list []");
    check(NULL, "method list", "method-list []");
    check(NULL, "connection list", "connection-list []");
    check(NULL, "controller list", "controller-list []");
    check(NULL, "controller remove vm2", "controller-remove {\"name\":\"vm2\"} [removed]");
    check(NULL, "qos set disk --iops 100 --bandwidth 1M",
          "qos-set {\"backend\":\"disk\",\"iops\":100,\"bandwidth\":1048576} [limits set on]");
    check(NULL, "stats", "stats []");
    check(NULL, "stats --backend disk", "stats {\"backend\":\"disk\"} []");
    check(NULL, "stats --prometheus", "stats-prometheus []");
    check(NULL, "config save /etc/vs.json", "config-save {\"file\":\"/etc/vs.json\"} [saved]");
}

static void test_controller_goes_to_lun_methods(void)
{
    check("vm2", "lun list", "lun-list {\"controller\":\"vm2\"} []");
    check("vm2", "lun remove 4", "lun-remove {\"target\":0,\"lun\":4,\"controller\":\"vm2\"} [removed]");
    check("vm2", "backend list", "backend-list []");
}

static void test_controller_add_options(void)
{
    check(NULL, "controller add vm2 /run/vm2.sock --queues 2 --allow-uid 0 --allow-uid=107 "
          "--allow-gid 5 --socket-group kvm --initiator iqn.2026-12.x:vm2",
          "controller-add {\"queues\":2,\"allow_uid\":[0,107],\"allow_gid\":[5],"
          "\"socket_group\":\"kvm\",\"initiator\":\"iqn.2026-12.x:vm2\",\"name\":\"vm2\","
          "\"socket\":\"/run/vm2.sock\"} [added]");
    check(NULL, "controller add --queues=1 vm3 x.sock",
          "controller-add {\"queues\":1,\"name\":\"vm3\",\"socket\":\"x.sock\"} [added]");
}

static void test_config_save_path_is_absolute(void)
{
    g_autofree char *cwd = g_get_current_dir();
    g_autofree char *abs = g_build_filename(cwd, "vs.json", NULL);
    g_autofree char *want = g_strdup_printf("config-save {\"file\":\"%s\"} [saved]", abs);

    /* the daemon's working directory is not ours */
    check(NULL, "config save vs.json", want);
}

static void test_bad_words_are_named(void)
{
    check(NULL, "", "usage: missing command");
    check(NULL, "frobnicate", "usage: unknown command 'frobnicate'");
    check(NULL, "version now", "usage: unknown command 'version'");
    check(NULL, "lun remove 256:0", "usage: '256:0': expected [TARGET:]LUN (0..255:0..16383)");
    check(NULL, "lun unmap 16384", "usage: '16384': expected [TARGET:]LUN (0..255:0..16383)");
    check(NULL, "lun resize 1 0", "usage: size '0': expected bytes with an optional K/M/G/T");
    check(NULL, "lun resize 1 1P", "usage: size '1P': expected bytes with an optional K/M/G/T");
    check(NULL, "lun grow 1", "usage: unknown lun command 'grow'");
    check(NULL, "backend resize disk lots",
          "usage: size 'lots': expected bytes with an optional K/M/G/T");
    check(NULL, "backend rename a b", "usage: unknown backend command 'rename'");
    check(NULL, "qos set disk --iops", "usage: expected: qos set BACKEND [--iops N] [--bandwidth SIZE]");
    check(NULL, "qos set disk --iops -1", "usage: qos set: bad '--iops' (--iops N, --bandwidth SIZE)");
    check(NULL, "stats --lun 1", "usage: stats: expected --prometheus, --controller NAME or "
          "--backend NAME, not '--lun'");
    check(NULL, "controller add vm3", "usage: controller add: expected NAME SOCKET [OPTIONS]");
    check(NULL, "controller add vm3 x.sock --queues zero",
          "usage: controller add: --queues 'zero': not a valid value");
    check(NULL, "controller add vm3 x.sock --queues 0",
          "usage: controller add: --queues '0': not a valid value");
    check(NULL, "controller add vm3 x.sock --bogus 1", "usage: controller add: unknown option '--bogus'");
    check(NULL, "controller add vm3 x.sock --initiator",
          "usage: controller add: --initiator needs a value");
    check(NULL, "controller add vm3 x.sock extra",
          "usage: controller add: expected NAME SOCKET [OPTIONS], not 'extra'");
    check(NULL, "config load x", "usage: expected: config save [FILE]");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/control-commands/methods-and-params", test_methods_and_params);
    g_test_add_func("/control-commands/controller-goes-to-lun-methods",
                    test_controller_goes_to_lun_methods);
    g_test_add_func("/control-commands/controller-add-options", test_controller_add_options);
    g_test_add_func("/control-commands/config-save-path-is-absolute",
                    test_config_save_path_is_absolute);
    g_test_add_func("/control-commands/bad-words-are-named", test_bad_words_are_named);
    return g_test_run();
}
