/*
 * The control socket's backend-add and lun-add (include/daemon/target.h), which
 * finish later: every backend is opened by a target job (target-job.c),
 * on a thread of its own, with its SCSI disk made and its reservations
 * file read there too, so that the main thread goes on serving every
 * front-end's vhost-user messages and every other control call while a
 * file on a stuck file system, or a remote LUN, takes its time.  Until
 * the add is answered, the backend's name and, for lun-add, its (target,
 * LUN) address are reserved: another add of either is refused -EBUSY
 * ("still opening"), and nothing of the backend is listed.  The main
 * thread then finishes the add exactly as the synchronous path does
 * (target-backends.c: the one-object check, attach to the I/O threads,
 * map, events to the front-ends).  A failed open leaves nothing behind.
 * A remote open (iSCSI, RBD) has a bound of its own and is called off
 * when the daemon stops; a file's open, which nothing can interrupt, is
 * given up at --control-timeout-ms or when the daemon stops: its add is
 * answered then, its reservations end, and what it opens after all is
 * closed by its thread.  Main thread only, but for open_run and
 * open_discard.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <glib.h>

#include "backend.h"
#include "lun-open.h"
#include "target.h"
#include "vs-error.h"

struct target_opening {
    struct target *tgt;
    /* Its name and address, in tgt->openings until answered; the controller is looked up again. */
    struct target_reservation r;
    char *spec;              /* SPEC, without "ID=" */
    bool implicit;
    char *pr_dir;            /* --pr-dir, the thread's own copy */
    struct lun_spec ls;      /* read by the thread */
    int cancel_fd;           /* an eventfd: written to call the open off; -1: cannot be */
    target_added_fn *done;   /* NULL once answered */
    void *opaque;
    /* The thread's result, the main thread's once it has posted. */
    struct target_opened opened;
    GError *err;
};

static void opening_free(struct target_opening *o)
{
    target_opened_clear(&o->opened);
    lun_spec_clear(&o->ls);
    if (o->cancel_fd >= 0) {
        close(o->cancel_fd);
    }
    g_free(o->r.name);
    g_free(o->spec);
    g_free(o->r.ctrl_name);
    g_free(o->pr_dir);
    g_clear_error(&o->err);
    g_free(o);
}

/* Answers the add, which then no longer reserves its name and address. */
static void answer(struct target_opening *o, struct target_added *a)
{
    target_added_fn *done = o->done;

    o->tgt->openings = g_list_remove(o->tgt->openings, &o->r);
    o->done = NULL;
    a->tgt = o->tgt;
    done(a, o->opaque);
}

/* The rest of the add, on the main thread, as the synchronous path does it. */
static void finish(struct target_opening *o, struct target_added *a, GError **err)
{
    struct target *tgt = o->tgt;

    a->ret = target_backend_install(tgt, o->r.name, o->spec, o->implicit, &o->opened,
                                    &a->backend, err);
    if (a->ret < 0 || !o->r.ctrl_name) {
        return;
    }
    a->ctrl = target_controller_find(tgt, o->r.ctrl_name);
    if (!a->ctrl) {
        a->ret = vs_error_set(err, -ENOENT, "controller %s was removed while the LUN opened",
                              o->r.ctrl_name);
        target_backend_remove(tgt, o->r.name, NULL);
        return;
    }
    a->port = o->r.port;
    a->lun = o->r.lun;
    a->ret = target_lun_map_implicit(a->ctrl, o->r.port, o->r.lun, o->r.name, err);
}

static int open_run(void *arg)
{
    struct target_opening *o = arg;

    return target_backend_open(o->pr_dir, o->r.name, o->spec, &o->ls, o->cancel_fd, &o->opened,
                               &o->err);
}

/* The thread has posted: answer the add (unless called off already). */
static void open_done(void *arg, int ret)
{
    struct target_opening *o = arg;
    g_autoptr(GError) err = NULL;
    struct target_added a = { .ret = ret, .err = o->err };

    if (o->done) {
        /* Its reservation ends here: the add maps what it reserved. */
        o->tgt->openings = g_list_remove(o->tgt->openings, &o->r);
        if (ret == 0) {
            finish(o, &a, &err);
            a.err = err;
        }
        answer(o, &a);
    }
    opening_free(o);
}

/* Given up on the main thread: answer now; the thread keeps o until it returns. */
static void open_abandoned(void *arg, int why)
{
    struct target_opening *o = arg;
    g_autofree char *shown = lun_spec_redact(o->spec);
    g_autoptr(GError) err = NULL;
    struct target_added a = { .ret = why };

    if (why == -ETIMEDOUT) {
        vs_error_set(&err, why, "%s: cannot open: not done within %u ms (--control-timeout-ms); "
                     "the daemon closes it if it ever opens", shown,
                     o->tgt->opts->job_timeout_ms);
    } else {
        vs_error_set(&err, why, "the daemon is shutting down");
    }
    a.err = err;
    if (o->done) {
        answer(o, &a);
    }
}

static void open_discard(void *arg, int ret)
{
    opening_free(arg);
}

/* The daemon stops: the remote open ends promptly; the add is answered at once. */
static void open_cancel(void *arg)
{
    struct target_opening *o = arg;
    g_autoptr(GError) err = NULL;
    struct target_added a = { .ret = vs_error_set(&err, -ECANCELED,
                                                  "the daemon is shutting down") };
    uint64_t one = 1;

    a.err = err;
    /* An eventfd write of 1 cannot block: the counter is far from full. */
    if (write(o->cancel_fd, &one, sizeof(one)) != sizeof(one)) {
        g_warning("backend %s: cannot call its open off: %s", o->r.name, g_strerror(errno));
    }
    if (o->done) {
        answer(o, &a);
    }
}

/* A remote open has a bound of its own (login-timeout, busy-timeout) and can be called off. */
static const struct target_job_ops remote_open_ops = {
    .run = open_run,
    .done = open_done,
    .abandoned = open_abandoned,
    .discard = open_discard,
    .cancel = open_cancel,
};
/* A file's open cannot be interrupted: it gets the control timeout, and is given up. */
static const struct target_job_ops file_open_ops = {
    .run = open_run,
    .done = open_done,
    .abandoned = open_abandoned,
    .discard = open_discard,
};

/*
 * Starts the open of o (its name, spec, address and lun_spec filled in);
 * answers it at once if it cannot start.
 */
static void start(struct target_opening *o)
{
    struct target *tgt = o->tgt;
    bool remote = lun_spec_opens_slowly(&o->ls);
    g_autofree char *what = g_strdup_printf("backend %s: opening", o->r.name);
    g_autoptr(GError) err = NULL;
    struct target_added a = { 0 };

    o->pr_dir = g_strdup(tgt->opts->pr_dir);
    if (remote) {
        o->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (o->cancel_fd < 0) {
            a.ret = vs_error_set(&err, -EAGAIN, "%s: cannot start opening it: %s", o->r.name,
                                 g_strerror(errno));
        }
    }
    /* Reserved before the thread can post: its name and address are taken meanwhile. */
    tgt->openings = g_list_prepend(tgt->openings, &o->r);
    if (a.ret == 0) {
        a.ret = target_job_start(tgt, what, remote ? &remote_open_ops : &file_open_ops, o,
                                 !remote, &err);
    }
    if (a.ret < 0) {
        a.err = err;
        answer(o, &a);
        opening_free(o);
        return;
    }
    g_debug("%s", what);
}

static struct target_opening *opening_new(struct target *tgt, target_added_fn *done,
                                          void *opaque)
{
    struct target_opening *o = g_new0(struct target_opening, 1);

    o->tgt = tgt;
    o->cancel_fd = -1;
    o->done = done;
    o->opaque = opaque;
    return o;
}

void target_backend_add_async(struct target *tgt, const char *name, const char *spec,
                              target_added_fn *done, void *opaque)
{
    struct target_opening *o = opening_new(tgt, done, opaque);
    g_autoptr(GError) err = NULL;
    struct target_added a = { 0 };

    a.ret = target_backend_name_free(tgt, name, &err);
    if (a.ret == 0) {
        a.ret = target_backend_parse(spec, &o->ls, &err);
    }
    if (a.ret == 0) {
        o->r.name = g_strdup(name);
        o->spec = g_strdup(spec);
        start(o);
        return;
    }
    a.err = err;
    answer(o, &a);
    opening_free(o);
}

void target_lun_add_async(struct controller *ctrl, const char *arg, target_added_fn *done,
                          void *opaque)
{
    struct target_opening *o = opening_new(ctrl->tgt, done, opaque);
    g_autoptr(GError) err = NULL;
    struct target_added a = { 0 };

    a.ret = target_lun_add_check(ctrl, arg, &o->r.port, &o->r.lun, &o->r.name, &err);
    if (a.ret == 0) {
        a.ret = target_backend_parse(strchr(arg, '=') + 1, &o->ls, &err);
    }
    if (a.ret == 0) {
        o->spec = g_strdup(strchr(arg, '=') + 1);
        o->implicit = true;
        o->r.ctrl_name = g_strdup(ctrl->name);
        start(o);
        return;
    }
    a.err = err;
    answer(o, &a);
    opening_free(o);
}
