/*
 * The daemon's confinement after set-up (hw/sandbox/sandbox.c): no new
 * privileges, optionally another user, and a seccomp filter (libseccomp)
 * on every thread that allows the system calls of the concerns the caller
 * names, kills the whole process on a dangerous one (a program run, a
 * fork, ptrace, a module, a mount...) and refuses any other with ENOSYS,
 * counted and reported in a rate-limited log line.  The sets are tables
 * in hw/sandbox/sandbox-sets.c; docs/security.md ("Sandbox") says why
 * each call is there.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef VHOST_SCSI_SANDBOX_H
#define VHOST_SCSI_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>

/* An installed filter's answerer of refused calls (hw/sandbox/sandbox-refusals.c). */
struct sandbox;

/* Refusals are reported at most once per this interval. */
#define SANDBOX_REPORT_INTERVAL_NS (10 * 1000000000ull)

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
 * The calls that kill the process rather than fail, NULL-terminated (a
 * sanitizer build allows those its runtime makes instead).  Also fatal,
 * by argument (sandbox.c): clone without CLONE_THREAD, packet sockets and
 * raw IP ones, executable mappings without the sets that load code, and
 * ioctl(TIOCSTI).
 */
const char *const *sandbox_fatal_calls(void);

/*
 * A user to become after set-up: NAME or a numeric UID, looked up with
 * every NSS source before the filter is on.  0 with *uid / *gid (its
 * primary group), or -ENOENT / -EINVAL / -errno.
 */
int sandbox_lookup_user(const char *name, uid_t *uid, gid_t *gid);

/*
 * A group NAME or a numeric GID (taken as it is).  Before the filter, by
 * every NSS source (getgrnam); once this process has a seccomp filter,
 * from /etc/group read directly (fgetgrent): NSS modules (systemd's,
 * LDAP's) make calls no filter of ours allows, so a group known only to
 * them must then be given by number.  0 with *gid, or -ENOENT / -EINVAL /
 * -errno.
 */
int sandbox_lookup_group(const char *name, gid_t *gid);

/*
 * Becomes uid:gid on every thread with no supplementary groups and no
 * capabilities left (setgroups, setresgid, setresuid: glibc applies them
 * to every thread).  -errno with *err saying which step failed.
 */
int sandbox_drop_user(uid_t uid, gid_t gid, GError **err);

/*
 * Sets PR_SET_NO_NEW_PRIVS and loads the filter allowing sets (a mask of
 * enum sandbox_set) on every thread of the process at once (TSYNC); threads
 * started afterwards inherit it.  A call of sandbox_fatal_calls() kills
 * the process with SIGSYS; any other call outside the sets fails with
 * ENOSYS and is counted for sandbox_report_refusals, by a thread of the
 * sandbox's own that *sbp holds from then on (sandbox_free).  -errno
 * with *err saying which step failed (the process is then unconfined).
 */
int sandbox_install(unsigned sets, struct sandbox **sbp, GError **err);

/*
 * An eventfd that becomes readable when a refusal is waiting to be
 * reported; sandbox_report_refusals clears it.
 */
int sandbox_refusals_fd(const struct sandbox *sb);

/*
 * Logs the refusals since the last report in one warning ("sandbox:
 * refused N system calls with ENOSYS: NR (NAME) M times, ..."), unless
 * the last report was less than SANDBOX_REPORT_INTERVAL_NS before now_ns
 * (a monotonic clock): then the nanoseconds until one may be made, else 0.
 */
uint64_t sandbox_report_refusals(struct sandbox *sb, uint64_t now_ns);

/*
 * Stops the answering thread and logs what is left to report; the filter
 * stays, and a call it refuses from then on fails with ENOSYS unlogged.
 * NULL is allowed.
 */
void sandbox_free(struct sandbox *sb);

#endif
