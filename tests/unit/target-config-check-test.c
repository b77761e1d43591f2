/*
 * Specification of the daemon's checks on what it is told to serve before
 * anything is opened (hw/daemon/target-config-check.c): a saved
 * configuration (`--config FILE`) is accepted only whole and well-formed,
 * and a refusal names the byte or the element at fault in words an
 * operator can act on; backend, controller and initiator names keep to
 * their grammars.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>

#include <glib.h>

#include "target.h"
#include "vs-error.h"

/* The file's text parsed; NULL and *err (-EINVAL) on refusal. */
static JsonNode *parse(const char *text, GError **err)
{
    JsonNode *root = target_config_parse(text, strlen(text), err);

    if (!root) {
        g_assert_error(*err, VS_ERROR, EINVAL);
    }
    return root;
}

/* text is refused, and the reason contains every one of words (NULL-ended). */
static void assert_refused(const char *text, const char *const *words)
{
    g_autoptr(GError) err = NULL;
    JsonNode *root = parse(text, &err);

    if (root) {
        json_node_unref(root);
        g_error("accepted: %s", text);
    }
    g_assert_nonnull(err);
    for (const char *const *w = words; *w; w++) {
        if (!strstr(err->message, *w)) {
            g_error("refusal of %s says \"%s\", without \"%s\"", text, err->message, *w);
        }
    }
}

#define REFUSED(text, ...) assert_refused(text, (const char *const[]){ __VA_ARGS__, NULL })

static void test_good_minimal(void)
{
    g_autoptr(GError) err = NULL;
    JsonNode *root = parse("{\"version\": 1, \"backends\": [], \"controllers\": []}", &err);

    g_assert_null(err);
    g_assert_nonnull(root);
    g_assert_cmpint(json_object_get_int_member(json_node_get_object(root), "version"), ==,
                    TARGET_CONFIG_VERSION);
    json_node_unref(root);
}

/* What config-save writes, every optional member included. */
static void test_good_full(void)
{
    static const char text[] =
        "{\"version\": 1,"
        " \"backends\": [{\"name\": \"data\", \"spec\": \"file:/var/d.img,direct\","
        "                 \"implicit\": false, \"qos\": {\"iops\": 100, \"bandwidth\": 0}},"
        "                {\"name\": \"lun0:1\", \"spec\": \"ram:1G\", \"implicit\": true}],"
        " \"controllers\": [{\"name\": \"default\", \"luns\": ["
        "                      {\"target\": 0, \"lun\": 1, \"backend\": \"lun0:1\"}]},"
        "                   {\"name\": \"vm1\", \"socket\": \"/run/vm1.sock\", \"queues\": 2,"
        "                    \"allow_uid\": [107], \"allow_gid\": [], \"socket_group\": \"kvm\","
        "                    \"initiator\": \"iqn.2026-12.org.example:vm1\","
        "                    \"luns\": [{\"target\": 0, \"lun\": 0, \"backend\": \"data\"}]}]}";
    g_autoptr(GError) err = NULL;
    JsonNode *root = parse(text, &err);
    JsonArray *ctrls;

    g_assert_null(err);
    g_assert_nonnull(root);
    ctrls = json_object_get_array_member(json_node_get_object(root), "controllers");
    g_assert_cmpuint(json_array_get_length(ctrls), ==, 2);
    json_node_unref(root);
}

static void test_bad_json(void)
{
    /* Where the text breaks, as a byte offset. */
    REFUSED("{\"version\": 1, \"backends\": [", "byte");
    REFUSED("", "");
    REFUSED("[1, 2]", "");
    REFUSED("{\"version\": 1, \"version\": 1, \"backends\": [], \"controllers\": []}",
            "duplicate member name \"version\"");
    /* json-glib would read infinity, which cannot be written back (fuzz-config found it). */
    REFUSED("{\"version\": 1, \"backends\": [], \"controllers\": [{\"name\": \"vm2\", "
            "\"socket\": \"/run/vm2.sock\", \"allow_uid\": [5e1000], \"luns\": []}]}",
            "number out of range");
}

static void test_bad_top(void)
{
    REFUSED("{\"version\": 2, \"backends\": [], \"controllers\": []}",
            "unsupported version (expected 1)");
    REFUSED("{\"backends\": [], \"controllers\": []}", "missing member \"version\"");
    REFUSED("{\"version\": 1, \"controllers\": []}", "missing member \"backends\"");
    REFUSED("{\"version\": \"1\", \"backends\": [], \"controllers\": []}",
            "member \"version\" has the wrong type");
    REFUSED("{\"version\": 1, \"backends\": [], \"controllers\": [], \"luns\": []}",
            "unknown member \"luns\"");
}

static void test_bad_backend(void)
{
    REFUSED("{\"version\": 1, \"backends\": [{\"name\": \"a\"}], \"controllers\": []}",
            "backends[0]", "missing member \"spec\"");
    REFUSED("{\"version\": 1, \"backends\": [{\"name\": \"a\", \"spec\": \"ram:1M\"},"
            " {\"name\": 7, \"spec\": \"ram:1M\"}], \"controllers\": []}",
            "backends[1]", "member \"name\" has the wrong type");
    REFUSED("{\"version\": 1, \"backends\": [{\"name\": \"a\", \"spec\": \"ram:1M\","
            " \"qos\": {\"iops\": -1}}], \"controllers\": []}",
            "backends[0].qos", "limits must be >= 0");
    REFUSED("{\"version\": 1, \"backends\": [{\"name\": \"a\", \"spec\": \"ram:1M\","
            " \"qos\": {\"latency\": 1}}], \"controllers\": []}",
            "backends[0].qos", "unknown member \"latency\"");
}

static void test_bad_controller(void)
{
    REFUSED("{\"version\": 1, \"backends\": [], \"controllers\": [{\"name\": \"vm1\","
            " \"luns\": []}]}",
            "controllers[0]", "needs a socket");
    REFUSED("{\"version\": 1, \"backends\": [], \"controllers\": [{\"name\": \"default\"}]}",
            "controllers[0]", "missing member \"luns\"");
    REFUSED("{\"version\": 1, \"backends\": [], \"controllers\": [{\"name\": \"default\","
            " \"initiator\": \"has space\", \"luns\": []}]}",
            "controllers[0]", "initiator 'has space'");
    REFUSED("{\"version\": 1, \"backends\": [], \"controllers\": [{\"name\": \"default\","
            " \"luns\": [{\"target\": 0, \"lun\": 0}]}]}",
            "controllers[0].luns[0]", "missing member \"backend\"");
}

/* Past the bounds a saved configuration can reach: refused, not walked. */
static void test_bad_depth(void)
{
    GString *s = g_string_new("{\"version\": 1, \"backends\": [], \"controllers\": [");

    for (int i = 0; i < 32; i++) {
        g_string_append_c(s, '[');
    }
    for (int i = 0; i < 32; i++) {
        g_string_append_c(s, ']');
    }
    g_string_append(s, "]}");
    REFUSED(s->str, "byte");
    g_string_free(s, TRUE);
}

static void test_names(void)
{
    g_autofree char *longest = g_strnfill(64, 'a');
    g_autofree char *too_long = g_strnfill(65, 'a');
    g_autofree char *iqn_longest = g_strnfill(TARGET_INITIATOR_MAX, 'i');
    g_autofree char *iqn_too_long = g_strnfill(TARGET_INITIATOR_MAX + 1, 'i');

    g_assert_true(target_name_ok("data"));
    g_assert_true(target_name_ok("lun0:1"));
    g_assert_true(target_name_ok("pool/img-1.a_b"));
    g_assert_true(target_name_ok(longest));
    g_assert_false(target_name_ok(""));
    g_assert_false(target_name_ok(too_long));
    g_assert_false(target_name_ok("a b"));
    g_assert_false(target_name_ok("a\"b"));
    g_assert_false(target_name_ok("caf\xc3\xa9"));

    g_assert_true(target_initiator_ok("iqn.2026-12.org.vhost-scsi:default"));
    g_assert_true(target_initiator_ok(iqn_longest));
    g_assert_false(target_initiator_ok(""));
    g_assert_false(target_initiator_ok(iqn_too_long));
    g_assert_false(target_initiator_ok("iqn/with/slash"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/target-config-check/good/minimal", test_good_minimal);
    g_test_add_func("/target-config-check/good/full", test_good_full);
    g_test_add_func("/target-config-check/bad/json", test_bad_json);
    g_test_add_func("/target-config-check/bad/top", test_bad_top);
    g_test_add_func("/target-config-check/bad/backend", test_bad_backend);
    g_test_add_func("/target-config-check/bad/controller", test_bad_controller);
    g_test_add_func("/target-config-check/bad/depth", test_bad_depth);
    g_test_add_func("/target-config-check/names", test_names);
    return g_test_run();
}
