/*
 * Becoming another user after set-up (include/sandbox/sandbox.h): the
 * daemon opens its sockets and LUNs with the rights it was started with,
 * then leaves them for an unprivileged user with no supplementary groups
 * and, as a non-root uid, no capabilities, so that what the seccomp filter
 * still allows (opening files, connecting) runs with that user's rights.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <glib.h>

#include "sandbox.h"

int sandbox_lookup_user(const char *name, uid_t *uid, gid_t *gid)
{
    struct passwd *pw;
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(name, &end, 10);
    if (*name && !*end && g_ascii_isdigit(*name)) {
        if (errno || v >= (uid_t)-1) {
            return -EINVAL;
        }
        /* A uid with no passwd entry gets the group of the same number. */
        pw = getpwuid((uid_t)v);
        *uid = (uid_t)v;
        *gid = pw ? pw->pw_gid : (gid_t)v;
        return 0;
    }
    errno = 0;
    pw = getpwnam(name);
    if (!pw) {
        return errno ? -errno : -ENOENT;
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 0;
}

int sandbox_drop_user(uid_t uid, gid_t gid)
{
    /* Groups first: once the uid is not root, they can no longer be changed. */
    if (setgroups(0, NULL) < 0) {
        g_warning("sandbox: setgroups: %s", g_strerror(errno));
        return -errno;
    }
    if (setresgid(gid, gid, gid) < 0) {
        g_warning("sandbox: setresgid(%u): %s", (unsigned)gid, g_strerror(errno));
        return -errno;
    }
    if (setresuid(uid, uid, uid) < 0) {
        g_warning("sandbox: setresuid(%u): %s", (unsigned)uid, g_strerror(errno));
        return -errno;
    }
    /* A uid 0 keeps its capabilities; anything else has lost them all now. */
    return 0;
}
