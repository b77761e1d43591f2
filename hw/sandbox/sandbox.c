/*
 * The seccomp filter the daemon confines itself with after set-up
 * (include/sandbox/sandbox.h), built with libseccomp: the calls of the
 * named sets (sandbox-sets.c) are allowed outright, a few more only with
 * arguments that cannot do harm; the dangerous ones kill the whole
 * process (SCMP_ACT_KILL_PROCESS), so that a parser subverted by a guest
 * cannot execute a program, fork, trace, mount, load a module, open a
 * packet socket or carry on in any other way; anything else is refused
 * with ENOSYS through a user notification (SCMP_ACT_NOTIFY, answered and
 * counted by sandbox-refusals.c), so that a call some library makes on a
 * path the tests did not take fails that operation, logged, and does
 * not take every VM's disks down.  The filter is loaded on every thread
 * at once (TSYNC), and threads started later (I/O openers, librbd's)
 * inherit it.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <seccomp.h>

#include "sandbox-int.h"
#include "vs-error.h"

/*
 * A sanitizer's runtime does at exit what the daemon never does: the leak
 * checker stops the world from a tracer task (clone without CLONE_THREAD,
 * ptrace, prctl(PR_SET_PTRACER)) and a report runs a symbolizer.  Such a
 * build is for tests, not for service, so it allows that too.
 */
#if defined(__SANITIZE_ADDRESS__)
#define SANDBOX_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANDBOX_SANITIZER 1
#endif
#endif
#ifndef SANDBOX_SANITIZER
#define SANDBOX_SANITIZER 0
#endif

static const char *const sanitizer_calls[] = {
    /* the leak checker's tracer and the symbolizer */
    "ptrace", "wait4", "waitid", "execve", "vfork", "kill", "tkill", "dup2", "pipe",
    "getppid", "sched_setaffinity", "process_vm_readv",
    /* the runtime's own raw calls: /proc/self/maps, /proc/self/task */
    "open", "stat", "lstat", "getdents", "getdents64",
    NULL,
};

/* An argument compared in its low 32 bits: ints reach the kernel sign-extended or not. */
#define ARG32_EQ(n, v) SCMP_CMP((n), SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)(v))

static bool in_list(const char *const *names, const char *name)
{
    for (; *names; names++) {
        if (!strcmp(*names, name)) {
            return true;
        }
    }
    return false;
}

/* action for every call of names, but those of except (NULL: none). */
static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names,
                     const char *const *except, const char *set, GError **err)
{
    for (; *names; names++) {
        int nr = seccomp_syscall_resolve_name(*names);
        int r;

        if (nr == __NR_SCMP_ERROR || (except && in_list(except, *names))) {
            continue;       /* not a call of this architecture, or allowed */
        }
        r = seccomp_rule_add(ctx, action, nr, 0);
        if (r < 0) {
            return vs_error_set(err, r, "rule for %s (%s): %s", *names, set, g_strerror(-r));
        }
    }
    return 0;
}

static int allow_arg(scmp_filter_ctx ctx, int nr, struct scmp_arg_cmp cmp, const char *what,
                     GError **err)
{
    int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, cmp);

    if (r < 0) {
        vs_error_set(err, r, "allowing %s: %s", what, g_strerror(-r));
    }
    return r;
}

static int kill_arg(scmp_filter_ctx ctx, int nr, struct scmp_arg_cmp cmp, const char *what,
                    GError **err)
{
    int r = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, nr, 1, cmp);

    if (r < 0) {
        vs_error_set(err, r, "killing on %s: %s", what, g_strerror(-r));
    }
    return r;
}

/* socket(domain, type) for TCP and UDP if allow (else refused), never SOCK_RAW. */
static int ip_socket_rules(scmp_filter_ctx ctx, int domain, bool allow, GError **err)
{
    int r = 0;

    for (int type = SOCK_STREAM; allow && type <= SOCK_DGRAM && !r; type++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, ARG32_EQ(0, domain),
                             SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, type));
    }
    r = r ?: seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(socket), 2,
                              ARG32_EQ(0, domain), SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
    if (r < 0) {
        vs_error_set(err, r, "rules for socket(%d): %s", domain, g_strerror(-r));
    }
    return r;
}

/*
 * The read-only queries of a block device the file backend makes when a
 * LUN is added (size, logical and physical sector sizes), its discard,
 * isatty() of the log, libiscsi's FIONREAD, and the answering thread's
 * own notification ioctls.
 */
static const unsigned long ioctls_allowed[] = {
    BLKGETSIZE64, BLKSSZGET, BLKPBSZGET, BLKDISCARD, TCGETS,
    SECCOMP_IOCTL_NOTIF_RECV, SECCOMP_IOCTL_NOTIF_SEND,
};

/* The calls allowed only with some arguments, by the sets that need them. */
static int allow_filtered(scmp_filter_ctx ctx, unsigned sets, GError **err)
{
    bool net = sets & (SANDBOX_NET | SANDBOX_RBD);
    /* Only these sets load code after set-up (NSS modules, librados plugins). */
    bool loads_code = net || SANDBOX_SANITIZER;
    int r = 0;

    /* Threads only: fork() is clone without CLONE_THREAD. */
    if (SANDBOX_SANITIZER) {
        r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 0);
    } else {
        r = r ?: allow_arg(ctx, SCMP_SYS(clone),
                           SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD), "clone", err);
        r = r ?: kill_arg(ctx, SCMP_SYS(clone), SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0),
                          "clone", err);
    }
    /* clone3's flags are behind a pointer the filter cannot read: glibc falls back to clone. */
    r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* raise() and abort() signal the caller's own thread; no other process. */
    r = r ?: allow_arg(ctx, SCMP_SYS(tgkill), SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()),
                       "tgkill", err);
    if (loads_code) {
        r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 0);
        r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 0);
    } else {
        /* Nothing is loaded after set-up: no mapping becomes executable. */
        r = r ?: allow_arg(ctx, SCMP_SYS(mmap), SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0),
                           "mmap", err);
        r = r ?: allow_arg(ctx, SCMP_SYS(mprotect), SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0),
                           "mprotect", err);
        r = r ?: kill_arg(ctx, SCMP_SYS(mmap),
                          SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC), "mmap", err);
        r = r ?: kill_arg(ctx, SCMP_SYS(mprotect),
                          SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC), "mprotect", err);
    }
    if (SANDBOX_SANITIZER) {
        r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 0);
    } else {
        /* Thread names (pthread_setname_np on the calling thread). */
        r = r ?: allow_arg(ctx, SCMP_SYS(prctl), ARG32_EQ(0, PR_SET_NAME), "prctl", err);
        r = r ?: allow_arg(ctx, SCMP_SYS(prctl), ARG32_EQ(0, PR_GET_NAME), "prctl", err);
        /* Whether a filter is on (sandbox_lookup_group). */
        r = r ?: allow_arg(ctx, SCMP_SYS(prctl), ARG32_EQ(0, PR_GET_SECCOMP), "prctl", err);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(ioctls_allowed); i++) {
        r = r ?: allow_arg(ctx, SCMP_SYS(ioctl), ARG32_EQ(1, ioctls_allowed[i]), "ioctl", err);
    }
    if (net) {
        r = r ?: allow_arg(ctx, SCMP_SYS(ioctl), ARG32_EQ(1, FIONREAD), "ioctl", err);
    }
    /* Typing into the terminal the log goes to: a way out of any sandbox. */
    r = r ?: kill_arg(ctx, SCMP_SYS(ioctl), ARG32_EQ(1, TIOCSTI), "ioctl", err);
    /* Sockets of the families a set uses; never raw or packet ones. */
    if (sets & (SANDBOX_CONTROL | SANDBOX_NET | SANDBOX_RBD)) {
        r = r ?: allow_arg(ctx, SCMP_SYS(socket), ARG32_EQ(0, AF_UNIX), "socket", err);
    }
    r = r ?: ip_socket_rules(ctx, AF_INET, net, err);
    r = r ?: ip_socket_rules(ctx, AF_INET6, net, err);
    if (net) {
        r = r ?: allow_arg(ctx, SCMP_SYS(socket), ARG32_EQ(0, AF_NETLINK), "socket", err);
    }
    r = r ?: kill_arg(ctx, SCMP_SYS(socket), ARG32_EQ(0, AF_PACKET), "socket", err);
    return r;
}

int sandbox_install(unsigned sets, struct sandbox **sbp, GError **err)
{
    struct sandbox *sb = NULL;
    scmp_filter_ctx ctx;
    int r = 0;

    *sbp = NULL;
    /* Set before the filter too, so that it holds even if loading fails. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        return vs_error_set(err, -errno, "PR_SET_NO_NEW_PRIVS: %s", g_strerror(errno));
    }
    /* Whatever no rule names is refused, answered by sb's thread. */
    ctx = seccomp_init(SCMP_ACT_NOTIFY);
    if (!ctx) {
        return vs_error_set(err, -ENOMEM, "seccomp_init failed");
    }
    /* Every thread now; a thread that cannot take it makes the load fail. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    r = r ?: seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    /* A binary tree over the call numbers: every call of the data path passes the filter. */
    r = r ?: seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (r < 0) {
        vs_error_set(err, r, "seccomp attributes: %s", g_strerror(-r));
        goto out;
    }
    for (unsigned bit = 1; bit && !r; bit <<= 1) {
        const char *const *calls = sets & bit ? sandbox_set_calls(bit) : NULL;

        if (calls) {
            r = add_names(ctx, SCMP_ACT_ALLOW, calls, NULL, sandbox_set_name(bit), err);
        }
    }
    if (!r && SANDBOX_SANITIZER) {
        r = add_names(ctx, SCMP_ACT_ALLOW, sanitizer_calls, NULL, "sanitizer", err);
    }
    r = r ?: add_names(ctx, SCMP_ACT_KILL_PROCESS, sandbox_fatal_calls(),
                       SANDBOX_SANITIZER ? sanitizer_calls : NULL, "fatal", err);
    r = r ?: allow_filtered(ctx, sets, err);
    if (r < 0) {
        goto out;
    }
    r = sandbox_refusals_new(&sb, err);
    if (r < 0) {
        goto out;
    }
    r = seccomp_load(ctx);
    if (r < 0) {
        vs_error_set(err, r, "loading the seccomp filter: %s", g_strerror(-r));
        goto out;
    }
    r = seccomp_notify_fd(ctx);
    if (r < 0) {
        /* Cannot happen once loaded; refused calls would wait for ever. */
        g_error("sandbox: the seccomp filter's listener: %s", g_strerror(-r));
    }
    sandbox_refusals_start(sb, r);
    *sbp = g_steal_pointer(&sb);
    r = 0;
out:
    sandbox_free(sb);
    seccomp_release(ctx);
    return r < 0 ? r : 0;
}
