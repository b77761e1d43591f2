/*
 * Test cases that need the test hooks (the hold: backend, fault injection
 * from VHOST_SCSI_TEST_FAULT), which only a build with -Dtest_hooks=true
 * has (scripts/build.sh makes the test builds so).  In a build without
 * them each such case is skipped, by its name and with this reason, so the
 * summary counts it; it never passes without having run.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_TEST_HOOKS_H
#define VHOST_SCSI_TEST_HOOKS_H

#include <stdbool.h>

#include <glib.h>

#define TEST_HOOKS_MISSING "needs the test hooks: a build with -Dtest_hooks=true (scripts/build.sh)"

#ifdef VHOST_SCSI_TEST_HOOKS
#define TEST_HOOKS_BUILT true
#else
#define TEST_HOOKS_BUILT false
#endif

/* True, with the running case marked skipped, in a build without the hooks. */
static inline bool test_hooks_missing(void)
{
    if (TEST_HOOKS_BUILT) {
        return false;
    }
    g_test_skip(TEST_HOOKS_MISSING);
    return true;
}

/* Registered in place of a case that a build without the hooks cannot even compile. */
static inline void test_hooks_skipped(void)
{
    test_hooks_missing();
}

/* fn, to register as a case; test_hooks_skipped in a build without the hooks. */
#define TEST_HOOKED(fn) (TEST_HOOKS_BUILT ? (fn) : test_hooks_skipped)

#endif
