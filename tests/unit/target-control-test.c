/*
 * Specification of the daemon's control methods (hw/daemon/target-control.c)
 * answered in-process: a target with its control socket, its main loop
 * on the test's thread, a client on another calling the methods as
 * vhost-scsi-ctl does.  Each method answers its result or an error whose
 * code and words say why; what one call changes, the next one sees.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "target-fixture.h"

/* A method that answers nothing answers JSON null. */
static void assert_json_null(JsonNode *r)
{
    g_assert_true(r == NULL || JSON_NODE_HOLDS_NULL(r));
    if (r) {
        json_node_unref(r);
    }
}

static const char *str_member(JsonNode *n, const char *name)
{
    return json_object_get_string_member(json_node_get_object(n), name);
}

static void script_version(struct target_client *c)
{
    JsonNode *r = call_ok(c, "version", NULL);

    g_assert_cmpstr(str_member(r, "program"), ==, "vhost-scsi-target");
    g_assert_nonnull(str_member(r, "version"));
    g_assert_cmpint(json_object_get_int_member(json_node_get_object(r), "protocol"), >=, 1);
    json_node_unref(r);
    call_err(c, "version", "{\"verbose\": true}", CTL_E_INVALID_PARAMS, "verbose");
    call_err(c, "no-such-method", NULL, CTL_E_NO_METHOD, "no such method");
}

static void script_backends_and_luns(struct target_client *c)
{
    JsonNode *r;
    JsonArray *a;

    r = call_ok(c, "lun-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 0);
    json_node_unref(r);

    /* Opened off the main thread, answered once open. */
    r = call_ok(c, "backend-add", "{\"name\": \"data\", \"spec\": \"ram:1M\"}");
    g_assert_cmpstr(str_member(r, "name"), ==, "data");
    g_assert_false(json_object_get_boolean_member(json_node_get_object(r), "implicit"));
    json_node_unref(r);
    call_err(c, "backend-add", "{\"name\": \"data\", \"spec\": \"null:1M\"}", CTL_E_FAILED,
             "a backend named 'data' exists");

    r = call_ok(c, "lun-map", "{\"lun\": 1, \"backend\": \"data\"}");
    g_assert_cmpstr(str_member(r, "controller"), ==, "default");
    g_assert_cmpstr(str_member(r, "backend"), ==, "data");
    json_node_unref(r);
    call_err(c, "lun-map", "{\"lun\": 2, \"backend\": \"nope\"}", CTL_E_FAILED,
             "no backend named 'nope'");
    call_err(c, "lun-map", "{\"lun\": 2, \"backend\": \"data\", \"controller\": \"vm9\"}",
             CTL_E_FAILED, "no such controller");

    r = call_ok(c, "lun-add", "{\"lun\": \"2=ram:1M\"}");
    g_assert_cmpstr(str_member(r, "backend"), ==, "lun0:2");
    json_node_unref(r);
    call_err(c, "lun-add", "{\"lun\": \"2=null:1M\"}", CTL_E_FAILED, "already mapped");
    call_err(c, "lun-add", "{\"lun\": 3}", CTL_E_INVALID_PARAMS, "lun");

    r = call_ok(c, "lun-list", NULL);
    a = json_node_get_array(r);
    g_assert_cmpuint(json_array_get_length(a), ==, 2);
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(a, 0), "lun"), ==, 1);
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(a, 1), "lun"), ==, 2);
    json_node_unref(r);

    call_err(c, "backend-remove", "{\"name\": \"data\"}", CTL_E_FAILED,
             "mapped 1 time(s); unmap it first");
    /* Answered once the LUN's commands have drained. */
    r = call_ok(c, "lun-remove", "{\"lun\": 1}");
    assert_json_null(r);
    call_err(c, "lun-remove", "{\"lun\": 1}", CTL_E_FAILED, "no LUN is mapped there");
    r = call_ok(c, "backend-remove", "{\"name\": \"data\"}");
    assert_json_null(r);
    call_err(c, "backend-remove", "{\"name\": \"data\"}", CTL_E_FAILED,
             "no backend named 'data'");

    /* The implicit backend went with its LUN. */
    r = call_ok(c, "lun-remove", "{\"lun\": 2}");
    assert_json_null(r);
    r = call_ok(c, "backend-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 0);
    json_node_unref(r);
}

static void script_controllers(struct target_client *c)
{
    g_autofree char *sock = target_fixture_path(c->f, "vm1.sock");
    g_autofree char *params = g_strdup_printf("{\"name\": \"vm1\", \"socket\": \"%s\"}", sock);
    JsonNode *r;

    /* Its socket is made off the main thread; it listens once answered. */
    r = call_ok(c, "controller-add", params);
    json_node_unref(r);
    g_assert_true(g_file_test(sock, G_FILE_TEST_EXISTS));
    call_err(c, "controller-add", params, CTL_E_FAILED, "a controller named 'vm1' exists");

    r = call_ok(c, "controller-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 2);
    json_node_unref(r);

    r = call_ok(c, "lun-add", "{\"controller\": \"vm1\", \"lun\": \"0=ram:1M\"}");
    g_assert_cmpstr(str_member(r, "controller"), ==, "vm1");
    json_node_unref(r);
    call_err(c, "controller-remove", "{\"name\": \"vm1\"}", CTL_E_FAILED, "unmap its LUNs");
    call_err(c, "controller-remove", "{\"name\": \"default\"}", CTL_E_FAILED,
             "the default controller stays");
    r = call_ok(c, "lun-remove", "{\"controller\": \"vm1\", \"lun\": 0}");
    assert_json_null(r);
    r = call_ok(c, "controller-remove", "{\"name\": \"vm1\"}");
    json_node_unref(r);
    g_assert_false(g_file_test(sock, G_FILE_TEST_EXISTS));
    call_err(c, "controller-remove", "{\"name\": \"vm1\"}", CTL_E_FAILED,
             "no controller named 'vm1'");

    /* No front-end has connected to either. */
    r = call_ok(c, "connection-list", NULL);
    g_assert_cmpuint(json_array_get_length(json_node_get_array(r)), ==, 0);
    json_node_unref(r);
}

static void script_stats(struct target_client *c)
{
    JsonNode *r;
    JsonObject *o;
    JsonArray *a;

    r = call_ok(c, "lun-add", "{\"lun\": \"0=ram:1M\"}");
    json_node_unref(r);
    r = call_ok(c, "stats", NULL);
    o = json_node_get_object(r);
    g_assert_cmpfloat(json_object_get_double_member(o, "uptime_s"), >=, 0);
    a = json_object_get_array_member(o, "backends");
    g_assert_cmpuint(json_array_get_length(a), ==, 1);
    g_assert_cmpstr(json_object_get_string_member(json_array_get_object_element(a, 0), "name"),
                    ==, "lun0:0");
    a = json_object_get_array_member(o, "controllers");
    g_assert_cmpuint(json_array_get_length(a), ==, 1);
    g_assert_cmpint(json_object_get_int_member(json_array_get_object_element(a, 0),
                                               "connections"), ==, 0);
    json_node_unref(r);
    call_err(c, "stats", "{\"backend\": \"nope\"}", CTL_E_FAILED, "no such backend");
    call_err(c, "stats", "{\"controller\": \"nope\"}", CTL_E_FAILED, "no such controller");
}

static void test_version(void)
{
    target_client_run(0, script_version);
}

static void test_backends_and_luns(void)
{
    target_client_run(0, script_backends_and_luns);
}

static void test_controllers(void)
{
    target_client_run(0, script_controllers);
}

static void test_stats(void)
{
    target_client_run(0, script_stats);
}

int main(int argc, char **argv)
{
    target_fixture_test_init(&argc, &argv);
    g_test_add_func("/target-control/version", test_version);
    g_test_add_func("/target-control/backends-and-luns", test_backends_and_luns);
    g_test_add_func("/target-control/controllers", test_controllers);
    g_test_add_func("/target-control/stats", test_stats);
    return g_test_run();
}
