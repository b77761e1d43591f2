/*
 * Fuzz target for the daemon's saved configuration (`--config FILE`): the
 * input is the file's text, parsed and checked by target_config_parse()
 * (hw/daemon/target-config-check.c: json-strict's bounds, then the shape of
 * every backend, qos, controller and mapping), then each backend's spec
 * through the LUN SPEC grammar as loading would (lun_spec_parse_full with a
 * placeholder ID), stopping before anything is opened: a fuzzer must not
 * create files or dial iSCSI portals.  Oracle: a refusal always says why;
 * an accepted file has version 1 and the members loading reads unchecked
 * (names, specs, LUN numbers: json-glib would log a CRITICAL, fatal here,
 * for one of the wrong type), and serialising it and parsing it again
 * gives an accepted file too; nothing leaks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdlib.h>

#include "fuzz-common.h"
#include "lun-open.h"
#include "target.h"

/* What target_config_load() reads without a check of its own. */
static void walk(JsonNode *root)
{
    JsonObject *top = json_node_get_object(root);
    JsonArray *a = json_object_get_array_member(top, "backends");

    if (json_object_get_int_member(top, "version") != TARGET_CONFIG_VERSION) {
        abort();
    }
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *b = json_array_get_object_element(a, i);
        g_autofree char *arg = g_strdup_printf("0=%s", json_object_get_string_member(b, "spec"));
        g_autoptr(GError) why = NULL;
        struct lun_spec ls;

        (void)json_object_get_string_member(b, "name");
        (void)json_object_get_boolean_member_with_default(b, "implicit", false);
        if (lun_spec_parse_full(arg, &ls, &why) == 0) {
            lun_spec_clear(&ls);
        } else if (!why) {
            abort();
        }
    }
    a = json_object_get_array_member(top, "controllers");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonObject *c = json_array_get_object_element(a, i);
        JsonArray *luns = json_object_get_array_member(c, "luns");

        (void)json_object_get_string_member(c, "name");
        (void)json_object_get_string_member_with_default(c, "socket_group", NULL);
        (void)json_object_get_int_member_with_default(c, "queues", 1);
        for (guint j = 0; j < json_array_get_length(luns); j++) {
            JsonObject *l = json_array_get_object_element(luns, j);

            (void)json_object_get_int_member(l, "target");
            (void)json_object_get_int_member(l, "lun");
            (void)json_object_get_string_member(l, "backend");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) err = NULL;
    JsonNode *root;

    fuzz_quiet_logs();
    /* A member of the wrong type read unchecked is a json-glib CRITICAL. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    root = target_config_parse((const char *)data, size, &err);
    if (!root) {
        if (!err) {
            abort();
        }
        return 0;
    }
    if (err) {
        abort();
    }
    walk(root);
    {
        g_autoptr(JsonGenerator) gen = json_generator_new();
        g_autoptr(GError) again_err = NULL;
        g_autofree char *text = NULL;
        gsize len;
        JsonNode *again;

        json_generator_set_root(gen, root);
        text = json_generator_to_data(gen, &len);
        again = target_config_parse(text, len, &again_err);
        if (!again) {
            abort();
        }
        json_node_unref(again);
    }
    json_node_unref(root);
    return 0;
}
