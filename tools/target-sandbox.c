/*
 * vhost-scsi-target's confinement (--sandbox, --sandbox-user): once set-up
 * is over, which seccomp sets (lib/sandbox) what is running needs, and the
 * order of the steps.  What a live operation will need decides the sets,
 * not only what is open now: a control socket can add iSCSI and RBD LUNs
 * and new controllers later, so with --control every set is allowed; an
 * iSCSI LUN reconnects and an RBD LUN's librados keeps its own threads
 * and sockets, so their sets are allowed when one is configured.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>

#include <glib.h>

#include "sandbox.h"
#include "target.h"

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
        g_autofree char *err = NULL;

        /* Every spec here has been opened, so it parses. */
        if (target_backend_parse(tb->spec, &ls, &err) < 0) {
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

int target_sandbox(struct target *tgt)
{
    struct target_opts *o = tgt->opts;
    unsigned sets;
    int r;

    /* The user first: the filter forbids changing it. */
    if (o->sandbox_user && sandbox_drop_user(o->sandbox_uid, o->sandbox_gid) < 0) {
        g_warning("--sandbox-user %s: cannot become uid %u gid %u", o->sandbox_user,
                  (unsigned)o->sandbox_uid, (unsigned)o->sandbox_gid);
        return -EPERM;
    }
    if (o->sandbox == TARGET_SANDBOX_NONE) {
        g_message("sandbox: none (--sandbox none): every system call allowed");
        return 0;
    }
    sets = sets_needed(tgt);
    r = sandbox_install(sets);
    if (r < 0) {
        return r;
    }
    g_message("sandbox: seccomp filter on every thread (base, files, uring, vhost-user%s%s%s)",
              sets & SANDBOX_CONTROL ? ", control" : "", sets & SANDBOX_NET ? ", net" : "",
              sets & SANDBOX_RBD ? ", rbd" : "");
    return 0;
}
