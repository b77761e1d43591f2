/*
 * The daemon's confinement after set-up (lib/sandbox/sandbox.c): no new
 * privileges, optionally another user, and a seccomp filter (libseccomp)
 * on every thread that allows only the system calls of the concerns the
 * caller names and kills the whole process on any other.  The sets are
 * tables in lib/sandbox/sandbox-sets.c; docs/security.md ("Sandbox") says
 * why each call is there.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SANDBOX_H
#define VHOST_SCSI_SANDBOX_H

#include <stdbool.h>
#include <sys/types.h>

/* What the confined process still does; each adds its system calls. */
enum sandbox_set {
    /* memory, threads, futexes, clocks, epoll/eventfd/timerfd loops, signals, exit, logging */
    SANDBOX_BASE       = 1u << 0,
    /* files opened, read, written, synced and renamed after set-up: LUNs added
       live, persistent-reservation state, config-save, the hold: test backend */
    SANDBOX_FILES      = 1u << 1,
    /* io_uring_enter on rings made before the filter (none is made after) */
    SANDBOX_URING      = 1u << 2,
    /* front-ends: accept, fds passed with SCM_RIGHTS, guest memory mapped */
    SANDBOX_VHOST_USER = 1u << 3,
    /* the control socket, and controllers it adds: new listening UNIX sockets */
    SANDBOX_CONTROL    = 1u << 4,
    /* iSCSI: TCP sockets, name resolution (NSS modules are loaded then) */
    SANDBOX_NET        = 1u << 5,
    /* librbd and librados: their own threads, sockets, timers and plugins */
    SANDBOX_RBD        = 1u << 6,
};

/*
 * The system calls a set allows, NULL-terminated (names as libseccomp
 * spells them; a name this architecture lacks is skipped).  Calls allowed
 * only with some arguments are not in these lists but in the filter
 * itself (sandbox.c): socket, clone, ioctl, prctl, mmap, mprotect, tgkill.
 */
const char *const *sandbox_set_calls(enum sandbox_set set);
/* "base", "files", ...; NULL for anything else. */
const char *sandbox_set_name(enum sandbox_set set);

/*
 * A user to become after set-up: NAME or a numeric UID, looked up now
 * (before the filter forbids reading /etc/passwd and loading NSS
 * modules).  0 with *uid / *gid (its primary group), or -ENOENT / -errno.
 */
int sandbox_lookup_user(const char *name, uid_t *uid, gid_t *gid);

/*
 * Becomes uid:gid on every thread with no supplementary groups and no
 * capabilities left (setgroups, setresgid, setresuid: glibc applies them
 * to every thread).  -errno, logged.
 */
int sandbox_drop_user(uid_t uid, gid_t gid);

/*
 * Sets PR_SET_NO_NEW_PRIVS and loads the filter allowing sets (a mask of
 * enum sandbox_set) on every thread of the process at once (TSYNC); threads
 * started afterwards inherit it.  Any other call kills the process with
 * SIGSYS.  -errno, logged (the process is then unconfined).
 */
int sandbox_install(unsigned sets);

#endif
