/*
 * Specification of the project's error domain (hw/util/vs-error.c): an
 * error's code is the errno its function returns negated, so the daemon
 * answers data.errno without a table, and a caller that does not want the
 * error still gets the errno.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "vs-error.h"

static void test_set_returns_the_errno(void)
{
    g_autoptr(GError) err = NULL;

    g_assert_cmpint(vs_error_set(&err, -ENOSPC, "%u bytes left", 7u), ==, -ENOSPC);
    g_assert_error(err, VS_ERROR, ENOSPC);
    g_assert_cmpstr(err->message, ==, "7 bytes left");
    g_assert_cmpint(vs_error_errno(err), ==, -ENOSPC);
}

static void test_without_an_error_to_fill(void)
{
    g_assert_cmpint(vs_error_set(NULL, -EINVAL, "nobody reads this"), ==, -EINVAL);
}

/* A failure without an errno still fails; another domain's error is EIO to JSON-RPC. */
static void test_no_errno_is_eio(void)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(GError) other = g_error_new_literal(g_quark_from_static_string("other"), 2, "gone");

    g_assert_cmpint(vs_error_set(&err, 0, "failed"), ==, -EIO);
    g_assert_error(err, VS_ERROR, EIO);
    g_assert_cmpint(vs_error_errno(other), ==, -EIO);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vs-error/set-returns-the-errno", test_set_returns_the_errno);
    g_test_add_func("/vs-error/without-an-error-to-fill", test_without_an_error_to_fill);
    g_test_add_func("/vs-error/no-errno-is-eio", test_no_errno_is_eio);
    return g_test_run();
}
