/*
 * The control methods the daemon answers (`method-list`) against the
 * method table of docs/control.md: every method documented is served and
 * every method served is documented (the list is made from the daemon's
 * own table, so neither side can drift unnoticed), each answers something
 * other than "no such method", and `vhost-scsi-ctl target method list`
 * prints them one a line.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "control-client.h"
#include "control-server.h"
#include "proto-util.h"

/*
 * The first column's names of docs/control.md's table headed
 * "| method | params | result |": "| `name` | ...".
 */
static GPtrArray *documented_methods(void)
{
    const char *md = g_getenv("CONTROL_MD");
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(GRegex) row = g_regex_new("^\\| `([a-z-]+)` \\|", 0, 0, NULL);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    bool inside = false;

    g_assert_nonnull(md);
    g_assert_true(g_file_get_contents(md, &text, NULL, NULL));
    lines = g_strsplit(text, "\n", -1);
    for (unsigned i = 0; lines[i]; i++) {
        g_autoptr(GMatchInfo) m = NULL;

        if (!strcmp(lines[i], "| method | params | result |")) {
            inside = true;
        } else if (inside && !g_str_has_prefix(lines[i], "|")) {
            break;
        } else if (inside && g_regex_match(row, lines[i], 0, &m)) {
            g_ptr_array_add(names, g_match_info_fetch(m, 1));
        }
    }
    g_assert_cmpuint(names->len, >, 0);
    return names;
}

/* Names only in a and not in b, comma-separated (empty: none). */
static char *missing(GPtrArray *a, GPtrArray *b)
{
    GString *out = g_string_new(NULL);

    for (guint i = 0; i < a->len; i++) {
        bool found = false;

        for (guint j = 0; j < b->len && !found; j++) {
            found = !strcmp(a->pdata[i], b->pdata[j]);
        }
        if (!found) {
            g_string_append_printf(out, "%s%s", out->len ? ", " : "", (char *)a->pdata[i]);
        }
    }
    return g_string_free(out, FALSE);
}

static void test_documented_and_served_agree(void)
{
    struct pu_daemon d;
    g_autofree char *ctl = NULL, *only_docs = NULL, *only_served = NULL, *printed = NULL;
    g_autoptr(GPtrArray) docs = documented_methods();
    g_autoptr(GPtrArray) served = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(JsonNode) list = NULL;
    g_autoptr(GString) want_printed = g_string_new(NULL);
    JsonArray *a;
    int fd, exit_code;

    pu_daemon_init(&d);
    ctl = g_build_filename(d.dir, "control.sock", NULL);
    pu_daemon_start(&d, (const char *const[]){ "--lun", "0=ram:1M", "--control", ctl, NULL });
    fd = ctl_client_connect(ctl);
    g_assert_cmpint(fd, >=, 0);
    list = pu_ctl_ok(fd, "method-list", NULL);
    a = json_object_get_array_member(json_node_get_object(list), "methods");
    for (guint i = 0; i < json_array_get_length(a); i++) {
        const char *name = json_object_get_string_member(json_array_get_object_element(a, i),
                                                         "name");

        g_ptr_array_add(served, g_strdup(name));
        g_string_append_printf(want_printed, "%s\n", name);
    }
    /* Sorted by name, each once. */
    for (guint i = 1; i < served->len; i++) {
        g_assert_cmpint(strcmp(served->pdata[i - 1], served->pdata[i]), <, 0);
    }
    only_docs = missing(docs, served);
    only_served = missing(served, docs);
    if (*only_docs || *only_served) {
        g_error("docs/control.md's method table and method-list differ: documented only: "
                "[%s]; served only: [%s]", only_docs, only_served);
    }
    /* Each is a method: called without params, it answers or refuses, never "no such method". */
    for (guint i = 0; i < served->len; i++) {
        JsonNode *result = NULL;
        g_autofree char *err = NULL;
        int code = 0;
        int r = ctl_client_call(fd, served->pdata[i], NULL, PU_TIMEOUT_MS, &result, &code, &err);

        if (r == 0) {
            json_node_unref(result);
        } else {
            g_assert_cmpint(r, ==, -EREMOTEIO);
            if (code == CTL_E_NO_METHOD) {
                g_error("%s is listed but answers %d %s", (char *)served->pdata[i], code, err);
            }
        }
    }
    /* A method that is not there is still "no such method". */
    g_free(pu_ctl_err(fd, "no-such-method", NULL, CTL_E_NO_METHOD));
    printed = pu_ctl_tool(ctl, (const char *const[]){ "method", "list", NULL }, &exit_code, NULL);
    g_assert_cmpint(exit_code, ==, 0);
    g_assert_cmpstr(printed, ==, want_printed->str);
    close(fd);
    g_assert_cmpint(pu_daemon_stop(&d, false), ==, 0);
    pu_daemon_cleanup(&d);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/methods/documented-and-served-agree", test_documented_and_served_agree);
    return g_test_run();
}
