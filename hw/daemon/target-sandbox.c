/*
 * vhost-scsi-target's confinement (--sandbox, --sandbox-user): once set-up
 * is over, which seccomp sets (hw/sandbox) what is running needs, and the
 * order of the steps.  What a live operation will need decides the sets,
 * not only what is open now: a control socket can add iSCSI and RBD LUNs
 * and new controllers later, so with --control every set is allowed; an
 * iSCSI LUN reconnects and an RBD LUN's librados keeps its own threads
 * and sockets, so their sets are allowed when one is configured.  A
 * call the filter refuses fails with ENOSYS; the main loop logs them,
 * at most once per SANDBOX_REPORT_INTERVAL_NS.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>

#include <glib.h>

#include "sandbox.h"
#include "target.h"
#include "vs-error.h"

static unsigned sets_needed(struct target *tgt)
{
    unsigned sets = SANDBOX_BASE | SANDBOX_FILES | SANDBOX_URING | SANDBOX_VHOST_USER;
    GHashTableIter it;
    gpointer value;

    if (tgt->opts->control_path) {
        return sets | SANDBOX_CONTROL | SANDBOX_NET | SANDBOX_RBD;
    }
    g_hash_table_iter_init(&it, tgt->backends);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        struct target_backend *tb = value;
        struct lun_spec ls;

        /* Every spec here has been opened, so it parses. */
        if (target_backend_parse(tb->spec, &ls, NULL) < 0) {
            continue;
        }
        if (ls.kind == LUN_SPEC_ISCSI) {
            sets |= SANDBOX_NET;
        } else if (ls.kind == LUN_SPEC_RBD) {
            sets |= SANDBOX_RBD;
        }
        lun_spec_clear(&ls);
    }
    return sets;
}

/* Reports now, or, too soon after the last report, stops watching until it may. */
static void report_refusals(struct target *tgt)
{
    uint64_t now = iothread_now_ns(tgt->main);
    uint64_t wait = sandbox_report_refusals(tgt->sandbox, now);
    int fd = sandbox_refusals_fd(tgt->sandbox);

    iothread_mod_fd(tgt->main, fd, wait ? 0 : EPOLLIN);
    if (wait) {
        iothread_timer_arm(tgt->main, &tgt->sandbox_report, now + wait);
    }
}

static void refusals_cb(void *opaque, uint32_t events)
{
    report_refusals(opaque);
}

static void report_timer_cb(struct iothread_timer *tm)
{
    report_refusals((struct target *)((char *)tm - offsetof(struct target, sandbox_report)));
}

void target_sandbox_end(struct target *tgt)
{
    if (!tgt->sandbox) {
        return;
    }
    iothread_timer_cancel(tgt->main, &tgt->sandbox_report);
    iothread_del_fd(tgt->main, sandbox_refusals_fd(tgt->sandbox));
    sandbox_free(tgt->sandbox);
    tgt->sandbox = NULL;
}

int target_sandbox(struct target *tgt, GError **err)
{
    struct target_opts *o = tgt->opts;
    g_autoptr(GError) why = NULL;
    unsigned sets;
    int r;

    /* The user first: the filter forbids changing it. */
    if (o->sandbox_user && (r = sandbox_drop_user(o->sandbox_uid, o->sandbox_gid, err)) < 0) {
        g_prefix_error(err, "--sandbox-user %s: cannot become uid %u gid %u: ", o->sandbox_user,
                       (unsigned)o->sandbox_uid, (unsigned)o->sandbox_gid);
        return r;
    }
    if (o->sandbox == TARGET_SANDBOX_NONE) {
        g_message("sandbox: none (--sandbox none): every system call allowed");
        return 0;
    }
    sets = sets_needed(tgt);
    r = sandbox_install(sets, &tgt->sandbox, &why);
    if (r < 0) {
        return vs_error_set(err, r, "cannot install the seccomp filter: %s (--sandbox none runs "
                            "without it)", why->message);
    }
    tgt->sandbox_report.fn = report_timer_cb;
    r = iothread_add_fd(tgt->main, sandbox_refusals_fd(tgt->sandbox), EPOLLIN, refusals_cb, tgt);
    if (r < 0) {
        return vs_error_set(err, r, "cannot watch the sandbox's refusals: %s", g_strerror(-r));
    }
    g_message("sandbox: seccomp filter on every thread (base, files, uring, vhost-user%s%s%s)",
              sets & SANDBOX_CONTROL ? ", control" : "", sets & SANDBOX_NET ? ", net" : "",
              sets & SANDBOX_RBD ? ", rbd" : "");
    return 0;
}
