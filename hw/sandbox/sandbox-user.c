/*
 * Becoming another user after set-up (include/sandbox/sandbox.h): the
 * daemon opens its sockets and LUNs with the rights it was started with,
 * then leaves them for an unprivileged user with no supplementary groups
 * and, as a non-root uid, no capabilities, so that what the seccomp filter
 * still allows (opening files, connecting) runs with that user's rights.
 * Also the group look-ups of sockets made later (--socket-group,
 * controller-add's socket_group), which must not call NSS modules once
 * the filter is on.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <glib.h>

#include "sandbox.h"
#include "vs-error.h"

/* 1 with *v if name is a number (of an id: below (id_t)-1), 0 if it is none, or -EINVAL. */
static int numeric_id(const char *name, unsigned long *v)
{
    char *end;

    if (!g_ascii_isdigit(*name)) {
        return 0;
    }
    errno = 0;
    *v = strtoul(name, &end, 10);
    if (*end) {
        return 0;
    }
    return errno || *v >= (id_t)-1 ? -EINVAL : 1;
}

int sandbox_lookup_user(const char *name, uid_t *uid, gid_t *gid)
{
    struct passwd *pw;
    unsigned long v;
    int r = numeric_id(name, &v);

    if (r < 0) {
        return r;
    }
    if (r) {
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

/* name in /etc/group itself, without NSS: fgetgrent_r, a buffer grown as it needs. */
static int group_from_file(const char *name, gid_t *gid)
{
    FILE *f = fopen("/etc/group", "re");
    size_t size = 1024;
    g_autofree char *buf = g_malloc(size);
    struct group grbuf, *gr;
    int r;

    if (!f) {
        return -errno;
    }
    for (;;) {
        r = fgetgrent_r(f, &grbuf, buf, size, &gr);
        if (r == ERANGE && size < (1u << 20)) {
            /* The entry is read again with more room. */
            size *= 2;
            buf = g_realloc(buf, size);
            continue;
        }
        if (r) {
            r = r == ENOENT ? -ENOENT : -r;     /* ENOENT: the end of the file */
            break;
        }
        if (!strcmp(gr->gr_name, name)) {
            *gid = gr->gr_gid;
            break;
        }
    }
    fclose(f);
    return r;
}

int sandbox_lookup_group(const char *name, gid_t *gid)
{
    struct group grbuf, *gr = NULL;
    char buf[16384];
    unsigned long v;
    int r = numeric_id(name, &v);

    if (r) {
        *gid = (gid_t)v;
        return r < 0 ? r : 0;
    }
    /* 2 under a filter; a filter that refuses the question is one too. */
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != 0) {
        return group_from_file(name, gid);
    }
    /* Reentrant: controller-adds look groups up on threads of their own, maybe two at once. */
    r = getgrnam_r(name, &grbuf, buf, sizeof(buf), &gr);
    if (!gr) {
        return r ? -r : -ENOENT;
    }
    *gid = gr->gr_gid;
    return 0;
}

int sandbox_drop_user(uid_t uid, gid_t gid, GError **err)
{
    /* Groups first: once the uid is not root, they can no longer be changed. */
    if (setgroups(0, NULL) < 0) {
        return vs_error_set(err, -errno, "setgroups: %s", g_strerror(errno));
    }
    if (setresgid(gid, gid, gid) < 0) {
        return vs_error_set(err, -errno, "setresgid(%u): %s", (unsigned)gid, g_strerror(errno));
    }
    if (setresuid(uid, uid, uid) < 0) {
        return vs_error_set(err, -errno, "setresuid(%u): %s", (unsigned)uid, g_strerror(errno));
    }
    /* A uid 0 keeps its capabilities; anything else has lost them all now. */
    return 0;
}
